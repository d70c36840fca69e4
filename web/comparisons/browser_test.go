package comparisons_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
)

// The browser test drives Debian's Chromium, headless, through a real
// console listening on a free port, over a real Sluice broker (in process,
// or SLUICE_TEST_BROKERS): an operator signs in, previews a comparison of
// ORDER with ORDERNEW (one order's total changed on the new side, and every
// processed_at different but ignored), creates it, and sees the verdict
// "not ready" with the mismatch's field diff and its two values side by
// side. Screenshots are saved for review; with SLUICE_SCREENSHOTS=1 they
// are also copied to docs/screenshots/.

func TestBrowserComparison(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	brokers, prefix := realBrokers(t)
	left, right := prefix+"ORDER", prefix+"ORDERNEW"
	// 300 orders on 3 partitions; the new service computes order o-0042's
	// total wrongly.
	orderStreams(t, brokers, left, right, 3, 300, map[string]string{"o-0042": orderValue(42, 64, testTime())}, nil)

	h := newHarness(t, brokers)
	if err := h.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.Store().CreateUser(context.Background(), "olivia", web.RoleOperator, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t, h.srv.URL())
	defer b.PublishScreenshots()

	b.Visit("/login?next=%2Fcomparisons")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "olivia"),
		chromedp.SendKeys(chromedp.ID("f-password"), "correct horse battery"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitTextWithin("No comparisons yet", 20*time.Second)
	b.CheckCSP("/comparisons")
	b.Screenshot("comparisons-01-empty")

	// The form, from the empty state's button.
	b.Do("open the form", chromedp.Click(chromedp.CSS(`main a[href="/comparisons/new"]`)))
	b.WaitTextWithin("Start time (Europe/Paris)", 10*time.Second) // typed in the viewer's zone
	b.CheckCSP("/comparisons/new")
	// The topic fields offer the cluster's topics.
	opts, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#cmp-topics option")).map(o => o.value)`))
	if err != nil || !contains(opts, left) || !contains(opts, right) {
		t.Fatalf("topics offered: %v (%v)", opts, err)
	}
	b.Do("fill the form",
		chromedp.SendKeys(chromedp.ID("f-left"), left),
		chromedp.SendKeys(chromedp.ID("f-right"), right),
		chromedp.SetValue(chromedp.ID("f-pairing"), "json"),
		chromedp.SendKeys(chromedp.ID("f-key_path"), "order.id"),
		chromedp.SetValue(chromedp.ID("f-values"), "json"),
		chromedp.SendKeys(chromedp.ID("f-ignore"), "processed_at"),
		chromedp.SetValue(chromedp.ID("f-window"), "10s"),
	)
	// First a mistake: a tolerance with a negative value.
	b.Do("send a bad tolerance",
		chromedp.SendKeys(chromedp.ID("f-tolerance"), "-1"),
		chromedp.Click(chromedp.CSS(`button[formaction="/comparisons/preview"]`)),
	)
	b.WaitTextWithin("Enter a number of 0 or more", 10*time.Second)
	if got := b.Text("#e-tolerance"); !strings.Contains(got, "0 or more") {
		t.Fatalf("tolerance error shown as %q", got)
	}
	b.Screenshot("comparisons-02-form-error")

	// Preview the first pairs: the changed order shows up with its diff.
	b.Do("preview",
		chromedp.Clear(chromedp.ID("f-tolerance")),
		chromedp.Click(chromedp.CSS(`button[formaction="/comparisons/preview"]`)),
	)
	b.WaitTextWithin("Nothing is stored until you save", 20*time.Second)
	b.CheckCSP("/comparisons/preview")
	prev := b.Text("#preview")
	if !strings.Contains(prev, "equal") {
		t.Fatalf("preview: %.800s", prev)
	}
	b.Screenshot("comparisons-03-preview")

	// Create it; the browser lands on its page, which follows it live until
	// it finishes and then shows the final verdict.
	b.Do("create", chromedp.Click(chromedp.CSS(`.cmp-form button.primary`)))
	b.WaitTextWithin("created; it is running", 10*time.Second)
	b.CheckCSP("/comparisons/1")
	b.WaitTextWithin("Final numbers", 30*time.Second)
	verdict := b.Text("[data-verdict]")
	if verdict != "Not ready" {
		t.Fatalf("verdict %q", verdict)
	}
	if got := b.Text(".cmp-verdict .summary"); !strings.Contains(got, "no_mismatch (want 0, got 1)") {
		t.Fatalf("verdict summary %q", got)
	}
	if got := b.Text("#cmp-counters"); !strings.Contains(got, "Matched\n299") && !strings.Contains(got, "299 pairs") {
		t.Fatalf("counters: %q", got)
	}
	// The mismatch: its field diff, and both values side by side with the
	// differing line marked (processed_at differs too but is ignored).
	row := b.Text("table.diffs tbody tr")
	if !strings.Contains(row, "o-0042") || !strings.Contains(row, "order.total") || !strings.Contains(row, "63") || !strings.Contains(row, "64") {
		t.Fatalf("mismatch row: %q", row)
	}
	marked, err := chromedp.Run(b.Ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.diffs details[open] .ln.mark")).map(e => e.textContent.trim())`))
	if err != nil || len(marked) != 2 || marked[0] != `"total": 63,` || marked[1] != `"total": 64,` {
		t.Fatalf("marked lines side by side: %q (%v)", marked, err)
	}
	b.Screenshot("comparisons-04-detail-not-ready")

	// Only the mismatches, then the list.
	b.Do("filter mismatches", chromedp.Click(chromedp.CSS(`.cmp-kinds a[href*="kind=mismatch"]`)))
	b.WaitTextWithin("1–1 of 1 differences", 10*time.Second)
	b.CheckCSP("/comparisons/1?kind=mismatch")
	b.Visit("/comparisons")
	b.WaitTextWithin("not ready", 10*time.Second)
	if got := b.Text("#cmp-table tbody"); !strings.Contains(got, left+" → "+right) || !strings.Contains(got, "finished") {
		t.Fatalf("list row: %q", got)
	}
	b.Screenshot("comparisons-06-list")

	// A continuous comparison's page follows new records without a reload.
	id, err := h.mgr.Create(context.Background(), "live orders", migration.Spec{Left: left, Right: right, Key: "json:order.id", Values: "json", Ignore: []string{"processed_at"}}, "olivia")
	if err != nil {
		t.Fatal(err)
	}
	b.Visit("/comparisons/" + itoa(id))
	b.WaitTextWithin("Left records\n300 msgs", 20*time.Second)
	if err := chromedp.Do(b.Ctx, chromedp.Evaluate[chromedp.Void](`window.__samePage = true`)); err != nil {
		t.Fatal(err)
	}
	produceMore(t, brokers, left, right, 301, 25)
	b.WaitTextWithin("Left records\n325 msgs", 20*time.Second)
	same, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`window.__samePage === true`))
	if err != nil || !same {
		t.Fatalf("the live numbers came with a page reload (%v)", err)
	}
	b.CheckCSP("/comparisons/" + itoa(id))
	b.Screenshot("comparisons-05-live")

	// Delete asks first.
	b.Visit("/comparisons/1")
	b.Do("delete", chromedp.Click(chromedp.CSS(`a.button.danger`)))
	b.WaitTextWithin("This cannot be undone", 10*time.Second)
	b.Screenshot("comparisons-07-delete")
	b.Do("confirm", chromedp.Click(chromedp.CSS(`form button.danger`)))
	b.WaitTextWithin("deleted.", 10*time.Second)
	if _, err := h.mgr.Get(context.Background(), 1); err == nil {
		t.Fatal("comparison 1 is still there after the delete")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

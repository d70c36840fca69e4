package comparisons_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

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

type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	chromium := testutil.RequireBinary(t, "chromium")
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.NoFirstRun,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: filepath.Join(t.TempDir(), "screenshots")}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// The first action starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// A viewer in Paris; every Content-Security-Policy violation is kept.
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Paris"}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`,
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v (page text: %.600s)", what, err, b.pageText())
	}
}

func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return s
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v (page text: %.600s)", sel, err, b.pageText())
	}
	return s
}

// waitText polls (bounded) until the page's text contains want.
func (b *browser) waitText(want string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := b.pageText()
		if strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("page never showed %q; it shows: %.1000s", want, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *browser) visit(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path))
	b.checkCSP(path)
}

func (b *browser) checkCSP(where string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__csp || []`))
	if err != nil {
		b.t.Fatalf("read CSP violations on %s: %v", where, err)
	}
	if len(v) > 0 {
		b.t.Fatalf("%s caused Content-Security-Policy violations: %v", where, v)
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)); err != nil {
		b.t.Fatal(err)
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// publishScreenshots copies the screenshots to docs/screenshots when
// SLUICE_SCREENSHOTS=1.
func (b *browser) publishScreenshots() {
	b.t.Logf("screenshots in %s", b.shots)
	if os.Getenv("SLUICE_SCREENSHOTS") != "1" {
		return
	}
	dst := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		b.t.Fatal(err)
	}
	entries, _ := os.ReadDir(b.shots)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(b.shots, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644)
		}
		if err != nil {
			b.t.Fatal(err)
		}
	}
	b.t.Logf("copied %d screenshots to %s", len(entries), dst)
}

func TestBrowserComparison(t *testing.T) {
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
	b := newBrowser(t, h.srv.URL())
	defer b.publishScreenshots()

	b.visit("/login?next=%2Fcomparisons")
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "olivia"),
		chromedp.SendKeys(chromedp.ID("f-password"), "correct horse battery"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.waitText("No comparisons yet", 20*time.Second)
	b.checkCSP("/comparisons")
	b.screenshot("comparisons-01-empty")

	// The form, from the empty state's button.
	b.do("open the form", chromedp.Click(chromedp.CSS(`main a[href="/comparisons/new"]`)))
	b.waitText("Start time (Europe/Paris)", 10*time.Second) // typed in the viewer's zone
	b.checkCSP("/comparisons/new")
	// The topic fields offer the cluster's topics.
	opts, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#cmp-topics option")).map(o => o.value)`))
	if err != nil || !contains(opts, left) || !contains(opts, right) {
		t.Fatalf("topics offered: %v (%v)", opts, err)
	}
	b.do("fill the form",
		chromedp.SendKeys(chromedp.ID("f-left"), left),
		chromedp.SendKeys(chromedp.ID("f-right"), right),
		chromedp.SetValue(chromedp.ID("f-pairing"), "json"),
		chromedp.SendKeys(chromedp.ID("f-key_path"), "order.id"),
		chromedp.SetValue(chromedp.ID("f-values"), "json"),
		chromedp.SendKeys(chromedp.ID("f-ignore"), "processed_at"),
		chromedp.SetValue(chromedp.ID("f-window"), "10s"),
	)
	// First a mistake: a tolerance with a negative value.
	b.do("send a bad tolerance",
		chromedp.SendKeys(chromedp.ID("f-tolerance"), "-1"),
		chromedp.Click(chromedp.CSS(`button[formaction="/comparisons/preview"]`)),
	)
	b.waitText("Enter a number of 0 or more", 10*time.Second)
	if got := b.text("#e-tolerance"); !strings.Contains(got, "0 or more") {
		t.Fatalf("tolerance error shown as %q", got)
	}
	b.screenshot("comparisons-02-form-error")

	// Preview the first pairs: the changed order shows up with its diff.
	b.do("preview",
		chromedp.Clear(chromedp.ID("f-tolerance")),
		chromedp.Click(chromedp.CSS(`button[formaction="/comparisons/preview"]`)),
	)
	b.waitText("Nothing is stored until you create the comparison", 20*time.Second)
	b.checkCSP("/comparisons/preview")
	prev := b.text("#preview")
	if !strings.Contains(prev, "equal") {
		t.Fatalf("preview: %.800s", prev)
	}
	b.screenshot("comparisons-03-preview")

	// Create it; the browser lands on its page, which follows it live until
	// it finishes and then shows the final verdict.
	b.do("create", chromedp.Click(chromedp.CSS(`.cmp-form button.primary`)))
	b.waitText("created; it is running", 10*time.Second)
	b.checkCSP("/comparisons/1")
	b.waitText("Final numbers", 30*time.Second)
	verdict := b.text("[data-verdict]")
	if verdict != "Not ready" {
		t.Fatalf("verdict %q", verdict)
	}
	if got := b.text(".cmp-verdict .summary"); !strings.Contains(got, "no_mismatch (want 0, got 1)") {
		t.Fatalf("verdict summary %q", got)
	}
	if got := b.text("#cmp-counters"); !strings.Contains(got, "Matched\n299") && !strings.Contains(got, "299 pairs") {
		t.Fatalf("counters: %q", got)
	}
	// The mismatch: its field diff, and both values side by side with the
	// differing line marked (processed_at differs too but is ignored).
	row := b.text("table.diffs tbody tr")
	if !strings.Contains(row, "o-0042") || !strings.Contains(row, "order.total") || !strings.Contains(row, "63") || !strings.Contains(row, "64") {
		t.Fatalf("mismatch row: %q", row)
	}
	marked, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.diffs details[open] .ln.mark")).map(e => e.textContent.trim())`))
	if err != nil || len(marked) != 2 || marked[0] != `"total": 63,` || marked[1] != `"total": 64,` {
		t.Fatalf("marked lines side by side: %q (%v)", marked, err)
	}
	b.screenshot("comparisons-04-detail-not-ready")

	// Only the mismatches, then the list.
	b.do("filter mismatches", chromedp.Click(chromedp.CSS(`.cmp-kinds a[href*="kind=mismatch"]`)))
	b.waitText("1–1 of 1 differences", 10*time.Second)
	b.checkCSP("/comparisons/1?kind=mismatch")
	b.visit("/comparisons")
	b.waitText("not ready", 10*time.Second)
	if got := b.text("#cmp-table tbody"); !strings.Contains(got, left+" → "+right) || !strings.Contains(got, "finished") {
		t.Fatalf("list row: %q", got)
	}
	b.screenshot("comparisons-06-list")

	// A continuous comparison's page follows new records without a reload.
	id, err := h.mgr.Create(context.Background(), "live orders", migration.Spec{Left: left, Right: right, Key: "json:order.id", Values: "json", Ignore: []string{"processed_at"}}, "olivia")
	if err != nil {
		t.Fatal(err)
	}
	b.visit("/comparisons/" + itoa(id))
	b.waitText("Left records\n300 msgs", 20*time.Second)
	if err := chromedp.Do(b.ctx, chromedp.Evaluate[chromedp.Void](`window.__samePage = true`)); err != nil {
		t.Fatal(err)
	}
	produceMore(t, brokers, left, right, 301, 25)
	b.waitText("Left records\n325 msgs", 20*time.Second)
	same, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.__samePage === true`))
	if err != nil || !same {
		t.Fatalf("the live numbers came with a page reload (%v)", err)
	}
	b.checkCSP("/comparisons/" + itoa(id))
	b.screenshot("comparisons-05-live")

	// Delete asks first.
	b.visit("/comparisons/1")
	b.do("delete", chromedp.Click(chromedp.CSS(`a.button.danger`)))
	b.waitText("This cannot be undone", 10*time.Second)
	b.screenshot("comparisons-07-delete")
	b.do("confirm", chromedp.Click(chromedp.CSS(`form button.danger`)))
	b.waitText("deleted.", 10*time.Second)
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

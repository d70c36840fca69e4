package alerts

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
)

// The browser test drives Debian's Chromium, headless, through a real
// console (listening on a free port, against kfake) with the alert pages:
// an operator adds a webhook notifier and sends it a test event, creates a
// rule (a mistake first, shown by its field), sees it listed, sees it fire
// and land in the history. Every page is checked for Content-Security-
// Policy violations and screenshotted; with SLUICE_SCREENSHOTS=1 the
// screenshots are copied to docs/screenshots/.

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
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.NoFirstRun,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: filepath.Join(t.TempDir(), "screenshots")}
	os.MkdirAll(b.shots, 0o755)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // starts the browser: no timeout
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Paris"}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
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
		b.t.Fatalf("%s: %v (page text: %.400s)", what, err, b.pageText())
	}
}

func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return s
}

// waitText polls until the page shows want.
func (b *browser) waitText(want string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := b.pageText()
		if strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("page never showed %q; it shows: %.800s", want, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *browser) visit(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path))
	b.checkCSP(path)
}

func (b *browser) checkCSP(path string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__csp || []`))
	if err != nil {
		b.t.Fatalf("read CSP violations on %s: %v", path, err)
	}
	if len(v) > 0 {
		b.t.Fatalf("%s caused Content-Security-Policy violations: %v", path, v)
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

func TestBrowserAlertPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Store().CreateUser(ctx, "otto", web.RoleOperator, "password-1"); err != nil {
		t.Fatal(err)
	}
	hook := newReceiver(t, http.StatusOK)
	b := newBrowser(t, e.srv.URL())
	defer b.publishScreenshots()

	b.visit("/login?next=%2Falerts")
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "otto"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.waitText("No alert rules yet")
	b.checkCSP("/alerts")
	b.screenshot("alerts-01-empty")

	// A webhook notifier, then its test event.
	b.visit("/alerts/notifiers")
	b.do("add a webhook",
		chromedp.SendKeys(chromedp.ID("f-name"), "ops webhook"),
		chromedp.SetValue(chromedp.ID("f-type"), "webhook"),
		chromedp.SendKeys(chromedp.ID("f-url"), hook.srv.URL+"/alertmanager"),
		chromedp.SendKeys(chromedp.ID("f-secret"), "s3cret-token-7f2c"),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.waitText("Notifier ops webhook added.")
	b.do("send a test event", chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	b.waitText("Test event delivered to ops webhook (HTTP 200).")
	if got := hook.events(); len(got) != 2 || got[0]["status"] != "firing" || got[1]["status"] != "resolved" {
		t.Fatalf("webhook received %v", got)
	}
	if s := b.pageText(); strings.Contains(s, "s3cret-token-7f2c") || !strings.Contains(s, "••••7f2c") {
		t.Fatalf("the notifier page shows the token or no hint: %.600s", s)
	}
	b.checkCSP("/alerts/notifiers/1")
	b.screenshot("alerts-02-notifier-test")

	// A rule: a mistake first, shown next to its field.
	b.visit("/alerts/rules/new")
	b.do("fill the rule form with a mistake",
		chromedp.SendKeys(chromedp.ID("f-name"), "billing lag"),
		chromedp.SendKeys(chromedp.ID("f-description"), "Runbook: restart the billing consumers."),
		chromedp.SetValue(chromedp.ID("f-severity"), "critical"),
		chromedp.SendKeys(chromedp.ID("f-threshold"), "lots"),
		chromedp.SetValue(chromedp.ID("f-for"), "0"),
		chromedp.SendKeys(chromedp.ID("f-scope_pattern"), "billing*"),
		chromedp.Click(chromedp.CSS(`input[name="notifiers"]`)),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.waitText("is not a number")
	b.checkCSP("/alerts/rules")
	b.screenshot("alerts-03-rule-error")
	b.do("fix the threshold",
		chromedp.SetValue(chromedp.ID("f-threshold"), "1000"),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.waitText("Rule billing lag created.")
	b.screenshot("alerts-04-rule")
	b.visit("/alerts/rules")
	b.waitText("billing lag")
	if s := b.pageText(); !strings.Contains(s, "> 1,000 records") || !strings.Contains(s, "ops webhook") || !strings.Contains(s, "enabled") {
		t.Fatalf("rules list: %.800s", s)
	}
	b.screenshot("alerts-05-rules")

	// The group falls behind: the rule fires.
	e.lag.set(alerting.GroupLag{Group: "billing-eu", State: "Empty", Partitions: []alerting.PartitionLag{
		{Topic: "orders", Partition: 0, Committed: 100, LogEnd: 4100, Lag: 4000},
		{Topic: "orders", Partition: 1, Committed: 90, LogEnd: 1290, Lag: 1200},
	}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	b.visit("/alerts")
	b.waitText("5200 records behind")
	b.screenshot("alerts-06-firing")
	b.visit("/alerts/history")
	b.waitText("firing")
	b.screenshot("alerts-07-history")
	b.visit("/alerts/deliveries")
	b.waitText("ops webhook")
	b.screenshot("alerts-08-deliveries")

	// Disable it from the list.
	b.visit("/alerts/rules")
	b.do("disable the rule", chromedp.Click(chromedp.CSS(`button[aria-label="Disable billing lag"]`)))
	b.waitText("Rule billing lag disabled.")
	b.checkCSP("/alerts/rules")
}

package web

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// The browser test drives Debian's Chromium, headless, through a real
// console (listening on a free port) against kfake, or against the cluster
// in SLUICE_TEST_BROKERS (then its topic and group names get a unique
// prefix). It does what a new user does: set up the admin,
// sign in, create a topic, produce a message from the form, find it by key,
// watch it arrive in the live tail, and see a group's lag after a real
// consumer commits. It saves a screenshot of every page; with
// SLUICE_SCREENSHOTS=1 they are also copied to docs/screenshots/.

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
	// The first action starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// Show times as a viewer in Paris would see them, and record every
	// Content-Security-Policy violation the pages cause.
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

// do runs actions with a time limit.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v (page text: %s)", what, err, b.textNow())
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browser) textNow() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 400) : ""`))
	return s
}

// waitText polls until the page's text contains want.
func (b *browser) waitText(want string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		cancel()
		if err == nil && strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("page never showed %q; it shows: %.600s", want, s)
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
	// From the top, so the sticky header is where a reader expects it.
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
	dst := filepath.Join("..", "docs", "screenshots")
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

func TestBrowserEndToEnd(t *testing.T) {
	brokers, prefix := e2eCluster(t)
	ts := newTestServer(t, func(c *Config) { c.LagSampleInterval = time.Second; c.Brokers = brokers })
	var (
		orders   = prefix + "orders"
		payments = prefix + "payments"
		auditEv  = prefix + "audit.events"
		shipping = prefix + "shipping"
	)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, ts.URL())
	defer b.publishScreenshots()

	// Sign-in page before any admin exists.
	b.visit("/login")
	b.waitText("No admin yet")
	b.screenshot("01-login-no-admin")

	// One-time setup from the link in the log.
	b.visit("/setup?token=" + ts.SetupToken())
	b.screenshot("02-setup")
	b.do("fill the setup form",
		chromedp.SendKeys(chromedp.ID("f-username"), "admin"),
		chromedp.SendKeys(chromedp.ID("f-password"), "correct horse battery"),
		chromedp.SendKeys(chromedp.ID("f-confirm"), "correct horse battery"),
		chromedp.Submit(chromedp.ID("f-username")),
	)
	b.waitText("Welcome, admin")
	b.checkCSP("/")

	// Sign out and in again through the form.
	b.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)))
	b.waitText("Sign in")
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "admin"),
		chromedp.SendKeys(chromedp.ID("f-password"), "correct horse battery"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.waitText("Brokers up")
	b.screenshot("03-overview-empty")

	// Create a topic with the form, with one mistake first.
	b.visit("/topics/new")
	b.do("create topic with a bad name",
		chromedp.SendKeys(chromedp.ID("f-name"), orders+" here"),
		chromedp.SendKeys(chromedp.ID("f-partitions"), "3"),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.waitText("is not allowed in a topic name")
	b.screenshot("04-topic-create-error")
	b.do("fix the name",
		chromedp.SetValue(chromedp.ID("f-name"), orders),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.waitText("Topic " + orders + " created.")
	b.checkCSP("/topics/" + orders)

	// Produce a message from the form.
	b.visit("/topics/" + orders + "/messages?produce=1")
	b.do("fill the produce form",
		chromedp.SendKeys(chromedp.ID("f-key"), "order-1001"),
		chromedp.SendKeys(chromedp.ID("f-value"), `{"order":1001,"total":42.5,"items":["tea","cups"]}`),
		chromedp.SendKeys(chromedp.ID("f-headers"), "trace-id: abc-123"),
		chromedp.Submit(chromedp.ID("f-key")),
	)
	b.waitText("Written to partition")

	// Fill the topic with more records so the search has work to do.
	cl := kgoClient(t, ts.brokers)
	var recs []*kgo.Record
	for i := 0; i < 500; i++ {
		recs = append(recs, &kgo.Record{Topic: orders, Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte(fmt.Sprintf(`{"order":%d,"total":%d.25}`, i, i%90))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Find the message by key in the browser.
	b.visit("/topics/" + orders + "/messages")
	b.do("search by key",
		chromedp.SetValue(chromedp.CSS(`select[name="field"]`), "key"),
		chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), "order-1001"),
		chromedp.Click(chromedp.CSS(`input[name="exact"]`)),
		chromedp.SetValue(chromedp.CSS(`select[name="format"]`), "json"),
		chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
	)
	b.waitText("Found 1")
	if got := b.text("#records tbody"); !strings.Contains(got, "order-1001") || !strings.Contains(got, `"total": 42.5`) || !strings.Contains(got, "trace-id: abc-123") {
		t.Fatalf("search result row: %q", got)
	}
	b.waitText("Time (Europe/Paris)") // times are in the viewer's zone
	b.screenshot("05-messages-search")

	// Live tail: start it, write a record, see it arrive.
	b.visit("/topics/" + orders + "/messages?from=latest&limit=20")
	b.screenshot("06-messages-latest")
	b.do("start the tail", chromedp.Click(chromedp.CSS("[data-tail-toggle]")))
	b.waitText("Live")
	time.Sleep(700 * time.Millisecond) // the tail takes the end offsets
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: orders, Key: []byte("tail-key-7"), Value: []byte("fresh off the wire")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.do("see the tailed record", chromedp.WaitVisible(chromedp.CSS("[data-tail-rows] tr")))
	if got := b.text("[data-tail-rows]"); !strings.Contains(got, "tail-key-7") {
		t.Fatalf("tailed rows: %q", got)
	}
	b.screenshot("07-messages-tail")
	b.do("stop the tail", chromedp.Click(chromedp.CSS("[data-tail-toggle]")))

	// A real consumer reads part of the topic and commits.
	createTopic(t, ts, payments, 2)
	createTopic(t, ts, auditEv, 1)
	produceRecords(t, ts.brokers, payments, 200)
	member := consume(t, ts.brokers, shipping, orders, 100)
	defer member.Close()
	b.visit("/groups")
	b.waitText(shipping)
	b.screenshot("08-groups")
	b.visit("/groups/" + shipping)
	b.waitText("Stable")
	lagText := b.text(".stats")
	if !strings.Contains(lagText, "402 msgs") { // 502 records in orders (form, 500, tail), 100 committed
		t.Fatalf("group lag shown: %q", lagText)
	}
	// Let the sampler draw a few points of history.
	time.Sleep(2500 * time.Millisecond)
	b.visit("/groups/" + shipping + "?range=1h")
	b.do("see the lag chart", chromedp.WaitVisible(chromedp.CSS("svg.chart path.line")))
	b.screenshot("09-group")

	// The remaining pages, for review.
	b.visit("/")
	b.waitText(shipping)
	b.screenshot("10-overview")
	b.visit("/topics")
	b.waitText(payments)
	b.screenshot("11-topics")
	b.visit("/topics/" + orders)
	b.waitText("Partitions")
	b.screenshot("12-topic")
	b.visit("/brokers")
	b.waitText("controller")
	b.screenshot("13-brokers")
	b.visit("/users")
	b.screenshot("14-users")
	b.visit("/audit")
	b.waitText("message.produce")
	b.screenshot("15-audit")
	b.visit("/account")
	b.screenshot("16-account")
	b.visit("/topics/nope")
	b.waitText("There is no topic nope")
	b.screenshot("17-not-found")

	// Dark mode follows the system setting; the layout fits a phone.
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	}); err != nil {
		t.Fatal(err)
	}
	b.visit("/groups/" + shipping + "?range=1h")
	bg, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	if err != nil || bg != "rgb(15, 20, 25)" {
		t.Fatalf("dark background: %q %v", bg, err)
	}
	b.screenshot("18-group-dark")
	if _, err := chromedp.Call(b.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	b.visit("/topics/" + orders)
	wide, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || wide {
		t.Fatalf("the topic page scrolls sideways on a phone (%v)", err)
	}
	b.screenshot("19-topic-phone")
	chromedp.Call(b.ctx, emulation.ClearDeviceMetricsOverride, cdpEmpty)
	chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})

	// The search box of the topics list filters in place (htmx) and
	// updates the address.
	b.visit("/topics")
	b.do("type in the topic search", chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), payments))
	b.waitText("1–1 of 1 topics")
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "q="+payments) {
		t.Fatalf("location after the htmx search: %q %v", loc, err)
	}
	b.checkCSP("/topics?q=" + payments)
}

var cdpEmpty = cdp.Empty{}

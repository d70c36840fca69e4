package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/browsertest"
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

func TestBrowserEndToEnd(t *testing.T) {
	testutil.Heavy(t, "Chromium")
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
	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()

	// Sign-in page before any admin exists.
	b.Visit("/login")
	b.WaitText("No admin yet")
	b.Screenshot("01-login-no-admin")

	// One-time setup from the link in the log.
	b.Visit("/setup?token=" + ts.SetupToken())
	b.Screenshot("02-setup")
	b.Do("fill the setup form",
		chromedp.SendKeys(chromedp.ID("f-username"), "admin"),
		chromedp.SendKeys(chromedp.ID("f-password"), "correct horse battery"),
		chromedp.SendKeys(chromedp.ID("f-confirm"), "correct horse battery"),
		chromedp.Submit(chromedp.ID("f-username")),
	)
	b.WaitText("Welcome, admin")
	b.CheckCSP("/")

	// Sign out and in again through the form.
	b.Do("sign out", chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)))
	b.WaitText("Sign in")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "admin"),
		chromedp.SendKeys(chromedp.ID("f-password"), "correct horse battery"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Brokers up")
	b.Screenshot("03-overview-empty")

	// Create a topic with the form, with one mistake first.
	b.Visit("/topics/new")
	b.Do("create topic with a bad name",
		chromedp.SendKeys(chromedp.ID("f-name"), orders+" here"),
		chromedp.SendKeys(chromedp.ID("f-partitions"), "3"),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.WaitText("is not allowed in a topic name")
	b.Screenshot("04-topic-create-error")
	b.Do("fix the name",
		chromedp.SetValue(chromedp.ID("f-name"), orders),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.WaitText("Topic " + orders + " created.")
	b.CheckCSP("/topics/" + orders)

	// Produce a message from the form.
	b.Visit("/topics/" + orders + "/messages?produce=1")
	b.Do("fill the produce form",
		chromedp.SendKeys(chromedp.ID("f-key"), "order-1001"),
		chromedp.SendKeys(chromedp.ID("f-value"), `{"order":1001,"total":42.5,"items":["tea","cups"]}`),
		chromedp.SendKeys(chromedp.ID("f-headers"), "trace-id: abc-123"),
		chromedp.Submit(chromedp.ID("f-key")),
	)
	b.WaitText("Written to " + orders + " partition 0 at offset 0.")

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
	b.Visit("/topics/" + orders + "/messages")
	b.Do("search by key",
		chromedp.SetValue(chromedp.CSS(`select[name="field"]`), "key"),
		chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), "order-1001"),
		chromedp.Click(chromedp.CSS(`input[name="exact"]`)),
		chromedp.SetValue(chromedp.CSS(`select[name="format"]`), "json"),
		chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
	)
	b.WaitText("Found 1")
	if got := b.Text("#records tbody"); !strings.Contains(got, "order-1001") || !strings.Contains(got, `"total": 42.5`) || !strings.Contains(got, "trace-id: abc-123") {
		t.Fatalf("search result row: %q", got)
	}
	b.WaitText("Time (Europe/Paris)") // times are in the viewer's zone
	b.Screenshot("05-messages-search")

	// Live tail: start it, write a record, see it arrive.
	b.Visit("/topics/" + orders + "/messages?from=latest&limit=20")
	b.Screenshot("06-messages-latest")
	b.Do("start the tail", chromedp.Click(chromedp.CSS("[data-tail-toggle]")))
	b.WaitText("Live")
	time.Sleep(700 * time.Millisecond) // the tail takes the end offsets
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: orders, Key: []byte("tail-key-7"), Value: []byte("fresh off the wire")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.Do("see the tailed record", chromedp.WaitVisible(chromedp.CSS("[data-tail-rows] tr")))
	if got := b.Text("[data-tail-rows]"); !strings.Contains(got, "tail-key-7") {
		t.Fatalf("tailed rows: %q", got)
	}
	b.Screenshot("07-messages-tail")
	b.Do("stop the tail", chromedp.Click(chromedp.CSS("[data-tail-toggle]")))

	// A real consumer reads part of the topic and commits.
	createTopic(t, ts, payments, 2)
	createTopic(t, ts, auditEv, 1)
	produceRecords(t, ts.brokers, payments, 200)
	member := consume(t, ts.brokers, shipping, orders, 100)
	defer member.Close()
	b.Visit("/groups")
	b.WaitText(shipping)
	b.Screenshot("08-groups")
	b.Visit("/groups/" + shipping)
	b.WaitText("Stable")
	lagText := b.Text(".stats")
	if !strings.Contains(lagText, "402 msgs") { // 502 records in orders (form, 500, tail), 100 committed
		t.Fatalf("group lag shown: %q", lagText)
	}
	// Wait until the sampler has stored a few points of history (it samples
	// every second) for the chart to draw.
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		pts, err := ts.store.LagHistory(context.Background(), shipping, "", time.Now().Add(-time.Hour), time.Now().Add(time.Second))
		if err == nil && len(pts) < 3 {
			err = fmt.Errorf("%d lag samples of %s stored", len(pts), shipping)
		}
		return err
	})
	b.Visit("/groups/" + shipping + "?range=1h")
	b.Do("see the lag chart", chromedp.WaitVisible(chromedp.CSS("svg.chart path.line")))
	b.Screenshot("09-group")

	// The remaining pages, for review.
	b.Visit("/")
	b.WaitText(shipping)
	b.Screenshot("10-overview")
	b.Visit("/topics")
	b.WaitText(payments)
	b.Screenshot("11-topics")
	b.Visit("/topics/" + orders)
	b.WaitText("Partitions")
	b.Screenshot("12-topic")
	b.Visit("/brokers")
	b.WaitText("controller")
	b.Screenshot("13-brokers")
	b.Visit("/users")
	b.Screenshot("14-users")
	b.Visit("/audit")
	b.WaitText("message.produce")
	b.Screenshot("15-audit")
	b.Visit("/account")
	b.Screenshot("16-account")
	b.Visit("/topics/nope")
	b.WaitText("There is no topic nope")
	b.Screenshot("17-not-found")

	// Dark mode follows the system setting; the layout fits a phone.
	if _, err := chromedp.Call(b.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	}); err != nil {
		t.Fatal(err)
	}
	b.Visit("/groups/" + shipping + "?range=1h")
	bg, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	if err != nil || bg != "rgb(15, 20, 25)" {
		t.Fatalf("dark background: %q %v", bg, err)
	}
	b.Screenshot("18-group-dark")
	if _, err := chromedp.Call(b.Ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	b.Visit("/topics/" + orders)
	wide, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || wide {
		t.Fatalf("the topic page scrolls sideways on a phone (%v)", err)
	}
	b.Screenshot("19-topic-phone")
	chromedp.Call(b.Ctx, emulation.ClearDeviceMetricsOverride, cdpEmpty)
	chromedp.Call(b.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})

	// The search box of the topics list filters in place (htmx) and
	// updates the address.
	b.Visit("/topics")
	b.Do("type in the topic search", chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), payments))
	b.WaitText("1–1 of 1 topics")
	loc, err := chromedp.Run(b.Ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "q="+payments) {
		t.Fatalf("location after the htmx search: %q %v", loc, err)
	}
	b.CheckCSP("/topics?q=" + payments)
}

var cdpEmpty = cdp.Empty{}

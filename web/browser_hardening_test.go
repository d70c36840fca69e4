package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestBrowserStaysOnTheConsole checks in Chromium what only a browser
// does: a sign-in link whose next address holds a tab (which browsers drop,
// turning "/\t/evil.example/" into "//evil.example/") keeps the user on the
// console; and a record holding carriage returns cannot inject an event
// into the live tail (here a forged "end" that would stop the tail with the
// producer's message).
func TestBrowserStaysOnTheConsole(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	createTopic(t, ts, "crlf", 1)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.user(t, "ann", RoleViewer)
	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()

	b.Visit("/login?next=/%09/evil.example/")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "ann"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Brokers up")
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	loc, err := chromedp.Run(ctx, chromedp.Location())
	cancel()
	if err != nil || !strings.HasPrefix(loc, ts.URL()+"/") {
		t.Fatalf("after sign-in the browser is at %q (%v), want the console", loc, err)
	}

	b.Visit("/topics/crlf/messages")
	b.Do("start the tail", chromedp.Click(chromedp.CSS("[data-tail-toggle]")))
	b.WaitText("Live")
	time.Sleep(700 * time.Millisecond) // the tail takes the end offsets
	cl := kgoClient(t, ts.brokers)
	forged := "before\r\revent: end\rdata: Stopped by a forged event\r\rafter"
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "crlf", Key: []byte("k1"), Value: []byte(forged)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.Do("see the tailed record", chromedp.WaitVisible(chromedp.CSS("[data-tail-rows] tr")))
	time.Sleep(300 * time.Millisecond)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "crlf", Key: []byte("k2"), Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.WaitText("Live · 2 shown")
	rows := b.Text("[data-tail-rows]")
	if !strings.Contains(rows, "before") || !strings.Contains(rows, "after") || !strings.Contains(rows, "second") {
		t.Fatalf("tailed rows: %q", rows)
	}
	if status := b.Text("[data-tail-status]"); !strings.HasPrefix(status, "Live · 2 shown") {
		t.Fatalf("tail status %q: a record's carriage returns injected an event", status)
	}
	b.Screenshot("tail-crlf")
}

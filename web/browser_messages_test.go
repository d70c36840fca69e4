package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/kafkaview"
)

// TestBrowserMessageViewer: the message viewer as an operator uses it, in
// Chromium: pretty JSON keeps the record's own key order, in colour; the
// Latest view pages to older records and back; search matches are
// highlighted; a long value is cut with Expand, and Copy is offered; a
// record's permalink opens that record; a dead letter is copied into the
// produce form and republished to its original topic, the form keeping
// its values after the send.
func TestBrowserMessageViewer(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts := newTestServer(t)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	createTopic(t, ts, "orders", 1)
	createTopic(t, ts, "orders.dlq", 1)
	ts.user(t, "otto", RoleOperator)
	cl := kgoClient(t, ts.brokers)
	var recs []*kgo.Record
	for i := 0; i < 45; i++ {
		// Keys deliberately not in alphabetical order.
		v := fmt.Sprintf(`{"zeta":%d,"alpha":"order %d","mid":{"y":true,"b":null}}`, i, i)
		if i == 40 {
			v = `{"zeta":40,"lines":[` + strings.Repeat(`{"sku":"tea-cup-white","qty":1},`, 60) + `{"sku":"last","qty":2}]}`
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("o-%02d", i)), Value: []byte(v)})
	}
	recs = append(recs, &kgo.Record{Topic: "orders.dlq", Key: []byte("o-99"), Value: []byte(`{"zeta":99,"alpha":"dead letter"}`),
		Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("timeout")}}})
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()
	b.Visit("/login?next=%2Ftopics%2Forders%2Fmessages%3Ffrom%3Dlatest%26limit%3D20%26format%3Djson")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "otto"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Older →")

	// The record's own key order, coloured.
	val := b.Text("#r-0-44 td.msg:not(.key) pre")
	if z, a, m := strings.Index(val, `"zeta"`), strings.Index(val, `"alpha"`), strings.Index(val, `"mid"`); z < 0 || !(z < a && a < m) {
		t.Fatalf("key order not kept: %q", val)
	}
	if y, bb := strings.Index(val, `"y"`), strings.Index(val, `"b"`); !(y >= 0 && y < bb) {
		t.Fatalf("nested key order not kept: %q", val)
	}
	coloured := evalIn[int](t, b, `document.querySelectorAll("#r-0-44 pre.json span.k").length`)
	if coloured != 5 {
		t.Fatalf("%d coloured keys, want 5", coloured)
	}

	// A long value is cut with Expand; every value has Copy.
	clamped := evalIn[bool](t, b, `document.querySelector("#r-0-40 td.msg:not(.key) .msgval").classList.contains("clamped")`)
	if !clamped {
		t.Fatal("the long value is not cut")
	}
	b.Do("expand", chromedp.Click(chromedp.CSS(`#r-0-40 td.msg:not(.key) .msgtools button`)))
	open := evalIn[bool](t, b, `document.querySelector("#r-0-40 td.msg:not(.key) .msgval").classList.contains("open")`)
	if !open || !strings.Contains(b.Text("#r-0-40 td.msg:not(.key) .msgtools"), "Collapse") {
		t.Fatal("Expand did not open the value")
	}
	if got := b.Text("#r-0-44 td.msg:not(.key) .msgtools"); got != "Copy" {
		t.Fatalf("tools of a short value: %q", got)
	}
	b.Screenshot("messages-01-latest-json")

	// Older pages: 25..44, then 5..24, then 0..4, and back to the newest.
	// Each wait reads the rows afresh: a page being replaced has no rows.
	rowsAre := func(what string, ok func(rows string) bool) {
		t.Helper()
		testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
			defer cancel()
			rows, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){var t=document.querySelector("#records tbody");return t?t.innerText:""})()`))
			if err != nil || !ok(rows) {
				return fmt.Errorf("%s: %.600s (%v)", what, rows, err)
			}
			return nil
		})
	}
	b.Do("older", chromedp.Click(chromedp.CSS(`a[rel="next"]`)))
	rowsAre("second page", func(rows string) bool {
		return strings.Contains(rows, "o-24") && strings.Contains(rows, "o-05") && !strings.Contains(rows, "o-25") && !strings.Contains(rows, "o-04")
	})
	b.WaitText("← Newest")
	b.Do("older again", chromedp.Click(chromedp.CSS(`a[rel="next"]`)))
	rowsAre("third page", func(rows string) bool { return strings.Contains(rows, "o-00") && !strings.Contains(rows, "o-05") })
	older := evalIn[int](t, b, `document.querySelectorAll('a[rel="next"]').length`)
	if older != 0 {
		t.Fatal("the oldest page still offers older records")
	}
	b.Do("newest", chromedp.Click(chromedp.Search(`//a[contains(., "Newest")]`)))
	rowsAre("back to the newest", func(rows string) bool { return strings.Contains(rows, "o-44") })

	// Search matches highlighted.
	b.Visit("/topics/orders/messages?field=value&q=order+1&format=json")
	b.WaitText("Found")
	marks := evalIn[[]string](t, b, `Array.from(document.querySelectorAll("#records mark")).map(m => m.textContent)`)
	if len(marks) == 0 || marks[0] != "order 1" {
		t.Fatalf("highlights: %q", marks)
	}

	// The permalink opens that record alone, marked as the target.
	b.Do("permalink", chromedp.Click(chromedp.CSS(`#r-0-12 td.recacts a`)))
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if hash, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`location.hash`)); err != nil || hash != "#r-0-12" {
			return fmt.Errorf("hash %q (%v)", hash, err)
		}
		return nil
	})
	if rows := b.Text("#records tbody"); !strings.Contains(rows, "o-12") || strings.Count(rows, "o-") != 1 {
		t.Fatalf("permalink rows: %q", rows)
	}

	// A dead letter goes back to its topic through the produce form.
	b.Visit("/topics/orders.dlq/messages")
	b.Do("copy to produce", chromedp.Click(chromedp.Search(`//a[text()="Copy to produce"]`)))
	b.WaitText("Copied from orders.dlq partition 0 offset 0")
	key, value, headers := evalIn[string](t, b, `document.getElementById("f-key").value`),
		evalIn[string](t, b, `document.getElementById("f-value").value`), evalIn[string](t, b, `document.getElementById("f-headers").value`)
	if key != "o-99" || value != `{"zeta":99,"alpha":"dead letter"}` || headers != "error: timeout" {
		t.Fatalf("form filled with key %q value %q headers %q", key, value, headers)
	}
	b.Do("republish to orders",
		chromedp.SetValue(chromedp.CSS(`#f-topic`), "orders"),
		chromedp.Click(chromedp.CSS(`#produce button.primary`)),
	)
	b.WaitText("Written to orders partition 0 at offset 45.")
	value = evalIn[string](t, b, `document.getElementById("f-value").value`)
	if value != `{"zeta":99,"alpha":"dead letter"}` {
		t.Fatalf("value after the send: %q", value)
	}
	b.Screenshot("messages-02-republished")
	res, err := ts.kc.Read(context.Background(), kafkaview.Query{Topic: "orders", Partition: 0, From: kafkaview.FromOffset, Offset: 45, Limit: 1})
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != `{"zeta":99,"alpha":"dead letter"}` || len(res.Records[0].Headers) != 1 {
		t.Fatalf("republished record: %+v (%v)", res, err)
	}
}

// evalIn evaluates a JavaScript expression on the page, bounded.
func evalIn[T any](t testing.TB, b *browsertest.Browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, browsertest.ActionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

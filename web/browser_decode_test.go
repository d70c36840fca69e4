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

// TestBrowserDecodedRecords: in Chromium, the message viewer shows Avro
// (two writer-schema versions) and Protobuf records in the Confluent wire
// format as coloured JSON in the writer schema's field order, each with its
// subject, version and id linking to the schema, and a record with an
// unknown schema id as it is with the reason; a search finds a decoded
// field.
func TestBrowserDecodedRecords(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	start := time.Now()
	ts, dec := decodingServer(t)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	createTopic(t, ts, "orders", 1)
	ts.user(t, "vera", RoleViewer)
	cl := kgoClient(t, ts.brokers)
	if err := cl.ProduceSync(context.Background(),
		&kgo.Record{Topic: "orders", Key: []byte("o-1"), Value: encode(t, dec, "orders-value", 1, `{"id":"o-1","total":12.5,"customer":"ann"}`)},
		&kgo.Record{Topic: "orders", Key: []byte("o-2"), Value: encode(t, dec, "orders-value", 2, `{"id":"o-2","total":7,"customer":"bob","channel":"web"}`)},
		&kgo.Record{Topic: "orders", Key: []byte("p-1"), Value: encode(t, dec, "payments-value", -1, `{"ref":"p-1","cents":"1250","payer":"cy"}`)},
		&kgo.Record{Topic: "orders", Key: []byte("lost"), Value: []byte{0, 0, 0, 0x27, 0x0f, 1, 2, 3}},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()
	b.Visit("/login?next=%2Ftopics%2Forders%2Fmessages%3Ffrom%3Dearliest%26format%3Djson")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "vera"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("orders-value v1")

	// Avro, version 1: the writer schema's field order, coloured.
	val := b.Text("#r-0-0 td.msg:not(.key) pre")
	if i, j, k := strings.Index(val, `"id"`), strings.Index(val, `"total"`), strings.Index(val, `"customer"`); !(i >= 0 && i < j && j < k) || !strings.Contains(val, `"ann"`) {
		t.Fatalf("Avro record: %q", val)
	}
	if n := evalIn[int](t, b, `document.querySelectorAll("#r-0-0 td.msg:not(.key) pre.json span.k").length`); n != 3 {
		t.Fatalf("%d coloured keys, want 3", n)
	}
	for _, c := range []struct{ row, ref, href, value string }{
		{"#r-0-0", "orders-value v1 · id 1 · AVRO", "/schemas/orders-value?version=1", `"total": 12.5`},
		{"#r-0-1", "orders-value v2 · id 2 · AVRO", "/schemas/orders-value?version=2", `"channel": "web"`},
		{"#r-0-2", "payments-value v1 · id 3 · PROTOBUF", "/schemas/payments-value?version=1", `"payer": "cy"`},
	} {
		if got := strings.Join(strings.Fields(b.Text(c.row+" td.msg:not(.key) .schemaref")), " "); got != c.ref {
			t.Errorf("%s schema: %q, want %q", c.row, got, c.ref)
		}
		if href := evalIn[string](t, b, `document.querySelector("`+c.row+` .schemaref a").getAttribute("href")`); href != c.href {
			t.Errorf("%s schema link: %q, want %q", c.row, href, c.href)
		}
		if v := b.Text(c.row + " td.msg:not(.key) pre"); !strings.Contains(v, c.value) {
			t.Errorf("%s value %q lacks %q", c.row, v, c.value)
		}
	}
	if got := b.Text("#r-0-3 .decodeerr"); !strings.Contains(got, "not decoded: schema id 9999 is not in the registry") {
		t.Fatalf("undecodable record: %q", got)
	}
	b.Screenshot("decoded-records")

	// A search on a decoded field (the Avro bytes hold no JSON).
	b.Visit(`/topics/orders/messages?format=json&field=value&q=%22payer%22%3A%22cy%22`)
	b.WaitText("Found 1")
	if v := b.Text("#r-0-2 td.msg:not(.key) pre"); !strings.Contains(v, `"ref": "p-1"`) {
		t.Fatalf("search result: %q", v)
	}
	b.CheckCSP("decoded records")
	t.Logf("took %v", time.Since(start))
}

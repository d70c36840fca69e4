package web

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/consoledb"
)

func TestProduceFormBrowseSearchExport(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "events", 3)
	op := ts.signedIn(t, "op", RoleOperator)
	page := "/topics/events/messages"
	r := op.Get(page)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "This topic is empty", "Produce a message", "Live tail")

	// Validation errors come back in the form with what was typed.
	r = op.Post(page, page, url.Values{"partition": {"7"}, "key": {"k"}, "value": {"v"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "The topic events has partitions 0 to 2", `value="k"`)
	r = op.Post(page, page, url.Values{"key": {"k"}, "value": {"v"}, "headers": {"no colon here"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Line 1: want name: value")

	// Produce with key, headers and a chosen partition.
	r = op.Post(page, page, url.Values{"partition": {"2"}, "key": {"order-42"}, "value": {`{"id":42,"total":9.5}`}, "headers": {"trace-id: abc-123\nsource: console"}})
	expectStatus(t, r, http.StatusSeeOther)
	loc := r.Header.Get("Location")
	if !strings.Contains(loc, "partition=2") || !strings.Contains(loc, "from=offset") {
		t.Fatalf("redirect after produce: %s", loc)
	}
	r = op.Get(loc)
	expectContains(t, r, "Written to events partition 2 at offset 0.", "order-42", "trace-id: abc-123", `{&#34;id&#34;:42,&#34;total&#34;:9.5}`)

	// Some more records to search through (through a plain client).
	cl := kgoClient(t, ts.brokers)
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte(fmt.Sprintf("user-%d", i)), Value: []byte(fmt.Sprintf("payload %d", i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v := ts.signedIn(t, "vic", RoleViewer)
	// Search by key, exact.
	r = v.Get(page + "?field=key&q=order-42&exact=1")
	expectContains(t, r, "Found 1 ·", "scanned 301 of 301 records", "order-42")
	// Search by header.
	r = v.Get(page + "?field=header&header=trace-id&q=abc")
	expectContains(t, r, "Found 1 ·", "order-42")
	// Search by value substring, several hits.
	r = v.Get(page + "?field=value&q=payload+29&limit=20")
	expectContains(t, r, "Found 11 ·", "<mark>payload 29</mark><", "<mark>payload 29</mark>9<") // matches highlighted
	// A bounded scan reports how far it got and offers to continue.
	r = v.Get(page + "?field=value&q=never-there&scan=100")
	expectContains(t, r, "stopped at the scan limit", "Continue search", "Nothing found yet")
	// Pretty JSON and hex.
	r = v.Get(page + "?partition=2&from=earliest&format=json")
	expectContains(t, r, `<span class="k">&#34;total&#34;</span>: <span class="n">9.5</span>`)
	r = v.Get(page + "?partition=2&from=earliest&format=hex&limit=1")
	expectContains(t, r, "00000000  6f 72 64 65 72 2d 34 32", "|order-42|")
	// Paging from earliest covers everything once.
	seen := 0
	next := page + "?from=earliest&limit=100"
	for i := 0; next != "" && i < 10; i++ {
		r = v.Get(next)
		seen += strings.Count(r.Text, `<td class="num">`) / 2 // partition and offset cells per row
		next = ""
		if m := nextRe.FindStringSubmatch(r.Text); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if seen != 301 {
		t.Fatalf("paged through %d records, want 301", seen)
	}
	// A bad query is explained on the page.
	r = v.Get(page + "?from=offset")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "offset must be a number")
	r = v.Get(page + "?from=timestamp&ts=yesterday")
	expectContains(t, r, "The time is not understood")
	// From a time in the viewer's zone.
	r = v.Get(page + "?from=timestamp&ts=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05")))
	expectContains(t, r, "No records from here")
	// A missing topic is a 404.
	expectStatus(t, v.Get("/topics/nope/messages"), http.StatusNotFound)

	// Export exactly what the page shows.
	r = v.Get(page + "/export?as=json&field=key&q=order-42&exact=1")
	expectStatus(t, r, http.StatusOK)
	if !strings.Contains(r.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export disposition: %q", r.Header.Get("Content-Disposition"))
	}
	var out []exportRecord
	if err := json.Unmarshal([]byte(r.Text), &out); err != nil || len(out) != 1 {
		t.Fatalf("export json: %v %s", err, snippet(r.Text))
	}
	if *out[0].Key != "order-42" || out[0].Partition != 2 || len(out[0].Headers) != 2 || out[0].Headers[0].Value != "abc-123" {
		t.Fatalf("exported record: %+v", out[0])
	}
	r = v.Get(page + "/export?as=csv&field=value&q=payload+1&limit=5")
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil || len(rows) != 6 || rows[0][4] != "key" || !strings.HasPrefix(rows[1][6], "payload 1") {
		t.Fatalf("export csv: %v %q", err, rows)
	}
	// JSON of the page itself.
	v.Accept = "application/json"
	r = v.Get(page + "?field=key&q=user-7&exact=1")
	var res struct {
		Records []struct{ Key string }
		Scanned int64
	}
	if err := json.Unmarshal([]byte(r.Text), &res); err != nil || len(res.Records) != 1 || res.Records[0].Key != "user-7" || res.Scanned != 301 {
		t.Fatalf("json browse: %v %s", err, snippet(r.Text))
	}
	entries, _, _ := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "message.produce"})
	if len(entries) != 1 || !strings.Contains(entries[0].Detail, "partition=2 offset=0") {
		t.Fatalf("audit of produce: %+v", entries)
	}
}

// The live tail is a server-sent-events stream; it needs a real listener.
func TestLiveTailStreamsNewRecords(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "live", 2)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := ts.signedIn(t, "v", RoleViewer)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp := ts.openTail(t, ctx, c, "/topics/live/messages/tail?field=key&q=keep")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() || sc.Text() != "event: note" {
		t.Fatalf("first line %q", sc.Text())
	}
	cl := kgoClient(t, ts.brokers)
	go func() {
		// Give the tail a moment to take the end offsets, then write one
		// record that the filter drops and one it keeps.
		time.Sleep(500 * time.Millisecond)
		cl.ProduceSync(ctx, &kgo.Record{Topic: "live", Key: []byte("drop-me"), Value: []byte("x")},
			&kgo.Record{Topic: "live", Key: []byte("keep-me"), Value: []byte("hello tail")})
	}()
	var data string
	for sc.Scan() {
		if sc.Text() == "event: records" && sc.Scan() {
			data = sc.Text()
			break
		}
	}
	if !strings.Contains(data, "<mark>keep</mark>-me") || !strings.Contains(data, "hello tail") || strings.Contains(data, "drop-me") {
		t.Fatalf("tail data: %q (scan err %v)", data, sc.Err())
	}
	// Close ends the stream (the server waits for it).
	cancel()
}

var nextRe = regexp.MustCompile(`href="([^"]+)">Next page`)

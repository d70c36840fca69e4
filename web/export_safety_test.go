package web

import (
	"bufio"
	"context"
	"encoding/csv"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCSVExportCannotInjectFormulas: record keys, values and headers that
// a spreadsheet would run as formulas are exported as text, every cell is
// quoted (so a ";" cannot split a cell in locales that use it as the
// separator), and the file still reads back as CSV.
func TestCSVExportCannotInjectFormulas(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "sheet", 1)
	cl := kgoClient(t, ts.brokers)
	values := []string{"=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "-12", "a;=1+1"}
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: "sheet", Key: []byte("=k" + strconv.Itoa(i)), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("@h")}}})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v := ts.signedIn(t, "vic", RoleViewer)
	r := v.Get("/topics/sheet/messages/export?as=csv&from=earliest&limit=100")
	expectStatus(t, r, http.StatusOK)
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil || len(rows) != len(values)+1 {
		t.Fatalf("export: %v, %d rows: %s", err, len(rows), snippet(r.Text))
	}
	for i, row := range rows[1:] {
		key, val := row[4], row[6]
		if key != "'=k"+strconv.Itoa(i) {
			t.Errorf("key cell %q", key)
		}
		want := "'" + values[i]
		if values[i] == "-12" || values[i] == "a;=1+1" {
			want = values[i]
		}
		if val != want {
			t.Errorf("value cell %q, want %q", val, want)
		}
	}
	// Every cell quoted, on every line.
	lines := strings.Split(strings.TrimSuffix(r.Text, "\n"), "\n")
	for i, row := range rows {
		quoted := make([]string, len(row))
		for j, cell := range row {
			quoted[j] = `"` + strings.ReplaceAll(cell, `"`, `""`) + `"`
		}
		if want := strings.Join(quoted, ","); lines[i] != want {
			t.Errorf("line %d: %q, want every cell quoted: %q", i, lines[i], want)
		}
	}
}

// sseEvents parses an event stream as a browser does (WHATWG): lines end
// at CR LF, LF or a lone CR; "event:" names the event; a blank line
// dispatches it.
func sseEvents(raw string) []string {
	var names []string
	name := ""
	for _, line := range regexp.MustCompile("\r\n|\r|\n").Split(raw, -1) {
		switch {
		case line == "":
			if name != "" {
				names = append(names, name)
			}
			name = ""
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		}
	}
	return names
}

// TestLiveTailCannotInjectEvents: a record holding carriage returns and
// newlines followed by "event:" lines arrives as one "records" event (its
// line breaks as character references), never as events of its own.
func TestLiveTailCannotInjectEvents(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "evil", 1)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := ts.signedIn(t, "v", RoleViewer)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp := ts.openTail(t, ctx, c, "/topics/evil/messages/tail")
	br := bufio.NewReader(resp.Body)
	if l, _ := br.ReadString('\n'); l != "event: note\n" {
		t.Fatalf("first line %q", l)
	}
	cl := kgoClient(t, ts.brokers)
	go func() {
		time.Sleep(500 * time.Millisecond)
		cl.ProduceSync(ctx, &kgo.Record{Topic: "evil", Key: []byte("k"),
			Value: []byte("a\revent: forged\rdata: <img src=x>\r\rb\nevent: forged2\n\nc\r\nevent: forged3\r\n\r\n")})
	}()
	var raw strings.Builder
	raw.WriteString("event: note\n")
	for !strings.Contains(raw.String(), "event: records") || !strings.HasSuffix(raw.String(), "\n\n") {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v; got %q", err, raw.String())
		}
		raw.WriteString(l)
	}
	names := sseEvents(raw.String())
	for _, n := range names {
		if strings.HasPrefix(n, "forged") {
			t.Fatalf("a record injected event %q into the stream: %q", n, raw.String())
		}
	}
	if !strings.Contains(raw.String(), "a&#13;event: forged&#13;") {
		t.Fatalf("the record's line breaks are not kept as references: %q", raw.String())
	}
}

// TestScansArePerUserBounded: a user with MaxScansPerUser reads running
// gets 429 for another (page, JSON or export), others are not affected;
// likewise for live tails.
func TestScansArePerUserBounded(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "big", 1)
	v := ts.signedIn(t, "vic", RoleViewer)
	w := ts.signedIn(t, "wes", RoleViewer)
	vic, _ := ts.store.UserByName(context.Background(), "vic")
	key := "scan:" + itoa64(vic.ID)
	for i := 0; i < MaxScansPerUser; i++ {
		if !ts.scans.acquire(key, MaxScansPerUser) {
			t.Fatal("no slot")
		}
	}
	for _, p := range []string{"/topics/big/messages?field=value&q=x", "/topics/big/messages/export?as=json"} {
		r := v.Get(p)
		expectStatus(t, r, http.StatusTooManyRequests)
		expectContains(t, r, "Too many searches at once")
		expectStatus(t, w.Get(p), http.StatusOK)
	}
	ts.scans.release(key)
	expectStatus(t, v.Get("/topics/big/messages?field=value&q=x"), http.StatusOK)
	ts.scans.release(key)
	if len(ts.scans.used) != 0 {
		t.Fatalf("slots left taken: %v", ts.scans.used)
	}

	tkey := "tail:" + itoa64(vic.ID)
	for i := 0; i < MaxTailsPerUser; i++ {
		ts.scans.acquire(tkey, MaxTailsPerUser)
	}
	r := v.Get("/topics/big/messages/tail")
	expectStatus(t, r, http.StatusTooManyRequests)
	expectContains(t, r, "Too many live tails")
}

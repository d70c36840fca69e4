package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/templates"
)

// consume starts a group member on topic that reads n records and commits
// them; the caller closes it to leave the group.
func consume(t *testing.T, brokers []string, group, topic string, n int) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxBytes(1<<10), kgo.ClientID("lag-test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	read := 0
	for read < n {
		fs := cl.PollRecords(ctx, n-read)
		if err := ctx.Err(); err != nil {
			cl.Close()
			t.Fatalf("consumed %d of %d: %v", read, n, err)
		}
		read += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		cl.Close()
		t.Fatal(err)
	}
	return cl
}

func produceRecords(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	cl := kgoClient(t, brokers)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte("v")}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestGroupsLagDetailAndReset(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "orders", 1)
	produceRecords(t, ts.brokers, "orders", 100)
	member := consume(t, ts.brokers, "billing", "orders", 40)
	defer member.Close()

	v := ts.signedIn(t, "vic", RoleViewer)
	r := v.Get("/groups")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "billing", "Stable", ">60 <")
	r = v.Get("/groups?state=Empty")
	expectContains(t, r, "No group matches")
	r = v.Get("/groups/billing")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "lag-test", "orders", ">40<", "Lag history") // committed 40
	v.Accept = "application/json"
	r = v.Get("/groups/billing")
	var gj struct {
		Group struct {
			TotalLag int64 `json:"total_lag"`
			State    string
		}
	}
	if err := json.Unmarshal([]byte(r.Text), &gj); err != nil || gj.Group.TotalLag != 60 || gj.Group.State != "Stable" {
		t.Fatalf("group json: %v %s", err, snippet(r.Text))
	}
	v.Accept = ""
	expectStatus(t, v.Get("/groups/no-such-group"), http.StatusNotFound)
	if strings.Contains(v.Get("/groups/billing").Text, "Preview reset") {
		t.Fatal("a viewer is offered the reset form")
	}

	op := ts.signedIn(t, "olga", RoleOperator)
	page := "/groups/billing"
	// Validation.
	r = op.Post(page, page+"/reset", url.Values{"mode": {"offset"}, "offset": {"-3"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Enter an offset of 0 or more")
	r = op.Post(page, page+"/reset", url.Values{"mode": {"timestamp"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Enter the time to reset to")
	// Preview while the group is active: no apply button.
	r = op.Post(page, page+"/reset", url.Values{"mode": {"earliest"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "not empty", ">40<")
	if strings.Contains(r.Text, "Apply:") {
		t.Fatal("apply offered for an active group")
	}
	// Forcing the apply while active is refused and changes nothing.
	r = op.Post(page, page+"/reset", url.Values{"mode": {"earliest"}, "apply": {"1"}, "off:orders:0": {"0"}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "stop its consumers first")

	member.Close()
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		d, err := ts.kc.Group(context.Background(), "billing")
		if err == nil && d.Lag.State != "Empty" {
			err = fmt.Errorf("group billing is %s, want Empty", d.Lag.State)
		}
		return err
	})
	r = op.Post(page, page+"/reset", url.Values{"mode": {"offset"}, "offset": {"90"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Apply: commit this offset", ">90<")
	form := url.Values{"mode": {"offset"}, "offset": {"90"}, "apply": {"1"}, "off:orders:0": {"90"}}
	r = op.Post(page, page+"/reset", form)
	expectStatus(t, r, http.StatusSeeOther)
	r = op.Get(page)
	expectContains(t, r, "Committed new offsets for 1 partition of billing.", ">90<")
	lags, _ := ts.kc.Lag(context.Background(), "billing")
	if len(lags) != 1 || lags[0].TotalLag != 10 {
		t.Fatalf("lag after reset: %+v", lags)
	}
	// Offsets past the end are clamped to it.
	r = op.Post(page, page+"/reset", url.Values{"mode": {"latest"}, "apply": {"1"}, "off:orders:0": {"100000"}})
	expectStatus(t, r, http.StatusSeeOther)
	lags, _ = ts.kc.Lag(context.Background(), "billing")
	if lags[0].TotalLag != 0 {
		t.Fatalf("lag after reset to a clamped offset: %d", lags[0].TotalLag)
	}
	entries, _, _ := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "group.reset-offsets"})
	if len(entries) != 3 || entries[2].Outcome == "ok" || entries[1].Outcome != "ok" {
		t.Fatalf("audit of resets: %+v", entries)
	}
}

// The sampler stores every group's lag; the group page draws it.
func TestLagHistoryIsSampledAndDrawn(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.LagSampleInterval = 200 * time.Millisecond })
	createTopic(t, ts, "in", 2)
	produceRecords(t, ts.brokers, "in", 50)
	member := consume(t, ts.brokers, "reader", "in", 20)
	member.Close()
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		pts, err := ts.store.LagHistory(context.Background(), "reader", "", time.Now().Add(-time.Minute), time.Now().Add(time.Second))
		if err == nil && (len(pts) < 3 || pts[len(pts)-1].Lag != 30) {
			err = fmt.Errorf("lag history %+v, want 3 samples or more, the last at 30", pts)
		}
		return err
	})
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/groups/reader?range=1h")
	expectContains(t, r, `<svg class="chart"`, `<path class="line" d="M`, "records behind", "Samples as a table")
	r = v.Get("/groups/reader?range=bogus")
	expectContains(t, r, `aria-current="true">6h`)
	// The overview lists the group among the most lagging.
	r = v.Get("/")
	expectContains(t, r, "Consumer groups with the most lag", "reader")
}

// Group names may hold any character; links escape them.
func TestGroupNamesWithAnyCharacter(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "t", 1)
	produceRecords(t, ts.brokers, "t", 10)
	m := consume(t, ts.brokers, "team a/b?x", "t", 5)
	defer m.Close()
	v := ts.signedIn(t, "vic", RoleViewer)
	expectContains(t, v.Get("/groups"), `href="/groups/team%20a%2Fb%3Fx"`)
	r := v.Get("/groups/team%20a%2Fb%3Fx")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "team a/b?x", ">5 <")
}

// The group page explains its lag: per-partition consumption and
// production rates and the time to catch up (a group that consumes nothing
// is "stopped"), the chart of one topic alone, and markers on the chart
// for the page groups' events (alerts) and for offset resets.
func TestLagChartExplains(t *testing.T) {
	var mu sync.Mutex
	var events []templates.ChartEvent
	ts := newTestServer(t, func(c *Config) {
		c.LagSampleInterval = 200 * time.Millisecond
		c.Extra = append(c.Extra, PageGroup{Name: "test-events", Events: func(_ context.Context, subject string, since, until time.Time) ([]templates.ChartEvent, error) {
			mu.Lock()
			defer mu.Unlock()
			if subject != "group:reader" {
				return nil, nil
			}
			return append([]templates.ChartEvent(nil), events...), nil
		}})
	})
	createTopic(t, ts, "in", 2)
	createTopic(t, ts, "other", 1)
	produceRecords(t, ts.brokers, "in", 50)
	produceRecords(t, ts.brokers, "other", 10)
	consume(t, ts.brokers, "reader", "in", 20).Close()
	consume(t, ts.brokers, "reader", "other", 4).Close()
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		pts, err := ts.store.LagHistory(context.Background(), "reader", "", time.Now().Add(-time.Minute), time.Now().Add(time.Second))
		if err == nil && (len(pts) < 3 || pts[len(pts)-1].Lag != 36) {
			err = fmt.Errorf("lag history %+v, want 3 samples or more, the last at 36", pts)
		}
		return err
	})
	at := time.Now()
	mu.Lock()
	events = []templates.ChartEvent{{At: at, Kind: "fired", Label: "billing lag fired: 36 records behind"}}
	mu.Unlock()
	if _, err := ts.store.AppendAudit(context.Background(), consoledb.AuditEntry{At: at, User: "otto", Action: "group.reset-offsets", Target: "reader", Detail: "in:0 -> 5", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	// Let a sample land after the events, so they are inside the span.
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		pts, err := ts.store.LagHistory(context.Background(), "reader", "", at, time.Now().Add(time.Second))
		if err == nil && len(pts) == 0 {
			err = fmt.Errorf("no sample after the events yet")
		}
		return err
	})
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/groups/reader?range=1h")
	expectContains(t, r, "Catch up in", `<td class="num bad-text">stopped</td>`, "Rates over the last",
		`<g class="marker fired"><title>`, "billing lag fired: 36 records behind", `<g class="marker reset"><title>`, "Offsets reset by otto: in:0 -&gt; 5",
		"the chart shows that span, not the whole 1h", `<rect class="hover"`, "records behind</title>")
	// One topic's chart.
	r = v.Get("/groups/reader?range=1h&topic=other")
	expectContains(t, r, `<strong aria-current="true">other</strong>`, "Lag of 6 records at the last sample")
	// The rate as JSON.
	var got struct {
		Rate struct {
			Known bool   `json:"known"`
			State string `json:"state"`
		} `json:"rate"`
	}
	v.GetJSON("/groups/reader", &got)
	if !got.Rate.Known || got.Rate.State != "stopped" {
		t.Fatalf("rate as JSON: %+v", got.Rate)
	}
}

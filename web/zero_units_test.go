package web

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web/webtest"
)

func TestBareZeroScanner(t *testing.T) {
	page := `<div class="stats"><div class="stat"><div class="label">Topics</div><div class="value">0 <small>topics</small></div></div>
<div class="stat"><div class="label">Rate</div><div class="value">0</div></div></div>
<table><thead><tr><th>Partition</th><th>Size</th><th>Records</th><th>Lag</th></tr></thead>
<tbody><tr><td class="num">0</td><td class="num">0 <span class="unit">B</span></td><td class="num">0</td><td class="num nowrap">0.0</td></tr></tbody></table>`
	got := fmt.Sprint(webtest.BareZeros("p", page))
	want := `[p: column "Records" shows "0" p: column "Lag" shows "0.0" p: figure "Rate" shows "0"]`
	if got != want {
		t.Fatalf("findings %s, want %s", got, want)
	}
}

// TestZerosCarryUnits renders the console's pages over an idle cluster (an
// empty topic, a topic whose only group has read everything, the lag
// sampler running) and fails on every numeric cell or figure that shows a
// bare zero.
func TestZerosCarryUnits(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.LagSampleInterval = 100 * time.Millisecond })
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	createTopic(t, ts, "empty", 3)
	createTopic(t, ts, "done", 1)
	produceRecords(t, ts.brokers, "done", 5)
	consume(t, ts.brokers, "idle", "done", 5).Close()
	testutil.CheckFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		pts, err := ts.store.LagHistory(context.Background(), "idle", "", time.Now().Add(-time.Hour), time.Now().Add(time.Second))
		if err == nil && len(pts) < 2 {
			err = fmt.Errorf("%d lag samples of idle", len(pts))
		}
		return err
	})
	admin := ts.signedIn(t, "ada", RoleAdmin)
	pages := []string{
		"/", "/brokers", "/topics", "/topics/empty", "/topics/done", "/topics/empty/messages",
		"/topics/done/messages", "/groups", "/groups/idle", "/groups/idle?range=1h", "/users", "/audit",
		"/account", "/transactions",
	}
	var all []webtest.ZeroFinding
	for _, p := range pages {
		r := admin.Get(p)
		expectStatus(t, r, http.StatusOK)
		all = append(all, webtest.BareZeros(p, r.Text)...)
	}
	webtest.ExpectNoBareZeros(t, all)
}

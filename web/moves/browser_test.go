package moves_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/moves"
)

// TestBrowserMoves moves a partition from the Partition moves page in
// Chromium, as an operator does: the "reassign a topic" form with a
// throttle, its preview (the partition that moves, from where to where, the
// bytes to copy), the confirmation, the move listed with its progress bar
// and refreshed by the page's polling, then cancelled from its row (after
// the browser's confirm dialog); on the cluster the move is gone and its
// throttle removed at once, and both are audited. A viewer is offered no
// link to the page, is refused it, and its forged posts (with its session's
// valid CSRF token, the start with a plan that would start) get 403 and
// start nothing.
func TestBrowserMoves(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper, three brokers and Chromium")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()+"/moves"),
		testcluster.LogLevel(slog.LevelWarn), testcluster.Settings("auto.create.topics.enable=false"))
	cl := c.Client(kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b1, b2, b3 := c.Node(0).ID(), c.Node(1).ID(), c.Node(2).ID()

	// 6 MiB on brokers 1 and 2, moved to 1 and 3 at 64 KiB/s: about 90 s
	// of copying (the first 10 s' worth passes at once), so the move is
	// still going when the test cancels it.
	createAssigned(ctx, t, cl, "slow", []int32{b1, b2})
	const recordBytes, records = 64 << 10, 96
	produce(ctx, t, cl, "slow", records, recordBytes)
	waitReplicas(ctx, t, adm, "slow", []int32{b1, b2})

	// The cleaner runs once at the start and then hourly: a throttle gone
	// after the cancel was removed by the cancel itself.
	con := newConsole(t, c.Addrs(), moves.Options{CleanupInterval: time.Hour})
	for name, role := range map[string]web.Role{"op": web.RoleOperator, "vic": web.RoleViewer} {
		if _, err := con.srv.Store().CreateUser(ctx, name, role, "password-1"); err != nil {
			t.Fatal(err)
		}
	}
	// moving is the reassignments of slow-0 on the cluster.
	moving := func() []kadm.ListPartitionReassignmentsResponse {
		t.Helper()
		var set kadm.TopicsSet
		set.Add("slow", 0)
		rs, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			t.Fatal(err)
		}
		return rs.Sorted()
	}
	ids := func(bs ...int32) string {
		s := make([]string, len(bs))
		for i, b := range bs {
			s[i] = strconv.Itoa(int(b))
		}
		return strings.Join(s, ", ")
	}

	b := browsertest.New(t, con.srv.URL())
	defer b.PublishScreenshots()
	b.SignIn("op", "password-1")
	if n := b.Count(`a[href="/moves"]`); n == 0 {
		t.Fatalf("an operator is offered no link to the partition moves page")
	}
	b.Visit("/moves")
	b.WaitText("No partition moves in progress")

	// The form, then its preview: nothing moves yet.
	b.Do("preview the move of slow to brokers 1 and 3",
		chromedp.SetValue(chromedp.ID("move-topic-topic"), "slow"),
		chromedp.SendKeys(chromedp.ID("move-topic-brokers"), fmt.Sprintf("%d,%d", b1, b3)),
		chromedp.SendKeys(chromedp.ID("move-topic-throttle"), "64KiB"),
		chromedp.Click(chromedp.CSS(`#move-topic button[type="submit"]`)),
	)
	b.WaitText("Reassign topic slow")
	b.CheckCSP("the preview")
	if got, want := b.Text("#preview-summary"), "1 partition moves; 6.0 MiB to copy, throttled to 64.0 KiB/s."; got != want {
		t.Fatalf("the preview's summary: %q, want %q", got, want)
	}
	cells := browsertest.Eval[[]string](b, `[...document.querySelectorAll("#preview tbody tr")].map(r => [...r.cells].map(c => c.textContent.trim()).join(" | "))`)
	if want := fmt.Sprintf("slow | 0 | %s | %s | %d | %d | 6.0 MiB", ids(b1, b2), ids(b1, b3), b3, b2); len(cells) != 1 || cells[0] != want {
		t.Fatalf("the preview's rows: %q, want [%q]", cells, want)
	}
	plan := browsertest.Eval[string](b, `document.querySelector('#move-confirm input[name="plan"]').value`)
	b.Screenshot("moves-preview")
	if m := moving(); len(m) != 0 {
		t.Fatalf("the preview started a move: %+v", m)
	}
	if got := topicConfig(ctx, t, adm, "slow", config.FollowerThrottledReplicas); got != "" {
		t.Fatalf("the preview throttled slow: %q", got)
	}

	// Confirmed: the move runs, throttled, and the page lists it.
	b.Do("start the move", chromedp.Click(chromedp.CSS(`#move-confirm button[type="submit"]`)))
	b.WaitText("Reassign topic slow: started 1 move. Throttled to 64.0 KiB/s; the throttle is removed once they end.")
	b.CheckCSP("/moves")
	if m := moving(); len(m) != 1 || !slices.Equal(m[0].AddingReplicas, []int32{b3}) || !slices.Equal(m[0].RemovingReplicas, []int32{b2}) {
		t.Fatalf("on the cluster after the start: %+v", m)
	}
	if got, want := topicConfig(ctx, t, adm, "slow", config.FollowerThrottledReplicas), fmt.Sprintf("0:%d", b3); got != want {
		t.Fatalf("slow's follower throttled replicas while it moves: %q, want %q", got, want)
	}
	if got := brokerConfig(ctx, t, adm, b3, config.FollowerThrottledRate); got != strconv.Itoa(64<<10) {
		t.Fatalf("broker %d's follower rate while slow moves: %q", b3, got)
	}
	b.Do("see the move's row", chromedp.WaitVisible(chromedp.CSS(`#move-slow-0 progress`)))
	if row := b.Text("#move-slow-0"); !strings.Contains(row, ids(b1, b3)) || !strings.Contains(row, " of ") {
		t.Fatalf("the move's row: %q", row)
	}
	if got := b.Text("#moves-throttled"); !strings.Contains(got, "slow") {
		t.Fatalf("the throttled topics: %q", got)
	}

	// The page polls: the row is replaced by a fresh one without the page
	// being loaded again, its progress bar part way.
	browsertest.Eval[bool](b, `(window.__samePage = true, document.querySelector("#move-slow-0").dataset.seen = "1", true)`)
	testutil.CheckFor(t, 20*time.Second, 250*time.Millisecond, func() error {
		st := browsertest.Eval[string](b, `(() => {
			if (!window.__samePage) return "the page was loaded again";
			const row = document.querySelector("#move-slow-0");
			if (!row) return "no row";
			return row.dataset.seen ? "not refreshed yet" : "";
		})()`)
		if st != "" {
			return fmt.Errorf("%s", st)
		}
		return nil
	})
	pct := browsertest.Eval[int](b, `Number(document.querySelector("#move-slow-0 progress").value)`)
	if max := browsertest.Eval[int](b, `Number(document.querySelector("#move-slow-0 progress").max)`); max != 100 || pct < 0 || pct >= 100 {
		t.Fatalf("the move's progress bar: %d of %d", pct, max)
	}
	t.Logf("refreshed by the page: %q", b.Text("#move-slow-0"))
	b.Screenshot("moves-in-progress")

	// Cancelled from its row, after the dialog.
	if m := moving(); len(m) != 1 {
		t.Fatalf("the move ended before the cancel (throttle not applied?): %+v", m)
	}
	msg := b.Confirm("cancel the move of slow-0", chromedp.Click(chromedp.CSS(`#move-slow-0 form[action="/moves/cancel"] button`)))
	if want := "Cancel the move of slow-0? It goes back to its original replicas."; msg != want {
		t.Fatalf("the confirm dialog says %q, want %q", msg, want)
	}
	b.WaitText("Cancelled 1 move: each partition goes back to its original replicas.")
	b.WaitTextWithin("No partition moves in progress", 20*time.Second)
	if n := b.Count("#moves-throttled"); n != 0 {
		t.Fatalf("the page still lists throttled topics: %q", b.Text("#moves-throttled"))
	}
	if m := moving(); len(m) != 0 {
		t.Fatalf("on the cluster after the cancel: %+v", m)
	}
	testutil.CheckFor(t, 15*time.Second, 200*time.Millisecond, func() error {
		for _, k := range []string{config.LeaderThrottledReplicas, config.FollowerThrottledReplicas} {
			if got := topicConfig(ctx, t, adm, "slow", k); got != "" {
				return fmt.Errorf("slow keeps %s=%q", k, got)
			}
		}
		for _, id := range []int32{b1, b2, b3} {
			for _, k := range []string{config.LeaderThrottledRate, config.FollowerThrottledRate} {
				if got := brokerConfig(ctx, t, adm, id, k); got != "" {
					return fmt.Errorf("broker %d keeps %s=%q", id, k, got)
				}
			}
		}
		return nil
	})
	waitReplicas(ctx, t, adm, "slow", []int32{b1, b2})
	starts := con.audit("moves.start")
	if len(starts) != 1 || starts[0].User != "op" || starts[0].Outcome != "ok" || starts[0].Target != "Reassign topic slow" ||
		!strings.Contains(starts[0].Detail, "partitions=1 throttle=65536") || !strings.Contains(starts[0].Detail, fmt.Sprintf("slow-0:%s->%s", ids(b1, b2), ids(b1, b3))) {
		t.Fatalf("moves.start audit %+v", starts)
	}
	cancels := con.audit("moves.cancel")
	if len(cancels) != 1 || cancels[0].User != "op" || cancels[0].Outcome != "ok" || cancels[0].Target != "slow-0" ||
		!strings.Contains(cancels[0].Detail, "throttle-removed=slow") {
		t.Fatalf("moves.cancel audit %+v", cancels)
	}

	// A viewer.
	b.SignOut()
	b.SignIn("vic", "password-1")
	if n := b.Count(`a[href="/moves"]`); n != 0 {
		t.Fatalf("a viewer is offered %d links to the partition moves page", n)
	}
	start := map[string]string{"kind": "topic", "topic": "slow", "brokers": fmt.Sprintf("%d,%d", b1, b3), "throttle": "64KiB", "plan": plan}
	for _, p := range []struct {
		path   string
		fields map[string]string
	}{
		{"/moves/preview", start},
		{"/moves/start", start},
		{"/moves/cancel", map[string]string{"all": "1"}},
	} {
		if st := b.ForgedPost(p.path, p.fields); st != http.StatusForbidden {
			t.Fatalf("a viewer's POST %s: status %d, want 403", p.path, st)
		}
	}
	b.Visit("/moves")
	b.WaitText("Your role is viewer; this needs operator.")
	if st := browsertest.Eval[int](b, `(() => { const x = new XMLHttpRequest(); x.open("GET", "/moves", false); x.send(); return x.status; })()`); st != http.StatusForbidden {
		t.Fatalf("a viewer's GET /moves: status %d, want 403", st)
	}
	if m := moving(); len(m) != 0 {
		t.Fatalf("the viewer's posts started a move: %+v", m)
	}
	if got := topicConfig(ctx, t, adm, "slow", config.FollowerThrottledReplicas); got != "" {
		t.Fatalf("the viewer's posts throttled slow: %q", got)
	}
	if len(con.audit("moves.start")) != 1 || len(con.audit("moves.cancel")) != 1 {
		t.Fatalf("the viewer's posts were audited as moves: %+v %+v", con.audit("moves.start"), con.audit("moves.cancel"))
	}
	if n := len(con.audit("auth.role-refused")); n != 5 {
		t.Fatalf("%d refusals audited, want 5 (three posts, two GETs)", n)
	}
}

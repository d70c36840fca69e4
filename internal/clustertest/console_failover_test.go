package clustertest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web/webtest"
)

// consoleLeaderID reads the broker id in /console_leader.
func consoleLeaderID(t *testing.T, c *testCluster) (int32, error) {
	data, _, err := c.zkConn(t).Get(zkChroot + "/console_leader")
	if err != nil {
		return 0, err
	}
	var node struct {
		BrokerID int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(data, &node); err != nil {
		return 0, err
	}
	return node.BrokerID, nil
}

// comparisonRecords writes records [from, to) of the comparison's data set
// to both topics: the same key and timestamp on both sides; every 70th
// record is missing on the right and every 50th (from 25) differs there.
func comparisonRecords(t *testing.T, cl *kgo.Client, left, right string, base time.Time, from, to int) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		key := []byte("k" + strconv.Itoa(i))
		recs = append(recs, &kgo.Record{Topic: left, Key: key, Value: value(i), Timestamp: ts})
		if i%70 == 0 {
			continue
		}
		v := value(i)
		if i%50 == 25 {
			v = []byte("changed-" + strconv.Itoa(i))
		}
		recs = append(recs, &kgo.Record{Topic: right, Key: key, Value: v, Timestamp: ts})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleFailover: kill -9 the host whose console leads while an alert
// is firing to a local PagerDuty stand-in and a comparison runs. Another
// console takes over within the ZooKeeper session timeout; PagerDuty gets
// no second trigger for the incident and gets the resolve when the lag
// clears; the comparison, resumed from its replicated checkpoint, ends
// with the counts of an uninterrupted run over the same records; and the
// lag chart of a surviving host misses at most one sample: no gap longer
// than two sample intervals, give or take the half interval a round's own
// duration moves its timestamp by.
func TestConsoleFailover(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	rootAdmin(t, c)
	ctx := ctxFor(t, 5*time.Minute)

	var leader int32
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() (err error) {
		leader, err = consoleLeaderID(t, c)
		return err
	})
	var rest []int32 // the hosts that stay
	for _, b := range c.brokers {
		if b.id != leader {
			rest = append(rest, b.id)
		}
	}
	observer := rest[len(rest)-1]
	t.Logf("host %d's console leads; host %d observes", leader, observer)
	tag := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)

	// Data the dying host does not hold: topics on the other two, and a
	// group whose coordinator is one of them.
	topic, left, right := "fo-orders-"+tag, "fo-left-"+tag, "fo-right-"+tag
	createTopic(t, c, topic, [][]int32{{rest[0], rest[1]}}, nil)
	createTopic(t, c, left, [][]int32{{rest[0], rest[1]}}, nil)
	createTopic(t, c, right, [][]int32{{rest[1], rest[0]}}, nil)
	adm := c.admin(t)
	var group string
	for i := 0; group == "" && i < 200; i++ {
		g := fmt.Sprintf("fo-billing-%s-%d", tag, i)
		resp := adm.FindGroupCoordinators(ctx, g)
		if r, ok := resp[g]; ok && r.Err == nil && r.NodeID != leader {
			group = g
		}
	}
	if group == "" {
		t.Fatal("no group name whose coordinator is not the leading host")
	}
	cl := c.client(t)
	for i := 0; i < 50; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(at int64) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.AddOffset(topic, 0, at, -1)
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			rs, err := adm.CommitOffsets(ctx, group, offs)
			if err != nil {
				return err
			}
			return rs.Error()
		})
	}
	commit(0) // 50 behind

	// The notifier and the rule, made on the observer's console.
	pd := newPDReceiver(t)
	obs := c.signedIn(t, observer, "root", rootPassword)
	nid := created(t, obs, "/alerts/notifiers", "/alerts/notifiers", url.Values{"name": {"pd-" + tag}, "type": {"pagerduty"},
		"url": {pd.srv.URL + "/v2/enqueue"}, "secret": {("failoverRoutingKey" + tag + "00000000000000")[:32]}, "enabled": {"1"}})
	rid := created(t, obs, "/alerts/rules/new", "/alerts/rules", url.Values{"name": {"billing lag " + tag}, "kind": {"lag_records"},
		"severity": {"critical"}, "threshold": {"10"}, "for": {"0"}, "clear_for": {"0"}, "scope_pattern": {group},
		"notifiers": {strconv.FormatInt(nid, 10)}, "enabled": {"1"}})
	var dedup string
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		evs := pd.events("trigger", "")
		for _, ev := range evs {
			if k, _ := ev["dedup_key"].(string); strings.Contains(k, fmt.Sprintf("rule-%d/", rid)) {
				dedup = k
				return nil
			}
		}
		return fmt.Errorf("no trigger yet: %v", evs)
	})
	t.Logf("firing: %s", dedup)

	// The comparison, running on the leader.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	comparisonRecords(t, cl, left, right, base, 0, 300)
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if page := obs.Get("/comparisons/new").Text; !strings.Contains(page, right) {
			return fmt.Errorf("the console does not offer %s yet", right)
		}
		return nil
	})
	cid := created(t, obs, "/comparisons/new", "/comparisons", url.Values{"name": {"failover " + tag}, "left": {left}, "right": {right},
		"pairing": {"key"}, "values": {"bytes"}, "start": {"earliest"}, "window": {"1s"}, "mode": {"continuous"}})
	type counters struct {
		LeftRecords     int64 `json:"left_records"`
		RightRecords    int64 `json:"right_records"`
		Matched         int64 `json:"matched"`
		Mismatched      int64 `json:"mismatched"`
		MissingRight    int64 `json:"missing_right"`
		MissingLeft     int64 `json:"missing_left"`
		DuplicatesLeft  int64 `json:"duplicates_left"`
		DuplicatesRight int64 `json:"duplicates_right"`
		OutOfOrder      int64 `json:"out_of_order"`
		PendingLeft     int64 `json:"pending_left"`
		PendingRight    int64 `json:"pending_right"`
	}
	countersOn := func(cl *webtest.Client) (counters, string) {
		var v struct {
			Comparison struct {
				State    string
				Snapshot struct{ Counters counters }
			}
		}
		cl.GetJSON(fmt.Sprintf("/comparisons/%d", cid), &v)
		return v.Comparison.Snapshot.Counters, v.Comparison.State
	}
	// Compared some, and checkpointed (the numbers reach the observer
	// through the topic).
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		if k, state := countersOn(obs); state != "running" || k.LeftRecords < 300 {
			return fmt.Errorf("comparison on the observer: %s %+v", state, k)
		}
		return nil
	})

	// kill -9 the leading host.
	c.broker(leader).kill()
	killed := time.Now()
	var next int32
	testutil.CheckFor(t, sessionTimeout+10*time.Second, 100*time.Millisecond, func() (err error) {
		id, err := consoleLeaderID(t, c)
		if err != nil {
			return err
		}
		if id == leader {
			return fmt.Errorf("host %d still holds /console_leader", id)
		}
		next = id
		return nil
	})
	took := time.Since(killed)
	if took > sessionTimeout+2*time.Second {
		t.Fatalf("the takeover took %v (session timeout %v)", took, sessionTimeout)
	}
	t.Logf("host %d's console took over %v after host %d was killed", next, took.Round(time.Millisecond), leader)

	// Several evaluation rounds of the new leader (every 500 ms) with the
	// lag still there and the alert firing there: no second trigger.
	newLeader := c.signedIn(t, next, "root", rootPassword)
	tookOver := time.Now()
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		var v struct {
			Evaluation struct {
				Evaluating bool
				Status     struct {
					LastRun time.Time `json:"last_run"`
					Firing  int
				}
			}
		}
		newLeader.GetJSON("/alerts", &v)
		st := v.Evaluation.Status
		if !v.Evaluation.Evaluating || st.LastRun.Before(tookOver.Add(3*time.Second)) || st.Firing < 1 {
			return fmt.Errorf("host %d's evaluation: %+v", next, v.Evaluation)
		}
		return nil
	})
	if n := len(pd.events("trigger", dedup)); n != 1 {
		t.Fatalf("%d triggers for %s after the takeover, want 1; received: %v", n, dedup, pd.actions(dedup))
	}

	// More records for the comparison, stamped now (a continuous
	// comparison that has caught up takes a record older than its window
	// and the idle grace as missing on the other side, failover or not);
	// the lag clears: the resolve comes.
	comparisonRecords(t, cl, left, right, time.Now().Add(-300*time.Millisecond), 300, 600)
	commit(50)
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if n := len(pd.events("resolve", dedup)); n != 1 {
			return fmt.Errorf("%d resolves", n)
		}
		return nil
	})
	if n := len(pd.events("trigger", dedup)); n != 1 {
		t.Fatalf("%d triggers for %s in all, want 1; received: %v", n, dedup, pd.actions(dedup))
	}

	// The comparison's final numbers against an uninterrupted run over the
	// same records.
	spec := migration.DefaultSpec()
	spec.Left, spec.Right, spec.Window, spec.Bounded = left, right, migration.Duration(time.Second), true
	ref, err := migration.New(spec, migration.Options{Brokers: c.seeds(), ClientOpts: c.clientOpts()})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ref.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := counters{LeftRecords: snap.Counters.LeftRecords, RightRecords: snap.Counters.RightRecords, Matched: snap.Counters.Matched,
		Mismatched: snap.Counters.Mismatched, MissingRight: snap.Counters.MissingRight, MissingLeft: snap.Counters.MissingLeft,
		DuplicatesLeft: snap.Counters.DuplicatesLeft, DuplicatesRight: snap.Counters.DuplicatesRight, OutOfOrder: snap.Counters.OutOfOrder}
	if want.LeftRecords != 600 || want.Matched != 579 || want.Mismatched != 12 || want.MissingRight != 9 {
		t.Fatalf("the uninterrupted run: %+v", want)
	}
	testutil.CheckFor(t, 90*time.Second, 250*time.Millisecond, func() error {
		got, state := countersOn(newLeader)
		if got != want {
			return fmt.Errorf("comparison after the failover (%s): %+v, want %+v", state, got, want)
		}
		return nil
	})

	// The lag chart on the observer around the failover.
	interval := time.Second // console.lag.sample.interval.ms of the test brokers
	rows, err := c.consoleDB(t, observer).QueryContext(ctx, `SELECT DISTINCT at FROM lag_samples WHERE group_name = ? AND at BETWEEN ? AND ? ORDER BY at`,
		group, killed.Add(-5*time.Second).UnixMilli(), killed.Add(took+10*time.Second).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	var ats []int64
	for rows.Next() {
		var at int64
		rows.Scan(&at)
		ats = append(ats, at)
	}
	rows.Close()
	if len(ats) < 5 {
		t.Fatalf("only %d lag samples of %s on host %d around the failover", len(ats), group, observer)
	}
	var gap time.Duration
	for i := 1; i < len(ats); i++ {
		gap = max(gap, time.Duration(ats[i]-ats[i-1])*time.Millisecond)
	}
	t.Logf("lag chart on host %d: %d samples around the failover, longest gap %v", observer, len(ats), gap)
	if first, last := time.UnixMilli(ats[0]), time.UnixMilli(ats[len(ats)-1]); first.After(killed) || last.Before(killed.Add(took)) {
		t.Fatalf("the samples (%v to %v) do not span the failover (%v + %v)", first, last, killed, took)
	}
	// A sample is stamped when its round ends, and a round that reads a
	// cluster which just lost a broker takes longer: at most one missed
	// round is a gap of two intervals plus that jitter, two missed ones
	// three intervals.
	if gap > 2*interval+interval/2 {
		t.Fatalf("the lag chart on host %d has a gap of %v: more than one sample missing", observer, gap)
	}

}

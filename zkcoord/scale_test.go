package zkcoord

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// scaleResult is what one run of the 10,000-partition scenario measured.
type scaleResult struct {
	partitions                  int
	createStates, peersSeeNew   time.Duration
	coldOpen                    time.Duration
	failoverWrite, peersSeeMove time.Duration
	moved                       int
	notifications               int
	watchesBefore, watchesAfter int
}

// runScale: three brokers' coordinators; the controller creates topics
// partitions x RF 3 (100 partitions per topic) and their states, then moves
// every partition led by broker 3 (its broker "died") to the next ISR
// member, as the controller does on failover. It measures how long the
// writes take and how long until the other coordinators have applied them.
func runScale(t testing.TB, partitions int) scaleResult {
	chroot := newChroot()
	var r scaleResult
	r.partitions = partitions
	cs := make([]*Coordinator, 3)
	for i := range cs {
		cs[i] = open(t, zkServer.Addr(), chroot, func(c *Config) { c.SessionTimeout = 10 * time.Second })
		mustOK(t, cs[i].RegisterBroker(bg(t), cluster.Broker{ID: int32(i + 1)}))
	}
	ctl := cs[0]
	ci, err := ctl.Campaign(bg(t), 1)
	mustOK(t, err)
	var err2 error
	r.watchesBefore, err2 = zkServer.WatchCount()
	mustOK(t, err2)

	const perTopic = 100
	rnd := rand.New(rand.NewPCG(1, 2))
	var writes []cluster.StateWrite
	for ti := 0; ti*perTopic < partitions; ti++ {
		n := min(perTopic, partitions-ti*perTopic)
		assign, err := cluster.AssignReplicas([]int32{1, 2, 3}, n, 3, 0, rnd)
		mustOK(t, err)
		name := fmt.Sprintf("topic-%04d", ti)
		mustOK(t, ctl.CreateTopic(bg(t), cluster.Topic{Name: name, ID: cluster.NewUUID(), Replicas: assign}, nil))
		for p, reps := range assign {
			writes = append(writes, cluster.StateWrite{Topic: name, Partition: int32(p), Create: true,
				State: cluster.PartitionState{Leader: reps[0], ISR: reps, ControllerEpoch: ci.Epoch}})
		}
	}
	wctx := cluster.WithControllerEpoch(bg(t), ci.Epoch)
	before := countNotifications(t, chroot)
	start := time.Now()
	_, errs := ctl.WritePartitionStates(wctx, writes)
	r.createStates = time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %s-%d: %v", writes[i].Topic, writes[i].Partition, err)
		}
	}
	// Peers see every partition.
	testutil.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error { return allStates(cs[1:], writes, false) })
	r.peersSeeNew = time.Since(start)
	r.notifications = countNotifications(t, chroot) - before

	start = time.Now()
	cold := open(t, zkServer.Addr(), chroot)
	r.coldOpen = time.Since(start)
	if err := allStates([]*Coordinator{cold}, writes, false); err != nil {
		t.Fatalf("a coordinator opened afterwards: %v", err)
	}
	cold.Close()

	// Failover: broker 3 is gone; its partitions move to the next replica.
	var moves []cluster.StateWrite
	for _, w := range writes {
		if w.State.Leader != 3 {
			continue
		}
		st := w.State.Clone()
		st.Version = 0
		st.LeaderEpoch++
		st.ISR = nil
		for _, b := range w.State.ISR {
			if b != 3 {
				st.ISR = append(st.ISR, b)
			}
		}
		st.Leader = st.ISR[0]
		moves = append(moves, cluster.StateWrite{Topic: w.Topic, Partition: w.Partition, State: st})
	}
	r.moved = len(moves)
	start = time.Now()
	_, errs = ctl.WritePartitionStates(wctx, moves)
	r.failoverWrite = time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("move %s-%d: %v", moves[i].Topic, moves[i].Partition, err)
		}
	}
	// Peers see every move.
	testutil.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error { return allStates(cs[1:], moves, true) })
	r.peersSeeMove = time.Since(start)
	r.watchesAfter, err = zkServer.WatchCount()
	mustOK(t, err)
	return r
}

func countNotifications(t testing.TB, chroot string) int {
	kids, _, err := rawConn(t, zkServer.Addr()).Children(chroot + stateChangesPath)
	mustOK(t, err)
	return len(kids)
}

// allStates checks that every coordinator holds the written states.
func allStates(cs []*Coordinator, writes []cluster.StateWrite, moved bool) error {
	for _, c := range cs {
		c.mu.RLock()
		for _, w := range writes {
			e, ok := c.cache.topics[w.Topic]
			var st cluster.PartitionState
			if ok {
				st, ok = e.states[w.Partition]
			}
			if !ok || st.Leader != w.State.Leader || (moved && st.LeaderEpoch != w.State.LeaderEpoch) {
				c.mu.RUnlock()
				return fmt.Errorf("%s-%d: %+v", w.Topic, w.Partition, st)
			}
		}
		c.mu.RUnlock()
	}
	return nil
}

func (r scaleResult) log(t testing.TB) {
	t.Logf("%d partitions: create states %v, peers have them %v (%d notifications); cold open %v; "+
		"failover of %d leaders: write %v, peers applied %v; zookeeper watches %d before, %d after",
		r.partitions, r.createStates.Round(time.Millisecond), r.peersSeeNew.Round(time.Millisecond), r.notifications,
		r.coldOpen.Round(time.Millisecond), r.moved, r.failoverWrite.Round(time.Millisecond), r.peersSeeMove.Round(time.Millisecond),
		r.watchesBefore, r.watchesAfter)
}

// TestScale10000Partitions: 10,000 partitions start and fail over in
// seconds, and the number of ZooKeeper watches does not grow with them.
func TestScale10000Partitions(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper, 10,000 partitions")
	r := runScale(t, 10000)
	r.log(t)
	if r.watchesAfter-r.watchesBefore > 40 {
		t.Fatalf("watches grew from %d to %d with 10,000 partitions", r.watchesBefore, r.watchesAfter)
	}
	if r.notifications > 20 {
		t.Fatalf("%d notifications for 10,000 state creations; want a handful", r.notifications)
	}
	// Generous bounds for a shared 2-core machine; typical figures are
	// in BENCHMARKS.md.
	if r.peersSeeNew > 30*time.Second || r.peersSeeMove > 10*time.Second || r.coldOpen > 30*time.Second {
		t.Fatalf("too slow: %+v", r)
	}
}

// BenchmarkScale reports the scenario's figures (go test -run XXX -bench Scale ./zkcoord).
func BenchmarkScale(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper")
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			for range b.N {
				r := runScale(b, n)
				r.log(b)
				b.ReportMetric(float64(r.peersSeeNew.Milliseconds()), "ms/create-seen")
				b.ReportMetric(float64(r.coldOpen.Milliseconds()), "ms/cold-open")
				b.ReportMetric(float64(r.peersSeeMove.Milliseconds()), "ms/failover-seen")
			}
		})
	}
}

// BenchmarkAlternativePerPartitionWatches measures the design this package
// rejected, for BENCHMARKS.md: a broker holding a data watch on
// every state znode and re-arming it (GetW) on each change, with the writer
// doing plain compare-and-sets and no notification znode.
func BenchmarkAlternativePerPartitionWatches(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper")
	const partitions, moved = 10000, 3334
	for range b.N {
		chroot := newChroot()
		raw := rawConn(b, zkServer.Addr())
		acl := zk.WorldACL(zk.PermAll)
		for _, p := range []string{chroot, chroot + "/t", chroot + "/t/partitions"} {
			_, err := raw.Create(p, nil, 0, acl)
			mustOK(b, err)
		}
		var ops []any
		flush := func() {
			if len(ops) > 0 {
				_, err := raw.Multi(ops...)
				mustOK(b, err)
				ops = ops[:0]
			}
		}
		for p := range partitions {
			pp := fmt.Sprintf("%s/t/partitions/%d", chroot, p)
			ops = append(ops, &zk.CreateRequest{Path: pp, Acl: acl},
				&zk.CreateRequest{Path: pp + "/state", Data: encodeState(cluster.PartitionState{Leader: 1, ISR: []int32{1, 2, 3}}), Acl: acl})
			if len(ops) >= 2000 {
				flush()
			}
		}
		flush()
		watchesBefore, _ := zkServer.WatchCount()

		events := make(chan string, partitions)
		watcher, _, err := zk.Connect([]string{zkServer.Addr()}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardZK{}),
			zk.WithEventCallback(func(ev zk.Event) {
				if ev.Type == zk.EventNodeDataChanged {
					events <- ev.Path
				}
			}))
		mustOK(b, err)
		start := time.Now()
		parallel(partitions, func(i int) {
			_, _, _, err := watcher.GetW(fmt.Sprintf("%s/t/partitions/%d/state", chroot, i))
			mustOK(b, err)
		})
		arm := time.Since(start)
		watchesArmed, _ := zkServer.WatchCount()

		start = time.Now()
		parallel(moved, func(i int) {
			_, err := raw.Set(fmt.Sprintf("%s/t/partitions/%d/state", chroot, i), encodeState(cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}}), 0)
			mustOK(b, err)
		})
		write := time.Since(start)
		// The broker's side: re-arm and read each changed znode.
		got := 0
		var rearm []string
		for got < moved {
			select {
			case p := <-events:
				rearm = append(rearm, p)
				got++
			case <-time.After(30 * time.Second):
				b.Fatalf("%d of %d change events", got, moved)
			}
		}
		parallel(len(rearm), func(i int) {
			_, _, _, err := watcher.GetW(rearm[i])
			mustOK(b, err)
		})
		applied := time.Since(start)
		watcher.Close()
		b.Logf("per-partition watches, %d partitions: arming %v (%d -> %d server watches); %d leader moves: write %v, watcher applied %v",
			partitions, arm.Round(time.Millisecond), watchesBefore, watchesArmed, moved, write.Round(time.Millisecond), applied.Round(time.Millisecond))
		b.ReportMetric(float64(applied.Milliseconds()), "ms/failover-seen")
	}
}

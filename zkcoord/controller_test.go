package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// controllerCluster is three brokers' coordinators (sessions) on one chroot,
// broker 1 the controller.
type controllerCluster struct {
	cs  map[int32]*Coordinator
	ctl *cluster.Controller
}

func newControllerCluster(t *testing.T, cfg cluster.ControllerConfig) *controllerCluster {
	chroot := newChroot()
	cc := &controllerCluster{cs: map[int32]*Coordinator{}}
	for id := int32(1); id <= 3; id++ {
		c := open(t, zkServer.Addr(), chroot)
		mustOK(t, c.RegisterBroker(bg(t), cluster.Broker{ID: id}))
		cc.cs[id] = c
	}
	cfg.Coordinator, cfg.BrokerID = cc.cs[1], 1
	cfg.RetryInterval = 100 * time.Millisecond
	cc.ctl = cluster.NewController(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cc.ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Controller elected.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if cc.ctl.Epoch() == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	return cc
}

func (cc *controllerCluster) state(t *testing.T, topic string, p int32) cluster.PartitionState {
	st, err := cc.cs[1].PartitionState(bg(t), topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// leaderISR waits until the partition has the leader and ISR.
func (cc *controllerCluster) waitState(t *testing.T, topic string, p int32, cond func(cluster.PartitionState) error) {
	t.Helper()
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		st, err := cc.cs[1].PartitionState(bg(t), topic, p)
		if err == nil {
			err = cond(st)
		}
		if err != nil {
			return fmt.Errorf("%s-%d: %w", topic, p, err)
		}
		return nil
	})
}

// controllerWrite changes a partition's state as the controller.
func (cc *controllerCluster) controllerWrite(t *testing.T, topic string, p int32, mutate func(*cluster.PartitionState)) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		st := cc.state(t, topic, p)
		mutate(&st)
		_, err := cc.cs[1].SetPartitionState(cluster.WithControllerEpoch(bg(t), cc.ctl.Epoch()), topic, p, st)
		if errors.Is(err, cluster.ErrBadVersion) && attempt < 100 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		mustOK(t, err)
		return
	}
}

// setISR writes a partition's ISR as its leader would.
func (cc *controllerCluster) setISR(t *testing.T, topic string, p int32, isr []int32) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		st := cc.state(t, topic, p)
		st.ISR = isr
		_, err := cc.cs[st.Leader].SetPartitionState(bg(t), topic, p, st)
		if errors.Is(err, cluster.ErrBadVersion) && attempt < 100 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		mustOK(t, err)
		return
	}
}

// TestControllerPreferredRebalance: with auto.leader.rebalance.enable, the
// controller moves leadership back to the preferred replicas on a broker
// whose share of partitions led elsewhere exceeds the threshold; ElectLeaders
// answers per partition.
func TestControllerPreferredRebalance(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	cc := newControllerCluster(t, cluster.ControllerConfig{AutoLeaderRebalance: true, LeaderImbalanceCheckInterval: 300 * time.Millisecond})
	ctx := bg(t)
	mustOK(t, cc.cs[1].CreateTopic(ctx, cluster.Topic{Name: "bal", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}}, nil))
	for p := int32(0); p < 3; p++ {
		want := p + 1
		cc.waitState(t, "bal", p, func(st cluster.PartitionState) error {
			if st.Leader != want || len(st.ISR) != 3 {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
	}
	// Leadership of partition 1 drifts to broker 3 (as after a failover).
	cc.controllerWrite(t, "bal", 1, func(st *cluster.PartitionState) { st.Leader, st.LeaderEpoch = 3, st.LeaderEpoch+1 })
	cc.waitState(t, "bal", 1, func(st cluster.PartitionState) error {
		if st.Leader != 2 {
			return fmt.Errorf("leader %d, want the preferred 2 back", st.Leader)
		}
		return nil
	})

	// ElectLeaders.
	res, err := cc.ctl.ElectLeaders(ctx, false, []cluster.TopicPartitionID{{Topic: "bal", Partition: 0}, {Topic: "bal", Partition: 9}, {Topic: "nope", Partition: 0}})
	mustOK(t, err)
	if !errors.Is(res[cluster.TopicPartitionID{Topic: "bal", Partition: 0}], cluster.ErrElectionNotNeeded) ||
		!errors.Is(res[cluster.TopicPartitionID{Topic: "bal", Partition: 9}], cluster.ErrUnknownPartition) ||
		!errors.Is(res[cluster.TopicPartitionID{Topic: "nope", Partition: 0}], cluster.ErrUnknownPartition) {
		t.Fatalf("ElectLeaders: %v", res)
	}
	// The preferred replica out of the ISR cannot be elected.
	cc.setISR(t, "bal", 0, []int32{1, 3})
	cc.controllerWrite(t, "bal", 0, func(st *cluster.PartitionState) { st.Leader, st.LeaderEpoch = 3, st.LeaderEpoch+1 })
	cc.setISR(t, "bal", 0, []int32{3})
	res, err = cc.ctl.ElectLeaders(ctx, false, []cluster.TopicPartitionID{{Topic: "bal", Partition: 0}})
	mustOK(t, err)
	if err := res[cluster.TopicPartitionID{Topic: "bal", Partition: 0}]; !errors.Is(err, cluster.ErrPreferredLeaderNotAvailable) {
		t.Fatalf("electing a preferred replica outside the ISR: %v", err)
	}
	// Unclean election: not needed while the leader lives.
	res, err = cc.ctl.ElectLeaders(ctx, true, []cluster.TopicPartitionID{{Topic: "bal", Partition: 0}})
	mustOK(t, err)
	if err := res[cluster.TopicPartitionID{Topic: "bal", Partition: 0}]; !errors.Is(err, cluster.ErrElectionNotNeeded) {
		t.Fatalf("unclean election with a live leader: %v", err)
	}
	// Back in the ISR, the preferred replica leads again (on request or
	// by the rebalance, whichever comes first).
	cc.setISR(t, "bal", 0, []int32{3, 1})
	// Bal-0 led by its preferred replica.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		res, err := cc.ctl.ElectLeaders(ctx, false, []cluster.TopicPartitionID{{Topic: "bal", Partition: 0}})
		if err != nil {
			return err
		}
		if err := res[cluster.TopicPartitionID{Topic: "bal", Partition: 0}]; err != nil && !errors.Is(err, cluster.ErrElectionNotNeeded) {
			return err
		}
		if st := cc.state(t, "bal", 0); st.Leader != 1 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
}

// TestControllerControlledShutdown: leadership moves off a broker shutting
// down and it leaves every ISR; a partition it alone holds stays with it
// (remaining); a new incarnation of the broker is not treated as shutting
// down.
func TestControllerControlledShutdown(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	cc := newControllerCluster(t, cluster.ControllerConfig{})
	ctx := bg(t)
	mustOK(t, cc.cs[1].CreateTopic(ctx, cluster.Topic{Name: "cs", ID: cluster.NewUUID(), Replicas: [][]int32{{3, 1, 2}, {1, 3}, {3}}}, nil))
	cc.waitState(t, "cs", 2, func(st cluster.PartitionState) error {
		if st.Leader != 3 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	remaining, err := cc.ctl.ControlledShutdown(ctx, 3)
	mustOK(t, err)
	if len(remaining) != 0 {
		t.Fatalf("remaining %v (cs-2 has one replica and does not count)", remaining)
	}
	if st := cc.state(t, "cs", 0); st.Leader != 1 || slices.Contains(st.ISR, 3) {
		t.Fatalf("cs-0 %+v", st)
	}
	if st := cc.state(t, "cs", 1); st.Leader != 1 || slices.Contains(st.ISR, 3) {
		t.Fatalf("cs-1 %+v", st)
	}
	if st := cc.state(t, "cs", 2); st.Leader != 3 {
		t.Fatalf("cs-2 %+v", st)
	}
	// Broker 3 stops and a new incarnation registers: it may lead again.
	mustOK(t, cc.cs[3].Close())
	c3 := open(t, zkServer.Addr(), cc.cs[1].cs.Chroot)
	mustOK(t, c3.RegisterBroker(ctx, cluster.Broker{ID: 3}))
	cc.cs[3] = c3
	cc.setISR(t, "cs", 0, []int32{1, 2, 3})
	// The controller learns of the registration from its watch: until then
	// broker 3 is not live and the election answers "not available".
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		res, err := cc.ctl.ElectLeaders(ctx, false, []cluster.TopicPartitionID{{Topic: "cs", Partition: 0}})
		if err != nil {
			return err
		}
		if err := res[cluster.TopicPartitionID{Topic: "cs", Partition: 0}]; err != nil {
			return fmt.Errorf("electing the restarted broker: %w", err)
		}
		return nil
	})
}

// TestControllerReassignment: a reassignment waits for its new replicas to
// join the ISR, then the leader moves into the target, the removed replicas
// leave (new epoch) and the assignment becomes the target; a cancelled one
// goes back to the original replicas.
func TestControllerReassignment(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	cc := newControllerCluster(t, cluster.ControllerConfig{})
	ctx := bg(t)
	mustOK(t, cc.cs[1].CreateTopic(ctx, cluster.Topic{Name: "re", ID: cluster.NewUUID(), Replicas: [][]int32{{1}, {1, 2}}}, nil))
	cc.waitState(t, "re", 1, func(st cluster.PartitionState) error {
		if st.Leader != 1 || len(st.ISR) != 2 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	live := func(id int32) bool { return id >= 1 && id <= 3 }
	res, err := cc.ctl.StartReassignments(ctx, "re", map[int32][]int32{0: {2, 3}, 1: {3, 2}, 7: {1}}, live)
	mustOK(t, err)
	if res[0] != nil || res[1] != nil || !errors.Is(res[7], cluster.ErrUnknownPartition) {
		t.Fatalf("start: %v", res)
	}
	tp, _ := cc.cs[1].Topic(ctx, "re")
	if !slices.Equal(tp.Replicas[0], []int32{2, 3, 1}) || !slices.Equal(tp.Adding[0], []int32{2, 3}) || !slices.Equal(tp.Removing[0], []int32{1}) {
		t.Fatalf("re-0 while reassigning: %+v", tp)
	}
	time.Sleep(300 * time.Millisecond)
	if st := cc.state(t, "re", 0); st.Leader != 1 {
		t.Fatalf("the leader moved before the new replicas were in sync: %+v", st)
	}
	before := cc.state(t, "re", 0)
	cc.setISR(t, "re", 0, []int32{1, 2, 3}) // they caught up
	cc.waitState(t, "re", 0, func(st cluster.PartitionState) error {
		if st.Leader != 2 || !slices.Equal(st.ISR, []int32{2, 3}) || st.LeaderEpoch <= before.LeaderEpoch {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	// Assignment becomes the target.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		tp, _ := cc.cs[1].Topic(ctx, "re")
		if !slices.Equal(tp.Replicas[0], []int32{2, 3}) || tp.Reassigning(0) {
			return fmt.Errorf("%+v", tp)
		}
		return nil
	})
	// re-1 is still in progress (3 never caught up): cancel it.
	res, err = cc.ctl.StartReassignments(ctx, "re", map[int32][]int32{1: nil}, live)
	mustOK(t, err)
	if res[1] != nil {
		t.Fatalf("cancel: %v", res)
	}
	tp, _ = cc.cs[1].Topic(ctx, "re")
	if orig := slices.Sorted(slices.Values(tp.Replicas[1])); !slices.Equal(orig, []int32{1, 2}) || tp.Reassigning(1) {
		t.Fatalf("after cancel: %+v", tp)
	}
	res, _ = cc.ctl.StartReassignments(ctx, "re", map[int32][]int32{1: nil}, live)
	if !errors.Is(res[1], cluster.ErrNoReassignment) {
		t.Fatalf("cancelling nothing: %v", res)
	}
	// The legacy znode is taken over by the controller.
	mustOK(t, cc.cs[2].SetReassignments(ctx, []cluster.Reassignment{{Topic: "re", Partition: 1, Replicas: []int32{2, 1}}}))
	// The /admin/reassign_partitions request is applied.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		tp, _ := cc.cs[1].Topic(ctx, "re")
		rs, _ := cc.cs[1].Reassignments(ctx)
		if !slices.Equal(tp.Replicas[1], []int32{2, 1}) || len(rs) != 0 {
			return fmt.Errorf("%+v, pending %v", tp, rs)
		}
		return nil
	})
}

// TestControllerUncleanTopicOverride: a topic's unclean.leader.election.enable
// lets a live replica outside the ISR lead when no ISR member is live.
func TestControllerUncleanTopicOverride(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	cc := newControllerCluster(t, cluster.ControllerConfig{})
	ctx := bg(t)
	mustOK(t, cc.cs[1].CreateTopic(ctx, cluster.Topic{Name: "clean", ID: cluster.NewUUID(), Replicas: [][]int32{{3, 2}}}, nil))
	mustOK(t, cc.cs[1].CreateTopic(ctx, cluster.Topic{Name: "dirty", ID: cluster.NewUUID(), Replicas: [][]int32{{3, 2}}},
		map[string]string{"unclean.leader.election.enable": "true"}))
	for _, name := range []string{"clean", "dirty"} {
		cc.waitState(t, name, 0, func(st cluster.PartitionState) error {
			if st.Leader != 3 {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
		cc.setISR(t, name, 0, []int32{3}) // 2 fell behind
	}
	mustOK(t, cc.cs[3].Close())
	cc.waitState(t, "dirty", 0, func(st cluster.PartitionState) error {
		if st.Leader != 2 || !slices.Equal(st.ISR, []int32{2}) {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	cc.waitState(t, "clean", 0, func(st cluster.PartitionState) error {
		if st.Leader != -1 || !slices.Equal(st.ISR, []int32{3}) {
			return fmt.Errorf("want offline with the ISR kept, got %+v", st)
		}
		return nil
	})
}

// TestSittingControllerIsQuiet: once elected, a controller with nothing to
// do makes no changes: its pass's Campaign, finding the role still its own,
// announces nothing (an announcement would start the next pass, and so on
// without end, every pass reading ZooKeeper).
func TestSittingControllerIsQuiet(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	cc := newControllerCluster(t, cluster.ControllerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := cc.cs[1].Watch(ctx)
	// Settle: the election's own announcement, once.
	settle := time.After(300 * time.Millisecond)
	for settling := true; settling; {
		select {
		case <-changes:
		case <-settle:
			settling = false
		}
	}
	quiet := time.After(time.Second)
	n := 0
	for {
		select {
		case <-changes:
			n++
			continue
		case <-quiet:
		}
		break
	}
	if n > 0 {
		t.Fatalf("%d changes announced in 1s by a controller with nothing to do", n)
	}
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/sluice-io/sluice/internal/testutil"
)

// The Controller's reads and writes around its policy (policy.go, whose
// rules the golden files cover), on the standalone coordinator: no
// ZooKeeper. zkcoord's controller tests run the same on ZooKeeper, with
// fencing and sessions, in the heavy tier.

// liveSet is a Standalone whose live brokers the test decides, as
// ZooKeeper's ephemeral registrations come and go: a broker leaves the set
// when it "dies" and comes back as a new incarnation (a new timestamp).
// The controller learns of it through Kick, as Watch would tell it.
type liveSet struct {
	*Standalone
	mu   sync.Mutex
	live map[int32]Broker
	fail int // Brokers fails this many more times (ErrUnavailable)
}

func newLiveSet(t *testing.T, ids ...int32) *liveSet {
	t.Helper()
	s, err := OpenStandalone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// The controller's own registration, which Campaign checks.
	if err := s.RegisterBroker(context.Background(), Broker{ID: 1}); err != nil {
		t.Fatal(err)
	}
	l := &liveSet{Standalone: s, live: map[int32]Broker{}}
	for _, id := range ids {
		l.up(id, 1)
	}
	return l
}

func (l *liveSet) up(id int32, ts int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live[id] = Broker{ID: id, Timestamp: ts}
}

func (l *liveSet) down(id int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, id)
}

func (l *liveSet) Brokers(ctx context.Context) ([]Broker, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail > 0 {
		l.fail--
		return nil, fmt.Errorf("%w: the test says so", ErrUnavailable)
	}
	var out []Broker
	for _, id := range slices.Sorted(maps.Keys(l.live)) {
		out = append(out, l.live[id])
	}
	return out, nil
}

// runController runs a controller for broker 1 on co until the test ends
// and waits until it acts.
func runController(t *testing.T, co Coordinator, cfg ControllerConfig) *Controller {
	t.Helper()
	cfg.Coordinator, cfg.BrokerID = co, 1
	ctl := NewController(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if ctl.Epoch() == 0 {
			return errors.New("not the controller yet")
		}
		return nil
	})
	return ctl
}

func stateOf(t *testing.T, co Coordinator, topic string, p int32) PartitionState {
	t.Helper()
	st, err := co.PartitionState(context.Background(), topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitState polls until topic-p satisfies cond.
func waitState(t *testing.T, co Coordinator, topic string, p int32, cond func(PartitionState) error) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		st, err := co.PartitionState(context.Background(), topic, p)
		if err == nil {
			err = cond(st)
		}
		if err != nil {
			return fmt.Errorf("%s-%d: %w", topic, p, err)
		}
		return nil
	})
}

func ledBy(leader int32, isr ...int32) func(PartitionState) error {
	return func(st PartitionState) error {
		if st.Leader != leader || (isr != nil && !slices.Equal(st.ISR, isr)) {
			return fmt.Errorf("leader %d isr %v, want leader %d isr %v", st.Leader, st.ISR, leader, isr)
		}
		return nil
	}
}

// setISR writes a partition's ISR as its leader does (again when the
// controller wrote the state meanwhile).
func setISR(t *testing.T, co Coordinator, topic string, p int32, isr ...int32) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		st := stateOf(t, co, topic, p)
		st.ISR = isr
		_, err := co.SetPartitionState(context.Background(), topic, p, st)
		return err
	})
}

func createTopic(t *testing.T, co Coordinator, name string, configs map[string]string, replicas ...[]int32) {
	t.Helper()
	if err := co.CreateTopic(context.Background(), Topic{Name: name, ID: NewUUID(), Replicas: replicas}, configs); err != nil {
		t.Fatal(err)
	}
}

// TestControllerControlledShutdown: leadership moves off a broker shutting
// down and it leaves every ISR; a partition it alone holds stays with it
// (and is not remaining); a new incarnation of the broker may lead again.
func TestControllerControlledShutdown(t *testing.T) {
	co := newLiveSet(t, 1, 2, 3)
	ctl := runController(t, co, ControllerConfig{})
	ctx := context.Background()
	createTopic(t, co, "cs", nil, []int32{3, 1, 2}, []int32{1, 3}, []int32{3})
	waitState(t, co, "cs", 2, ledBy(3))
	remaining, err := ctl.ControlledShutdown(ctx, 3)
	if err != nil || len(remaining) != 0 {
		t.Fatalf("remaining %v, err %v (cs-2 has one replica and does not count)", remaining, err)
	}
	for p, want := range []func(PartitionState) error{ledBy(1, 1, 2), ledBy(1, 1), ledBy(3, 3)} {
		if err := want(stateOf(t, co, "cs", int32(p))); err != nil {
			t.Fatalf("cs-%d: %v", p, err)
		}
	}
	if _, err := ctl.ControlledShutdown(ctx, 9); !errors.Is(err, ErrBrokerNotAvailable) {
		t.Fatalf("shutdown of an unregistered broker: %v", err)
	}
	// Broker 3 stops and a new incarnation registers: it may lead again
	// once back in the ISR. (A pass that began before the new incarnation
	// showed up may still take it out of the ISR: its leader adds it
	// again, as a real leader does while it keeps up.)
	co.up(3, 2)
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if st := stateOf(t, co, "cs", 0); !slices.Contains(st.ISR, 3) {
			setISR(t, co, "cs", 0, 1, 2, 3)
		}
		res, err := ctl.ElectLeaders(ctx, false, []TopicPartitionID{{"cs", 0}})
		if err == nil {
			err = res[TopicPartitionID{"cs", 0}]
		}
		if err != nil {
			return fmt.Errorf("electing the restarted broker: %w", err)
		}
		return ledBy(3)(stateOf(t, co, "cs", 0))
	})
}

// TestControllerFailover: when a leader goes away the next in-sync replica
// leads; with none the partition goes offline, unless the topic allows
// unclean leader election.
func TestControllerFailover(t *testing.T) {
	co := newLiveSet(t, 1, 2, 3)
	ctl := runController(t, co, ControllerConfig{})
	createTopic(t, co, "clean", nil, []int32{3, 2})
	createTopic(t, co, "dirty", map[string]string{"unclean.leader.election.enable": "true"}, []int32{3, 2})
	for _, name := range []string{"clean", "dirty"} {
		waitState(t, co, name, 0, ledBy(3, 3, 2))
		setISR(t, co, name, 0, 3) // 2 fell behind
	}
	co.down(3)
	ctl.Kick()
	waitState(t, co, "dirty", 0, ledBy(2, 2))
	waitState(t, co, "clean", 0, ledBy(-1, 3))
	co.up(3, 2)
	ctl.Kick()
	waitState(t, co, "clean", 0, ledBy(3, 3))
}

// TestControllerReassignment: a reassignment completes once its new
// replicas are in the ISR: the leader moves into the target and the
// assignment becomes the target.
func TestControllerReassignment(t *testing.T) {
	co := newLiveSet(t, 1, 2, 3)
	ctl := runController(t, co, ControllerConfig{})
	ctx := context.Background()
	createTopic(t, co, "re", nil, []int32{1})
	waitState(t, co, "re", 0, ledBy(1, 1))
	res, err := ctl.StartReassignments(ctx, "re", map[int32][]int32{0: {2, 3}}, func(id int32) bool { return id <= 3 })
	if err != nil || res[0] != nil {
		t.Fatalf("start: %v %v", res, err)
	}
	before := stateOf(t, co, "re", 0)
	setISR(t, co, "re", 0, 1, 2, 3) // they caught up
	ctl.Kick()
	waitState(t, co, "re", 0, func(st PartitionState) error {
		if err := ledBy(2, 2, 3)(st); err != nil || st.LeaderEpoch <= before.LeaderEpoch {
			return fmt.Errorf("%+v, want leader 2, isr [2 3], a new epoch", st)
		}
		return nil
	})
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		tp, err := co.Topic(ctx, "re")
		if err == nil && (!slices.Equal(tp.Replicas[0], []int32{2, 3}) || tp.Reassigning(0)) {
			err = fmt.Errorf("assignment %+v, want the target [2 3]", tp)
		}
		return err
	})
}

// TestControllerRebalanceOnTheClock: with auto.leader.rebalance.enable the
// check runs every LeaderImbalanceCheckInterval of the controller's clock,
// and not before.
func TestControllerRebalanceOnTheClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	co := newLiveSet(t, 1, 2, 3)
	const every = 5 * time.Minute
	ctl := runController(t, co, ControllerConfig{AutoLeaderRebalance: true, LeaderImbalanceCheckInterval: every, Clock: clock})
	createTopic(t, co, "bal", nil, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	for p := range int32(3) {
		waitState(t, co, "bal", p, ledBy(p+1))
	}
	// Leadership of bal-1 drifts to broker 3 (as after a failover).
	st := stateOf(t, co, "bal", 1)
	st.Leader, st.LeaderEpoch = 3, st.LeaderEpoch+1
	if _, err := co.SetPartitionState(WithControllerEpoch(context.Background(), ctl.Epoch()), "bal", 1, st); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // Run's ticker
		t.Fatal(err)
	}
	clock.Advance(every - time.Second)
	time.Sleep(50 * time.Millisecond) // a pass that should not happen would have by now
	if err := ledBy(3)(stateOf(t, co, "bal", 1)); err != nil {
		t.Fatalf("before the check interval: %v", err)
	}
	clock.Advance(time.Second)
	waitState(t, co, "bal", 1, ledBy(2))
}

// TestControllerRetriesOnTheClock: a pass that fails (the store out of
// reach) is retried after RetryInterval of the controller's clock.
func TestControllerRetriesOnTheClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	co := newLiveSet(t, 1)
	ctl := runController(t, co, ControllerConfig{RetryInterval: time.Minute, Clock: clock})
	co.mu.Lock()
	co.fail = 1
	co.mu.Unlock()
	createTopic(t, co, "later", nil, []int32{1}) // the pass it triggers fails
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // Run waits to retry
		t.Fatal(err)
	}
	if _, err := co.PartitionState(ctx, "later", 0); !errors.Is(err, ErrNoState) {
		t.Fatalf("a state before the retry: %v", err)
	}
	clock.Advance(time.Minute)
	waitState(t, co, "later", 0, ledBy(1, 1))
	if ctl.Epoch() == 0 {
		t.Fatal("the controller gave up its role after a failed pass")
	}
}

package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// producer writes numbered records to one partition with acks=all (and
// idempotence) until stopped, remembering which were acknowledged and when.
type producer struct {
	cl    *kgo.Client
	topic string

	mu      sync.Mutex
	acked   map[int]bool
	ackTime []time.Time // time of each acknowledgement, in order
	errs    int
	next    int

	stop chan struct{}
	done chan struct{}
}

func startProducer(t *testing.T, c *testCluster, topic string, opts ...kgo.Opt) *producer {
	cl := c.client(t, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(60 * time.Second)}, opts...)...)
	p := &producer{cl: cl, topic: topic, acked: map[int]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(p.halt)
	return p
}

func (p *producer) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-p.stop; cancel() }()
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		case sem <- struct{}{}:
		}
		p.mu.Lock()
		p.next = i + 1
		p.mu.Unlock()
		wg.Add(1)
		p.cl.Produce(ctx, &kgo.Record{Value: value(i)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			defer func() { <-sem }()
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					p.errs++
				}
				return
			}
			p.acked[i] = true
			p.ackTime = append(p.ackTime, time.Now())
		})
		time.Sleep(2 * time.Millisecond)
	}
}

// halt stops producing and waits for every outstanding record.
func (p *producer) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// waitAcks waits until n more records than now are acknowledged.
func (p *producer) waitAcks(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	want := p.count() + n
	testutil.CheckFor(t, timeout, 100*time.Millisecond, func() error {
		if got := p.count(); got < want {
			return fmt.Errorf("%d records acknowledged, want %d", got, want)
		}
		return nil
	})
}

// gapAfter is the longest time between two acknowledgements after t0.
func (p *producer) gapAfter(t0 time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := slices.Clone(p.ackTime)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	prev := t0
	for _, x := range ts {
		if x.Before(t0) {
			continue
		}
		gap = max(gap, x.Sub(prev))
		prev = x
	}
	return gap
}

func (p *producer) snapshot() map[int]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]bool, len(p.acked))
	for k := range p.acked {
		out[k] = true
	}
	return out
}

// leaderOf returns a partition's leader as the running brokers agree on it.
func leaderOf(t *testing.T, c *testCluster, topic string, partition int32) int32 {
	t.Helper()
	var leader int32 = -1
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, b := range c.brokers {
			if !b.running() {
				continue
			}
			ps, err := partitionsFrom(ctx, b, topic)
			if err != nil {
				return err
			}
			if l := ps[partition].Leader; l >= 0 {
				leader = l
				return nil
			}
		}
		return fmt.Errorf("no leader of %s-%d", topic, partition)
	})
	return leader
}

// TestBrokerKilled kills one broker with kill -9 and checks, each in its
// own subtest, what the death of a broker must not break. The broker is the
// controller; it also leads partition "failover" while a producer writes
// to it, follows partition "follower-kill" while another producer writes
// there, leads "ctl-led", holds the only replica of "ctl-single", and is
// the coordinator of a consumer group. The scenarios share the kill, and so
// the session timeout it takes ZooKeeper to notice it, which keeps the
// suite short; each asserts what it did as a test of its own.
//
//   - FailoverWithoutLoss: acks=all, min.insync.replicas=2, replication
//     factor 3: a new leader is elected from the ISR within seconds, the
//     producer carries on, and (FailoverRejoinAndCatchUp) every acknowledged record
//     is there afterwards exactly once, in order; the killed broker
//     restarts, truncates what it must and catches up (back in the ISR).
//   - ControllerFailover: another broker takes over as controller
//     (DescribeCluster names it) and goes on electing leaders — including
//     for a partition the dead controller led — while a partition whose only
//     replica was on the dead broker shows, visibly, no leader and an
//     offline replica, until the broker returns.
//   - GroupCoordinatorFollowsLeadership: a consumer group's coordinator is
//     the leader of its __consumer_offsets partition; the leadership moves,
//     and with it the group: the new coordinator has loaded the committed
//     offsets from its replica of the partition.
//   - KilledFollowerCatchesUp: a killed follower misses records (the ISR
//     shrinks, so acks=all goes on with min.insync.replicas=2), then
//     restarts, truncates and fetches until it is back in the ISR; made
//     leader, it serves every acknowledged record.
func TestBrokerKilled(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	ctx := ctxFor(t, 240*time.Second)
	old, err := describeController(ctx, c.client(t))
	if err != nil {
		t.Fatal(err)
	}
	others := slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == old })
	minISR2 := map[string]*string{"min.insync.replicas": strp("2")}
	createTopic(t, c, "failover", [][]int32{{old, others[0], others[1]}}, minISR2)
	createTopic(t, c, "follower-kill", [][]int32{{others[0], old, others[1]}}, minISR2)
	createTopic(t, c, "ctl-led", [][]int32{{old, others[0], others[1]}}, nil)
	createTopic(t, c, "ctl-single", [][]int32{{old}}, nil)
	createTopic(t, c, "grp", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	group, offs := groupCoordinatedBy(t, c, old)

	pf := startProducer(t, c, "failover")
	pk := startProducer(t, c, "follower-kill")
	pf.waitAcks(t, 500, 60*time.Second)
	pk.waitAcks(t, 300, 60*time.Second)
	killedAt := time.Now()
	c.broker(old).kill()
	t.Logf("killed broker %d (controller, leader of failover, coordinator of %s) after %d acknowledged records", old, group, pf.count())

	t.Run("FailoverWithoutLoss", func(t *testing.T) {
		// Writing resumes on a new leader within seconds: the session
		// timeout (6 s) plus an election.
		pf.waitAcks(t, 500, 40*time.Second)
		gap := pf.gapAfter(killedAt)
		t.Logf("longest pause in acknowledgements after the kill: %v", gap)
		if gap > sessionTimeout+10*time.Second {
			t.Fatalf("producing stopped for %v after the leader was killed", gap)
		}
		if l := leaderOf(t, c, "failover", 0); l == old {
			t.Fatalf("leader still %d", old)
		}
	})

	t.Run("ControllerFailover", func(t *testing.T) {
		var next int32 = -1
		// A new controller.
		testutil.CheckFor(t, 40*time.Second, 100*time.Millisecond, func() error {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			id, err := controllerFrom(cctx, c.broker(others[0]))
			if err != nil {
				return err
			}
			if id < 0 || id == old {
				return fmt.Errorf("controller %d", id)
			}
			next = id
			return nil
		})
		// DescribeCluster (from a surviving broker) names it.
		cl2 := c.client(t, kgo.SeedBrokers(c.broker(others[1]).addr))
		// DescribeCluster names the new controller.
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			id, err := describeController(ctx, cl2)
			if err != nil {
				return err
			}
			if id != next {
				return fmt.Errorf("controller %d, want %d", id, next)
			}
			return nil
		})
		t.Logf("controller %d killed; %d took over", old, next)
		waitISR(t, c, "ctl-led", func(_ int32, pi partitionInfo) error {
			if pi.Leader != others[0] || slices.Contains(pi.ISR, old) || !slices.Equal(pi.Offline, []int32{old}) {
				return fmt.Errorf("%+v", pi)
			}
			return nil
		})
		waitISR(t, c, "ctl-single", func(_ int32, pi partitionInfo) error {
			if pi.Leader != -1 || pi.Err != kerr.LeaderNotAvailable.Code || !slices.Equal(pi.Offline, []int32{old}) {
				return fmt.Errorf("want an offline partition, got %+v", pi)
			}
			return nil
		})
		// The partition is writable through its new leader.
		cl := c.client(t, kgo.DefaultProduceTopic("ctl-led"))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("GroupCoordinatorFollowsLeadership", func(t *testing.T) {
		adm := kadm.NewClient(c.client(t))
		// Offsets from the new coordinator.
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			fc := adm.FindGroupCoordinators(ctx, group)
			if r := fc[group]; r.Err != nil || r.NodeID == old {
				return fmt.Errorf("coordinator %+v", r)
			}
			got, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			if err := got.Error(); err != nil {
				return err
			}
			for p := int32(0); p < 3; p++ {
				o, ok := got.Lookup("grp", p)
				want, _ := offs.Lookup("grp", p)
				if !ok || o.At != want.At {
					return fmt.Errorf("grp-%d: %+v", p, o)
				}
			}
			return nil
		})
	})

	t.Run("KilledFollowerMissesRecords", func(t *testing.T) {
		pk.waitAcks(t, 1000, 60*time.Second)
		waitISR(t, c, "follower-kill", func(_ int32, pi partitionInfo) error {
			if slices.Contains(pi.ISR, old) {
				return fmt.Errorf("ISR %v still has the dead follower", pi.ISR)
			}
			return nil
		})
	})

	// The killed broker comes back.
	if err := c.broker(old).start(); err != nil {
		t.Fatal(err)
	}

	t.Run("FailoverRejoinAndCatchUp", func(t *testing.T) {
		pf.waitAcks(t, 200, 30*time.Second)
		pf.halt()
		waitISR(t, c, "failover", func(_ int32, pi partitionInfo) error {
			if len(pi.ISR) != 3 {
				return fmt.Errorf("ISR %v", pi.ISR)
			}
			return nil
		})
		acked := pf.snapshot()
		read := readAll(t, c, "failover", 0)
		checkExactlyOnceInOrder(t, read, acked)
		t.Logf("%d acknowledged, %d read back, %d producer errors", len(acked), len(read), pf.errs)
	})

	t.Run("ControllerFailoverSingleReplicaBack", func(t *testing.T) {
		// Its single-replica partition comes back online (it is its ISR's
		// only member).
		waitISR(t, c, "ctl-single", func(_ int32, pi partitionInfo) error {
			if pi.Leader != old || len(pi.Offline) != 0 {
				return fmt.Errorf("%+v", pi)
			}
			return nil
		})
	})

	t.Run("KilledFollowerCatchesUp", func(t *testing.T) {
		pk.waitAcks(t, 300, 60*time.Second)
		waitISR(t, c, "follower-kill", func(_ int32, pi partitionInfo) error {
			if len(pi.ISR) != 3 {
				return fmt.Errorf("ISR %v", pi.ISR)
			}
			return nil
		})
		pk.halt()
		acked := pk.snapshot()
		// Make the restarted follower the leader (a preferred election after
		// a reassignment that puts it first is the admin way).
		adm := c.admin(t)
		if _, err := adm.AlterPartitionAssignments(ctx, alterReq("follower-kill", 0, old, others[0], others[1])); err != nil {
			t.Fatal(err)
		}
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			ps, err := partitionsFrom(ctx, c.broker(others[0]), "follower-kill")
			if err != nil {
				return err
			}
			if ps[0].Replicas[0] != old {
				return fmt.Errorf("replicas %v, want broker %d first", ps[0].Replicas, old)
			}
			return nil
		})
		electPreferred(t, c, "follower-kill", 0)
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if l := leaderOf(t, c, "follower-kill", 0); l != old {
				return fmt.Errorf("leader %d, want broker %d", l, old)
			}
			return nil
		})
		read := readAll(t, c, "follower-kill", 0)
		checkExactlyOnceInOrder(t, read, acked)
		t.Logf("%d acknowledged, %d read back from the restarted follower", len(acked), len(read))
	})
}

// groupCoordinatedBy commits offsets of topic "grp" for a consumer group
// whose coordinator is broker id (trying group names until one hashes to a
// __consumer_offsets partition that id leads) and returns the group and the
// offsets.
func groupCoordinatedBy(t *testing.T, c *testCluster, id int32) (string, kadm.Offsets) {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	adm := c.admin(t)
	offs := kadm.Offsets{}
	for p := int32(0); p < 3; p++ {
		offs.AddOffset("grp", p, int64(10+p), -1)
	}
	for i := 0; i < 100; i++ {
		group := fmt.Sprintf("g-failover-%d", i)
		var coord int32
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			r := adm.FindGroupCoordinators(ctx, group)[group]
			if r.Err != nil {
				return fmt.Errorf("the coordinator of %s: %w", group, r.Err)
			}
			coord = r.NodeID
			return nil
		})
		if coord != id {
			continue
		}
		// Offsets committed.
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			rs, err := adm.CommitOffsets(ctx, group, offs)
			if err != nil {
				return err
			}
			return rs.Error()
		})
		return group, offs
	}
	t.Fatalf("no group coordinated by broker %d among 100 names", id)
	return "", nil
}

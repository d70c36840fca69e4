package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
)

// newLeaderBroker runs broker 1 leading "r" (replicas 1 and 2, both in the
// ISR, min.insync.replicas=2) with a short replica.lag.time.max.ms; broker 2
// is registered but played by the test, through UpdateFollower.
func newLeaderBroker(t *testing.T, lag time.Duration) (*Broker, *cluster.Standalone, *Partition) {
	t.Helper()
	return newLeaderBrokerWith(t, Config{ReplicaLagTimeMax: lag}, map[string]string{"min.insync.replicas": "2"})
}

// newLeaderBrokerWith is newLeaderBroker with the broker's config cfg and
// the topic's configs (a fake Clock, no min.insync.replicas).
func newLeaderBrokerWith(t *testing.T, cfg Config, topicConfigs map[string]string) (*Broker, *cluster.Standalone, *Partition) {
	t.Helper()
	ctx := context.Background()
	b, co := startBroker(t, cfg, true)
	if err := co.CreateTopic(ctx, cluster.Topic{Name: "r", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}, topicConfigs); err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreatePartitionState(ctx, "r", 0, cluster.PartitionState{Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := b.LeaderPartition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	return b, co, p
}

func storedISR(t *testing.T, co cluster.Coordinator) []int32 {
	st, err := co.PartitionState(context.Background(), "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	return st.ISR
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestISRShrinkAndExpand: a follower that stops fetching leaves the ISR
// after replica.lag.time.max.ms (written to the coordinator, then used for
// the high watermark, which moves on); one that fetches up to the high
// watermark again rejoins it.
func TestISRShrinkAndExpand(t *testing.T) {
	_, co, p := newLeaderBroker(t, 300*time.Millisecond)
	info, err := p.AppendRecords(batchOf(t, 5), 1)
	if err != nil {
		t.Fatal(err)
	}
	// The follower fetches everything: the high watermark follows.
	if err := p.UpdateFollower(2, info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != info.LastOffset+1 {
		t.Fatalf("high watermark %d after the follower caught up, want %d", hw, info.LastOffset+1)
	}
	// New records; the follower goes quiet.
	info, err = p.AppendRecords(batchOf(t, 3), 1)
	if err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw == info.LastOffset+1 {
		t.Fatal("the high watermark passed records the ISR follower lacks")
	}
	eventually(t, "the lagging follower leaves the ISR", func() bool { return slices.Equal(storedISR(t, co), []int32{1}) })
	eventually(t, "the high watermark moves on without it", func() bool { return p.HighWatermark() == info.LastOffset+1 })
	// It comes back and catches up: back in the ISR.
	if err := p.UpdateFollower(2, info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower rejoins the ISR", func() bool { return slices.Equal(storedISR(t, co), []int32{1, 2}) })
	if st := p.State(); !slices.Equal(st.ISR, []int32{1, 2}) {
		t.Fatalf("leader's ISR %v", st.ISR)
	}
}

// TestNotEnoughReplicasAfterAppend: an acks=all append accepted with a full
// ISR, whose high watermark is reached only after the ISR shrank below
// min.insync.replicas, answers NOT_ENOUGH_REPLICAS_AFTER_APPEND; the next
// acks=all append is refused up front with NOT_ENOUGH_REPLICAS.
func TestNotEnoughReplicasAfterAppend(t *testing.T) {
	_, _, p := newLeaderBroker(t, 300*time.Millisecond)
	info, err := p.AppendRecords(batchOf(t, 2), -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.WaitForHighWatermark(ctx, info.LastOffset+1)
	if !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
		t.Fatalf("wait after the ISR shrank: %v", err)
	}
	if _, err := p.AppendRecords(batchOf(t, 1), -1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with a short ISR: %v", err)
	}
}

// TestFollowerAppendFencedByEpoch: records fetched at an epoch the
// partition no longer follows at are dropped, and a leader never takes
// follower appends.
func TestFollowerAppendFencedByEpoch(t *testing.T) {
	_, _, p := newLeaderBroker(t, time.Minute)
	if err := p.appendAsFollower(1, batchOf(t, 1), 1, 0); !errors.Is(err, errStaleFollower) {
		t.Fatalf("follower append on the leader: %v", err)
	}
	if err := p.truncateAsFollower(1, 0); !errors.Is(err, errStaleFollower) {
		t.Fatalf("follower truncation on the leader: %v", err)
	}
}

// TestISRShrinkOnTheBrokerClock: the ISR manager measures lag on the
// broker's clock (Config.Clock): with replica.lag.time.max.ms of a minute, a
// quiet follower stays in the ISR until that clock has moved past the minute,
// then leaves at the next check — without the test waiting a minute.
func TestISRShrinkOnTheBrokerClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ctx := context.Background()
	_, co, p := newLeaderBrokerWith(t, Config{ReplicaLagTimeMax: time.Minute, Clock: clock}, nil)
	info, err := p.AppendRecords(batchOf(t, 5), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.UpdateFollower(2, info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 1), 1); err != nil { // the follower lacks this one
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(wctx, 1); err != nil { // the manager's ticker
		t.Fatal(err)
	}
	for range 3 { // 45 s of checks: still within the lag period
		clock.Advance(15 * time.Second)
	}
	time.Sleep(100 * time.Millisecond)
	if isr := storedISR(t, co); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v after 45 s of a 60 s lag period", isr)
	}
	clock.Advance(16 * time.Second) // 61 s
	eventually(t, "the follower leaves the ISR once the broker's clock passed a minute", func() bool {
		clock.Advance(time.Millisecond) // keep ticks coming if the manager was busy
		return slices.Equal(storedISR(t, co), []int32{1})
	})
}

// TestParkedFetchesWakeOnlyForTheirData: a follower's fetch parked at the
// log end and a consumer's parked at the high watermark wake nobody while
// they wait (a follower's re-read must not move the high watermark's
// waiters, or two parked fetches wake each other without end); an append
// wakes the follower's fetch alone (the consumer's data is not committed
// yet); the follower's next fetch moves the high watermark, which wakes the
// consumer's.
func TestParkedFetchesWakeOnlyForTheirData(t *testing.T) {
	b, _, p := newLeaderBroker(t, time.Minute)
	info, err := p.AppendRecords(batchOf(t, 2), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.UpdateFollower(2, info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	end := info.LastOffset + 1
	fetch := func(replica int32) <-chan *FetchRequest {
		out := make(chan *FetchRequest, 1)
		go func() {
			req := &FetchRequest{ReplicaID: replica, MaxWait: 10 * time.Second, MinBytes: 1, MaxBytes: 1 << 20,
				Partitions: []FetchPartition{{Topic: "r", FetchOffset: end, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}}}
			b.Fetch(context.Background(), req, nil)
			t.Cleanup(req.Release)
			out <- req
		}()
		return out
	}
	follower, consumer := fetch(2), fetch(-1)
	eventually(t, "both fetches parked", func() bool { return b.purgatory[delayedFetch].Load() == 2 })

	// Nothing happens: a probe watching every change hears nothing.
	probe := NewWaiter()
	p.Watch(probe)
	defer p.Unwatch(probe)
	quiet := time.After(300 * time.Millisecond)
	for wakes := 0; ; {
		select {
		case <-probe.C():
			wakes++
			continue
		case <-quiet:
		}
		if wakes > 0 {
			t.Fatalf("%d wake-ups in 300ms while two fetches waited for data that did not come", wakes)
		}
		break
	}

	batch := batchOf(t, 3)
	if _, err := p.AppendRecords(batch, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-follower:
		if got := req.Partitions[0]; got.Err != nil || got.Records.Len() != int64(len(batch)) {
			t.Fatalf("follower's fetch: %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the append did not wake the follower's fetch")
	}
	if n := b.purgatory[delayedFetch].Load(); n != 1 {
		t.Fatalf("%d fetches parked after the append, want the consumer's alone", n)
	}
	if err := p.UpdateFollower(2, end+3); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-consumer:
		if got := req.Partitions[0]; got.Err != nil || got.Records.Len() != int64(len(batch)) || got.HighWatermark != end+3 {
			t.Fatalf("consumer's fetch: %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the high watermark's move did not wake the consumer's fetch")
	}
}

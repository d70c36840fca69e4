package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/storage"
)

// TestReplicationQuotaWindows: the rate is Kafka's, over 11 windows of a
// second, with at least ten seconds' span: a first burst up to ten
// seconds' worth of bytes passes, more is over the quota, and the windows
// that age out free the quota again.
func TestReplicationQuotaWindows(t *testing.T) {
	var counted int
	q := newReplicationQuota(func(n int) { counted += n })
	t0 := time.Unix(1_700_000_000, 0)
	if q.active() || q.exceeded(t0) {
		t.Fatal("a quota without a bound throttles")
	}
	q.setBound(config.NoThrottle)
	if q.active() {
		t.Fatal("Long.MAX_VALUE is a throttle")
	}
	q.setBound(1000)
	if !q.active() || q.exceeded(t0) {
		t.Fatal("an unused quota is exceeded")
	}
	q.record(t0, 5000)
	if q.exceeded(t0) { // 5000 B over the minimum span of 10 s
		t.Fatal("5000 B is over 1000 B/s")
	}
	q.record(t0.Add(200*time.Millisecond), 6000)
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 10*time.Second + 500*time.Millisecond} {
		if !q.exceeded(t0.Add(d)) {
			t.Errorf("11000 B at t0: not exceeded at +%v", d)
		}
	}
	if q.exceeded(t0.Add(11*time.Second + 500*time.Millisecond)) {
		t.Error("the window holding the bytes aged out, but the quota is still exceeded")
	}
	if counted != 11000 {
		t.Errorf("counted %d bytes, want 11000", counted)
	}
	q.setBound(0)
	if q.active() || q.exceeded(t0.Add(time.Second)) {
		t.Error("a removed bound still throttles")
	}
}

// TestReplicationQuotaAverage: a fetcher that takes a chunk whenever the
// quota is not exceeded moves, over a minute and more, the bound's rate.
func TestReplicationQuotaAverage(t *testing.T) {
	for _, bound := range []int64{1 << 20, 100 << 10} {
		q := newReplicationQuota(nil)
		q.setBound(bound)
		now := time.Unix(1_700_000_000, 0)
		chunk := int(bound / 20)
		total := 0
		const run = 120 * time.Second
		for end := now.Add(run); now.Before(end); now = now.Add(10 * time.Millisecond) {
			if !q.exceeded(now) {
				q.record(now, chunk)
				total += chunk
			}
		}
		rate := float64(total) / run.Seconds()
		if rate < 0.9*float64(bound) || rate > 1.1*float64(bound) {
			t.Errorf("bound %d B/s: moved %.0f B/s", bound, rate)
		}
	}
}

func TestThrottledOf(t *testing.T) {
	topics := map[string]*TopicImage{
		"a": {Name: "a", Configs: map[string]string{config.LeaderThrottledReplicas: "0:1,1:2", config.FollowerThrottledReplicas: "0:3"},
			Partitions: []PartitionImage{{Partition: 0}, {Partition: 1}}},
		"b":   {Name: "b", Configs: map[string]string{config.FollowerThrottledReplicas: "*"}, Partitions: []PartitionImage{{Partition: 0}, {Partition: 1}}},
		"c":   {Name: "c", Configs: map[string]string{"retention.ms": "1"}, Partitions: []PartitionImage{{Partition: 0}}},
		"bad": {Name: "bad", Configs: map[string]string{config.LeaderThrottledReplicas: "x"}, Partitions: []PartitionImage{{Partition: 0}}},
	}
	im := &Image{throttled: throttledOf(topics, 1)}
	tp := func(topic string, p int32) storage.TopicPartition {
		return storage.TopicPartition{Topic: topic, Partition: p}
	}
	for _, c := range []struct {
		tp   storage.TopicPartition
		side throttleSide
		want bool
	}{
		{tp("a", 0), leaderThrottled, true},
		{tp("a", 0), followerThrottled, false}, // 0:3 names broker 3
		{tp("a", 1), leaderThrottled, false},   // 1:2 names broker 2
		{tp("b", 0), followerThrottled, true},
		{tp("b", 1), followerThrottled, true},
		{tp("b", 1), leaderThrottled, false},
		{tp("c", 0), leaderThrottled, false},
		{tp("bad", 0), leaderThrottled, false},
	} {
		if got := im.isThrottled(c.tp, c.side); got != c.want {
			t.Errorf("%s side %d: %v, want %v", c.tp, c.side, got, c.want)
		}
	}
	if m := throttledOf(map[string]*TopicImage{"c": topics["c"]}, 1); m != nil {
		t.Errorf("no lists: %v, want nil", m)
	}
}

// TestLeaderThrottle: with leader.replication.throttled.rate set (a
// dynamic broker config) and its quota exceeded, the leader answers a
// follower outside the ISR with no records for a partition its
// leader.replication.throttled.replicas names, while it serves the same
// follower an unthrottled partition, a follower in the ISR, and consumers;
// the bytes it serves for throttled partitions count against the quota.
func TestLeaderThrottle(t *testing.T) {
	ctx := context.Background()
	b, co := startBroker(t, Config{Static: config.Default()}, true)
	throttled := map[string]string{config.LeaderThrottledReplicas: "0:1"}
	for _, tc := range []struct {
		name string
		cfg  map[string]string
		isr  []int32
	}{{"slow", throttled, []int32{1}}, {"free", nil, []int32{1}}, {"synced", throttled, []int32{1, 2}}} {
		if err := co.CreateTopic(ctx, cluster.Topic{Name: tc.name, ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}, tc.cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := co.CreatePartitionState(ctx, tc.name, 0, cluster.PartitionState{Leader: 1, LeaderEpoch: 1, ISR: tc.isr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := co.SetBrokerConfig(ctx, "1", map[string]string{config.LeaderThrottledRate: "1000"}); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.leaderQuota.bound.Load(); got != 1000 {
		t.Fatalf("leader quota bound %d, want 1000", got)
	}
	if b.followerQuota.active() {
		t.Fatal("the follower quota is set without its rate")
	}
	batch := batchOf(t, 3)
	for _, topic := range []string{"slow", "free", "synced"} {
		p, err := b.LeaderPartition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.AppendRecords(batch, 1); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(replica int32, topic string) FetchPartition {
		req := &FetchRequest{ReplicaID: replica, MaxBytes: 1 << 20,
			Partitions: []FetchPartition{{Topic: topic, FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}}}
		b.Fetch(ctx, req, nil)
		t.Cleanup(req.Release)
		fp := req.Partitions[0]
		if fp.Err != nil {
			t.Fatalf("fetch of %s by %d: %v", topic, replica, fp.Err)
		}
		return fp
	}
	// Under the quota: served, and counted.
	if fp := fetch(2, "slow"); fp.Records.Len() != int64(len(batch)) {
		t.Fatalf("under the quota: %d bytes, want %d", fp.Records.Len(), len(batch))
	}
	b.leaderQuota.record(b.now(), 1<<20) // far over 1000 B/s
	if !b.leaderQuota.exceeded(b.now()) {
		t.Fatal("the quota is not exceeded")
	}
	if fp := fetch(2, "slow"); fp.Records.Len() != 0 || fp.HighWatermark < 0 {
		t.Errorf("over the quota, throttled, follower outside the ISR: %d bytes (high watermark %d), want none", fp.Records.Len(), fp.HighWatermark)
	}
	for _, c := range []struct {
		replica int32
		topic   string
	}{{2, "free"}, {2, "synced"}, {-1, "slow"}} {
		if fp := fetch(c.replica, c.topic); fp.Records.Len() != int64(len(batch)) {
			t.Errorf("over the quota, %s fetched by %d: %d bytes, want %d", c.topic, c.replica, fp.Records.Len(), len(batch))
		}
	}
	// The rate removed: nothing is held back.
	if err := co.SetBrokerConfig(ctx, "1", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if b.leaderQuota.active() {
		t.Fatal("the leader quota stays after its rate was removed")
	}
	if fp := fetch(2, "slow"); fp.Records.Len() != int64(len(batch)) {
		t.Errorf("without a rate: %d bytes, want %d", fp.Records.Len(), len(batch))
	}
}

// TestReassignmentBytesRemaining: a replica being added here counts as not
// done before its leader answers, then the offsets behind the leader's high
// watermark, in bytes once it holds some; a caught-up one counts nothing.
func TestReassignmentBytesRemaining(t *testing.T) {
	ctx := context.Background()
	b, co := startBroker(t, Config{}, true)
	if b.reassignmentBytesRemaining() != 0 {
		t.Fatal("bytes remaining without a reassignment")
	}
	err := co.CreateTopic(ctx, cluster.Topic{Name: "m", ID: cluster.NewUUID(), Replicas: [][]int32{{2, 1}},
		Adding: map[int32][]int32{0: {1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreatePartitionState(ctx, "m", 0, cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("m", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.reassignmentBytesRemaining(); got != 1 {
		t.Errorf("before the leader answered: %d, want 1", got)
	}
	p.leaderHW.Store(10)
	if got := b.reassignmentBytesRemaining(); got != 10 {
		t.Errorf("nothing copied, 10 offsets behind: %d, want 10", got)
	}
	batch := batchOf(t, 3)
	if err := p.appendAsFollower(1, batch, 3, 0); err != nil {
		t.Fatal(err)
	}
	p.leaderHW.Store(9)
	want := 6 * p.log.Size() / 3
	if got := b.reassignmentBytesRemaining(); got != want {
		t.Errorf("3 of 9 offsets copied (%d B): %d, want %d", p.log.Size(), got, want)
	}
	p.leaderHW.Store(3)
	if got := b.reassignmentBytesRemaining(); got != 0 {
		t.Errorf("caught up: %d, want 0", got)
	}
}

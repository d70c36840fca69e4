package broker

import (
	"testing"
	"time"

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

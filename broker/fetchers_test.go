package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/storage"
)

// fetcherIndex picks a partition's fetcher as Kafka does
// (abs(31 * topic.hashCode() + partition) % num.replica.fetchers); the
// expected values are Java's.
func TestFetcherIndex(t *testing.T) {
	for _, c := range []struct {
		topic           string
		partition, n, w int
	}{
		{"orders", 0, 3, 2}, {"orders", 7, 3, 1}, {"payments-eu", 11, 4, 1},
		{"t😀", 2, 5, 2}, {"a-very-long-topic-name-to-overflow", 3, 7, 6}, {"x", 5, 1, 0},
	} {
		if got := fetcherIndex(storage.TopicPartition{Topic: c.topic, Partition: int32(c.partition)}, c.n); got != c.w {
			t.Errorf("fetcherIndex(%s-%d, %d) = %d, want %d", c.topic, c.partition, c.n, got, c.w)
		}
	}
}

// With num.replica.fetchers 4, the partitions followed from one leader are
// spread over four fetchers, each partition on exactly one; with 1, one
// fetcher has them all.
func TestNumReplicaFetchers(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b, _ := startBroker(t, Config{NumReplicaFetchers: n}, false)
			r := newReplicaFetchers(b)
			defer r.close()
			targets := map[storage.TopicPartition]followTarget{}
			for p := range 64 {
				targets[storage.TopicPartition{Topic: "spread", Partition: int32(p)}] = followTarget{p: &Partition{}, leader: 9, epoch: 1}
			}
			r.update(targets)
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.bySource) != n {
				t.Fatalf("%d fetchers for one leader, want %d", len(r.bySource), n)
			}
			seen := map[storage.TopicPartition]int{}
			for key, f := range r.bySource {
				f.mu.Lock()
				for tp := range f.parts {
					seen[tp]++
					if key.source != 9 || key.index != fetcherIndex(tp, n) {
						t.Errorf("%s on fetcher %+v", tp, key)
					}
				}
				if len(f.parts) == 0 {
					t.Errorf("fetcher %+v has no partitions", key)
				}
				f.mu.Unlock()
			}
			if len(seen) != 64 {
				t.Fatalf("%d partitions followed, want 64", len(seen))
			}
			for tp, k := range seen {
				if k != 1 {
					t.Fatalf("%s on %d fetchers", tp, k)
				}
			}
		})
	}
}

// TestNumReplicaFetchersDynamic: num.replica.fetchers changed as a dynamic
// broker config (this broker's, then the cluster default, then removed)
// re-lays the followed partitions over that many fetchers per leader
// without a restart, each partition on its fetcher by Kafka's formula.
func TestNumReplicaFetchersDynamic(t *testing.T) {
	ctx := context.Background()
	b, co := startBroker(t, Config{Static: config.Default()}, true)
	const parts = 32
	replicas := make([][]int32, parts)
	for i := range replicas {
		replicas[i] = []int32{2, 1}
	}
	if err := co.CreateTopic(ctx, cluster.Topic{Name: "spread", ID: cluster.NewUUID(), Replicas: replicas}, nil); err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		if _, err := co.CreatePartitionState(ctx, "spread", int32(p), cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 1}}); err != nil {
			t.Fatal(err)
		}
	}
	layout := func(want int) {
		t.Helper()
		if err := b.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		r := b.fetchers
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.bySource) != want {
			t.Fatalf("%d fetchers for leader 2, want %d", len(r.bySource), want)
		}
		seen := 0
		for key, f := range r.bySource {
			f.mu.Lock()
			for tp := range f.parts {
				seen++
				if key.source != 2 || key.index != fetcherIndex(tp, want) {
					t.Errorf("%s on fetcher %+v with %d fetchers", tp, key, want)
				}
			}
			f.mu.Unlock()
		}
		if seen != parts {
			t.Fatalf("%d partitions followed, want %d", seen, parts)
		}
	}
	layout(1)
	if err := b.IncrementalAlterBrokerConfigs(ctx, "1", []ConfigOp{{Name: "num.replica.fetchers", Value: "4"}}, false); err != nil {
		t.Fatal(err)
	}
	layout(4)
	if err := b.IncrementalAlterBrokerConfigs(ctx, "", []ConfigOp{{Name: "num.replica.fetchers", Value: "3"}}, false); err != nil {
		t.Fatal(err)
	}
	layout(4) // the broker's own value wins over the cluster default
	if err := b.IncrementalAlterBrokerConfigs(ctx, "1", []ConfigOp{{Name: "num.replica.fetchers", Op: 1}}, false); err != nil {
		t.Fatal(err)
	}
	layout(3)
	if err := b.IncrementalAlterBrokerConfigs(ctx, "", []ConfigOp{{Name: "num.replica.fetchers", Op: 1}}, false); err != nil {
		t.Fatal(err)
	}
	layout(1)
	if err := b.IncrementalAlterBrokerConfigs(ctx, "1", []ConfigOp{{Name: "num.replica.fetchers", Value: "0"}}, false); err == nil {
		t.Fatal("num.replica.fetchers=0 accepted")
	}
}

// TestLogDirsOffsetLag: DescribeLogDirs' offset lag of a replica this
// broker follows is its fetcher's lag (the leader's high watermark as the
// last fetch answered, minus the local log end), and of a replica it leads
// the records not yet replicated to the ISR.
func TestLogDirsOffsetLag(t *testing.T) {
	ctx := context.Background()
	b, co := startBroker(t, Config{Static: config.Default()}, true)
	for _, tc := range []struct {
		topic  string
		leader int32
	}{{"followed", 2}, {"led", 1}} {
		if err := co.CreateTopic(ctx, cluster.Topic{Name: tc.topic, ID: cluster.NewUUID(), Replicas: [][]int32{{tc.leader, 3 - tc.leader}}}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := co.CreatePartitionState(ctx, tc.topic, 0, cluster.PartitionState{Leader: tc.leader, LeaderEpoch: 1, ISR: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	followed, err := b.Partition("followed", 0)
	if err != nil {
		t.Fatal(err)
	}
	lags := func() map[string]int64 {
		out := map[string]int64{}
		for _, d := range b.LogDirs([]string{filepath.Dir(followed.log.Dir())}) {
			for _, p := range d.Partitions {
				out[p.Topic] = p.OffsetLag
			}
		}
		return out
	}
	if got := lags(); got["followed"] != 0 || got["led"] != 0 {
		t.Fatalf("before any fetch or append: %v", got)
	}
	followed.leaderHW.Store(7) // as the fetcher stores it from the leader's answer
	led, err := b.LeaderPartition("led", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.AppendRecords(batchOf(t, 3), 1); err != nil { // broker 2, in the ISR, has not fetched them
		t.Fatal(err)
	}
	if got := lags(); got["followed"] != 7 || got["led"] != 3 {
		t.Fatalf("offset lags %v, want followed 7 (the fetcher's lag) and led 3 (not replicated)", got)
	}
}

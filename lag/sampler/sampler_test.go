package sampler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
)

type fakeSource struct {
	mu       sync.Mutex
	groups   []lag.Group
	lagErr   error
	failOnce int // calls of Lag still to fail before answering
	calls    int
	ends     int64
	bytes    int64
}

func (f *fakeSource) Lag(context.Context, ...string) ([]lag.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failOnce > 0 {
		f.failOnce--
		return nil, errors.New("dial tcp 127.0.0.3:9092: connect: connection refused")
	}
	return f.groups, f.lagErr
}

func (f *fakeSource) Totals(context.Context) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ends, f.bytes, nil
}

func (f *fakeSource) Metadata(context.Context, time.Duration) (*kafkaview.Snapshot, error) {
	return &kafkaview.Snapshot{Brokers: []kafkaview.Broker{{ID: 1, Host: "a", Port: 9092, Rack: "r1"}, {ID: 2, Host: "b", Port: 9092}}}, nil
}

type fakeStore struct {
	mu      sync.Mutex
	inserts [][]consoledb.LagSample
	prunes  []time.Time
	seen    [][]consoledb.KnownBroker
}

func (f *fakeStore) InsertLagSamples(_ context.Context, _ time.Time, s []consoledb.LagSample) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inserts = append(f.inserts, s)
	return nil
}

func (f *fakeStore) PruneLagSamples(_ context.Context, before time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prunes = append(f.prunes, before)
	return 0, nil
}

func (f *fakeStore) SeeBrokers(_ context.Context, b []consoledb.KnownBroker) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, b)
	return nil
}

func (f *fakeStore) counts() (inserts, prunes, seen int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inserts), len(f.prunes), len(f.seen)
}

var twoGroups = []lag.Group{
	{Group: "billing", Partitions: []lag.Partition{
		{Topic: "orders", Partition: 0, Lag: 5, LagTime: time.Second},
		{Topic: "orders", Partition: 1, Lag: 7, LagTime: 3 * time.Second},
		{Topic: "refunds", Partition: 0, Lag: 1},
	}},
	{Group: "gone", Err: errors.New("COORDINATOR_NOT_AVAILABLE")},
}

// A group's lag is stored per topic: records summed over its partitions,
// the largest time lag; a group that failed with no partitions is left out.
func TestSamplesOf(t *testing.T) {
	got := samplesOf(twoGroups)
	want := []consoledb.LagSample{
		{Group: "billing", Topic: "orders", Lag: 12, LagTime: 3 * time.Second},
		{Group: "billing", Topic: "refunds", Lag: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("samples = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The first round samples at once: the pages see the lag, the brokers are
// recorded, and the leading console stores the lag history and prunes it
// by the retention; a console that does not lead keeps the lag in memory
// only.
func TestRunStoresWhileLeading(t *testing.T) {
	for _, leads := range []bool{true, false} {
		src := &fakeSource{groups: twoGroups}
		store := &fakeStore{}
		s := New(Config{Source: src, Store: store, Interval: time.Hour, Retention: 24 * time.Hour, Leader: func() bool { return leads }})
		if _, _, ok := s.LatestLag(time.Minute); ok {
			t.Fatal("lag known before the first round")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, _, ok := s.LatestLag(time.Minute); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no lag after the first round")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		groups, _, _ := s.LatestLag(time.Minute)
		if len(groups) != 2 || groups[0].Group != "billing" {
			t.Fatalf("latest lag = %+v", groups)
		}
		inserts, prunes, seen := store.counts()
		if seen != 1 || len(store.seen[0]) != 2 || store.seen[0][0] != (consoledb.KnownBroker{ID: 1, Host: "a", Port: 9092, Rack: "r1"}) {
			t.Errorf("brokers seen: %+v", store.seen)
		}
		if leads {
			if inserts != 1 || len(store.inserts[0]) != 2 || prunes != 1 {
				t.Fatalf("leading: %d inserts %+v, %d prunes; want 1 of 2 samples and 1 prune", inserts, store.inserts, prunes)
			}
			if age := time.Since(store.prunes[0]); age < 24*time.Hour || age > 25*time.Hour {
				t.Errorf("pruned before %v ago, want the 24h retention", age)
			}
		} else if inserts != 0 || prunes != 0 {
			t.Fatalf("not leading: %d inserts, %d prunes; want none", inserts, prunes)
		}
	}
}

// A failed collection keeps the last good lag, which expires with maxAge.
func TestLatestLagKeepsLastGood(t *testing.T) {
	src := &fakeSource{groups: twoGroups}
	s := New(Config{Source: src, Store: &fakeStore{}, Interval: time.Second})
	s.sampleLag(context.Background())
	src.mu.Lock()
	src.groups, src.lagErr = nil, errors.New("no broker")
	src.mu.Unlock()
	s.sampleLag(context.Background())
	if groups, _, ok := s.LatestLag(time.Minute); !ok || len(groups) != 2 {
		t.Fatalf("after a failed round: %+v %v; want the last good lag", groups, ok)
	}
	if _, _, ok := s.LatestLag(0); ok {
		t.Fatal("lag older than maxAge returned")
	}
}

// Rates come from the last two observations; a log that shrank
// (retention) shows no negative rate, and bytes out is known only when
// both observations had it.
func TestTraffic(t *testing.T) {
	s := New(Config{Source: &fakeSource{}, Store: &fakeStore{}})
	if tr := s.Traffic(); tr.Known || tr.BytesIn != -1 || tr.BytesOut != -1 {
		t.Fatalf("before two observations: %+v", tr)
	}
	t0 := time.Unix(1000, 0)
	s.obs[0] = observation{at: t0, ends: 100, bytes: 10_000, out: 500, outOK: true, outSource: "m"}
	s.obs[1] = observation{at: t0.Add(10 * time.Second), ends: 300, bytes: 5_000, out: 2500, outOK: true, outSource: "broker metrics"}
	tr := s.Traffic()
	want := Traffic{Known: true, MessagesIn: 20, BytesIn: 0, BytesOut: 200, BytesOutSource: "broker metrics", Over: 10 * time.Second}
	if tr != want {
		t.Fatalf("traffic = %+v, want %+v", tr, want)
	}
	s.obs[0].outOK = false
	if tr := s.Traffic(); tr.BytesOut != -1 || tr.BytesOutSource != "" {
		t.Fatalf("bytes out with one unknown observation: %+v", tr)
	}
}

func TestTimeToDrain(t *testing.T) {
	cases := []struct {
		r     PartitionRate
		lag   int64
		want  time.Duration
		state Drain
	}{
		{PartitionRate{Known: true, Consumed: 30, Produced: 10}, 1200, time.Minute, DrainDraining},
		{PartitionRate{Known: true, Consumed: 10, Produced: 10}, 100, 0, DrainGrowing},
		{PartitionRate{Known: true, Consumed: 0, Produced: 5}, 100, 0, DrainStopped},
		{PartitionRate{Known: true, Consumed: 5}, 0, 0, DrainCaughtUp},
		{PartitionRate{}, 10, 0, DrainUnknown},
		{PartitionRate{Known: true, Consumed: 1e-9}, 1e9, 0, DrainGrowing},
	}
	for _, c := range cases {
		d, st := c.r.TimeToDrain(c.lag)
		if d != c.want || st != c.state {
			t.Errorf("%+v lag %d: %v %v, want %v %v", c.r, c.lag, d, st, c.want, c.state)
		}
	}
	sum := SumRates([]PartitionRate{{Known: true, Consumed: 2, Produced: 1, Over: time.Minute}, {Known: true, Consumed: 3, Over: 30 * time.Second}})
	if !sum.Known || sum.Consumed != 5 || sum.Produced != 1 || sum.Over != 30*time.Second {
		t.Errorf("sum %+v", sum)
	}
}

// TestPartitionRatesAndHistory: the sampler keeps each partition's recent
// positions for its rates, and the traffic of the last hour.
func TestPartitionRatesAndHistory(t *testing.T) {
	s := New(Config{Interval: time.Second})
	now := time.Now()
	for i := 0; i < 15; i++ {
		at := now.Add(time.Duration(i) * 10 * time.Second)
		s.mu.Lock()
		s.keepPositions([]lag.Group{{Group: "g", Partitions: []lag.Partition{
			{Topic: "t", Partition: 0, Committed: int64(100 * i), LogEnd: int64(150*i + 50)},
			{Topic: "t", Partition: 1, Committed: -1, LogEnd: 10},
		}}}, at)
		s.remember(observation{at: at, ends: int64(1000 * i), bytes: int64(500 * i)})
		s.mu.Unlock()
	}
	rs := s.PartitionRates("g")
	if len(rs) != 2 || !rs[0].Known || rs[0].Consumed != 10 || rs[0].Produced != 15 || rs[0].Over != 110*time.Second || len(rs[0].Lags) != recentPositions {
		t.Fatalf("rates %+v", rs)
	}
	if rs[1].Consumed != 0 || len(rs[1].Lags) != 0 {
		t.Errorf("partition without a commit %+v", rs[1])
	}
	if got := s.PartitionRates("other"); len(got) != 0 {
		t.Errorf("other group %+v", got)
	}
	h := s.TrafficHistory()
	if len(h) == 0 || h[len(h)-1].MessagesIn != 100 || h[len(h)-1].BytesIn != 50 {
		t.Errorf("history %+v", h)
	}
}

// A round whose first read fails (a broker just gone) retries once within
// the round and stores its samples: no hole in the lag history.
func TestRoundRetriesAFailedRead(t *testing.T) {
	src := &fakeSource{groups: twoGroups, failOnce: 1}
	store := &fakeStore{}
	s := New(Config{Source: src, Store: store, Interval: time.Second, Retention: time.Hour, Leader: func() bool { return true }})
	s.sampleLag(context.Background())
	if inserts, _, _ := store.counts(); inserts != 1 || len(store.inserts[0]) != 2 || src.calls != 2 {
		t.Fatalf("%d inserts (%+v) after %d reads; want one round of 2 samples after a retry", inserts, store.inserts, src.calls)
	}
	// A source that keeps failing: one retry, then the round is given up.
	src.failOnce, src.calls = 5, 0
	s.sampleLag(context.Background())
	if inserts, _, _ := store.counts(); inserts != 1 || src.calls != 2 {
		t.Fatalf("%d inserts after %d reads of a failing source; want no new round after 2 reads", inserts, src.calls)
	}
}

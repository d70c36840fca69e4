package consolestate_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/consolestate"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// TestKafkaLogRidesOutLeaderMoves: the console's state log keeps taking
// writes and answering End while the broker leading its partition shuts
// down (a controlled shutdown moves the leadership) and starts again,
// round after round: no write fails, none is written twice, and they are
// in the topic in the order they were acknowledged.
func TestKafkaLogRidesOutLeaderMoves(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three brokers stopped and started")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()), testcluster.LogLevel(slog.LevelWarn),
		testcluster.Settings("auto.leader.rebalance.enable=false"))
	l := consolestate.NewKafkaLog(c.Addrs(), consolestate.StateTopicSpec(3), nil)
	t.Cleanup(l.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rec := func(i int) consoledb.Record {
		return consoledb.Record{Key: fmt.Appendf(nil, `["t",%d]`, i), Value: fmt.Appendf(nil, `{"id":%d}`, i)}
	}
	if _, err := l.Append(ctx, []consoledb.Record{rec(0)}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(c.Client())
	partition := func() (kadm.PartitionDetail, error) {
		td, err := adm.ListTopics(ctx, consolestate.StateTopic)
		if err != nil {
			return kadm.PartitionDetail{}, err
		}
		p, ok := td[consolestate.StateTopic].Partitions[0]
		if !ok || p.Err != nil {
			return kadm.PartitionDetail{}, fmt.Errorf("partition 0: %v", p.Err)
		}
		return p, nil
	}

	// A writer appends as the console does, each write bounded to 15 s,
	// and reads the end as the console does before each change.
	var (
		mu      sync.Mutex
		acked   = []int{0}
		errs    []error
		appends atomic.Int64
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); <-done }
	t.Cleanup(halt)
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
			_, _, err := l.End(wctx)
			if err != nil {
				err = fmt.Errorf("end before write %d: %w", i, err)
			} else if _, err = l.Append(wctx, []consoledb.Record{rec(i)}); err != nil {
				err = fmt.Errorf("write %d: %w", i, err)
			}
			wcancel()
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				acked = append(acked, i)
			}
			mu.Unlock()
			appends.Add(1)
		}
	}()
	waitWrites := func(n int64) {
		t.Helper()
		from := appends.Load()
		testutil.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
			if got := appends.Load() - from; got < n {
				return fmt.Errorf("%d writes", got)
			}
			return nil
		})
	}
	for round := range 3 {
		p, err := partition()
		if err != nil {
			t.Fatal(err)
		}
		node := c.Node(int(p.Leader) - 1)
		waitWrites(5)
		node.Stop() // leadership moves while the writer writes
		waitWrites(5)
		node.Start()
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			p, err := partition()
			if err == nil && len(p.ISR) != 3 {
				err = fmt.Errorf("ISR %v", p.ISR)
			}
			return err
		})
		waitWrites(5)
		mu.Lock()
		failed := slices.Clone(errs)
		mu.Unlock()
		if len(failed) > 0 {
			halt()
			t.Fatalf("round %d (broker %d stopped and started): %d writes failed, first: %v", round, p.Leader, len(failed), failed[0])
		}
	}
	halt()

	// Every acknowledged write is in the topic once, in order.
	end, _, err := l.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for next := int64(0); next < end; {
		recs, err := l.Fetch(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var i int
			if _, err := fmt.Sscanf(string(r.Key), `["t",%d]`, &i); err != nil {
				t.Fatalf("record at %d: key %q", r.Offset, r.Key)
			}
			got = append(got, i)
			next = r.Offset + 1
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, acked) {
		t.Fatalf("the topic holds %d records, %d writes were acknowledged: %v\nvs %v", len(got), len(acked), got, acked)
	}
}

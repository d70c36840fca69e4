package clustertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestReplicationBasics: a replication-factor-3 topic created through the
// cluster has a leader and a full ISR on every broker's metadata; records
// produced with acks=all are read back; every follower fetches them.
func TestReplicationBasics(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	t.Parallel() // with the other tests that stop no broker, after the ones that do
	c := healthy(t)
	createTopic(t, c, "basics", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, map[string]*string{"min.insync.replicas": strp("2")})
	cl := c.client(t, kgo.DefaultProduceTopic("basics"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxFor(t, 60*time.Second)
	// Produced concurrently (kgo keeps each partition's records in order,
	// idempotently); every one must be acknowledged.
	var mu sync.Mutex
	var errs []error
	for i := 0; i < 300; i++ {
		r := &kgo.Record{Value: value(i), Partition: int32(i % 3)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("produce %s: %w", r.Value, err))
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d records not acknowledged, first: %v", len(errs), errs[0])
	}
	for p := int32(0); p < 3; p++ {
		got := readAll(t, c, "basics", p)
		want := map[int]bool{}
		for i := int(p); i < 300; i += 3 {
			want[i] = true
		}
		if len(got) != 100 {
			t.Fatalf("partition %d: %d records", p, len(got))
		}
		checkExactlyOnceInOrder(t, got, want)
	}
	waitISR(t, c, "basics", func(p int32, pi partitionInfo) error {
		if len(pi.ISR) != 3 {
			return fmt.Errorf("partition %d ISR %v", p, pi.ISR)
		}
		return nil
	})
}

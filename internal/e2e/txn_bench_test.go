package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/zktest"
)

// Transactions against idempotence, and read_committed against
// read_uncommitted: 100 B records, four partitions, transactions of 1,000
// records. Run with
//
//	go test ./internal/e2e -run '^$' -bench 'Txn' -benchtime 200000x
//
// Figures are in BENCHMARKS.md.

const txnBenchValueSize = 100

func benchProduce100(b *testing.B, cl *kgo.Client, topic string, count, perTxn int) {
	ctx := context.Background()
	value := make([]byte, txnBenchValueSize)
	var failed atomic.Value
	for done := 0; done < count; {
		n := count - done
		if perTxn > 0 {
			n = min(n, perTxn)
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		for range n {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
			})
		}
		// franz-go ends a transaction only after its records are flushed.
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if perTxn > 0 {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
		done += n
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTxnProduce: the same acks=all producer, idempotent or
// transactional (a commit every 1,000 records).
func BenchmarkTxnProduce(b *testing.B) {
	for _, mode := range []struct {
		name   string
		perTxn int
	}{{"idempotent", 0}, {"transactional", 1000}} {
		b.Run(mode.name, func(b *testing.B) {
			n := startNode(b, txnSettings...)
			benchTopic(b, n, "bench", 4)
			opts := []kgo.Opt{kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(1 << 20), kgo.MaxBufferedRecords(100_000)}
			if mode.perTxn > 0 {
				opts = append(opts, kgo.TransactionalID("bench"))
			}
			cl := n.Client(opts...)
			benchProduce100(b, cl, "bench", 1000, mode.perTxn) // warm up
			b.SetBytes(txnBenchValueSize)
			b.ResetTimer()
			benchProduce100(b, cl, "bench", b.N, mode.perTxn)
			b.StopTimer()
			reportRate(b)
		})
	}
}

// BenchmarkTxnFetch: consuming transactionally written records (a marker
// every 1,000 records per transaction) with read_uncommitted and
// read_committed.
func BenchmarkTxnFetch(b *testing.B) {
	for _, iso := range []struct {
		name string
		iso  kgo.IsolationLevel
	}{{"read_uncommitted", kgo.ReadUncommitted()}, {"read_committed", kgo.ReadCommitted()}} {
		b.Run(iso.name, func(b *testing.B) {
			n := startNode(b, txnSettings...)
			benchTopic(b, n, "bench", 4)
			producer := n.Client(kgo.TransactionalID("bench"), kgo.ProducerLinger(time.Millisecond),
				kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
			benchProduce100(b, producer, "bench", b.N, 1000)
			consumer := n.Client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(iso.iso), kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(10<<20))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			b.SetBytes(txnBenchValueSize)
			b.ResetTimer()
			got := 0
			for got < b.N {
				fs := consumer.PollFetches(ctx)
				if ctx.Err() != nil {
					b.Fatalf("consumed %d of %d", got, b.N)
				}
				if errs := fs.Errors(); len(errs) > 0 {
					b.Fatal(errs)
				}
				got += fs.NumRecords()
			}
			b.StopTimer()
			reportRate(b)
		})
	}
}

// BenchmarkCoordinatorWritesRF3: on three brokers on ZooKeeper, with
// __consumer_offsets, __transaction_state and the topic replicated on all
// three, one OffsetCommit, and one transaction of one record (InitProducerId
// once; AddPartitionsToTxn, produce, EndTxn and the marker each time), one
// after another: every one is an acks=all write of a coordinator.
//
//	go test ./internal/e2e -run '^$' -bench CoordinatorWritesRF3 -benchtime 50x
func BenchmarkCoordinatorWritesRF3(b *testing.B) {
	zk := zktest.Start(b, zktest.Options{})
	c := testcluster.New(b, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings(append([]string{"offsets.topic.replication.factor=3", "transaction.state.log.replication.factor=3"}, txnSettings...)...))
	c.CreateTopic("lat", 1, 3, nil)
	ctx := ctxFor(b, 10*time.Minute)
	b.Run("offset-commit", func(b *testing.B) {
		adm := kadm.NewClient(c.Client())
		commit := func(at int64) {
			var o kadm.Offsets
			o.Add(kadm.Offset{Topic: "lat", Partition: 0, At: at})
			if _, err := adm.CommitOffsets(ctx, "lat-group", o); err != nil {
				b.Fatal(err)
			}
		}
		commit(0) // the coordinator loads
		b.ResetTimer()
		for i := range b.N {
			commit(int64(i))
		}
	})
	b.Run("transaction-of-one-record", func(b *testing.B) {
		p := c.Client(kgo.TransactionalID("lat"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		txn := func() {
			if err := p.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: "lat", Value: []byte("v")}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
		txn() // InitProducerId
		b.ResetTimer()
		for range b.N {
			txn()
		}
	})
}

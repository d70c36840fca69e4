package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker's data path measured end to end with franz-go in the same
// binary: the client's encode/decode cost is included, the network is
// loopback. Run with
//
//	go test ./internal/e2e -run '^$' -bench . -benchtime 200000x
//
// Figures are in BENCHMARKS.md.

const benchValueSize = 1024

func benchTopic(b *testing.B, n *node, topic string, partitions int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n.Admin().CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
}

func benchProduce(b *testing.B, cl *kgo.Client, topic string, count int) {
	ctx := context.Background()
	value := make([]byte, benchValueSize)
	for i := range value {
		value[i] = byte(i * 7)
	}
	var failed atomic.Value
	for range count {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProduce: idempotent acks=all produce of 1 KiB records to four
// partitions, uncompressed, as fast as one client goes.
func BenchmarkProduce(b *testing.B) {
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"lz4", kgo.Lz4Compression()}} {
		b.Run(codec.name, func(b *testing.B) {
			n := startNode(b)
			benchTopic(b, n, "bench", 4)
			cl := n.Client(kgo.ProducerBatchCompression(codec.codec), kgo.ProducerLinger(time.Millisecond),
				kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
			benchProduce(b, cl, "bench", 1000) // warm up: connections, producer id
			b.SetBytes(benchValueSize)
			b.ResetTimer()
			benchProduce(b, cl, "bench", b.N)
			b.StopTimer()
			reportRate(b)
		})
	}
}

// BenchmarkFetch: consume 1 KiB records from four partitions, sent from
// the segment files with sendfile.
func BenchmarkFetch(b *testing.B) {
	n := startNode(b)
	benchTopic(b, n, "bench", 4)
	producer := n.Client(kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	benchProduce(b, producer, "bench", b.N)
	consumer := n.Client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(10<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.SetBytes(benchValueSize)
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
}

func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "records/s")
	}
}

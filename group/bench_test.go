package group_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/group"
)

// BenchmarkCommit measures OffsetCommit through the whole path: a franz-go
// client sends OffsetCommit v8 (one partition per request, generation -1)
// to the in-process broker, the coordinator appends the record to
// __consumer_offsets (acks=all on one node) and answers. Sequential: one
// commit in flight. Parallel: eight committers, each with its own
// connection and group (spread over __consumer_offsets partitions as their
// names fall). Parallel-one-partition: the same with eight groups of one
// __consumer_offsets partition, whose commits are written together when
// they meet (group commit). Parallel-100-partitions: eight committers
// whose requests each carry the offsets of 100 partitions, as a consumer
// owning 100 partitions commits them; offsets/s counts offsets, as Kafka's
// offset-commit-rate does. cpu-ns/op is the process's CPU time per
// request, client and broker together (they share the process).
func BenchmarkCommit(b *testing.B) {
	n := startNode(b)
	n.createTopic("bench", 8)
	n.createTopic("bench100", 100)
	width := 1 // partitions per request
	commit := func(b *testing.B, cl *kgo.Client, group string, partition int32, offset int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		t := kmsg.OffsetCommitRequestTopic{Topic: "bench", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: partition, Offset: offset, LeaderEpoch: -1},
		}}
		if width > 1 {
			t.Topic, t.Partitions = "bench100", nil
			for p := range int32(width) {
				t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: offset, LeaderEpoch: -1})
			}
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{t}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				b.Fatal(kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	b.Run("sequential", func(b *testing.B) {
		cl := n.client()
		commit(b, cl, "bench-seq", 0, 0) // __consumer_offsets exists, coordinator known
		b.ReportAllocs()
		cpu := group.ProcessCPU()
		start := time.Now()
		for i := int64(0); b.Loop(); i++ {
			commit(b, cl, "bench-seq", 0, i)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		group.ReportCPU(b, cpu)
	})
	parallel := func(b *testing.B, groups []string) {
		// One client (one connection) per committer: a connection's
		// requests are answered one at a time, as Kafka does.
		clients := make(chan *kgo.Client, len(groups))
		for _, g := range groups {
			cl := n.client()
			commit(b, cl, g, 0, 0)
			clients <- cl
		}
		var next atomic.Int64
		before := n.groups().Stats()
		b.SetParallelism(max(1, len(groups)/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.ResetTimer()
		cpu := group.ProcessCPU()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			g := groups[next.Add(1)-1]
			cl := <-clients
			for i := int64(0); pb.Next(); i++ {
				commit(b, cl, g, int32(i%8), i)
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		if width > 1 {
			b.ReportMetric(float64(b.N*width)/time.Since(start).Seconds(), "offsets/s")
		}
		group.ReportCPU(b, cpu)
		after := n.groups().Stats()
		b.ReportMetric(float64(after.Batches-before.Batches)/float64(after.Appends-before.Appends), "commits/append")
	}
	const committers = 8
	b.Run("parallel", func(b *testing.B) {
		var groups []string
		for i := range committers {
			groups = append(groups, fmt.Sprintf("bench-par-%d", i))
		}
		parallel(b, groups)
	})
	b.Run("parallel-one-partition", func(b *testing.B) {
		var groups []string
		for i := 0; len(groups) < committers; i++ {
			if g := fmt.Sprintf("bench-one-%d", i); group.PartitionFor(g, offsetsPartitions) == 0 {
				groups = append(groups, g)
			}
		}
		parallel(b, groups)
	})
	b.Run("parallel-100-partitions", func(b *testing.B) {
		width = 100
		defer func() { width = 1 }()
		var groups []string
		for i := range committers {
			groups = append(groups, fmt.Sprintf("bench-wide-%d", i))
		}
		parallel(b, groups)
	})
}

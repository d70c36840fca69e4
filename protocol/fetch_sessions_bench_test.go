package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/internal/testutil"
)

// BenchmarkIdleSessionFetch: one incremental Fetch per op of a session
// over partitions with nothing new (every position at the log end, max wait
// 0): what an idle consumer or follower costs the broker each poll, per
// partition of its session. Run:
//
//	go test -run '^$' -bench IdleSessionFetch -benchmem ./protocol/
func BenchmarkIdleSessionFetch(b *testing.B) {
	for _, parts := range []int{100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			n := startBenchNode(b, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := n.brk.CreateTopic(ctx, broker.TopicSpec{Name: "idle", Partitions: int32(parts), ReplicationFactor: 1}, false, 0); err != nil {
				b.Fatal(err)
			}
			testutil.CheckFor(b, time.Minute, 50*time.Millisecond, func() error {
				for p := range int32(parts) {
					if _, err := n.brk.LeaderPartition("idle", p); err != nil {
						return err
					}
				}
				return nil
			})
			c := dialRaw(b, n.addr)
			defer c.Close()
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, 0, 1, 1<<20
			req.SessionEpoch = 0 // open a session
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "idle"
			for p := range int32(parts) {
				rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, CurrentLeaderEpoch: -1,
					LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20})
			}
			req.Topics = []kmsg.FetchRequestTopic{rt}
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = req.Version
			if err := c.roundTrip(req, resp); err != nil {
				b.Fatal(err)
			}
			if resp.ErrorCode != 0 || resp.SessionID == 0 {
				b.Fatalf("full fetch: error %d, session %d", resp.ErrorCode, resp.SessionID)
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						b.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
					}
				}
			}
			inc := kmsg.NewPtrFetchRequest()
			inc.Version, inc.ReplicaID, inc.MaxWaitMillis, inc.MinBytes, inc.MaxBytes = 12, -1, 0, 1, 1<<20
			inc.SessionID = resp.SessionID
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				inc.SessionEpoch = int32(i + 1)
				r := kmsg.NewPtrFetchResponse()
				r.Version = inc.Version
				if err := c.roundTrip(inc, r); err != nil {
					b.Fatal(err)
				}
				if r.ErrorCode != 0 || len(r.Topics) != 0 {
					b.Fatalf("idle incremental fetch: error %d, %d topics", r.ErrorCode, len(r.Topics))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(parts), "ns/partition")
		})
	}
}

package group

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// nopBackend accepts every append at once: it isolates the coordinator's
// own cost (state machine, writers, encoding) from the log's.
type nopBackend struct{ appends atomic.Int64 }

func (*nopBackend) EnsureOffsetsTopic(context.Context) error { return nil }
func (*nopBackend) OffsetsLeader(int32, string) (Node, bool) { return Node{ID: 1}, true }
func (b *nopBackend) Append(context.Context, int32, int32, []byte, time.Duration) error {
	b.appends.Add(1)
	return nil
}
func (*nopBackend) Read(context.Context, int32, int64, int32) ([]byte, int64, int64, error) {
	return nil, 0, 0, nil
}
func (*nopBackend) PartitionExists(string, int32) bool { return true }

// ProcessCPU is the CPU time (user + system) the test process used so far.
// Divided by the operations of a benchmark it gives their CPU cost, which,
// unlike ns/op, does not depend on what else runs on the machine.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation since before
// (cpu-ns/op).
func reportCPU(b *testing.B, before time.Duration) {
	b.ReportMetric(float64(ProcessCPU()-before)/float64(b.N), "cpu-ns/op")
}

// ReportCPU is reportCPU for the external tests.
func ReportCPU(b *testing.B, before time.Duration) { reportCPU(b, before) }

// BenchmarkCoordinatorCommit measures OffsetCommit inside the coordinator
// (the coordinator's lock, validation, record encoding, the
// partition writer, the answer) with a backend whose appends cost nothing.
func BenchmarkCoordinatorCommit(b *testing.B) {
	cfg := DefaultConfig()
	be := &nopBackend{}
	c, err := New(Options{Config: cfg, Backend: be})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for p := int32(0); p < cfg.NumPartitions; p++ {
		c.BecomeLeader(p, 0)
	}
	ctx := context.Background()
	for {
		loaded, _ := c.Coordinating(ctx)
		all := len(loaded) == int(cfg.NumPartitions)
		for _, ok := range loaded {
			all = all && ok
		}
		if all {
			break
		}
		time.Sleep(time.Millisecond)
	}
	commit := func(group string, i int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group, req.Generation = group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: int32(i % 8), Offset: i, LeaderEpoch: -1},
		}}}
		resp, err := c.OffsetCommit(ctx, req)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("commit: %v %+v", err, resp)
		}
	}
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		cpu := ProcessCPU()
		for i := int64(0); b.Loop(); i++ {
			commit("g", i)
		}
		reportCPU(b, cpu)
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Int64
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		before := be.appends.Load()
		b.ResetTimer()
		cpu := ProcessCPU()
		b.RunParallel(func(pb *testing.PB) {
			g := fmt.Sprintf("g-%d", next.Add(1))
			for i := int64(0); pb.Next(); i++ {
				commit(g, i)
			}
		})
		reportCPU(b, cpu)
		b.ReportMetric(float64(b.N)/float64(be.appends.Load()-before), "commits/append")
	})
}

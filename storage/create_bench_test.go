package storage

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkCreateLogs creates 1,000 new logs in one log dir with fsync on,
// as a broker does when it is given 1,000 new replicas: one at a time
// through GetOrCreateLog from 8 goroutines (the broker's parallelism), and
// in batches of 256 through CreateLogs (one directory fsync per batch). The
// figure is ns per log, and the Close of the manager that follows (not
// timed in ns/log) per log. Run:
//
//	go test -run '^$' -bench CreateLogs -benchtime 1x ./storage/
func BenchmarkCreateLogs(b *testing.B) {
	const logs = 1000
	cfg := DefaultLogConfig()
	cfg.SegmentIndexBytes = 65536
	for _, mode := range []string{"one-by-one", "batched"} {
		b.Run(mode, func(b *testing.B) {
			var closing time.Duration
			for i := range b.N {
				b.StopTimer()
				m, err := OpenManager(ManagerConfig{Dirs: []string{b.TempDir()}})
				if err != nil {
					b.Fatal(err)
				}
				tps := make([]TopicPartition, logs)
				cfgs := make([]LogConfig, logs)
				for j := range tps {
					tps[j] = TopicPartition{Topic: fmt.Sprintf("t%d", i), Partition: int32(j)}
					cfgs[j] = cfg
				}
				b.StartTimer()
				switch mode {
				case "one-by-one":
					var wg sync.WaitGroup
					work := make(chan int)
					for range 8 {
						wg.Go(func() {
							for j := range work {
								if _, err := m.GetOrCreateLog(tps[j], cfgs[j]); err != nil {
									b.Error(err)
								}
							}
						})
					}
					for j := range tps {
						work <- j
					}
					close(work)
					wg.Wait()
				case "batched":
					for j := 0; j < logs; j += 256 {
						k := min(j+256, logs)
						_, errs := m.CreateLogs(tps[j:k], cfgs[j:k])
						for _, err := range errs {
							if err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				b.StopTimer()
				t0 := time.Now()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				closing += time.Since(t0)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*logs), "ns/log")
			b.ReportMetric(float64(closing.Nanoseconds())/float64(b.N*logs), "close-ns/log")
		})
	}
}

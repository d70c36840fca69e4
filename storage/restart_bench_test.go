package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-io/sluice/storage/vfs"
)

// BenchmarkRestart times OpenManager on a log dir of many logs, as a broker
// restarting with them: after a clean shutdown (the .kafka_cleanshutdown
// marker: nothing is recovered), and after a simulated kill -9 (no marker,
// the recovery points behind: at the base of each log's last segment, so
// every active segment is read, checked and re-indexed, as Kafka's recovery
// from recovery-point-offset-checkpoint does), and crash-full: no recovery
// point at all, every byte recovered. The dir is built once
// (SLUICE_BENCH_RESTART_LOGS logs of SLUICE_BENCH_RESTART_MB MiB in
// segments of SLUICE_BENCH_RESTART_SEGMENT_KB KiB; default 1,000 × 2 MiB
// in 512 KiB segments, 2 GiB) and kept when SLUICE_BENCH_RESTART_DIR names
// where, so several builds time the same data.
// SLUICE_BENCH_RESTART_THREADS sets RecoveryThreadsPerDir
// (num.recovery.threads.per.data.dir; default DefaultRecoveryThreadsPerDir).
// The Close after each open (the clean stop: a flush of every log) is
// reported apart, as ms/close; cpu-s/open is the CPU time (user + system,
// all threads) the process spent in the open. stop-written is the clean
// case with one 16 KiB batch appended to every log between the open and
// the Close (untimed), so that the Close has every log to flush, as a
// broker stopped under load has. SLUICE_BENCH_COLD=1 drops the dir's files from the page cache before each
// open (posix_fadvise DONTNEED), as after a reboot. Run:
//
//	SLUICE_BENCH_RESTART_DIR=/tmp/restart go test -run '^$' -bench Restart -benchtime 3x -timeout 30m ./storage/
func BenchmarkRestart(b *testing.B) {
	logs := envInt("SLUICE_BENCH_RESTART_LOGS", 1000)
	mib := envInt("SLUICE_BENCH_RESTART_MB", 2)
	segKiB := envInt("SLUICE_BENCH_RESTART_SEGMENT_KB", 512)
	dir := os.Getenv("SLUICE_BENCH_RESTART_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	buildRestartDir(b, dir, logs, mib, segKiB)
	cold := os.Getenv("SLUICE_BENCH_COLD") == "1"
	cfg := ManagerConfig{Dirs: []string{dir}, CheckpointInterval: time.Hour, FlushSchedulerInterval: time.Hour,
		RetentionCheckInterval: time.Hour, HighWatermarkCheckpointInterval: time.Hour, IdleSegmentTimeout: time.Hour,
		RecoveryThreadsPerDir: envInt("SLUICE_BENCH_RESTART_THREADS", 0)}
	batch := batchOfSize(b, 16<<10, 1000)
	for _, name := range []string{"clean", "crash", "crash-full", "stop-written"} {
		b.Run(name, func(b *testing.B) {
			crash := name == "crash" || name == "crash-full"
			var recovered int64
			var closing, cpu time.Duration
			for range b.N {
				b.StopTimer()
				if crash {
					recovered = simulateKill(b, dir, name == "crash-full")
				}
				if cold {
					dropPageCache(b, dir)
				}
				cpu0 := processCPU(b)
				b.StartTimer()
				m, err := OpenManager(cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += processCPU(b) - cpu0
				if n := len(m.Logs()); n != logs {
					b.Fatalf("%d logs loaded, want %d", n, logs)
				}
				if name == "stop-written" {
					for _, l := range m.Logs() {
						if _, err := l.AppendAsLeader(batch, 0); err != nil {
							b.Fatal(err)
						}
					}
				}
				t0 := time.Now()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				closing += time.Since(t0)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
			b.ReportMetric(float64(closing.Milliseconds())/float64(b.N), "ms/close")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/open")
			b.ReportMetric(float64(recovered)/(1<<20), "MiB-recovered")
		})
	}
}

// processCPU is the user plus system CPU time the process has used: on a
// shared, loaded machine a steadier figure than the wall time.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// buildRestartDir fills dir with logs × mib MiB of 16 KiB batches in
// segments of segKiB KiB and closes it cleanly; a dir built before (the
// "built" file names its shape) is reused.
func buildRestartDir(b *testing.B, dir string, logs, mib, segKiB int) {
	shape := fmt.Sprintf("%d logs x %d MiB\n", logs, mib)
	if segKiB != 512 {
		shape = fmt.Sprintf("%d logs x %d MiB in %d KiB segments\n", logs, mib, segKiB)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "built")); err == nil && string(got) == shape {
		return
	}
	syncEnabled.Store(false)
	defer syncEnabled.Store(true)
	m, err := OpenManager(ManagerConfig{Dirs: []string{dir}, CheckpointInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = int64(segKiB) << 10
	cfg.SegmentIndexBytes = max(64<<10, int32(segKiB)<<10/256)
	tps := make([]TopicPartition, logs)
	cfgs := make([]LogConfig, logs)
	for i := range tps {
		tps[i] = TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)}
		cfgs[i] = cfg
	}
	ls, errs := m.CreateLogs(tps, cfgs)
	batch := batchOfSize(b, 16<<10, 1000)
	for i, l := range ls {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		for l.Size() < int64(mib)<<20 {
			if _, err := l.AppendAsLeader(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "built"), []byte(shape), 0o644); err != nil {
		b.Fatal(err)
	}
}

// simulateKill turns a cleanly closed dir into one left by kill -9 after
// the last segment rolled: no clean-shutdown marker, every recovery point
// at the base of the log's last segment, no producer snapshot past it.
// With full, every recovery point is 0 and no snapshot is left: the whole
// of every log is recovered (a broker killed before its first recovery
// checkpoint, or whose logs were never flushed: Kafka's default flush
// settings leave the active segment unflushed until it rolls). Returns the
// bytes recovery will read.
func simulateKill(b *testing.B, dir string, full bool) (bytes int64) {
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		b.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	rps := map[TopicPartition]int64{}
	for _, e := range ents {
		tp, err := parseTopicPartition(e.Name())
		if !e.IsDir() || err != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		last, size, total := int64(-1), int64(0), int64(0)
		for _, f := range files {
			if o, ok := parseOffsetFileName(f.Name(), logSuffix); ok {
				info, err := f.Info()
				if err != nil {
					b.Fatal(err)
				}
				total += info.Size()
				if o > last {
					last, size = o, info.Size()
				}
			}
		}
		if full {
			last, size = -1, total
		}
		rps[tp] = max(last, 0)
		bytes += size
		for _, f := range files {
			if o, ok := parseOffsetFileName(f.Name(), snapshotSuffix); ok && o > last {
				os.Remove(filepath.Join(dir, e.Name(), f.Name()))
			}
		}
	}
	if err := writeOffsetCheckpoint(vfs.Default, filepath.Join(dir, recoveryPointCheckpoint), rps); err != nil {
		b.Fatal(err)
	}
	return bytes
}

// dropPageCache asks the kernel to drop the cached pages of every file
// under dir (clean pages only; they were written and closed before).
func dropPageCache(b *testing.B, dir string) {
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".lock") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		b.Fatal(err)
	}
}

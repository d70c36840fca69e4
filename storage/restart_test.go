package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// restartFixture is a few logs over two log dirs, several segments each,
// closed cleanly.
type restartFixture struct {
	dirs []string
	tps  []TopicPartition
	leo  map[TopicPartition]int64
	// lastBatch is the position and size of each log's last batch in its
	// last segment; lastSeg that segment's base.
	lastPos, lastSize map[TopicPartition]int64
	lastSeg           map[TopicPartition]int64
}

func restartLogConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 400
	cfg.IndexIntervalBytes = 100
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// restartManager opens the fixture's dirs with two load workers per dir,
// recording every progress report.
func (fx *restartFixture) open(t *testing.T, progress *[]LoadProgress, logger *slog.Logger) *Manager {
	t.Helper()
	var mu sync.Mutex
	return openTestManager(t, fx.dirs[0], nil, func(c *ManagerConfig) {
		c.Dirs = fx.dirs
		c.DefaultConfig = func(string) LogConfig { return restartLogConfig() }
		c.RecoveryThreadsPerDir = 2
		if logger != nil {
			c.Logger = logger
		}
		c.LoadProgress = func(p LoadProgress) {
			mu.Lock()
			*progress = append(*progress, p)
			mu.Unlock()
		}
	})
}

func buildRestartFixture(t *testing.T) *restartFixture {
	noSync(t)
	fx := &restartFixture{dirs: []string{t.TempDir(), t.TempDir()}, leo: map[TopicPartition]int64{},
		lastPos: map[TopicPartition]int64{}, lastSize: map[TopicPartition]int64{}, lastSeg: map[TopicPartition]int64{}}
	var progress []LoadProgress
	m := fx.open(t, &progress, nil)
	for p := range 6 {
		tp := TopicPartition{"restart", int32(p)}
		fx.tps = append(fx.tps, tp)
		l, err := m.GetOrCreateLog(tp, restartLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 12 + p {
			mustAppend(t, l, producerBatch(t, int64(100+p), 0, int32(5*i), 5))
		}
		if l.NumSegments() < 3 {
			t.Fatalf("%s: %d segments, want several", tp, l.NumSegments())
		}
		last := l.segments()[l.NumSegments()-1]
		fx.leo[tp] = l.LogEndOffset()
		fx.lastSeg[tp] = last.base
		size := last.size.Load()
		f, err := last.acquire()
		if err != nil {
			t.Fatal(err)
		}
		var hb [record.BatchHeaderSize]byte
		var h record.BatchHeader
		for pos := int64(0); pos < size; pos += int64(h.Size()) {
			if err := readHeader(f, pos, size, hb[:], &h); err != nil {
				t.Fatal(err)
			}
			fx.lastPos[tp], fx.lastSize[tp] = pos, int64(h.Size())
		}
		last.release()
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// partDir finds the directory of tp in the fixture's log dirs.
func (fx *restartFixture) partDir(t *testing.T, tp TopicPartition) string {
	for _, d := range fx.dirs {
		p := filepath.Join(d, tp.String())
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no directory for %s", tp)
	return ""
}

// crash turns the cleanly closed dirs into what kill -9 leaves after the
// last roll: no clean-shutdown marker, each recovery point at the base of
// the log's last segment, no producer snapshot past it.
func (fx *restartFixture) crash(t *testing.T) {
	for _, d := range fx.dirs {
		if err := os.Remove(filepath.Join(d, cleanShutdownFile)); err != nil {
			t.Fatal(err)
		}
		rps, err := readOffsetCheckpoint(vfs.Default, filepath.Join(d, recoveryPointCheckpoint))
		if err != nil {
			t.Fatal(err)
		}
		for tp := range rps {
			rps[tp] = fx.lastSeg[tp]
			if fx.leo[tp] == fx.lastSeg[tp] {
				continue // the snapshot of the roll
			}
			pd := filepath.Join(d, tp.String())
			if err := os.Remove(filepath.Join(pd, offsetFileName(fx.leo[tp], snapshotSuffix))); err != nil {
				t.Fatal(err)
			}
		}
		if err := writeOffsetCheckpoint(vfs.Default, filepath.Join(d, recoveryPointCheckpoint), rps); err != nil {
			t.Fatal(err)
		}
	}
}

// flipByte changes one byte of a segment file in place.
func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryFromCheckpoint: after kill -9, only what lies after each
// log's recovery point is read, checked and re-indexed, the logs of both
// dirs in parallel: a torn batch at the end is truncated, a corrupt one
// after the recovery point is cut with what follows, and damage before the
// recovery point is not looked at (Kafka's recovery from
// recovery-point-offset-checkpoint). The progress counts every log and
// exactly the bytes of the segments after the recovery points.
func TestRecoveryFromCheckpoint(t *testing.T) {
	fx := buildRestartFixture(t)
	fx.crash(t)
	torn, corrupt, early := fx.tps[0], fx.tps[1], fx.tps[2]
	var want int64
	for _, tp := range fx.tps {
		st, err := os.Stat(filepath.Join(fx.partDir(t, tp), offsetFileName(fx.lastSeg[tp], logSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		want += st.Size()
	}
	// A batch torn by the crash: its first 30 bytes only.
	tornBatch := producerBatch(t, 100, 0, int32(5*12), 5)
	f, err := os.OpenFile(filepath.Join(fx.partDir(t, torn), offsetFileName(fx.lastSeg[torn], logSuffix)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(tornBatch[:30]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want += 30
	// A record byte (under the CRC) of the last batch.
	flipByte(t, filepath.Join(fx.partDir(t, corrupt), offsetFileName(fx.lastSeg[corrupt], logSuffix)),
		fx.lastPos[corrupt]+fx.lastSize[corrupt]-1)
	// The same in the first segment, below the recovery point.
	flipByte(t, filepath.Join(fx.partDir(t, early), offsetFileName(0, logSuffix)), int64(len(tornBatch))-1)

	var progress []LoadProgress
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	m := fx.open(t, &progress, slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &logMu}, nil)))
	defer m.Close()
	final := progress[len(progress)-1]
	if final.Loaded != len(fx.tps) || final.Total != len(fx.tps) || final.RecoveredBytes != want {
		t.Fatalf("final progress %+v, want %d/%d logs and %d bytes recovered", final, len(fx.tps), len(fx.tps), want)
	}
	logMu.Lock()
	line := fmt.Sprintf("loaded %d/%d logs, %.1f MB recovered", len(fx.tps), len(fx.tps), float64(want)/1e6)
	if !strings.Contains(logBuf.String(), line) {
		t.Errorf("no progress line %q in the log:\n%s", line, logBuf.String())
	}
	logMu.Unlock()
	for _, tp := range fx.tps {
		l, _ := m.Log(tp)
		wantEnd := fx.leo[tp]
		if tp == corrupt {
			wantEnd -= 5 // the corrupt last batch of 5 records is cut
		}
		if got := l.LogEndOffset(); got != wantEnd {
			t.Errorf("%s: log end %d, want %d", tp, got, wantEnd)
		}
		// What recovery read is not known to be on disk (kill -9 leaves it
		// in the page cache): the recovery point stays at the checkpoint
		// until a flush, so a second crash recovers it again.
		if rp := l.RecoveryPoint(); rp != fx.lastSeg[tp] {
			t.Errorf("%s: recovery point %d after recovery, want the checkpoint's %d", tp, rp, fx.lastSeg[tp])
		}
		if tp == torn {
			st, err := os.Stat(filepath.Join(l.Dir(), offsetFileName(fx.lastSeg[tp], logSuffix)))
			if err != nil || st.Size() != fx.lastPos[tp]+fx.lastSize[tp] {
				t.Errorf("%s: torn tail not truncated: %v %v", tp, st.Size(), err)
			}
		}
		// The producer's sequence goes on after the last whole batch.
		next := int32(5 * (12 + int(tp.Partition)))
		if tp == corrupt {
			next -= 5
		}
		if _, err := l.AppendAsLeader(producerBatch(t, int64(100+tp.Partition), 0, next, 1), 0); err != nil {
			t.Errorf("%s: append after recovery: %v", tp, err)
		}
	}
	l, _ := m.Log(torn)
	if err := l.Flush(); err != nil || l.RecoveryPoint() != l.LogEndOffset() {
		t.Errorf("after a flush: recovery point %d, log end %d, %v", l.RecoveryPoint(), l.LogEndOffset(), err)
	}
	// Damage below the recovery point is not looked at: the log is as long
	// as before (reading that batch would fail its CRC check).
	if l, _ := m.Log(early); l.LogEndOffset() != fx.leo[early]+1 {
		t.Errorf("%s: log end %d: recovery read below the recovery point", early, l.LogEndOffset())
	}
}

// TestCleanShutdownSkipsRecovery: after a clean shutdown no segment is
// read or checked (a corrupt batch in the active segment stays, unseen);
// once the marker is gone, the same damage is found and cut.
func TestCleanShutdownSkipsRecovery(t *testing.T) {
	fx := buildRestartFixture(t)
	tp := fx.tps[3]
	seg := filepath.Join(fx.partDir(t, tp), offsetFileName(fx.lastSeg[tp], logSuffix))
	flipByte(t, seg, fx.lastPos[tp]+fx.lastSize[tp]-1)

	var progress []LoadProgress
	m := fx.open(t, &progress, nil)
	final := progress[len(progress)-1]
	if final.Loaded != len(fx.tps) || final.RecoveredBytes != 0 {
		t.Fatalf("after a clean shutdown: progress %+v, want every log loaded and nothing recovered", final)
	}
	if l, _ := m.Log(tp); l.LogEndOffset() != fx.leo[tp] {
		t.Fatalf("log end %d after a clean shutdown, want %d", l.LogEndOffset(), fx.leo[tp])
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	fx.crash(t)
	progress = nil
	m = fx.open(t, &progress, nil)
	defer m.Close()
	if final := progress[len(progress)-1]; final.RecoveredBytes == 0 {
		t.Fatalf("after a crash nothing was recovered: %+v", final)
	}
	if l, _ := m.Log(tp); l.LogEndOffset() != fx.leo[tp]-5 {
		t.Fatalf("log end %d after recovery, want the corrupt batch cut: %d", l.LogEndOffset(), fx.leo[tp]-5)
	}
}

// TestLoadFailureStopsStart: a log that cannot be loaded stops the start
// with an error naming it, whichever worker meets it; the logs already
// loaded are closed and the dirs unlocked, so a start after the operator
// moved the file away loads everything.
func TestLoadFailureStopsStart(t *testing.T) {
	fx := buildRestartFixture(t)
	bad := filepath.Join(fx.partDir(t, fx.tps[4]), "garbage.log")
	if err := os.WriteFile(bad, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenManager(ManagerConfig{Dirs: fx.dirs, RecoveryThreadsPerDir: 2,
		DefaultConfig: func(string) LogConfig { return restartLogConfig() }})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("OpenManager: %v, want an error naming %s", err, bad)
	}
	os.Remove(bad)
	var progress []LoadProgress
	m := fx.open(t, &progress, nil)
	defer m.Close()
	for _, tp := range fx.tps {
		if l, ok := m.Log(tp); !ok || l.LogEndOffset() != fx.leo[tp] {
			t.Fatalf("%s after the failed start: %v", tp, l)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// inode is a file's inode number: a file rewritten atomically (a new file
// renamed over it) gets a new one.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// TestCreateCloseReopen: a log created and closed at once writes no
// producer snapshot (it has nothing to hold) and comes back intact and
// writable; once written to, its close writes one, and closing again
// without an append does not rewrite it; the producer's state survives
// every restart. A partition directory that already exists when the log is
// created (left on disk, not loaded) is loaded, not emptied.
func TestCreateCloseReopen(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"fresh", 0}
	l, err := m.GetOrCreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	ldir := l.Dir()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	snaps := func() []string {
		m, _ := filepath.Glob(filepath.Join(ldir, "*"+snapshotSuffix))
		return m
	}
	if s := snaps(); len(s) != 0 {
		t.Fatalf("an empty log wrote producer snapshots %v", s)
	}

	m = openTestManager(t, dir, nil)
	l, ok := m.Log(tp)
	if !ok || l.LogEndOffset() != 0 || l.LogStartOffset() != 0 || l.NumSegments() != 1 {
		t.Fatalf("empty log after a restart: %v", l)
	}
	mustAppend(t, l, producerBatch(t, 7, 0, 0, 3))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(ldir, offsetFileName(3, snapshotSuffix))
	ino := inode(t, snap)

	m = openTestManager(t, dir, nil)
	l, _ = m.Log(tp)
	if st, ok := l.ProducerState(7); !ok || st.LastSequence != 2 || l.LogEndOffset() != 3 {
		t.Fatalf("after a restart: producer %+v %v, log end %d", st, ok, l.LogEndOffset())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, snap); got != ino {
		t.Fatal("a close with nothing appended rewrote the producer snapshot")
	}

	m = openTestManager(t, dir, nil)
	l, _ = m.Log(tp)
	if st, ok := l.ProducerState(7); !ok || st.LastSequence != 2 {
		t.Fatalf("after a second restart: producer %+v %v", st, ok)
	}
	mustAppend(t, l, producerBatch(t, 7, 0, 3, 2))

	// A partition directory on disk that the manager did not load.
	other := TopicPartition{"fresh", 1}
	odir := filepath.Join(dir, other.String())
	if err := os.Mkdir(odir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := OpenManager(ManagerConfig{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	wl, _ := w.GetOrCreateLog(other, DefaultLogConfig())
	mustAppend(t, wl, batchOfSize(t, 300, 10))
	wantEnd := wl.LogEndOffset()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	copyDir(t, wl.Dir(), odir)
	ol, err := m.GetOrCreateLog(other, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if ol.LogEndOffset() != wantEnd {
		t.Fatalf("existing partition directory: log end %d, want %d (its records)", ol.LogEndOffset(), wantEnd)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ldir, offsetFileName(5, snapshotSuffix))); err != nil {
		t.Fatalf("no snapshot at the new log end after an append: %v", err)
	}
}

package storage

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/storage/vfs/errorfs"
)

// cleanOpenFixture is a log dir of two logs of many small segments,
// closed cleanly, on an errorfs over the disk.
type cleanOpenFixture struct {
	dir      string
	fsys     *errorfs.FS
	tps      []TopicPartition
	leo      map[TopicPartition]int64
	lastBase map[TopicPartition]int64
	maxTS    map[TopicPartition]int64
	batchTS  map[TopicPartition]map[int64]int64 // base offset -> timestamp
}

func (fx *cleanOpenFixture) open(t *testing.T) *Manager {
	t.Helper()
	return openTestManager(t, fx.dir, nil, func(c *ManagerConfig) {
		c.FS = fx.fsys
		c.DefaultConfig = func(string) LogConfig { return rebuildLogConfig() }
	})
}

func buildCleanOpenFixture(t *testing.T) *cleanOpenFixture {
	fx := &cleanOpenFixture{dir: t.TempDir(), fsys: errorfs.New(nil),
		tps:      []TopicPartition{{"lazy", 0}, {"lazy", 1}},
		leo:      map[TopicPartition]int64{},
		lastBase: map[TopicPartition]int64{},
		maxTS:    map[TopicPartition]int64{},
		batchTS:  map[TopicPartition]map[int64]int64{},
	}
	m := fx.open(t)
	now := time.Now().UnixMilli()
	for _, tp := range fx.tps {
		l, err := m.GetOrCreateLog(tp, rebuildLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		fx.batchTS[tp] = map[int64]int64{}
		for i := range 120 {
			ts := now - 10_000 + int64(10*i)
			info := mustAppend(t, l, faultBatch(t, i, ts))
			fx.batchTS[tp][info.FirstOffset] = ts
			fx.maxTS[tp] = ts
		}
		if l.NumSegments() < 4 {
			t.Fatalf("%d segments, want several", l.NumSegments())
		}
		fx.leo[tp] = l.LogEndOffset()
		fx.lastBase[tp] = l.active().base
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// notLastSegment matches the files of every segment of the fixture's logs
// but the last one of each.
func (fx *cleanOpenFixture) notLastSegment(p string) bool {
	for _, tp := range fx.tps {
		if filepath.Base(filepath.Dir(p)) != tp.String() {
			continue
		}
		name := filepath.Base(p)
		for _, suf := range segmentFileSuffixes {
			if b, ok := parseOffsetFileName(name, suf); ok {
				return b != fx.lastBase[tp]
			}
		}
	}
	return false
}

// TestCleanOpenReadsNoInactiveSegment: after a clean shutdown the load
// opens and reads no file of a segment below the last one (they are opened
// lazily, as Kafka's): with every open and read of them failing, the logs
// load with the right ends. Once reads work again, every record, every
// timestamp lookup and the max timestamp are found through those
// segments, whose indexes are read at first use.
func TestCleanOpenReadsNoInactiveSegment(t *testing.T) {
	fx := buildCleanOpenFixture(t)
	remove := fx.fsys.Inject(errorfs.Fault{Ops: errorfs.OpOpen | errorfs.OpRead, Match: fx.notLastSegment})
	m := fx.open(t)
	defer m.Close()
	if n := fx.fsys.Fired(); n != 0 {
		t.Fatalf("the clean load opened or read %d files of inactive segments", n)
	}
	for _, tp := range fx.tps {
		l, ok := m.Log(tp)
		if !ok {
			t.Fatalf("%s not loaded", tp)
		}
		if l.LogEndOffset() != fx.leo[tp] {
			t.Fatalf("%s: log end %d, want %d", tp, l.LogEndOffset(), fx.leo[tp])
		}
		segs := l.segments()
		for _, s := range segs[:len(segs)-1] {
			if !s.lazy.Load() {
				t.Fatalf("%s: segment %d loaded at start", tp, s.base)
			}
		}
	}
	remove()
	for _, tp := range fx.tps {
		l, _ := m.Log(tp)
		if ts, _ := l.MaxTimestampAndOffset(); ts != fx.maxTS[tp] {
			t.Errorf("%s: max timestamp %d, want %d", tp, ts, fx.maxTS[tp])
		}
		checkRebuiltLookups(t, l, fx.batchTS[tp])
		for _, s := range l.segments() {
			if s.lazy.Load() {
				t.Errorf("%s: segment %d still not loaded after it was read", tp, s.base)
			}
		}
	}
}

// TestCleanOpenDamagedIndexRebuiltOnUse: an index of an inactive segment
// that fails its check after a clean shutdown (junk, or missing) is not
// looked at by the load; the first read of the segment finds the damage,
// rebuilds the index from the log with the same bytes, and reads and
// timestamp lookups are right.
func TestCleanOpenDamagedIndexRebuiltOnUse(t *testing.T) {
	fx := buildCleanOpenFixture(t)
	tp := fx.tps[0]
	pd := filepath.Join(fx.dir, tp.String())
	junk, missing := filepath.Join(pd, offsetFileName(0, indexSuffix)), filepath.Join(pd, offsetFileName(0, timeIndexSuffix))
	wantOI, err := os.ReadFile(junk)
	if err != nil {
		t.Fatal(err)
	}
	wantTI, err := os.ReadFile(missing)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte(strings.Repeat("\xa5", len(wantOI)+16)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	m := fx.open(t)
	defer m.Close()
	l, _ := m.Log(tp)
	checkRebuiltLookups(t, l, fx.batchTS[tp])
	for path, want := range map[string][]byte{junk: wantOI, missing: wantTI} {
		if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
			t.Errorf("%s after its first use:\n got %x\nwant %x (%v)", path, got, want, err)
		}
	}
}

// TestCloseSyncsOnlyWrittenLogs: Close fsyncs the files of a log written
// since its last flush, before the clean-shutdown marker (a power cut
// right after Close loses nothing), and makes no sync at all for a log not
// written since it was loaded (every sync of its files fails here, and
// Close succeeds).
func TestCloseSyncsOnlyWrittenLogs(t *testing.T) {
	fx := buildCleanOpenFixture(t)
	written, idle := fx.tps[0], fx.tps[1]
	m := fx.open(t)
	l, _ := m.Log(written)
	now := time.Now().UnixMilli()
	for i := range 30 { // rolls on the way
		info := mustAppend(t, l, faultBatch(t, 1000+i, now+int64(i)))
		fx.batchTS[written][info.FirstOffset] = now + int64(i)
	}
	fx.leo[written] = l.LogEndOffset()
	if l.RecoveryPoint() >= fx.leo[written] {
		t.Fatalf("recovery point %d already at the log end %d: nothing left to flush", l.RecoveryPoint(), fx.leo[written])
	}
	fx.fsys.Inject(errorfs.Fault{Ops: errorfs.OpSync, Match: func(p string) bool {
		return strings.Contains(p, string(filepath.Separator)+idle.String()+string(filepath.Separator))
	}, Err: syscall.EIO})
	if err := m.Close(); err != nil {
		t.Fatalf("Close synced a log not written since the load: %v", err)
	}
	if n := fx.fsys.Fired(); n != 0 {
		t.Fatalf("%d syncs of the idle log's files", n)
	}
	if _, err := os.Stat(filepath.Join(fx.dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after Close: %v", err)
	}
	// Power is cut after Close: what was not synced is lost.
	fx.fsys.Crash()
	if err := fx.fsys.Restart(); err != nil {
		t.Fatal(err)
	}
	m = fx.open(t)
	defer m.Close()
	for _, tp := range fx.tps {
		l, _ := m.Log(tp)
		if l.LogEndOffset() != fx.leo[tp] {
			t.Fatalf("%s: log end %d after a power cut following Close, want %d", tp, l.LogEndOffset(), fx.leo[tp])
		}
		checkRebuiltLookups(t, l, fx.batchTS[tp])
	}
}

// TestCleanMarkerWithoutRecoveryPointsNotTrusted: a clean-shutdown marker
// beside no recovery-point checkpoint (lost, or removed by hand) is not
// trusted: every log is recovered from its start, nothing opened lazily.
func TestCleanMarkerWithoutRecoveryPointsNotTrusted(t *testing.T) {
	fx := buildCleanOpenFixture(t)
	if err := os.Remove(filepath.Join(fx.dir, recoveryPointCheckpoint)); err != nil {
		t.Fatal(err)
	}
	var last LoadProgress
	m := openTestManager(t, fx.dir, nil, func(c *ManagerConfig) {
		c.FS = fx.fsys
		c.DefaultConfig = func(string) LogConfig { return rebuildLogConfig() }
		c.LoadProgress = func(p LoadProgress) { last = p }
	})
	defer m.Close()
	if last.RecoveredBytes == 0 {
		t.Fatalf("nothing recovered: %+v", last)
	}
	for _, tp := range fx.tps {
		l, _ := m.Log(tp)
		if l.LogEndOffset() != fx.leo[tp] {
			t.Fatalf("%s: log end %d, want %d", tp, l.LogEndOffset(), fx.leo[tp])
		}
		for _, s := range l.segments() {
			if s.lazy.Load() {
				t.Fatalf("%s: segment %d opened lazily without recovery points", tp, s.base)
			}
		}
	}
}

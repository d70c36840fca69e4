package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
	"github.com/sluice-io/sluice/storage/vfs/errorfs"
)

// copyDir copies a flat tree (log dir with partition folders).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// simulateCrash turns a cleanly closed log dir into one that must be
// recovered: no clean-shutdown marker, recovery point at 0.
func simulateCrash(t testing.TB, dir string) {
	t.Helper()
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	os.Remove(filepath.Join(dir, recoveryPointCheckpoint))
}

// Small segments and indexes: the crash tests reopen the log hundreds of
// times, and a 10 MiB preallocated index costs disk I/O on every open.
func crashLogConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 100
	cfg.SegmentIndexBytes = 4096
	return cfg
}

func crashConfig(c *ManagerConfig) {
	c.DefaultConfig = func(string) LogConfig { return crashLogConfig() }
}

type crashFixture struct {
	pristine   string
	tp         TopicPartition
	segPath    string
	lastPos    int64 // position of the last batch in the last segment
	lastSize   int
	lastBase   int64
	prevValues map[int64]string // offset -> value of every record before the last batch
}

func buildCrashFixture(t *testing.T) *crashFixture {
	noSync(t)
	return buildCrashLog(t, t.TempDir(), nil)
}

// buildCrashLog writes the fixture's log in dir. With fsys, the log lives on
// it and the last append is torn: it flushes the batches before it, makes
// the last write put only cut bytes on disk and crash, and restarts fsys.
func buildCrashLog(t *testing.T, dir string, fsys *errorfs.FS, cut ...int) *crashFixture {
	m := openTestManager(t, dir, nil, crashConfig, func(c *ManagerConfig) {
		if fsys != nil {
			c.FS = fsys
		}
	})
	tp := TopicPartition{"crash", 0}
	cfg := crashLogConfig()
	l, err := m.GetOrCreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx := &crashFixture{pristine: dir, tp: tp, prevValues: map[int64]string{}}
	now := time.Now().UnixMilli()
	for i := 0; i < 12; i++ {
		recs := []record.Record{{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("value-%02d-%s", i, strings.Repeat("x", 60)))},
			{Key: []byte("second"), Value: []byte(fmt.Sprintf("v%d", i))}}
		b, err := record.BuildBatch(record.BatchOptions{ProducerID: 9, ProducerEpoch: 0, BaseSequence: int32(2 * i), BaseTimestamp: now + int64(i)}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if i == 11 && fsys != nil {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			fsys.Inject(errorfs.Fault{Ops: errorfs.OpWrite, Match: errorfs.Suffix(logSuffix), Partial: cut[0], Torn: true})
			act := l.active()
			fx.segPath, fx.lastBase, fx.lastSize, fx.lastPos = act.path(logSuffix), l.LogEndOffset(), len(b), act.size.Load()
			if _, err := l.AppendAsLeader(b, 0); err == nil || !fsys.Crashed() {
				t.Fatalf("torn append: %v (crashed %v)", err, fsys.Crashed())
			}
			crashAndRestart(t, fsys, m)
			return fx
		}
		info := mustAppend(t, l, b)
		if i < 11 {
			fx.prevValues[info.FirstOffset] = string(recs[0].Value)
			fx.prevValues[info.FirstOffset+1] = string(recs[1].Value)
		} else {
			fx.lastBase = info.FirstOffset
			fx.lastSize = len(b)
		}
	}
	act := l.active()
	fx.segPath = act.path(logSuffix)
	fx.lastPos = act.size.Load() - int64(fx.lastSize)
	if act.base == fx.lastBase {
		t.Fatal("fixture: the last batch must share its segment with earlier batches")
	}
	if l.NumSegments() < 3 {
		t.Fatalf("fixture: want several segments, got %d", l.NumSegments())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// check opens a damaged copy and verifies recovery kept every batch before
// the last one and nothing after, and that the log takes appends again.
func (fx *crashFixture) check(t *testing.T, dir string, lastKept bool) {
	t.Helper()
	m := openTestManager(t, dir, nil, crashConfig)
	defer m.Close()
	l, ok := m.Log(fx.tp)
	if !ok {
		t.Fatal("log missing after recovery")
	}
	wantEnd := fx.lastBase
	if lastKept {
		wantEnd = fx.lastBase + 2
	}
	if l.LogEndOffset() != wantEnd {
		t.Fatalf("log end %d after recovery, want %d", l.LogEndOffset(), wantEnd)
	}
	recs := readAllRecords(t, l, 0)
	if len(recs) != int(wantEnd) {
		t.Fatalf("read %d records after recovery, want %d", len(recs), wantEnd)
	}
	for _, r := range recs {
		if r.Offset < fx.lastBase && fx.prevValues[r.Offset] != string(r.Value) {
			t.Fatalf("offset %d has %q, want %q", r.Offset, r.Value, fx.prevValues[r.Offset])
		}
	}
	// Producer state was rebuilt: the next sequence follows the kept data.
	seq := int32(22)
	if lastKept {
		seq = 24
	}
	b, _ := record.BuildBatch(record.BatchOptions{ProducerID: 9, BaseSequence: seq, BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Key: []byte("after"), Value: []byte("crash")}})
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	if info.FirstOffset != wantEnd {
		t.Fatalf("append after recovery at %d, want %d", info.FirstOffset, wantEnd)
	}
}

// TestCrashRecoveryTornTail: the power goes while the last batch is
// written (on the filesystem seam: errorfs tears the write), cut at every
// byte position; everything flushed before it is recovered, and the
// producer's sequence goes on after the last whole batch. Under -short,
// every 7th byte and the edges of the header.
func TestCrashRecoveryTornTail(t *testing.T) {
	defer syncEnabled.Store(true)
	for cut := 0; ; cut++ {
		switch cut {
		case record.OffMagic, record.OffMagic + 1, record.BatchHeaderSize - 1, record.BatchHeaderSize:
		default:
			if testing.Short() && cut%7 != 0 {
				continue
			}
		}
		dir := t.TempDir()
		syncEnabled.Store(true) // errorfs keeps what was synced (and fsyncs nothing for real)
		fx := buildCrashLog(t, dir, errorfs.New(nil), cut)
		if cut >= fx.lastSize {
			break
		}
		syncEnabled.Store(false) // the checks reopen the log on the disk itself
		if st, err := os.Stat(fx.segPath); err != nil || st.Size() != fx.lastPos+int64(cut) {
			t.Fatalf("cut %d: the segment holds %v bytes (%v), want %d", cut, st.Size(), err, fx.lastPos+int64(cut))
		}
		fx.check(t, dir, false)
		if t.Failed() {
			t.Fatalf("cut at byte %d of the last batch", cut)
		}
	}
}

// TestCrashRecoveryCorruptTail flips every byte of the last batch. Bytes
// outside the CRC (base offset 0-7, partition leader epoch 12-15; Kafka's
// format leaves them out so the broker can rewrite them) are checked for
// no loss of earlier data only.
func TestCrashRecoveryCorruptTail(t *testing.T) {
	fx := buildCrashFixture(t)
	for pos := 0; pos < fx.lastSize; pos++ {
		// Every byte in the full tier; under -short every 7th and the
		// batch header's edges.
		switch pos {
		case record.OffMagic, record.OffMagic + 1, record.BatchHeaderSize - 1, record.BatchHeaderSize:
		default:
			if testing.Short() && pos%7 != 0 {
				continue
			}
		}
		dir := filepath.Join(t.TempDir(), "d")
		copyDir(t, fx.pristine, dir)
		simulateCrash(t, dir)
		seg := filepath.Join(dir, strings.TrimPrefix(fx.segPath, fx.pristine))
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		data[fx.lastPos+int64(pos)] ^= 0x5a
		if err := os.WriteFile(seg, data, 0o644); err != nil {
			t.Fatal(err)
		}
		switch {
		case pos >= record.OffPartitionLeaderEpoch && pos < record.OffMagic:
			fx.check(t, dir, true) // not covered by the CRC: kept
		case pos < record.OffBatchLength:
			// A changed base offset: lower than the log end it is rejected;
			// a gap forward is legal (compaction) and kept.
			m := openTestManager(t, dir, nil, crashConfig)
			l, _ := m.Log(fx.tp)
			recs := readAllRecords(t, l, 0)
			if len(recs) < len(fx.prevValues) {
				t.Fatalf("byte %d: lost earlier records (%d left)", pos, len(recs))
			}
			m.Close()
		default:
			fx.check(t, dir, false)
		}
		if t.Failed() {
			t.Fatalf("corrupt byte %d of the last batch", pos)
		}
	}
}

// TestCrashRecoveryMidLog corrupts a batch in an older segment: the log ends
// there, and the bytes and segments after it are kept aside, not deleted.
func TestCrashRecoveryMidLog(t *testing.T) {
	fx := buildCrashFixture(t)
	dir := filepath.Join(t.TempDir(), "d")
	copyDir(t, fx.pristine, dir)
	simulateCrash(t, dir)
	pdir := filepath.Join(dir, fx.tp.String())
	first := filepath.Join(pdir, offsetFileName(0, logSuffix))
	data, _ := os.ReadFile(first)
	h, err := record.ParseBatchHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	data[h.Size()+record.BatchHeaderSize+3] ^= 0xff // second batch's records
	os.WriteFile(first, data, 0o644)
	m := openTestManager(t, dir, nil, crashConfig)
	l, _ := m.Log(fx.tp)
	if l.LogEndOffset() != h.NextOffset() || l.NumSegments() != 1 {
		t.Fatalf("log end %d with %d segments, want %d with 1", l.LogEndOffset(), l.NumSegments(), h.NextOffset())
	}
	m.Close()
	ents, _ := os.ReadDir(pdir)
	var aside []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), corruptSuffix) {
			aside = append(aside, e.Name())
		}
	}
	// The cut tail of segment 0 plus every later segment.
	if len(aside) < 3 {
		t.Fatalf("set-aside files %v", aside)
	}
	tail, _ := os.ReadFile(filepath.Join(pdir, fmt.Sprintf("%s.%d%s", offsetFileName(0, logSuffix), h.Size(), corruptSuffix)))
	if !bytes.Equal(tail, data[h.Size():]) {
		t.Fatal("set-aside tail differs from the cut bytes")
	}
}

// TestStrayDirectorySkipped: a folder in a log dir that is not a partition
// (here a console data directory placed inside the log dir) is logged and
// skipped, as Kafka does, on the first start and on every restart; it is
// left as it is and the partitions beside it load.
func TestStrayDirectorySkipped(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	stray := filepath.Join(dir, "console")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(stray, "console.db")
	if err := os.WriteFile(db, []byte("not a log"), 0o600); err != nil {
		t.Fatal(err)
	}
	for start := 1; start <= 3; start++ {
		var logged bytes.Buffer
		m, err := OpenManager(ManagerConfig{Dirs: []string{dir}, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		if !strings.Contains(logged.String(), "not a partition") || !strings.Contains(logged.String(), stray) {
			t.Errorf("start %d: no warning naming %s:\n%s", start, stray, logged.String())
		}
		if start == 1 {
			l, err := m.GetOrCreateLog(TopicPartition{"orders", 0}, DefaultLogConfig())
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, recordtest.Batch(t, 5, 10, time.Now().UnixMilli(), record.CompressionNone))
		}
		if logs := m.Logs(); len(logs) != 1 || logs[0].LogEndOffset() != 5 {
			t.Fatalf("start %d: logs %v", start, logs)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(db); err != nil || string(b) != "not a log" {
		t.Fatalf("the stray directory was changed: %q %v", b, err)
	}
}

// TestLoadErrors: what cannot be read is an error naming the file, and
// nothing is changed.
func TestLoadErrors(t *testing.T) {
	t.Run("bad segment name", func(t *testing.T) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "t-0"), 0o755)
		os.WriteFile(filepath.Join(dir, "t-0", "12.log"), []byte("x"), 0o644)
		_, err := OpenManager(ManagerConfig{Dirs: []string{dir}})
		if err == nil || !strings.Contains(err.Error(), "12.log") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("old message format", func(t *testing.T) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "t-0"), 0o755)
		msgset := recordtest.Capture(t, "kcat-v1-none.bin")
		seg := filepath.Join(dir, "t-0", offsetFileName(0, logSuffix))
		os.WriteFile(seg, msgset, 0o644)
		_, err := OpenManager(ManagerConfig{Dirs: []string{dir}})
		if err == nil || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "v1") {
			t.Fatalf("error %v", err)
		}
		if got, _ := os.ReadFile(seg); !bytes.Equal(got, msgset) {
			t.Fatal("the foreign file was modified")
		}
	})
	t.Run("directory in use", func(t *testing.T) {
		dir := t.TempDir()
		m := openTestManager(t, dir, nil)
		defer m.Close()
		if _, err := OpenManager(ManagerConfig{Dirs: []string{dir}}); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("second manager on the same dir: %v", err)
		}
	})
	t.Run("bad checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, recoveryPointCheckpoint), []byte("0\n2\nt 0 5\n"), 0o644)
		_, err := OpenManager(ManagerConfig{Dirs: []string{dir}})
		if err == nil || !strings.Contains(err.Error(), recoveryPointCheckpoint) {
			t.Fatalf("error %v", err)
		}
	})
}

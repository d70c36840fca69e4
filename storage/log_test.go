package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
	"github.com/sluice-io/sluice/storage/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"orders", 3}
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 64 << 10
	l, err := m.GetOrCreateLog(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var want int64
	for i := 0; i < 50; i++ {
		b := recordtest.Batch(t, 10, 200, now, record.CompressionNone)
		info := mustAppend(t, l, b)
		if info.FirstOffset != want || info.LastOffset != want+9 {
			t.Fatalf("append %d: offsets %d-%d, want %d-%d", i, info.FirstOffset, info.LastOffset, want, want+9)
		}
		want += 10
	}
	if l.LogEndOffset() != 500 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	if l.NumSegments() < 2 {
		t.Fatalf("expected rolls, got %d segments", l.NumSegments())
	}
	l.SetHighWatermark(400)
	recs := readAllRecords(t, l, 0)
	if len(recs) != 500 {
		t.Fatalf("read %d records", len(recs))
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	// Read below the high watermark stops at it.
	ri, err := l.Read(395, 1<<20, l.HighWatermark(), false)
	if err != nil {
		t.Fatal(err)
	}
	if ri.FirstOffset != 390 {
		t.Fatalf("first offset %d", ri.FirstOffset)
	}
	ri.Release()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal("no clean shutdown marker")
	}
	for _, f := range []string{recoveryPointCheckpoint, logStartCheckpoint, replicationCheckpoint} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", f, data)
	}
	m = openTestManager(t, dir, nil)
	defer m.Close()
	l, ok := m.Log(tp)
	if !ok {
		t.Fatal("log not found after reopen")
	}
	if l.LogEndOffset() != 500 || l.HighWatermark() != 400 {
		t.Fatalf("after reopen LEO %d HW %d", l.LogEndOffset(), l.HighWatermark())
	}
	recs2 := readAllRecords(t, l, 0)
	if len(recs2) != 500 || !bytes.Equal(recs2[499].Value, recs[499].Value) {
		t.Fatalf("after reopen read %d", len(recs2))
	}
	info := mustAppend(t, l, recordtest.Batch(t, 5, 10, now, record.CompressionNone))
	if info.FirstOffset != 500 {
		t.Fatalf("append after reopen at %d", info.FirstOffset)
	}
}

func TestRollTriggers(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	m := openTestManager(t, t.TempDir(), clock)
	defer m.Close()
	// segment.ms: a segment whose first batch is older than segment.ms rolls.
	cfg := DefaultLogConfig()
	cfg.SegmentMs = time.Hour.Milliseconds()
	l, _ := m.GetOrCreateLog(TopicPartition{"roll-time", 0}, cfg)
	now := clock.Now().UnixMilli()
	mustAppend(t, l, recordtest.Batch(t, 1, 10, now, record.CompressionNone))
	mustAppend(t, l, recordtest.Batch(t, 1, 10, now, record.CompressionNone))
	if l.NumSegments() != 1 {
		t.Fatalf("%d segments before segment.ms", l.NumSegments())
	}
	clock.Advance(2 * time.Hour)
	mustAppend(t, l, recordtest.Batch(t, 1, 10, clock.Now().UnixMilli(), record.CompressionNone))
	if l.NumSegments() != 2 || l.active().base != 2 {
		t.Fatalf("no roll after segment.ms: %d segments", l.NumSegments())
	}
	// A full offset index rolls the segment, and the rolled segment's
	// indexes are trimmed to their entries.
	cfg = DefaultLogConfig()
	cfg.SegmentIndexBytes = 48 // 6 offset entries, 4 time entries
	cfg.IndexIntervalBytes = 1
	l2, _ := m.GetOrCreateLog(TopicPartition{"roll-index", 0}, cfg)
	for i := 0; i < 20; i++ {
		mustAppend(t, l2, recordtest.Batch(t, 1, 10, now+int64(i), record.CompressionNone))
	}
	if l2.NumSegments() < 3 {
		t.Fatalf("full index did not roll: %d segments", l2.NumSegments())
	}
	first := l2.segments()[0]
	for _, c := range []struct {
		suf   string
		entry int64
		ix    *index
	}{{indexSuffix, offsetIndexEntry, first.oi}, {timeIndexSuffix, timeIndexEntry, first.ti}} {
		st, err := os.Stat(first.path(c.suf))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == 0 || st.Size() != int64(c.ix.entries())*c.entry {
			t.Fatalf("%s not trimmed: %d bytes for %d entries", c.suf, st.Size(), c.ix.entries())
		}
	}
	if st, _ := os.Stat(first.path(indexSuffix)); st.Size() >= 48 {
		t.Fatalf("offset index of a rolled segment is %d bytes, want trimmed", st.Size())
	}
	// The active segment's index is preallocated to segment.index.bytes.
	if st, _ := os.Stat(l2.active().path(indexSuffix)); st.Size() != 48 {
		t.Fatalf("active index %d bytes, want preallocated 48", st.Size())
	}
	// flush.ms: the flush scheduler flushes a log once flush.ms passed.
	cfg = DefaultLogConfig()
	cfg.FlushMs = 1000
	l3, _ := m.GetOrCreateLog(TopicPartition{"flush-ms", 0}, cfg)
	mustAppend(t, l3, recordtest.Batch(t, 3, 10, now, record.CompressionNone))
	m.flushTick()
	if l3.RecoveryPoint() != 0 {
		t.Fatal("flushed before flush.ms")
	}
	clock.Advance(2 * time.Second)
	m.flushTick()
	if l3.RecoveryPoint() != 3 {
		t.Fatalf("recovery point %d after flush.ms", l3.RecoveryPoint())
	}
}

func TestMultipleLogDirs(t *testing.T) {
	noSync(t)
	a, b := t.TempDir(), t.TempDir()
	open := func() *Manager {
		m, err := OpenManager(ManagerConfig{Dirs: []string{a, b}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	for p := int32(0); p < 4; p++ {
		l, err := m.GetOrCreateLog(TopicPartition{"spread", p}, DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, recordtest.Batch(t, int(p)+1, 10, time.Now().UnixMilli(), record.CompressionNone))
	}
	m.Close()
	for _, d := range []string{a, b} {
		ents, _ := os.ReadDir(d)
		n := 0
		for _, e := range ents {
			if e.IsDir() {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%s holds %d partitions, want 2", d, n)
		}
	}
	m = open()
	defer m.Close()
	if len(m.Logs()) != 4 {
		t.Fatalf("%d logs after reopen", len(m.Logs()))
	}
	for _, l := range m.Logs() {
		if l.LogEndOffset() != int64(l.TopicPartition().Partition)+1 {
			t.Fatalf("%s log end %d", l.TopicPartition(), l.LogEndOffset())
		}
	}
}

// TestCapturedBatchesThroughLog appends batches written by real clients
// (franz-go and kcat/librdkafka, every codec; record/testdata) to a log:
// offsets are assigned in place, the bytes the CRC covers are untouched, and
// the records read back.
func TestCapturedBatchesThroughLog(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	for _, client := range []string{"franz-go", "kcat"} {
		for _, codec := range []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
			name := fmt.Sprintf("%s-%s", client, codec)
			t.Run(name, func(t *testing.T) {
				raw := recordtest.Capture(t, name+".bin")
				h, err := record.ValidateBatch(raw)
				if err != nil {
					t.Fatal(err)
				}
				l, err := m.GetOrCreateLog(TopicPartition{name, 0}, DefaultLogConfig())
				if err != nil {
					t.Fatal(err)
				}
				in := append([]byte(nil), raw...)
				mustAppend(t, l, recordtest.Batch(t, 3, 10, h.MaxTimestamp, record.CompressionNone))
				info := mustAppend(t, l, in)
				if info.FirstOffset != 3 || info.LastOffset != 7 {
					t.Fatalf("offsets %d-%d", info.FirstOffset, info.LastOffset)
				}
				if !bytes.Equal(in[record.OffMagic:], raw[record.OffMagic:]) {
					t.Fatal("append changed bytes covered by the CRC")
				}
				recs := readAllRecords(t, l, 3)
				if len(recs) != 5 || recs[4].Offset != 7 || string(recs[4].Key) != "key-4" {
					t.Fatalf("read back %+v", recs)
				}
			})
		}
	}
}

// TestCheckpointsSkipUnchanged: a checkpoint whose offsets did not move
// since the manager last wrote it is not written again (an idle broker of
// thousands of partitions rewrote and fsynced every file every 5 s); once an
// offset moves, the file is written with it.
func TestCheckpointsSkipUnchanged(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	defer m.Close()
	tp := TopicPartition{"idle", 0}
	l, err := m.GetOrCreateLog(tp, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recordtest.Batch(t, 3, 10, time.Now().UnixMilli(), record.CompressionNone))
	l.SetHighWatermark(2)
	if err := m.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	files := []string{recoveryPointCheckpoint, logStartCheckpoint, replicationCheckpoint, cleanerCheckpoint}
	stat := func() map[string]os.FileInfo {
		out := map[string]os.FileInfo{}
		for _, f := range files {
			fi, err := os.Stat(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			out[f] = fi
		}
		return out
	}
	first := stat()
	// Nothing moved: every file stays the one written first (each write
	// renames a new file over the old one).
	if err := m.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	for f, fi := range stat() {
		if !os.SameFile(fi, first[f]) {
			t.Errorf("%s written again though no offset moved", f)
		}
	}
	// The high watermark moves: that file is written, with it.
	l.SetHighWatermark(3)
	if err := m.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	now := stat()
	if os.SameFile(now[replicationCheckpoint], first[replicationCheckpoint]) {
		t.Fatal("high watermark checkpoint not written after the high watermark moved")
	}
	if !os.SameFile(now[logStartCheckpoint], first[logStartCheckpoint]) {
		t.Error("log start checkpoint written again though no log start moved")
	}
	hws, err := readOffsetCheckpoint(vfs.Default, filepath.Join(dir, replicationCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if hws[tp] != 3 {
		t.Fatalf("checkpointed high watermark %d, want 3", hws[tp])
	}
}

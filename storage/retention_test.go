package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

func smallSegments() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 4096
	cfg.SegmentIndexBytes = 4096
	cfg.IndexIntervalBytes = 512
	return cfg
}

func segmentFiles(t *testing.T, l *Log) []string {
	ents, err := os.ReadDir(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), logSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestRetentionByTime(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	m := openTestManager(t, t.TempDir(), clock)
	defer m.Close()
	cfg := smallSegments()
	cfg.RetentionMs = time.Hour.Milliseconds()
	l, _ := m.GetOrCreateLog(TopicPartition{"retention-time", 0}, cfg)
	now := clock.Now().UnixMilli()
	old := now - 2*time.Hour.Milliseconds()
	for i := 0; i < 40; i++ { // ~10 segments of two-hour-old records
		mustAppend(t, l, recordtest.Batch(t, 5, 150, old, record.CompressionNone))
	}
	firstNew := l.LogEndOffset()
	l.Roll()
	for i := 0; i < 12; i++ {
		mustAppend(t, l, recordtest.Batch(t, 5, 150, now, record.CompressionNone))
	}
	// Not past the high watermark.
	if n, _ := l.DeleteOldSegments(); n != 0 {
		t.Fatalf("deleted %d segments above the high watermark", n)
	}
	l.SetHighWatermark(l.LogEndOffset())
	n, err := l.DeleteOldSegments()
	if err != nil || n == 0 {
		t.Fatalf("DeleteOldSegments: %d %v", n, err)
	}
	if l.LogStartOffset() != firstNew {
		t.Fatalf("log start %d, want %d (first new record)", l.LogStartOffset(), firstNew)
	}
	if got := segmentFiles(t, l); len(got) != l.NumSegments() || got[0] != offsetFileName(firstNew, logSuffix) {
		t.Fatalf("segment files %v", got)
	}
	if _, err := l.Read(0, 1000, l.LogEndOffset(), true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	// Everything expired: all segments but the active one go.
	clock.Advance(3 * time.Hour)
	l.DeleteOldSegments()
	if l.NumSegments() != 1 {
		t.Fatalf("%d segments left, want the active one", l.NumSegments())
	}
	if l.active().size.Load() == 0 {
		t.Fatal("the active segment was emptied")
	}
	// compact alone: no time retention.
	cfg.Cleanup = "compact"
	l2, _ := m.GetOrCreateLog(TopicPartition{"retention-compact", 0}, cfg)
	for i := 0; i < 20; i++ {
		mustAppend(t, l2, recordtest.Batch(t, 5, 150, old, record.CompressionNone))
	}
	l2.SetHighWatermark(l2.LogEndOffset())
	if n, _ := l2.DeleteOldSegments(); n != 0 {
		t.Fatalf("compacted topic lost %d segments to retention.ms", n)
	}
	// Through the manager's sweep, compact,delete applies time retention.
	cfg.Cleanup = "compact,delete"
	l2.SetConfig(cfg)
	if n := m.RunRetention(); n == 0 {
		t.Fatal("compact,delete topic kept expired segments")
	}
}

func TestRetentionBySize(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := smallSegments()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 10000
	l, _ := m.GetOrCreateLog(TopicPartition{"retention-size", 0}, cfg)
	now := time.Now().UnixMilli()
	for i := 0; i < 100; i++ {
		mustAppend(t, l, recordtest.Batch(t, 5, 150, now, record.CompressionNone))
	}
	total := l.Size()
	l.SetHighWatermark(l.LogEndOffset())
	n, err := l.DeleteOldSegments()
	if err != nil || n == 0 {
		t.Fatalf("DeleteOldSegments: %d %v", n, err)
	}
	// Kafka's rule: delete oldest segments while what remains is still at
	// least retention.bytes, so the log ends within one segment above it.
	first := l.segments()[0]
	if l.Size() < cfg.RetentionBytes || l.Size()-first.size.Load() >= cfg.RetentionBytes {
		t.Fatalf("size %d (was %d) after retention, limit %d, oldest segment %d bytes", l.Size(), total, cfg.RetentionBytes, first.size.Load())
	}
	if l.LogStartOffset() != l.segments()[0].base {
		t.Fatalf("log start %d, first segment %d", l.LogStartOffset(), l.segments()[0].base)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"delete-records", 0}
	l, _ := m.GetOrCreateLog(tp, smallSegments())
	now := time.Now().UnixMilli()
	for i := 0; i < 50; i++ {
		mustAppend(t, l, recordtest.Batch(t, 4, 150, now, record.CompressionNone))
	}
	l.SetHighWatermark(150)
	if _, err := l.DeleteRecordsBefore(151); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the high watermark: %v", err)
	}
	segsBefore := l.NumSegments()
	start, err := l.DeleteRecordsBefore(101)
	if err != nil || start != 101 || l.LogStartOffset() != 101 {
		t.Fatalf("DeleteRecordsBefore(101) = %d, %v", start, err)
	}
	if l.NumSegments() >= segsBefore {
		t.Fatal("no segment deleted")
	}
	// Offset 101 is inside a batch: reading it returns that batch, and
	// records below 101 are not offered by readAllRecords' filter.
	if _, err := l.Read(100, 1000, l.LogEndOffset(), true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	recs := readAllRecords(t, l, 101)
	if recs[0].Offset != 101 {
		t.Fatalf("first record %d", recs[0].Offset)
	}
	if s, _ := l.DeleteRecordsBefore(-1); s != 150 {
		t.Fatalf("-1 (high watermark) gave %d", s)
	}
	m.Close()
	m = openTestManager(t, dir, nil)
	defer m.Close()
	l, _ = m.Log(tp)
	if l.LogStartOffset() != 150 || l.HighWatermark() != 150 {
		t.Fatalf("after restart log start %d, high watermark %d", l.LogStartOffset(), l.HighWatermark())
	}
}

func TestTruncate(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"truncate", 0}
	l, _ := m.GetOrCreateLog(tp, smallSegments())
	now := time.Now().UnixMilli()
	for i := 0; i < 60; i++ {
		b, _ := record.BuildBatch(record.BatchOptions{ProducerID: 3, BaseSequence: int32(2 * i), BaseTimestamp: now + int64(i)},
			[]record.Record{{Key: []byte("a"), Value: []byte(strings.Repeat("v", 200))}, {Key: []byte("b"), Value: []byte("w")}})
		epoch := int32(0)
		if i >= 30 {
			epoch = 1
		}
		if _, err := l.AppendAsLeader(b, epoch); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	segs := l.NumSegments()
	// Truncate into the middle of an older segment, at a batch boundary
	// inside epoch 0.
	if err := l.Truncate(40); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 40 || l.HighWatermark() != 40 || l.NumSegments() >= segs {
		t.Fatalf("after truncate: end %d hw %d segments %d (was %d)", l.LogEndOffset(), l.HighWatermark(), l.NumSegments(), segs)
	}
	if e, _ := l.LatestEpoch(); e != 0 {
		t.Fatalf("epoch 1 started at 60, latest is %d after truncating to 40", e)
	}
	if recs := readAllRecords(t, l, 0); len(recs) != 40 || recs[39].Offset != 39 {
		t.Fatalf("read %d records", len(recs))
	}
	// Producer state follows the truncation: the next sequence is 40.
	st, ok := l.ProducerState(3)
	if !ok || st.LastSequence != 39 || st.LastOffset != 39 {
		t.Fatalf("producer state %+v", st)
	}
	b, _ := record.BuildBatch(record.BatchOptions{ProducerID: 3, BaseSequence: 40, BaseTimestamp: now}, []record.Record{{Key: []byte("c"), Value: []byte("x")}})
	if info, err := l.AppendAsLeader(b, 2); err != nil || info.FirstOffset != 40 {
		t.Fatalf("append after truncate: %+v %v", info, err)
	}
	m.Close()
	m = openTestManager(t, dir, nil)
	defer m.Close()
	l, _ = m.Log(tp)
	if l.LogEndOffset() != 41 {
		t.Fatalf("after restart log end %d", l.LogEndOffset())
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.NumSegments() != 1 {
		t.Fatalf("after TruncateFullyAndStartAt: %d-%d, %d segments", l.LogStartOffset(), l.LogEndOffset(), l.NumSegments())
	}
	if _, ok := l.LatestEpoch(); ok {
		t.Fatal("epochs survived a full truncation")
	}
	if info := mustAppend(t, l, recordtest.Batch(t, 1, 1, now, record.CompressionNone)); info.FirstOffset != 1000 {
		t.Fatalf("append at %d", info.FirstOffset)
	}
	if got := segmentFiles(t, l); len(got) != 1 || got[0] != offsetFileName(1000, logSuffix) {
		t.Fatalf("files %v", got)
	}
}

func TestLeaderEpochCache(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"epochs", 0}
	l, _ := m.GetOrCreateLog(tp, DefaultLogConfig())
	now := time.Now().UnixMilli()
	for _, e := range []int32{0, 0, 2, 2, 5} {
		if _, err := l.AppendAsLeader(recordtest.Batch(t, 10, 10, now, record.CompressionNone), e); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		req       int32
		epoch     int32
		endOffset int64
	}{{0, 0, 20}, {1, 0, 20}, {2, 2, 40}, {3, 2, 40}, {5, 5, 50}, {7, -1, -1}, {-1, -1, -1}}
	for _, c := range cases {
		if e, o := l.EndOffsetForEpoch(c.req); e != c.epoch || o != c.endOffset {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", c.req, e, o, c.epoch, c.endOffset)
		}
	}
	// New epochs reach the file with the flush that moves the recovery
	// point past them (TestLeaderEpochCheckpointWrites).
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(l.Dir(), leaderEpochCheckpoint))
	if string(data) != "0\n3\n0 0\n2 20\n5 40\n" {
		t.Fatalf("leader-epoch-checkpoint:\n%s", data)
	}
	// A new leader assigns its epoch at the log end, then appends.
	if err := l.AssignEpochStartOffset(6, 50); err != nil {
		t.Fatal(err)
	}
	if e, o := l.EndOffsetForEpoch(5); e != 5 || o != 50 {
		t.Fatalf("epoch 5 ends at %d (%d)", o, e)
	}
	if _, err := l.AppendAsLeader(recordtest.Batch(t, 1, 10, now, record.CompressionNone), 6); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m = openTestManager(t, dir, nil)
	defer m.Close()
	l, _ = m.Log(tp)
	if e, ok := l.LatestEpoch(); !ok || e != 6 {
		t.Fatalf("latest epoch %d after restart", e)
	}
	// A follower's batches carry their epochs into the cache.
	f, _ := m.GetOrCreateLog(TopicPartition{"follower", 0}, DefaultLogConfig())
	var buf []byte
	for i, e := range []int32{1, 1, 4} {
		b, _ := record.BuildBatch(record.BatchOptions{BaseOffset: int64(i * 10), PartitionLeaderEpoch: e, ProducerID: -1, BaseSequence: -1, BaseTimestamp: now},
			[]record.Record{{Key: []byte("k"), Value: []byte(fmt.Sprint(i)), OffsetDelta: 9}})
		buf = append(buf, b...)
	}
	if info, err := f.AppendAsFollower(buf); err != nil || info.LastOffset != 29 {
		t.Fatalf("AppendAsFollower: %+v %v", info, err)
	}
	if e, o := f.EndOffsetForEpoch(1); e != 1 || o != 20 {
		t.Fatalf("follower epoch 1 ends at %d (%d)", o, e)
	}
	if _, err := f.AppendAsFollower(buf[:len(buf)/3]); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("follower append below the log end: %v", err)
	}
}

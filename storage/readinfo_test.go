package storage

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// TestReadNextOffset: a region's NextOffset is the offset after its last
// batch, whether the read walked every header or jumped with the index, at
// every fetch offset, size limit and high watermark; for an empty region it
// is the offset asked for. (The broker counts records sent to consumers as
// NextOffset-FirstOffset.)
func TestReadNextOffset(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 256 // index entries every few batches: reads jump
	l, err := m.GetOrCreateLog(TopicPartition{"next", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range 120 {
		mustAppend(t, l, recordtest.Batch(t, 1+i%7, 40, now, record.CompressionNone))
	}
	leo := l.LogEndOffset()
	checked := 0
	for off := int64(0); off < leo; off += 3 {
		for _, maxBytes := range []int32{10, 300, 1000, 5000, 1 << 20} {
			for _, maxOffset := range []int64{leo, leo - 5, off + 20} {
				ri, err := l.Read(off, maxBytes, maxOffset, off%2 == 0)
				if err != nil {
					t.Fatal(err)
				}
				if ri.Region.Len == 0 {
					if ri.NextOffset != ri.FirstOffset {
						t.Fatalf("empty read at %d: first %d next %d", off, ri.FirstOffset, ri.NextOffset)
					}
					ri.Release()
					continue
				}
				buf := make([]byte, ri.Region.Len)
				if _, err := ri.Region.File.ReadAt(buf, ri.Region.Pos); err != nil {
					t.Fatal(err)
				}
				ri.Release()
				want := int64(-1)
				if err := record.ForEachBatch(buf, func(h *record.BatchHeader, _ []byte) error { want = h.NextOffset(); return nil }); err != nil {
					t.Fatal(err)
				}
				if ri.NextOffset != want {
					t.Fatalf("read(%d, %d, %d): next offset %d, the region ends at %d", off, maxBytes, maxOffset, ri.NextOffset, want)
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d non-empty reads checked", checked)
	}
}

package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// rebuildLogConfig: segments of a few dozen batches, an index entry every
// few batches, so each segment has many offset and time index entries.
func rebuildLogConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 500
	cfg.SegmentIndexBytes = 4096
	return cfg
}

// TestRebuiltIndexesEqualAppended: the offset and time indexes recovery
// rebuilds from the log (in memory, written with one write) are byte for
// byte those written during the appends, for every segment (the last one
// once closed), and lookups through them find every offset and timestamp,
// after the recovering open and after a clean reopen.
func TestRebuiltIndexesEqualAppended(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	tp := TopicPartition{"rebuild", 0}
	open := func() *Manager {
		return openTestManager(t, dir, nil, func(c *ManagerConfig) {
			c.DefaultConfig = func(string) LogConfig { return rebuildLogConfig() }
		})
	}
	m := open()
	l, err := m.GetOrCreateLog(tp, rebuildLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Timestamps mostly rising, every fourth batch older than the one
	// before: the time index skips those. (Recent: segment.ms counts from
	// the first one.)
	batchTS := map[int64]int64{} // base offset -> timestamp
	now := time.Now().UnixMilli()
	for i := range 300 {
		ts := now - 10_000 + int64(10*i)
		if i%4 == 3 {
			ts -= 25
		}
		info := mustAppend(t, l, faultBatch(t, i, ts))
		batchTS[info.FirstOffset] = ts
	}
	if l.NumSegments() < 5 {
		t.Fatalf("%d segments, want several", l.NumSegments())
	}
	leo := l.LogEndOffset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// The indexes as the appends wrote them (trimmed at roll and close).
	pd := filepath.Join(dir, tp.String())
	want := map[string][]byte{}
	ents, err := os.ReadDir(pd)
	if err != nil {
		t.Fatal(err)
	}
	var lastBase int64 = -1
	for _, e := range ents {
		name := e.Name()
		if b, ok := parseOffsetFileName(name, logSuffix); ok {
			lastBase = max(lastBase, b)
		}
		_, oi := parseOffsetFileName(name, indexSuffix)
		_, ti := parseOffsetFileName(name, timeIndexSuffix)
		if !oi && !ti {
			continue
		}
		data, err := os.ReadFile(filepath.Join(pd, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			t.Fatalf("%s is empty: the test needs indexed segments", name)
		}
		want[name] = data
		// What the recovering open finds says nothing: emptied, or
		// longer than the rebuilt index and full of garbage (the rebuild
		// overwrites the file and cuts it to its entries).
		junk := []byte{}
		if len(want)%2 == 0 {
			junk = bytes.Repeat([]byte{0xa5}, len(data)+3*timeIndexEntry)
		}
		if err := os.WriteFile(filepath.Join(pd, name), junk, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lastIndexes := map[string]bool{offsetFileName(lastBase, indexSuffix): true, offsetFileName(lastBase, timeIndexSuffix): true}

	// kill -9 before any recovery checkpoint: every segment is recovered.
	simulateCrash(t, dir)
	m = open()
	l, ok := m.Log(tp)
	if !ok {
		t.Fatal("log not loaded")
	}
	if got := l.LogEndOffset(); got != leo {
		t.Fatalf("log end %d after recovery, want %d", got, leo)
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(pd, name))
		if err != nil {
			t.Fatal(err)
		}
		if lastIndexes[name] {
			// Mapped read-write and preallocated, as a loaded active index.
			if len(got) < len(data) || !bytes.Equal(got[:len(data)], data) {
				t.Errorf("%s: active segment's rebuilt index does not start with the appended entries", name)
			}
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s: rebuilt index differs from the appended one:\n got %x\nwant %x", name, got, data)
		}
	}
	checkRebuiltLookups(t, l, batchTS)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(pd, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s after close: rebuilt index differs from the appended one:\n got %x\nwant %x", name, got, data)
		}
	}

	// A clean reopen loads (checks) the rebuilt indexes instead.
	m = open()
	l, _ = m.Log(tp)
	checkRebuiltLookups(t, l, batchTS)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// After a clean stop, an index that fails its check (junk, longer
	// than the real one) is rebuilt too: the same bytes again. The segment
	// is opened lazily, so the check and the rebuild come with its first
	// use (the lookups), not with the load.
	bad := offsetFileName(0, indexSuffix)
	if err := os.WriteFile(filepath.Join(pd, bad), bytes.Repeat([]byte{0xa5}, len(want[bad])+16), 0o644); err != nil {
		t.Fatal(err)
	}
	m = open()
	defer m.Close()
	l, _ = m.Log(tp)
	checkRebuiltLookups(t, l, batchTS)
	if got, err := os.ReadFile(filepath.Join(pd, bad)); err != nil || !bytes.Equal(got, want[bad]) {
		t.Errorf("%s rebuilt after its check failed:\n got %x\nwant %x (%v)", bad, got, want[bad], err)
	}
}

// checkRebuiltLookups looks up every batch by offset and by timestamp, and
// checks that the offset index (not only the scan after it) takes each
// lookup to a batch start at or before the batch.
func checkRebuiltLookups(t *testing.T, l *Log, batchTS map[int64]int64) {
	t.Helper()
	recs := readAllRecords(t, l, 0)
	if len(recs) != 2*len(batchTS) {
		t.Fatalf("%d records read, want %d", len(recs), 2*len(batchTS))
	}
	indexed := 0
	for _, s := range l.segments() {
		var starts []int64 // batch positions
		f, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		var hb [record.BatchHeaderSize]byte
		var h record.BatchHeader
		bases := map[int64]int64{} // position -> base offset
		size := s.size.Load()
		for pos := int64(0); pos < size; pos += int64(h.Size()) {
			if err := readHeader(f, pos, size, hb[:], &h); err != nil {
				t.Fatal(err)
			}
			starts = append(starts, pos)
			bases[pos] = h.BaseOffset
		}
		s.release()
		err = s.withIndexes(func(oi, _ *index) {
			indexed += oi.entries()
			for _, pos := range starts {
				o := bases[pos]
				if _, p := oi.lookupOffset(o, size); p > pos {
					t.Errorf("segment %d: lookup of offset %d went to %d, past its batch at %d", s.base, o, p, pos)
				} else if _, ok := bases[p]; !ok {
					t.Errorf("segment %d: lookup of offset %d went to %d, not a batch start", s.base, o, p)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if indexed == 0 {
		t.Fatal("no offset index entries after reopen")
	}
	for base, ts := range batchTS {
		// The first record at or after ts: this batch, unless an earlier
		// one (an older-stamped batch after a newer one) already reaches ts.
		off, _, found, err := l.OffsetForTimestamp(ts)
		if err != nil || !found {
			t.Fatalf("OffsetForTimestamp(%d): %d %v %v", ts, off, found, err)
		}
		wantOff := base
		for b, bts := range batchTS {
			if b < wantOff && bts >= ts {
				wantOff = b
			}
		}
		if off != wantOff {
			t.Errorf("OffsetForTimestamp(%d) = %d, want %d", ts, off, wantOff)
		}
	}
}

// TestBuildIndexGrows: an index rebuilt in memory grows past its size hint
// up to segment.index.bytes and is then full; what it wrote reads back.
func TestBuildIndexGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), offsetFileName(100, indexSuffix))
	ix := buildIndex(vfs.Default, path, 100, offsetIndexEntry, 8*50+3, 0)
	for i := range 60 {
		if ix.full() != (i >= 50) {
			t.Fatalf("entry %d: full %v", i, ix.full())
		}
		ix.appendOffset(int64(101+i), int64(10*(i+1)))
	}
	if ix.entries() != 50 {
		t.Fatalf("%d entries, want 50 (the limit)", ix.entries())
	}
	if err := ix.writeBuilt(true); err != nil {
		t.Fatal(err)
	}
	if ix.mapped || ix.data != nil || !ix.unsynced.Load() {
		t.Fatalf("after writeBuilt: mapped %v, data %d bytes, unsynced %v", ix.mapped, len(ix.data), ix.unsynced.Load())
	}
	got, err := readIndex(vfs.Default, path, 100, offsetIndexEntry)
	if err != nil {
		t.Fatal(err)
	}
	if got.entries() != 50 {
		t.Fatalf("read back %d entries", got.entries())
	}
	for i := range 50 {
		if o, p := got.offsetEntry(i); o != int64(101+i) || p != int64(10*(i+1)) {
			t.Fatalf("entry %d: (%d, %d)", i, o, p)
		}
	}
}

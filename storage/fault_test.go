package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
	"github.com/sluice-io/sluice/storage/vfs/errorfs"
)

// Tests of the log on a fault-injecting filesystem (package errorfs): what a
// producer and a consumer see when the disk fails, fills up, or loses power.

var faultTP = TopicPartition{"faults", 0}

// faultLogConfig is small segments with an fsync per message, so every
// acknowledged append is durable.
func faultLogConfig() LogConfig {
	cfg := crashLogConfig()
	cfg.FlushMessages = 1
	return cfg
}

// openFaultLog opens a manager on fsys over dir and the log faultTP in it.
func openFaultLog(t testing.TB, dir string, fsys vfs.FS, cfg LogConfig) (*Manager, *Log) {
	t.Helper()
	m := openTestManager(t, dir, nil, func(c *ManagerConfig) {
		c.FS = fsys
		c.DefaultConfig = func(string) LogConfig { return cfg }
	})
	l, err := m.GetOrCreateLog(faultTP, cfg)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return m, l
}

// faultBatch is batch i: two records whose values name it, timestamp ts.
func faultBatch(t testing.TB, i int, ts int64) []byte {
	t.Helper()
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: ts}, []record.Record{
		{Key: []byte("k"), Value: []byte(fmt.Sprintf("b%03d-r0-%s", i, strings.Repeat("x", 40)))},
		{Key: []byte("k"), Value: []byte(fmt.Sprintf("b%03d-r1", i))},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// faultLedger is what was acknowledged: offset -> value, and where the
// acknowledged log ends.
type faultLedger struct {
	values map[int64]string
	end    int64
	ts     map[int64]int64 // batch base offset -> timestamp
}

func newFaultLedger() *faultLedger {
	return &faultLedger{values: map[int64]string{}, ts: map[int64]int64{}}
}

// appendOK appends batch i and records it as acknowledged.
func (lg *faultLedger) appendOK(t testing.TB, l *Log, i int, ts int64) {
	t.Helper()
	b := faultBatch(t, i, ts)
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatalf("append %d: %v", i, err)
	}
	lg.values[info.FirstOffset] = fmt.Sprintf("b%03d-r0-%s", i, strings.Repeat("x", 40))
	lg.values[info.FirstOffset+1] = fmt.Sprintf("b%03d-r1", i)
	lg.ts[info.FirstOffset] = ts
	lg.end = info.LastOffset + 1
}

// check asserts the log holds exactly the acknowledged records [0, end).
func (lg *faultLedger) check(t testing.TB, l *Log) {
	t.Helper()
	if l.LogEndOffset() != lg.end {
		t.Fatalf("log end %d, want %d (the last acknowledged offset + 1)", l.LogEndOffset(), lg.end)
	}
	recs := readAllRecords(t, l, 0)
	if len(recs) != int(lg.end) {
		t.Fatalf("read %d records, want %d", len(recs), lg.end)
	}
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != lg.values[r.Offset] {
			t.Fatalf("record %d: offset %d value %q, want %q", i, r.Offset, r.Value, lg.values[int64(i)])
		}
	}
}

// crashAndRestart loses power under m: nothing more reaches the disk, m is
// closed (its errors are the crash's), and what was not synced is dropped.
func crashAndRestart(t testing.TB, fsys *errorfs.FS, m *Manager) {
	t.Helper()
	fsys.Crash()
	m.Close()
	if err := fsys.Restart(); err != nil {
		t.Fatal(err)
	}
}

// TestFaultAppendEIO: a write error reaches the producer as an error naming
// the file (no panic), the log stays readable up to the last acknowledged
// offset, and once the disk works again appends go on at the same offset.
func TestFaultAppendEIO(t *testing.T) {
	fsys := errorfs.New(nil)
	m, l := openFaultLog(t, t.TempDir(), fsys, faultLogConfig())
	defer m.Close()
	lg := newFaultLedger()
	now := time.Now().UnixMilli()
	for i := 0; i < 4; i++ {
		lg.appendOK(t, l, i, now+int64(i))
	}
	remove := fsys.Inject(errorfs.Fault{Ops: errorfs.OpWrite, Match: errorfs.Suffix(logSuffix), Err: syscall.EIO})
	for i := 0; i < 3; i++ {
		_, err := l.AppendAsLeader(faultBatch(t, 100+i, now), 0)
		if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), faultTP.String()) || !strings.Contains(err.Error(), logSuffix) {
			t.Fatalf("append on a failing disk: %v, want ErrStorage and EIO naming the partition and the file", err)
		}
	}
	lg.check(t, l)
	if l.RecoveryPoint() != lg.end {
		t.Fatalf("recovery point %d, want %d", l.RecoveryPoint(), lg.end)
	}
	remove()
	lg.appendOK(t, l, 4, now+4)
	lg.check(t, l)
}

// TestFaultAppendENOSPC: a disk filling up in the middle of a write (a
// prefix of the batch reaches the file) fails the append with ENOSPC and
// leaves no partial batch behind; when space is back appends work again,
// and a crash then keeps every acknowledged record.
func TestFaultAppendENOSPC(t *testing.T) {
	fsys := errorfs.New(nil)
	dir := t.TempDir()
	m, l := openFaultLog(t, dir, fsys, faultLogConfig())
	lg := newFaultLedger()
	now := time.Now().UnixMilli()
	for i := 0; i < 3; i++ {
		lg.appendOK(t, l, i, now+int64(i))
	}
	remove := fsys.Inject(errorfs.Fault{Ops: errorfs.OpWrite, Match: errorfs.Suffix(logSuffix), Err: syscall.ENOSPC, Partial: 50})
	for i := 0; i < 2; i++ {
		if _, err := l.AppendAsLeader(faultBatch(t, 100+i, now), 0); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v, want ErrStorage and ENOSPC", err)
		}
		act := l.active()
		st, err := os.Stat(act.path(logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != act.size.Load() {
			t.Fatalf("segment file holds %d bytes after a short write, the log %d: a partial batch was left", st.Size(), act.size.Load())
		}
	}
	lg.check(t, l)
	remove()
	for i := 3; i < 8; i++ { // rolls on the way
		lg.appendOK(t, l, i, now+int64(i))
	}
	lg.check(t, l)
	crashAndRestart(t, fsys, m)
	m, l = openFaultLog(t, dir, fsys, faultLogConfig())
	defer m.Close()
	lg.check(t, l)
	lg.appendOK(t, l, 8, now+8)
	lg.check(t, l)
}

// TestFaultRollENOSPC: a full disk refuses the files of a new segment; the
// append that needed the roll fails (ErrStorage), the log is unchanged, and
// once space is back the roll and the append go through.
func TestFaultRollENOSPC(t *testing.T) {
	for _, c := range []struct {
		name string
		f    errorfs.Fault
	}{
		{"log", errorfs.Fault{Ops: errorfs.OpOpen, Match: errorfs.Suffix(logSuffix), Err: syscall.ENOSPC}},
		{"index", errorfs.Fault{Ops: errorfs.OpTruncate, Match: errorfs.Suffix(indexSuffix), Err: syscall.ENOSPC}},
		{"txnindex", errorfs.Fault{Ops: errorfs.OpOpen, Match: errorfs.Suffix(txnIndexSuffix), Err: syscall.ENOSPC}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := errorfs.New(nil)
			dir := t.TempDir()
			m, l := openFaultLog(t, dir, fsys, faultLogConfig())
			defer func() { m.Close() }()
			lg := newFaultLedger()
			now := time.Now().UnixMilli()
			lg.appendOK(t, l, 0, now)
			for l.NumSegments() == 1 {
				lg.appendOK(t, l, int(lg.end/2), now)
			}
			segs := l.NumSegments()
			remove := fsys.Inject(c.f)
			failed := 0
			for i := 0; i < 8 && failed == 0; i++ { // up to the next roll
				if _, err := l.AppendAsLeader(faultBatch(t, 100+i, now), 0); err != nil {
					if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("append needing a roll on a full disk: %v, want ErrStorage and ENOSPC", err)
					}
					failed++
					continue
				}
				lg.values[lg.end] = fmt.Sprintf("b%03d-r0-%s", 100+i, strings.Repeat("x", 40))
				lg.values[lg.end+1] = fmt.Sprintf("b%03d-r1", 100+i)
				lg.end += 2
			}
			if failed == 0 || fsys.Fired() == 0 {
				t.Fatal("no append needed a roll")
			}
			lg.check(t, l)
			remove()
			lg.appendOK(t, l, 200, now)
			if l.NumSegments() <= segs {
				t.Fatalf("%d segments after the disk came back, want more than %d", l.NumSegments(), segs)
			}
			lg.check(t, l)
			m.Close()
			m, l = openFaultLog(t, dir, fsys, faultLogConfig())
			lg.check(t, l)
		})
	}
}

// TestFaultSyncEIO: when the fsync of an append fails, the producer gets the
// error (the append is not acknowledged) and the recovery point stays; a
// crash then loses that batch and nothing acknowledged. Without a crash, the
// next append's fsync covers both.
func TestFaultSyncEIO(t *testing.T) {
	for _, crash := range []bool{true, false} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			fsys := errorfs.New(nil)
			dir := t.TempDir()
			m, l := openFaultLog(t, dir, fsys, faultLogConfig())
			defer func() { m.Close() }()
			lg := newFaultLedger()
			now := time.Now().UnixMilli()
			for i := 0; i < 3; i++ {
				lg.appendOK(t, l, i, now+int64(i))
			}
			remove := fsys.Inject(errorfs.Fault{Ops: errorfs.OpSync, Match: errorfs.Suffix(logSuffix), Err: syscall.EIO, Times: 1})
			if _, err := l.AppendAsLeader(faultBatch(t, 3, now+3), 0); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("append whose fsync fails: %v, want ErrStorage and EIO", err)
			}
			remove()
			if l.RecoveryPoint() != lg.end {
				t.Fatalf("recovery point %d after a failed fsync, want %d", l.RecoveryPoint(), lg.end)
			}
			if !crash {
				// The batch whose fsync failed is in the log (as in Kafka,
				// whose producer retries): the next fsync makes it durable.
				lg.values[lg.end] = fmt.Sprintf("b%03d-r0-%s", 3, strings.Repeat("x", 40))
				lg.values[lg.end+1] = "b003-r1"
				lg.end += 2
				lg.appendOK(t, l, 4, now+4)
				if l.RecoveryPoint() != lg.end {
					t.Fatalf("recovery point %d, want %d", l.RecoveryPoint(), lg.end)
				}
			}
			crashAndRestart(t, fsys, m)
			m, l = openFaultLog(t, dir, fsys, faultLogConfig())
			lg.check(t, l)
		})
	}
}

// TestFaultReadEIO: a read error reaches the consumer's fetch as an error,
// not a panic; a file of a filesystem that is not the operating system's is
// sent with a read copy (no sendfile), byte for byte.
func TestFaultReadEIO(t *testing.T) {
	fsys := errorfs.New(nil)
	m, l := openFaultLog(t, t.TempDir(), fsys, faultLogConfig())
	defer m.Close()
	lg := newFaultLedger()
	now := time.Now().UnixMilli()
	for i := 0; i < 6; i++ {
		lg.appendOK(t, l, i, now+int64(i))
	}
	ri, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer ri.Release()
	if _, ok := vfs.OSFile(ri.Region.File); ok {
		t.Fatal("a file of errorfs passes for an *os.File")
	}
	// To a pipe (an *os.File, which sendfile would take): a plain copy.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(pr); got <- b }()
	n, err := ri.Region.WriteTo(pw)
	pw.Close()
	sent := <-got
	pr.Close()
	want := make([]byte, ri.Region.Len)
	if _, err := ri.Region.File.ReadAt(want, ri.Region.Pos); err != nil {
		t.Fatal(err)
	}
	if err != nil || n != ri.Region.Len || !bytes.Equal(sent, want) {
		t.Fatalf("WriteTo: %d bytes, %v; the reader got %d bytes", n, err, len(sent))
	}
	remove := fsys.Inject(errorfs.Fault{Ops: errorfs.OpRead, Match: errorfs.Suffix(logSuffix), Err: syscall.EIO})
	if _, err := ri.Region.WriteTo(io.Discard); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WriteTo on a failing disk: %v, want EIO", err)
	}
	remove()
	lg.check(t, l)
}

// TestFaultTornWrite: the power goes while a batch is written, and only a
// prefix of it reaches the disk (cut at the interesting places of the
// batch; TestCrashRecoveryTornTail cuts at every byte). The restart recovers to the last whole batch, every acknowledged
// record is there, and the log takes appends at the next offset.
func TestFaultTornWrite(t *testing.T) {
	now := time.Now().UnixMilli()
	size := len(faultBatch(t, 99, now))
	cuts := []int{1, record.OffBatchLength + 2, record.OffMagic, record.OffMagic + 1, record.BatchHeaderSize - 1,
		record.BatchHeaderSize, record.BatchHeaderSize + 1, size / 2, size - 1}
	for _, cut := range cuts {
		fsys := errorfs.New(nil)
		dir := t.TempDir()
		m, l := openFaultLog(t, dir, fsys, faultLogConfig())
		lg := newFaultLedger()
		for i := 0; i < 7; i++ { // several segments
			lg.appendOK(t, l, i, now+int64(i))
		}
		fsys.Inject(errorfs.Fault{Ops: errorfs.OpWrite, Match: errorfs.Suffix(logSuffix), Partial: cut, Torn: true, Times: 1})
		if _, err := l.AppendAsLeader(faultBatch(t, 99, now+99), 0); err == nil {
			t.Fatalf("cut %d: the torn append succeeded", cut)
		}
		if !fsys.Crashed() {
			t.Fatalf("cut %d: a torn write did not crash the filesystem", cut)
		}
		crashAndRestart(t, fsys, m)
		act := filepath.Join(dir, faultTP.String(), offsetFileName(l.active().base, logSuffix))
		if st, err := os.Stat(act); err != nil || st.Size() != l.active().size.Load()+int64(cut) {
			t.Fatalf("cut %d: the torn prefix is not on disk: %v %v", cut, st, err)
		}
		m, l = openFaultLog(t, dir, fsys, faultLogConfig())
		lg.check(t, l)
		lg.appendOK(t, l, 7, now+7)
		lg.check(t, l)
		m.Close()
		if t.Failed() {
			t.Fatalf("cut at byte %d of %d", cut, size)
		}
	}
}

// TestFaultCrashAfterRoll: appends roll several segments, a flush and a
// checkpoint make part of them durable, more appends roll on unsynced, and
// the power goes. The restart keeps every record flushed, the offset and
// time indexes agree with the log (every entry points at a batch that is
// there; offset and timestamp lookups find every batch), the indexes of the
// segments flushed before the crash survived it, and appends go on.
func TestFaultCrashAfterRoll(t *testing.T) {
	cfg := crashLogConfig() // flush.messages: Kafka's default, no fsync per append
	fsys := errorfs.New(nil)
	dir := t.TempDir()
	m, l := openFaultLog(t, dir, fsys, cfg)
	lg := newFaultLedger()
	now := time.Now().UnixMilli()
	for i := 0; i < 12; i++ {
		lg.appendOK(t, l, i, now+int64(10*i))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointNow(); err != nil {
		t.Fatal(err)
	}
	flushed := *lg
	flushedSegs := map[int64]int{} // base -> offset index entries of the segments wholly flushed
	segs := l.segments()
	for _, s := range segs[:len(segs)-1] {
		s.withIndexes(func(oi, _ *index) { flushedSegs[s.base] = oi.entries() })
	}
	for i := 12; i < 24; i++ { // several more rolls, not flushed
		lg.appendOK(t, l, i, now+int64(10*i))
	}
	if l.NumSegments() <= len(segs)+1 {
		t.Fatalf("fixture: want rolls after the flush, got %d segments then %d", len(segs), l.NumSegments())
	}
	crashAndRestart(t, fsys, m)

	m, l = openFaultLog(t, dir, fsys, cfg)
	defer m.Close()
	// The records that survived: every flushed one, and of the rest whole
	// batches up to where the first unsynced segment lost its data.
	recs := readAllRecords(t, l, 0)
	survived := int64(len(recs))
	if survived < flushed.end || survived > lg.end || survived%2 != 0 {
		t.Fatalf("%d records after the crash, want whole batches between %d (flushed) and %d", survived, flushed.end, lg.end)
	}
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != lg.values[r.Offset] {
			t.Fatalf("record %d: offset %d value %q, want %q", i, r.Offset, r.Value, lg.values[int64(i)])
		}
	}
	// A segment rolled after the lost data stays, empty, as in Kafka: the
	// log end is its base, and the offsets in between are a gap (never
	// acknowledged as durable) that reads skip.
	leo := l.LogEndOffset()
	if leo < survived || leo > lg.end {
		t.Fatalf("log end %d after the crash, want between %d and %d", leo, survived, lg.end)
	}
	checkIndexesAgree(t, l, survived)
	for _, s := range l.segments() {
		if n, ok := flushedSegs[s.base]; ok {
			var got int
			s.withIndexes(func(oi, _ *index) { got = oi.entries() })
			if got != n {
				t.Errorf("segment %d: %d offset index entries after the crash, %d before: the flushed index was lost", s.base, got, n)
			}
		}
	}
	for base, ts := range lg.ts {
		if base >= survived {
			continue
		}
		off, got, found, err := l.OffsetForTimestamp(ts)
		if err != nil || !found || off != base || got != ts {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d", ts, off, got, found, err, base)
		}
	}
	if ts, off := l.MaxTimestampAndOffset(); ts != lg.ts[survived-2] || off != survived-1 {
		t.Errorf("max timestamp %d at %d, want %d at %d", ts, off, lg.ts[survived-2], survived-1)
	}
	after := newFaultLedger()
	after.end = leo
	for i := 30; i < 36; i++ {
		b := faultBatch(t, i, now+int64(10*i))
		info, err := l.AppendAsLeader(b, 0)
		if err != nil || info.FirstOffset != after.end {
			t.Fatalf("append after the crash: %+v %v, want offset %d", info, err, after.end)
		}
		after.values[info.FirstOffset] = fmt.Sprintf("b%03d-r0-%s", i, strings.Repeat("x", 40))
		after.values[info.FirstOffset+1] = fmt.Sprintf("b%03d-r1", i)
		after.end = info.LastOffset + 1
	}
	// A consumer in the gap goes on at the first batch after it.
	ri, err := l.Read(survived, 1<<20, l.LogEndOffset(), true)
	if err != nil || ri.FirstOffset != leo {
		t.Fatalf("Read(%d) in the gap: first offset %d, %v; want %d", survived, ri.FirstOffset, err, leo)
	}
	ri.Release()
	got := readAllRecords(t, l, leo)
	if len(got) != int(after.end-leo) {
		t.Fatalf("read %d records appended after the crash, want %d", len(got), after.end-leo)
	}
	for _, r := range got {
		if string(r.Value) != after.values[r.Offset] {
			t.Fatalf("offset %d: %q, want %q", r.Offset, r.Value, after.values[r.Offset])
		}
	}
	checkIndexesAgree(t, l, survived)
}

// checkIndexesAgree asserts every offset index entry of every segment names
// the last offset of the batch at its position, every time index entry an
// offset of the segment, and that a read from every offset below upTo
// starts at the batch holding it.
func checkIndexesAgree(t testing.TB, l *Log, upTo int64) {
	t.Helper()
	for _, s := range l.segments() {
		f, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		size, next := s.size.Load(), s.next.Load()
		var hb [record.BatchHeaderSize]byte
		var h record.BatchHeader
		err = s.withIndexes(func(oi, ti *index) {
			for i := 0; i < oi.entries(); i++ {
				o, pos := oi.offsetEntry(i)
				if err := readHeader(f, pos, size, hb[:], &h); err != nil || h.LastOffset() != o {
					t.Errorf("segment %d: offset index entry (%d, %d) does not name the batch there (%v, last offset %d)", s.base, o, pos, err, h.LastOffset())
				}
			}
			for i := 0; i < ti.entries(); i++ {
				ts, o := ti.timeEntry(i)
				if o < s.base || o >= next || ts > s.maxTS.Load() {
					t.Errorf("segment %d (offsets below %d, max timestamp %d): time index entry (%d, %d) out of it", s.base, next, s.maxTS.Load(), ts, o)
				}
			}
		})
		s.release()
		if err != nil {
			t.Fatal(err)
		}
	}
	for o := l.LogStartOffset(); o < upTo; o++ {
		ri, err := l.Read(o, 1, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("Read(%d): %v", o, err)
		}
		if ri.FirstOffset > o || ri.NextOffset <= o {
			t.Errorf("Read(%d) returned the batch %d-%d", o, ri.FirstOffset, ri.NextOffset-1)
		}
		ri.Release()
	}
}

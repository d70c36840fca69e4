package storage

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// TestGroupCommit: with flush.messages=1, appends from many goroutines to
// one log each return only once their batch is on disk (the recovery point
// passed it), and appends that arrive while an fsync runs share the next
// one: fewer fsync rounds than appends.
func TestGroupCommit(t *testing.T) {
	syncHook = func() { time.Sleep(2 * time.Millisecond) } // a disk that takes its time
	t.Cleanup(func() { syncHook = nil })
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l, err := m.GetOrCreateLog(TopicPartition{"gc", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 20
	now := time.Now().UnixMilli()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := recordtest.Batch(t, 3, 20, now, record.CompressionNone)
			for range each {
				info, err := l.AppendAsLeader(bytes.Clone(b), 0)
				if err != nil {
					errs <- err
					return
				}
				if rp := l.RecoveryPoint(); rp <= info.LastOffset {
					errs <- errors.New("append returned before its batch was on disk")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if leo := l.LogEndOffset(); leo != writers*each*3 || l.RecoveryPoint() != leo {
		t.Fatalf("log end %d, recovery point %d, want both %d", leo, l.RecoveryPoint(), writers*each*3)
	}
	rounds := l.syncRounds.Load()
	if rounds >= writers*each {
		t.Fatalf("%d fsync rounds for %d concurrent appends: none shared", rounds, writers*each)
	}
	t.Logf("%d appends, %d fsync rounds", writers*each, rounds)
}

// TestFsyncHoldsNoLock: while an fsync runs, reads are served and another
// append writes its batch (it then waits for the next round); nothing waits
// on a lock held across the fsync.
func TestFsyncHoldsNoLock(t *testing.T) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	syncHook = func() {
		entered <- struct{}{}
		<-release
	}
	t.Cleanup(func() { syncHook = nil })
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l, err := m.GetOrCreateLog(TopicPartition{"nolock", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	done := make(chan error, 2)
	go func() {
		_, err := l.AppendAsLeader(recordtest.Batch(t, 2, 10, now, record.CompressionNone), 0)
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first append's fsync never started")
	}
	// The first batch is written: readable while its fsync is held.
	l.SetHighWatermark(l.LogEndOffset())
	ri, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || ri.Region.Len == 0 {
		t.Fatalf("read during fsync: %v, %d bytes", err, ri.Region.Len)
	}
	ri.Release()
	// A second append writes while the first fsync is held.
	go func() {
		_, err := l.AppendAsLeader(recordtest.Batch(t, 2, 10, now, record.CompressionNone), 0)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for l.LogEndOffset() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("second append did not write during the first fsync (log end %d)", l.LogEndOffset())
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("an append returned (%v) while its fsync was held", err)
	default:
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if l.RecoveryPoint() != 4 {
		t.Fatalf("recovery point %d after both appends, want 4", l.RecoveryPoint())
	}
}

// TestReadInfoAppendTo: a region copied with AppendTo (from the segment's
// mapping, or with pread where there is none) holds the same bytes as the
// file; after a truncation that removed them it is an error and dst is
// unchanged.
func TestReadInfoAppendTo(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 64 << 10
	l, err := m.GetOrCreateLog(TopicPartition{"copy", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for range 40 { // ~4 KiB batches: several segments
		mustAppend(t, l, recordtest.Batch(t, 10, 400, now, record.CompressionNone))
	}
	l.SetHighWatermark(l.LogEndOffset())
	checkN := func(name string, offset int64, maxBytes int32) {
		t.Helper()
		ri, err := l.Read(offset, maxBytes, l.HighWatermark(), true)
		if err != nil || ri.Region.Len == 0 {
			t.Fatalf("%s: read: %v, %d bytes", name, err, ri.Region.Len)
		}
		defer ri.Release()
		want := make([]byte, ri.Region.Len)
		if _, err := ri.Region.File.ReadAt(want, ri.Region.Pos); err != nil {
			t.Fatal(err)
		}
		got, err := ri.AppendTo([]byte("prefix"))
		if err != nil || string(got[:6]) != "prefix" || !bytes.Equal(got[6:], want) {
			t.Fatalf("%s: AppendTo: %v, %d bytes, equal %v", name, err, len(got)-6, bytes.Equal(got[6:], want))
		}
	}
	// One batch (~4 KiB) is copied from the mapping, 20 KiB of batches
	// (more than mapCopyMax) read with pread.
	check := func(name string, offset int64) {
		t.Helper()
		checkN(name+", one batch", offset, 4<<10)
		checkN(name+", up to 20 KiB", offset, 20<<10)
	}
	check("active segment", l.LogEndOffset()-10)
	check("old segment", 0)
	if ri, err := l.Read(0, 20<<10, l.HighWatermark(), true); err != nil || ri.Region.Len <= mapCopyMax {
		t.Fatalf("a read of 20 KiB from offset 0: %v, %d bytes, want more than %d", err, ri.Region.Len, mapCopyMax)
	} else {
		ri.Release()
	}
	m.CloseIdleNow()
	// A region the log no longer holds (a follower truncated it away).
	last := l.LogEndOffset() - 10
	ri, err := l.Read(last, 20<<10, l.HighWatermark(), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(last); err != nil {
		t.Fatal(err)
	}
	got, err := ri.AppendTo([]byte("x"))
	ri.Release()
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != "x" {
		t.Fatalf("AppendTo of a truncated region: %v, %q", err, got)
	}
	l.SetHighWatermark(l.LogEndOffset())
	l.closeIdle(0, true)
	check("segments whose files and mappings were closed", 10)

	// A region of a segment deleted after the read: no mapping any more,
	// the held file is read with pread.
	old, err := l.Read(0, 8<<10, l.HighWatermark(), true)
	if err != nil || old.Region.Len == 0 {
		t.Fatalf("read: %v", err)
	}
	want := make([]byte, old.Region.Len)
	if _, err := old.Region.File.ReadAt(want, old.Region.Pos); err != nil {
		t.Fatal(err)
	}
	segs := l.NumSegments()
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset() - 10); err != nil || l.NumSegments() >= segs {
		t.Fatalf("deleting records: %v, %d segments left of %d", err, l.NumSegments(), segs)
	}
	if got, err := old.AppendTo(nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("AppendTo of a deleted segment's region: %v, equal %v", err, bytes.Equal(got, want))
	}
	old.Release()
}

// mappedKiB returns the resident KiB of this process's mappings of path
// (from /proc/self/smaps), -1 when it is not mapped.
func mappedKiB(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	total, found, in := 0, false, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && len(f) >= 5 { // a mapping's header line
			in = len(f) >= 6 && f[5] == path
			found = found || in
			continue
		}
		if in && f[0] == "Rss:" && len(f) >= 2 {
			n, _ := strconv.Atoi(f[1])
			total += n
		}
	}
	if !found {
		return -1
	}
	return total
}

// TestLogMappingStaysSmall: reads through a segment's mapping (batch
// headers) fault in page cache around each header, which would count in
// the broker's RSS until the segment closed; the mapping is trimmed every
// mapTrimEvery reads and once its readers are gone.
func TestLogMappingStaysSmall(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	l, err := m.GetOrCreateLog(TopicPartition{"rss", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch := recordtest.Batch(t, 4, 1000, time.Now().UnixMilli(), record.CompressionNone) // ~4 KiB
	const batches = 16384                                                                 // ~64 MiB
	for range batches {
		mustAppend(t, l, bytes.Clone(batch))
	}
	l.SetHighWatermark(l.LogEndOffset())
	path := l.active().path(logSuffix)
	// One small read every 16 batches (~64 KiB), as a consumer catching up
	// with small fetches: without trimming, fault-around would leave most
	// of the 64 MiB mapped.
	for off := int64(0); off < l.LogEndOffset(); off += 4 * 16 {
		ri, err := l.Read(off, 4<<10, l.HighWatermark(), true)
		if err != nil {
			t.Fatal(err)
		}
		ri.Release()
	}
	rss := mappedKiB(t, path)
	if rss < 0 {
		t.Fatalf("%s is not mapped", path)
	}
	if rss > 24<<10 {
		t.Fatalf("%d KiB of the 64 MiB log mapped after reading through it: not trimmed", rss)
	}
	t.Logf("%d KiB mapped after reading through 64 MiB", rss)
	time.Sleep(1100 * time.Millisecond)
	m.CloseIdleNow()
	if rss := mappedKiB(t, path); rss > 256 {
		t.Fatalf("%d KiB still mapped after the idle sweep", rss)
	}
}

package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluice-io/sluice/storage/vfs"
)

// Index entry sizes, as in Kafka's OffsetIndex and TimeIndex.
const (
	offsetIndexEntry = 8  // int32 relative offset, int32 position
	timeIndexEntry   = 12 // int64 timestamp, int32 relative offset
)

// index is a memory-mapped, sparse, append-only index file: the offset index
// (.index) or the time index (.timeindex). The active segment's index is
// preallocated to segment.index.bytes and mapped read-write; when the
// segment rolls or closes it is trimmed to its entries. An index may be
// unmapped (idle segments of idle partitions) and is mapped again on use.
//
// Concurrency: the writer (holding Log.mu) appends entries past n and then
// publishes n atomically, so readers see only complete entries. Mapping and
// unmapping happen under the owning segment's mu held for writing; readers
// hold it for reading while they look at data.
type index struct {
	fs        vfs.FS
	path      string
	base      int64
	entrySize int
	data      []byte // the mapping; nil when unmapped or empty
	mapped    bool
	writable  bool
	n         atomic.Int32 // valid entries
	// unsynced: the index was written since its last msync or fsync (an
	// entry stored into the mapping, a trim, an index rebuilt by
	// recovery); sync msyncs or fsyncs it, and does nothing otherwise, so
	// flushing a log that was not written costs no system call.
	unsynced atomic.Bool
	// extended: the file was extended to segment.index.bytes for appends
	// (makeWritable) and not yet trimmed back to its entries.
	extended bool
	// building: recovery is rebuilding the index in memory (buildIndex):
	// data is a heap buffer of the entries, limit the most bytes it may
	// hold, and nothing is on disk until writeBuilt.
	building bool
	limit    int
}

// createIndex creates (or truncates) an index file preallocated to maxBytes
// and maps it read-write.
func createIndex(fsys vfs.FS, path string, base int64, entrySize, maxBytes int) (*index, error) {
	ix := &index{fs: fsys, path: path, base: base, entrySize: entrySize}
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	if err := ix.makeWritable(maxBytes); err != nil {
		return nil, err
	}
	return ix, nil
}

// buildIndex starts an index that recovery rebuilds in memory: entries go
// into a heap buffer (about sizeHint bytes; grown as needed up to maxBytes,
// segment.index.bytes) and writeBuilt writes them with one write. Writing
// them instead through a fresh mapping of a preallocated file costs a page
// fault per page on the first store, which allocates the page's block:
// most of the CPU of a recovery.
func buildIndex(fsys vfs.FS, path string, base int64, entrySize, maxBytes, sizeHint int) *index {
	limit := maxBytes / entrySize * entrySize
	return &index{fs: fsys, path: path, base: base, entrySize: entrySize, building: true, limit: limit,
		data: make([]byte, 0, min(max(sizeHint, entrySize), limit))}
}

// writeBuilt writes a rebuilt index to its file with one write, and
// leaves the index unmapped, as a loaded one: it is mapped when first
// used. The file is not fsynced: sync does it (the flush that moves the
// recovery point past the segment), and an index lost before that is
// checked and rebuilt at the next load.
//
// With inPlace the old file is overwritten and then cut to the new length
// instead of opened with O_TRUNC: on ext4 a file truncated to zero and
// written again starts its writeback at close (auto_da_alloc), a cost per
// index. A crash may then leave a mix of old and new entries on disk, so
// inPlace is only for a segment at or after the recovery point, whose
// index the next load rebuilds whatever it holds. An index rebuilt because
// its check failed (below the recovery point, loaded and trusted next
// time) is truncated first: a crash leaves it new, cut short, or empty,
// never the old entries.
func (ix *index) writeBuilt(inPlace bool) error {
	flag := os.O_CREATE | os.O_RDWR
	if !inPlace {
		flag |= os.O_TRUNC
	}
	f, err := ix.fs.OpenFile(ix.path, flag, 0o644)
	if err != nil {
		return err
	}
	data := ix.data[:ix.entries()*ix.entrySize]
	if len(data) > 0 {
		if _, err = f.WriteAt(data, 0); err != nil {
			err = fmt.Errorf("write %s: %w", ix.path, err)
		}
	}
	if err == nil && inPlace {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	ix.data, ix.building, ix.mapped, ix.writable = nil, false, false, false
	ix.unsynced.Store(true)
	return nil
}

// room reports whether entry n fits the index, growing the buffer of an
// index being rebuilt.
func (ix *index) room(n int) bool {
	if (n+1)*ix.entrySize <= len(ix.data) {
		return true
	}
	return ix.grow(n)
}

func (ix *index) grow(n int) bool {
	need := (n + 1) * ix.entrySize
	if !ix.building || need > ix.limit {
		return false
	}
	if need > cap(ix.data) {
		grown := make([]byte, len(ix.data), min(max(2*cap(ix.data), need), ix.limit))
		copy(grown, ix.data)
		ix.data = grown
	}
	ix.data = ix.data[:need]
	return true
}

// openIndex opens an existing index file read-only and counts its entries:
// the used prefix of the file (a crash may leave a preallocated tail of
// zeros, which holds no entry since every real entry has a non-zero
// position or relative offset).
func openIndex(fsys vfs.FS, path string, base int64, entrySize int) (*index, error) {
	ix := &index{fs: fsys, path: path, base: base, entrySize: entrySize}
	if err := ix.mapFile(false, -1); err != nil {
		return nil, err
	}
	total := len(ix.data) / entrySize
	used := sort.Search(total, func(i int) bool { return ix.zero(i) })
	ix.n.Store(int32(used))
	return ix, nil
}

// readIndex reads an index file into memory, not mapped, to check it and
// count its entries at load: a read costs less than a mapping made and
// unmapped at once (munmap flushes every core's TLB). The caller drops
// the data (forget) when done; the index is mapped when first used.
func readIndex(fsys vfs.FS, path string, base int64, entrySize int) (*index, error) {
	ix := &index{fs: fsys, path: path, base: base, entrySize: entrySize}
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	ix.data = data[:len(data)/entrySize*entrySize]
	total := len(ix.data) / entrySize
	used := sort.Search(total, func(i int) bool { return ix.zero(i) })
	ix.n.Store(int32(used))
	return ix, nil
}

// forget drops the data readIndex read.
func (ix *index) forget() {
	if !ix.mapped {
		ix.data = nil
	}
}

// zero reports whether entry i is all zero bytes.
func (ix *index) zero(i int) bool {
	for _, b := range ix.data[i*ix.entrySize : (i+1)*ix.entrySize] {
		if b != 0 {
			return false
		}
	}
	return true
}

// mapFile maps the file. size < 0 keeps the file's size; otherwise the file
// is first truncated or extended to size.
func (ix *index) mapFile(writable bool, size int) error {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	f, err := ix.fs.OpenFile(ix.path, flag, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if size >= 0 {
		if err := f.Truncate(int64(size)); err != nil {
			return err
		}
	} else {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		size = int(st.Size())
	}
	size = size / ix.entrySize * ix.entrySize
	ix.data, ix.mapped, ix.writable = nil, true, writable
	if writable {
		ix.extended = true
	}
	if size == 0 {
		return nil
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		ix.mapped = false
		return fmt.Errorf("mmap %s: %w", ix.path, err)
	}
	// An index is read at random (binary searches) and written an entry at
	// a time: without this, a fault on the preallocated (sparse) tail of an
	// active index made the kernel read ahead — zero-fill — up to a few
	// hundred KiB of the file per fault. With 1,000 partitions taking
	// produce at once (2,000 active indexes), those zero-fills were nearly
	// all of the broker's CPU and a few percent of the one-partition
	// throughput was left; see BENCHMARKS.md. A failed advice changes
	// nothing else.
	unix.Madvise(data, unix.MADV_RANDOM)
	ix.data = data
	return nil
}

// ensureMapped maps an unmapped index read-only (or read-write for the
// active segment). Segment mu must be held for writing.
func (ix *index) ensureMapped(writable bool, maxBytes int) error {
	if ix.mapped && (!writable || ix.writable) {
		return nil
	}
	if writable {
		return ix.makeWritable(maxBytes)
	}
	return ix.mapFile(false, -1)
}

// makeWritable extends the file to maxBytes and maps it read-write.
func (ix *index) makeWritable(maxBytes int) error {
	maxBytes = max(maxBytes/ix.entrySize*ix.entrySize, int(ix.n.Load())*ix.entrySize)
	if ix.mapped && ix.writable && len(ix.data) == maxBytes {
		return nil // already so (a segment recovery just rebuilt it)
	}
	if err := ix.unmap(); err != nil {
		return err
	}
	return ix.mapFile(true, maxBytes)
}

func (ix *index) unmap() error {
	var err error
	if ix.data != nil {
		err = unix.Munmap(ix.data)
	}
	ix.data, ix.mapped, ix.writable = nil, false, false
	return err
}

// trim unmaps the index and cuts the file to its entries (on roll, close and
// when a segment goes idle) when it was extended for appends; an index
// never mapped for appends since it was loaded is left alone.
func (ix *index) trim() error {
	extended := ix.writable || ix.extended
	if err := ix.unmap(); err != nil {
		return err
	}
	if !extended {
		return nil
	}
	ix.extended = false
	ix.unsynced.Store(true)
	return ix.fs.Truncate(ix.path, int64(ix.n.Load())*int64(ix.entrySize))
}

// sync writes dirty pages of a writable mapping to disk, or fsyncs the file
// of an index trimmed since its last sync (a rolled segment's indexes are
// flushed with its log, as Kafka's LogSegment.flush does: without it a
// crash may leave a flushed segment with an empty index).
//
// An index not written since its last sync is skipped: an msync of a clean
// mapping, like an fsync of a clean file, still costs a disk cache flush
// on ext4, and a broker stopping with thousands of idle logs paid two per
// log. The flag is cleared before the sync and set by a writer after its
// store, so a store racing with a sync is synced by the next one.
func (ix *index) sync() error {
	if !syncEnabled.Load() || !ix.unsynced.Swap(false) {
		return nil
	}
	if err := ix.syncNow(); err != nil {
		ix.unsynced.Store(true)
		return err
	}
	return nil
}

func (ix *index) syncNow() error {
	if ix.writable && ix.data != nil {
		return ix.fs.SyncMapping(ix.path, ix.data)
	}
	f, err := ix.fs.OpenFile(ix.path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed meanwhile
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", ix.path, err)
	}
	return nil
}

// noteWrite records a store into the mapping (not into the buffer of an
// index being rebuilt, which writeBuilt marks).
func (ix *index) noteWrite() {
	if !ix.building {
		ix.unsynced.Store(true)
	}
}

func (ix *index) entries() int { return int(ix.n.Load()) }

func (ix *index) full() bool {
	if ix.building {
		return (int(ix.n.Load())+1)*ix.entrySize > ix.limit
	}
	return ix.writable && (int(ix.n.Load())+1)*ix.entrySize > len(ix.data)
}

// truncateEntries keeps the first n entries, zeroing the rest of a writable
// mapping so a crash cannot resurrect them.
func (ix *index) truncateEntries(n int) {
	if n >= ix.entries() {
		return
	}
	if ix.writable {
		clear(ix.data[n*ix.entrySize : ix.entries()*ix.entrySize])
		ix.noteWrite()
	}
	ix.n.Store(int32(n))
}

// ---- offset index ----

func (ix *index) offsetEntry(i int) (offset int64, pos int64) {
	e := ix.data[i*offsetIndexEntry:]
	return ix.base + int64(binary.BigEndian.Uint32(e)), int64(binary.BigEndian.Uint32(e[4:]))
}

// appendOffset adds (offset, pos) if offset is past the last entry.
func (ix *index) appendOffset(offset, pos int64) {
	n := ix.entries()
	if !ix.room(n) {
		return
	}
	if n > 0 {
		if last, _ := ix.offsetEntry(n - 1); offset <= last {
			return
		}
	}
	e := ix.data[n*offsetIndexEntry:]
	binary.BigEndian.PutUint32(e, uint32(offset-ix.base))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	ix.n.Store(int32(n + 1))
	ix.noteWrite()
}

// lookupOffset returns the position of the last indexed batch whose
// offset is <= target and whose position is below limit, or (base, 0).
// A batch indexed at (o, p) starts at p and ends with offset o, so every
// batch holding an offset >= target starts at or after p.
func (ix *index) lookupOffset(target, limit int64) (int64, int64) {
	n := ix.entries()
	i := sort.Search(n, func(i int) bool {
		o, p := ix.offsetEntry(i)
		return o > target || p >= limit
	}) - 1
	if i < 0 {
		return ix.base, 0
	}
	return ix.offsetEntry(i)
}

// lookupEnd returns the largest indexed position p with p <= limitPos whose
// batch's last offset o satisfies o <= maxOffset: every batch before p then
// ends by p and has offsets < o <= maxOffset. 0 when there is none.
func (ix *index) lookupEnd(limitPos, maxOffset int64) int64 {
	n := ix.entries()
	i := sort.Search(n, func(i int) bool {
		o, p := ix.offsetEntry(i)
		return p > limitPos || o > maxOffset
	}) - 1
	if i < 0 {
		return 0
	}
	_, p := ix.offsetEntry(i)
	return p
}

// ---- time index ----

func (ix *index) timeEntry(i int) (ts int64, offset int64) {
	e := ix.data[i*timeIndexEntry:]
	return int64(binary.BigEndian.Uint64(e)), ix.base + int64(binary.BigEndian.Uint32(e[8:]))
}

// lastTimeEntry returns the newest entry or (-1, base).
func (ix *index) lastTimeEntry() (int64, int64) {
	if n := ix.entries(); n > 0 && ix.data != nil {
		return ix.timeEntry(n - 1)
	}
	return -1, ix.base
}

// appendTime adds (ts, offset) when ts is newer than the last entry.
// force ignores the full check's reserve (the final entry at roll).
func (ix *index) appendTime(ts, offset int64) {
	n := ix.entries()
	if !ix.room(n) {
		return
	}
	if n > 0 {
		if lts, lo := ix.timeEntry(n - 1); ts <= lts || offset < lo {
			return
		}
	} else if ts < 0 {
		return
	}
	e := ix.data[n*timeIndexEntry:]
	binary.BigEndian.PutUint64(e, uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-ix.base))
	ix.n.Store(int32(n + 1))
	ix.noteWrite()
}

// lookupTime returns the offset of the last entry with timestamp < ts: every
// record with a timestamp >= ts is at or after the batch holding that offset.
// (base when none).
func (ix *index) lookupTime(ts int64) int64 {
	n := ix.entries()
	i := sort.Search(n, func(i int) bool {
		t, _ := ix.timeEntry(i)
		return t >= ts
	}) - 1
	if i < 0 {
		return ix.base
	}
	_, o := ix.timeEntry(i)
	return o
}

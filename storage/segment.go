package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".snapshot"
	cleanedSuffix   = ".cleaned"
	swapSuffix      = ".swap"
	deletedSuffix   = ".deleted"
	corruptSuffix   = ".corrupt"
)

// offsetFileName is Kafka's file name prefix: the offset zero-padded to 20 digits.
func offsetFileName(offset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", offset, suffix)
}

// parseOffsetFileName reads "<20 digits><suffix>".
func parseOffsetFileName(name, suffix string) (int64, bool) {
	if len(name) != 20+len(suffix) || name[20:] != suffix {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

var errSegmentGone = errors.New("segment deleted")

// segment is one <base>.log with its indexes.
//
// Fields marked "writer" are touched only by the goroutine holding Log.mu.
// mu guards file, refs, deleted and the index mappings; size, next and the
// max timestamp are atomics so readers see a consistent committed end
// without taking any lock.
type segment struct {
	fs   vfs.FS
	dir  string
	base int64
	ext  string // appended to every file name: "" or ".cleaned" while the cleaner writes

	mu      sync.RWMutex
	file    vfs.File // nil while closed (idle)
	refs    int      // readers holding file (FileRegions, scans)
	deleted bool
	active  bool // the log's last segment: indexes mapped read-write
	maxIdx  int  // segment.index.bytes for the active segment's indexes
	oi, ti  *index
	txn     *txnIndex // aborted transactions whose marker is in the segment
	// logMap is a read-only mapping of the .log, for reading batch headers
	// on the fetch path without a pread per header (a syscall costs ~1-2 µs
	// here; a header from the page cache through the mapping ~50 ns). The
	// active segment maps mapLen (segment.bytes) ahead of its size; only
	// bytes below the committed size are ever touched, so the pages past
	// the end of the file are never faulted. Every truncation of the .log
	// unmaps it first, under mu held for writing, while readers touch it
	// only under mu held for reading: no reader can fault on a page that a
	// truncation removed (which would be SIGBUS).
	logMap       []byte
	mapLen       int64
	mapReads     atomic.Int64 // reads through logMap (noteMapRead)
	mapTrimmed   atomic.Int64 // mapReads at the last trim
	mapLo, mapHi atomic.Int64 // span of the positions read since the last trim, plus one; 0: none

	// logDirty: the .log was written or truncated since its last fsync
	// (set after the write, cleared before the fsync). flush skips a clean
	// file: an fsync of a file with nothing to write still flushes the
	// disk's cache on ext4.
	logDirty atomic.Bool
	// syncMu is held by flush: a flush that finds nothing dirty returns
	// only once a flush running meanwhile (which cleared the flags) has
	// synced.
	syncMu sync.Mutex

	// lazy: the segment lies below the recovery point and its indexes
	// have not been read since the load (Kafka's lazy indexes): next is
	// the base of the segment after it (an upper bound: compaction may
	// leave a gap), the max timestamp is not known, and the index entries
	// are not counted. The first use of the indexes or of the max
	// timestamp reads and checks them (loadLocked), rebuilding from the
	// log an index that fails its check. interval and logger serve that
	// load.
	lazy     atomic.Bool
	interval int64
	logger   *slog.Logger

	size          atomic.Int64 // committed bytes of .log
	next          atomic.Int64 // offset after the last batch (base when empty)
	maxTS         atomic.Int64 // largest batch max timestamp, -1 when none
	offsetOfMaxTS atomic.Int64
	lastUse       atomic.Int64 // unix nanoseconds of the last read or write

	rollTS          int64 // writer: ms the segment's age counts from (segment.ms)
	bytesSinceIndex int64 // writer

	// recent are the last batches appended (at most recentBatches),
	// oldest first, with mu held for writing; readers use them under mu
	// held for reading. A read at the tail — a follower's fetch, a
	// consumer that keeps up — finds its batches here instead of reading
	// their headers through logMap: the pages just written are not mapped
	// in this process yet, so each header read there faulted one in, and
	// the leader's reads for its followers were about a third of the page
	// faults of a replicated broker (the faults are dear on a virtual
	// machine). Truncation drops what it cuts.
	recent []recentBatch
}

// recentBatches is how many appended batches a segment remembers (a
// follower's fetch at the log end reads the last few).
const recentBatches = 16

// recentBatch is what a read needs of an appended batch's header.
type recentBatch struct {
	pos       int64
	base      int64
	size      int32 // the whole batch: BatchLength + BatchLengthOverhead
	lastDelta int32
}

// header sets the fields of h a read uses (offsets and size); the others
// are zero.
func (b *recentBatch) header(h *record.BatchHeader) {
	*h = record.BatchHeader{BaseOffset: b.base, BatchLength: b.size - record.BatchLengthOverhead,
		LastOffsetDelta: b.lastDelta, Magic: 2}
}

// noteRecentLocked remembers an appended batch. mu is held for writing.
func (s *segment) noteRecentLocked(b recentBatch) {
	if s.recent == nil {
		s.recent = make([]recentBatch, 0, recentBatches)
	}
	if len(s.recent) == recentBatches {
		copy(s.recent, s.recent[1:])
		s.recent = s.recent[:recentBatches-1]
	}
	s.recent = append(s.recent, b)
}

// trimRecentLocked forgets the batches at or past cut (a truncation). mu is
// held for writing.
func (s *segment) trimRecentLocked(cut int64) {
	for len(s.recent) > 0 && s.recent[len(s.recent)-1].pos+int64(s.recent[len(s.recent)-1].size) > cut {
		s.recent = s.recent[:len(s.recent)-1]
	}
}

// recentFirst finds, among the recent batches committed below size, the
// first whose last offset is >= target, when the recent batches start at or
// before target (no earlier batch can then end at or after it).
func recentFirst(recent []recentBatch, target, size int64, h *record.BatchHeader) (int64, bool) {
	if len(recent) == 0 || recent[0].base > target {
		return 0, false
	}
	for i := range recent {
		b := &recent[i]
		if b.pos+int64(b.size) > size {
			return 0, false
		}
		if b.base+int64(b.lastDelta) >= target {
			b.header(h)
			return b.pos, true
		}
	}
	return 0, false
}

// recentAt sets h to the recent batch at pos, committed below size.
func recentAt(recent []recentBatch, pos, size int64, h *record.BatchHeader) bool {
	if len(recent) == 0 || pos < recent[0].pos {
		return false
	}
	for i := len(recent) - 1; i >= 0; i-- {
		b := &recent[i]
		if b.pos == pos {
			if b.pos+int64(b.size) > size {
				return false
			}
			b.header(h)
			return true
		}
		if b.pos < pos {
			return false
		}
	}
	return false
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, offsetFileName(s.base, suffix)+s.ext)
}

// createSegment creates an empty active segment.
func createSegment(fsys vfs.FS, dir string, base int64, cfg *LogConfig, nowMs int64) (*segment, error) {
	return createSegmentExt(fsys, dir, base, "", cfg, nowMs)
}

func createSegmentExt(fsys vfs.FS, dir string, base int64, ext string, cfg *LogConfig, nowMs int64) (*segment, error) {
	s := &segment{fs: fsys, dir: dir, base: base, ext: ext, active: true}
	s.next.Store(base)
	s.maxTS.Store(-1)
	s.offsetOfMaxTS.Store(base)
	s.rollTS = nowMs
	f, err := fsys.OpenFile(s.path(logSuffix), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.file = f
	s.mapLen = cfg.SegmentBytes
	s.maxIdx = max(int(cfg.SegmentIndexBytes), minSegmentIndexBytes)
	if s.oi, err = createIndex(fsys, s.path(indexSuffix), base, offsetIndexEntry, s.maxIdx); err != nil {
		f.Close()
		return nil, err
	}
	if s.ti, err = createIndex(fsys, s.path(timeIndexSuffix), base, timeIndexEntry, s.maxIdx); err != nil {
		f.Close()
		s.oi.unmap()
		return nil, err
	}
	s.txn = newTxnIndex(fsys, s.path(txnIndexSuffix), base)
	if err := s.txn.create(); err != nil {
		f.Close()
		s.oi.unmap()
		s.ti.unmap()
		return nil, err
	}
	s.touch()
	return s, nil
}

// segmentFileSuffixes are the files of a segment, the log last: removed,
// renamed and swapped together.
var segmentFileSuffixes = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}

func (s *segment) touch() { s.lastUse.Store(time.Now().UnixNano()) }

// openFileLocked opens the .log file if it is closed. mu must be held for writing.
func (s *segment) openFileLocked() error {
	if s.deleted {
		return errSegmentGone
	}
	if s.file != nil {
		return nil
	}
	f, err := s.fs.OpenFile(s.path(logSuffix), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open segment: %w", err)
	}
	s.file = f
	return nil
}

// acquire opens the file if needed and takes a reference the caller must
// release. The file is never closed while a reference is held.
func (s *segment) acquire() (vfs.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openFileLocked(); err != nil {
		return nil, err
	}
	s.refs++
	s.touch()
	return s.file, nil
}

func (s *segment) release() {
	s.mu.Lock()
	s.refs--
	if s.refs == 0 && s.deleted && s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.mu.Unlock()
}

// withIndexes runs fn with both indexes mapped, under mu held for reading.
func (s *segment) withIndexes(fn func(oi, ti *index)) error {
	return s.withMaps(func(oi, ti *index, _ []byte) { fn(oi, ti) })
}

// withMaps runs fn with the indexes and the log mapped (data may be nil
// or shorter than the file: callers fall back to pread), under mu held for
// reading. fn must not take mu.
func (s *segment) withMaps(fn func(oi, ti *index, data []byte)) error {
	for {
		s.mu.RLock()
		if s.deleted {
			s.mu.RUnlock()
			return errSegmentGone
		}
		if s.oi.mapped && s.ti.mapped && (s.logMap != nil || s.size.Load() == 0 || s.file == nil) {
			fn(s.oi, s.ti, s.logMap)
			s.mu.RUnlock()
			return nil
		}
		s.mu.RUnlock()
		s.mu.Lock()
		err := s.mapIndexesLocked()
		if err == nil && s.file != nil && s.logMap == nil && s.size.Load() > 0 {
			err = s.mapLogLocked()
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (s *segment) mapIndexesLocked() error {
	if s.deleted {
		return errSegmentGone
	}
	if err := s.loadLocked(); err != nil {
		return err
	}
	if err := s.oi.ensureMapped(s.active, s.maxIdx); err != nil {
		return err
	}
	return s.ti.ensureMapped(s.active, s.maxIdx)
}

// When the log mapping is trimmed (see noteMapRead): after mapTrimMinReads
// reads once they span mapTrimSpan bytes of the file, and after
// mapTrimMaxReads reads in any case.
const (
	mapTrimMinReads = 64
	mapTrimMaxReads = 4096
	mapTrimSpan     = 16 << 20
)

// noteMapRead records a read through the log mapping at pos, and bounds the
// resident size of the mapping. Every read through it (a batch header, a
// small region copied) faults in a page and, by the kernel's fault-around,
// up to 64 KiB of page cache around it, which then count in the broker's
// RSS until the mapping goes: a consumer reading 10 GB from the start left
// ~640 MB of the log mapped (about 90 KB per 1 MB batch read). So the whole
// mapping is dropped with MADV_DONTNEED (the page cache keeps the pages; for
// this read-only shared mapping nothing is lost) once the reads since the
// last trim spread over mapTrimSpan bytes (a consumer catching up: at most
// ~16 MiB stays mapped per segment), or after mapTrimMaxReads reads (a
// consumer at the tail touches little, and gets one madvise per 4,096
// reads, not one per 64). The manager's idle sweep drops what a finished
// reader left in segments no longer read (trimIdleMapping). Readers
// touching a dropped page fault it in again.
func (s *segment) noteMapRead(pos int64) {
	n := s.mapReads.Add(1)
	// The span is approximate (racing readers may lose an update): it only
	// decides when to trim.
	if lo := s.mapLo.Load(); lo == 0 || pos+1 < lo {
		s.mapLo.Store(pos + 1)
	}
	if pos+1 > s.mapHi.Load() {
		s.mapHi.Store(pos + 1)
	}
	since := n - s.mapTrimmed.Load()
	if since < mapTrimMinReads || since < mapTrimMaxReads && s.mapHi.Load()-s.mapLo.Load() < mapTrimSpan {
		return
	}
	s.mu.RLock() // the mapping cannot be unmapped meanwhile
	defer s.mu.RUnlock()
	if last := s.mapTrimmed.Load(); s.logMap != nil && n-last >= mapTrimMinReads && s.mapTrimmed.CompareAndSwap(last, n) {
		unix.Madvise(s.logMap, unix.MADV_DONTNEED)
		s.mapLo.Store(0)
		s.mapHi.Store(0)
	}
}

// trimIdleMapping drops the mapped pages of a segment read since its last
// trim but not since cutoff (unix nanoseconds).
func (s *segment) trimIdleMapping(cutoff int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.logMap == nil || s.lastUse.Load() >= cutoff {
		return
	}
	if n := s.mapReads.Load(); n != s.mapTrimmed.Load() {
		unix.Madvise(s.logMap, unix.MADV_DONTNEED)
		s.mapTrimmed.Store(n)
		s.mapLo.Store(0)
		s.mapHi.Store(0)
	}
}

// mapLogLocked maps the open .log read-only: mapLen bytes for the active
// segment, its size otherwise. mu must be held for writing.
func (s *segment) mapLogLocked() error {
	n := s.size.Load()
	if s.active {
		n = max(n, s.mapLen)
	}
	n = min(n, math.MaxInt32)
	if n <= 0 || s.file == nil {
		return nil
	}
	data, err := unix.Mmap(int(s.file.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", s.file.Name(), err)
	}
	s.logMap = data
	return nil
}

// unmapLogLocked drops the log mapping; it must precede any truncation of
// the .log. mu must be held for writing.
func (s *segment) unmapLogLocked() {
	if s.logMap != nil {
		unix.Munmap(s.logMap)
		s.logMap = nil
	}
}

// header decodes the batch header at pos from the mapping when it covers
// it, else with a pread.
func header(f vfs.File, data []byte, pos, size int64, hb []byte, h *record.BatchHeader) error {
	if pos+record.BatchHeaderSize <= int64(len(data)) && pos+record.BatchHeaderSize <= size {
		record.DecodeHeader(data[pos:], h)
		if h.Magic != 2 || h.Size() < record.BatchHeaderSize || int64(h.Size()) > size-pos {
			return fmt.Errorf("%w: no batch at position %d of %s (magic %d, %d bytes)", record.ErrCorruptBatch, pos, f.Name(), h.Magic, h.Size())
		}
		return nil
	}
	return readHeader(f, pos, size, hb, h)
}

// readHeader reads the batch header at pos (hb holds BatchHeaderSize bytes).
func readHeader(f vfs.File, pos, size int64, hb []byte, h *record.BatchHeader) error {
	if size-pos < record.BatchHeaderSize {
		return io.ErrUnexpectedEOF
	}
	if _, err := readAt(f, hb[:record.BatchHeaderSize], pos); err != nil {
		return err
	}
	record.DecodeHeader(hb, h)
	if h.Magic != 2 || h.Size() < record.BatchHeaderSize || int64(h.Size()) > size-pos {
		return fmt.Errorf("%w: no batch at position %d of %s (magic %d, %d bytes)", record.ErrCorruptBatch, pos, f.Name(), h.Magic, h.Size())
	}
	return nil
}

// readAt is f.ReadAt that keeps b on the caller's stack: a buffer passed to
// a method of an interface escapes to the heap (the compiler cannot see the
// callee), so the *os.File of the default FS is called directly, and any
// other File reads into a copy.
func readAt(f vfs.File, b []byte, off int64) (int, error) {
	if of, ok := vfs.OSFile(f); ok {
		return of.ReadAt(b, off)
	}
	return readAtCopy(f, b, off)
}

func readAtCopy(f vfs.File, b []byte, off int64) (int, error) {
	tmp := make([]byte, len(b))
	n, err := f.ReadAt(tmp, off)
	copy(b, tmp[:n])
	return n, err
}

// translate finds the first batch whose last offset is >= target, among
// the committed bytes [0, size). found is false when there is none.
func (s *segment) translate(f vfs.File, target, size int64, hb []byte, h *record.BatchHeader) (pos int64, found bool, err error) {
	werr := s.withMaps(func(oi, _ *index, data []byte) {
		pos, found, err = translateIn(f, data, oi, target, size, hb, h)
	})
	if werr != nil {
		return 0, false, werr
	}
	s.noteMapRead(pos)
	return pos, found, err
}

func translateIn(f vfs.File, data []byte, oi *index, target, size int64, hb []byte, h *record.BatchHeader) (int64, bool, error) {
	_, pos := oi.lookupOffset(target, size)
	for pos < size {
		if err := header(f, data, pos, size, hb, h); err != nil {
			return 0, false, err
		}
		if h.LastOffset() >= target {
			return pos, true, nil
		}
		pos += int64(h.Size())
	}
	return 0, false, nil
}

// read returns the region of whole batches from the batch holding
// startOffset: at most maxBytes (at least one batch when minOneBatch), no
// batch whose last offset is >= maxOffset. found is false when the segment
// holds no batch ending at or after startOffset.
func (s *segment) read(f vfs.File, startOffset int64, maxBytes int64, maxOffset int64, minOneBatch bool, hb []byte) (pos, n, first, next int64, found bool, err error) {
	size := s.size.Load()
	werr := s.withMaps(func(oi, _ *index, data []byte) {
		pos, n, first, next, found, err = readIn(f, data, oi, s.recent, size, startOffset, maxBytes, maxOffset, minOneBatch, hb)
	})
	if werr != nil {
		return 0, 0, 0, 0, false, werr
	}
	s.noteMapRead(pos + n)
	return pos, n, first, next, found, err
}

// readIn finds the whole batches from startOffset that fit maxBytes and
// stay below maxOffset. next is the offset after the region: the last
// offset of its last batch plus one, or, where the index jump skipped that
// batch's header, the base offset of the batch after the region (the same
// in a log without gaps).
//
// Batches among recent (the segment's last appended ones) are taken from
// there, not from the file.
func readIn(f vfs.File, data []byte, oi *index, recent []recentBatch, size, startOffset, maxBytes, maxOffset int64, minOneBatch bool, hb []byte) (pos, n, first, next int64, found bool, err error) {
	var h record.BatchHeader
	start, found := recentFirst(recent, startOffset, size, &h)
	if !found {
		start, found, err = translateIn(f, data, oi, startOffset, size, hb, &h)
		if err != nil || !found {
			return 0, 0, 0, 0, found, err
		}
	}
	if h.LastOffset() >= maxOffset {
		return start, 0, h.BaseOffset, h.BaseOffset, true, nil
	}
	first = h.BaseOffset
	firstSize := int64(h.Size())
	next = h.LastOffset() + 1 // when only the first batch goes
	limit := min(start+maxBytes, size)
	// Jump with the index to the last indexed batch that surely fits, then
	// walk the few headers after it.
	p := max(start, oi.lookupEnd(limit, maxOffset))
	for p < size {
		if !recentAt(recent, p, size, &h) {
			if err := header(f, data, p, size, hb, &h); err != nil {
				return 0, 0, 0, 0, false, err
			}
		}
		if p+int64(h.Size()) > limit || h.LastOffset() >= maxOffset {
			if p > start {
				next = h.BaseOffset
			}
			break
		}
		p += int64(h.Size())
		next = h.LastOffset() + 1
	}
	if p == start && minOneBatch {
		p = start + firstSize
	}
	return start, p - start, first, next, true, nil
}

// appendBatches writes buf (whole batches, offsets assigned) at the end of
// the active segment and indexes them. Writer only.
//
// The write itself runs without s.mu: readers (fetches acquiring the file,
// reading headers) never wait for a write to the page cache. The file stays
// open because the caller holds Log.mu, which closeIdle, truncation and
// close need too; the bytes past size are not read by anyone until size
// moves.
func (s *segment) appendBatches(buf []byte, intervalBytes int64) error {
	s.mu.Lock()
	if err := s.openFileLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	if err := s.mapIndexesLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	f := s.file
	s.mu.Unlock()
	pos := s.size.Load()
	if _, err := f.WriteAt(buf, pos); err != nil {
		// Leave no partial batch behind: a later append would write after it.
		s.mu.Lock()
		s.unmapLogLocked()
		f.Truncate(pos)
		s.mu.Unlock()
		s.logDirty.Store(true)
		return fmt.Errorf("append to %s: %w: %w", f.Name(), ErrStorage, err)
	}
	s.logDirty.Store(true) // after the write: a flush that clears it after this fsyncs these bytes
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos == 0 && len(buf) >= record.BatchHeaderSize {
		s.rollTS = int64(binary.BigEndian.Uint64(buf[record.OffMaxTimestamp:]))
		if s.rollTS < 0 {
			s.rollTS = time.Now().UnixMilli()
		}
	}
	next := s.next.Load()
	for p := 0; p < len(buf); {
		size := int(binary.BigEndian.Uint32(buf[p+record.OffBatchLength:])) + record.BatchLengthOverhead
		last := int64(binary.BigEndian.Uint64(buf[p:])) + int64(binary.BigEndian.Uint32(buf[p+record.OffLastOffsetDelta:]))
		maxTS := int64(binary.BigEndian.Uint64(buf[p+record.OffMaxTimestamp:]))
		s.indexBatch(pos+int64(p), int64(size), last, maxTS, intervalBytes)
		s.noteRecentLocked(recentBatch{pos: pos + int64(p), base: int64(binary.BigEndian.Uint64(buf[p:])),
			size: int32(size), lastDelta: int32(binary.BigEndian.Uint32(buf[p+record.OffLastOffsetDelta:]))})
		next = last + 1
		p += size
	}
	s.size.Store(pos + int64(len(buf)))
	s.next.Store(next)
	s.touch()
	return nil
}

// indexBatch updates the max timestamp and the sparse indexes for a batch at
// pos, as Kafka's LogSegment.append does: an entry once more than
// index.interval.bytes were appended since the last one.
func (s *segment) indexBatch(pos, size, lastOffset, maxTS, intervalBytes int64) {
	if maxTS > s.maxTS.Load() {
		s.maxTS.Store(maxTS)
		s.offsetOfMaxTS.Store(lastOffset)
	}
	if s.bytesSinceIndex > intervalBytes {
		s.oi.appendOffset(lastOffset, pos)
		s.ti.appendTime(s.maxTS.Load(), s.offsetOfMaxTS.Load())
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += size
}

// indexFull reports whether either index cannot take another entry.
func (s *segment) indexFull() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.oi.full() || s.ti.full()
}

// deactivate makes the segment inactive (it rolled): the final time index
// entry records the segment's max timestamp, then both indexes are trimmed.
func (s *segment) deactivate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.mapIndexesLocked(); err != nil {
		return err
	}
	s.appendFinalTimeEntry()
	s.active = false
	s.recent = nil // reads at the tail go to the next segment now
	if err := s.oi.trim(); err != nil {
		return err
	}
	return s.ti.trim()
}

// appendFinalTimeEntry adds the segment's max timestamp to a full-or-not
// time index (Kafka's maybeAppend with skipFullCheck), so a reopened
// inactive segment knows its max timestamp from the index alone.
func (s *segment) appendFinalTimeEntry() {
	ts, off := s.maxTS.Load(), s.offsetOfMaxTS.Load()
	if ts < 0 || !s.ti.writable && !s.ti.building {
		return
	}
	if lts, _ := s.ti.lastTimeEntry(); ts <= lts {
		return
	}
	if s.ti.building {
		s.ti.limit = max(s.ti.limit, (s.ti.entries()+1)*timeIndexEntry)
	} else if s.ti.full() {
		// Make room: one more entry past segment.index.bytes is harmless
		// once trimmed.
		if err := s.ti.makeWritable(len(s.ti.data) + timeIndexEntry); err != nil {
			return
		}
	}
	s.ti.appendTime(ts, off)
}

// activate makes an inactive segment the log's active one again (after a
// truncation removed the segments after it).
func (s *segment) activate(maxIdx int, mapLen int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return err
	}
	s.active, s.maxIdx, s.mapLen = true, maxIdx, mapLen
	s.unmapLogLocked() // remapped with room to grow
	if err := s.oi.makeWritable(maxIdx); err != nil {
		return err
	}
	return s.ti.makeWritable(maxIdx)
}

// flush fsyncs the log file and the indexes, each only when it was
// written since its last sync: flushing a segment nothing was written to
// makes no system call.
func (s *segment) flush() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.logDirty.Swap(false) {
		f, err := s.acquire()
		if err != nil {
			if errors.Is(err, errSegmentGone) {
				return nil
			}
			s.logDirty.Store(true)
			return err
		}
		err = fsyncFile(f)
		s.release()
		if err != nil {
			s.logDirty.Store(true)
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
	}
	if err := s.txn.sync(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.oi.sync(); err != nil {
		return err
	}
	return s.ti.sync()
}

// closeIdle closes the file and unmaps the indexes when no reader holds the
// file. Called with Log.mu held, so no append runs. Returns whether it closed.
func (s *segment) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs > 0 || s.deleted {
		return false
	}
	if s.active {
		// Keep the preallocated file; the mapping goes and comes back
		// read-write on the next append.
		s.oi.sync()
		s.ti.sync()
		s.oi.unmap()
		s.ti.unmap()
	} else {
		s.oi.trim()
		s.ti.trim()
	}
	s.unmapLogLocked()
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	return true
}

// close flushes nothing; it trims the indexes (after recording the final
// time entry), unmaps them and closes the file once readers are done.
func (s *segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.active && s.oi.mapped {
		s.appendFinalTimeEntry()
	}
	if s.active {
		// Cut the indexes back to their entries if they were extended for
		// appends (mapped or not); an active segment loaded and never
		// appended to is left as it is.
		err = errors.Join(s.oi.trim(), s.ti.trim())
	} else {
		err = errors.Join(s.oi.unmap(), s.ti.unmap())
	}
	s.unmapLogLocked()
	s.deleted = true // no new references; FileRegions still held keep the file
	if s.refs == 0 && s.file != nil {
		err = errors.Join(err, s.file.Close())
		s.file = nil
	}
	return err
}

// remove deletes the segment's files. Readers holding a FileRegion keep
// reading the unlinked file until they release it.
func (s *segment) remove() error {
	s.mu.Lock()
	s.deleted = true
	s.oi.unmap()
	s.ti.unmap()
	s.unmapLogLocked()
	if s.refs == 0 && s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.mu.Unlock()
	var errs []error
	for _, suf := range segmentFileSuffixes {
		if err := s.fs.Remove(s.path(suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// largestTimestamp is what retention.ms compares: the max timestamp, or the
// file's modification time when no record carries one (Kafka's rule).
func (s *segment) largestTimestamp() int64 {
	if ts, _ := s.maxTimestamp(); ts >= 0 {
		return ts
	}
	if st, err := s.fs.Stat(s.path(logSuffix)); err == nil {
		return st.ModTime().UnixMilli()
	}
	return -1
}

// retire takes a segment out of service for the cleaner's swap: its files are
// renamed to .deleted (readers holding it keep their open file) and removed
// by the caller once the replacement is in place.
func (s *segment) retire() error {
	s.mu.Lock()
	s.deleted = true
	s.oi.unmap()
	s.ti.unmap()
	s.unmapLogLocked()
	if s.refs == 0 && s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.mu.Unlock()
	for _, suf := range segmentFileSuffixes {
		if err := s.fs.Rename(s.path(suf), s.path(suf)+deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (s *segment) removeRetired() {
	for _, suf := range segmentFileSuffixes {
		s.fs.Remove(s.path(suf) + deletedSuffix)
	}
}

// setExt renames the segment's files in memory: the indexes follow ext
// (the cleaner's .cleaned, .swap, then none).
func (s *segment) setExt(ext string) {
	s.mu.Lock()
	s.ext = ext
	s.oi.path, s.ti.path = s.path(indexSuffix), s.path(timeIndexSuffix)
	s.mu.Unlock()
	s.txn.mu.Lock()
	s.txn.path = s.path(txnIndexSuffix)
	s.txn.mu.Unlock()
}

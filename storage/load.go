package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// logLoad carries what the manager knows about a log from its checkpoints.
type logLoad struct {
	dir           string
	tp            TopicPartition
	cfg           *logConfig
	env           *env
	recoveryPoint int64 // -1: no checkpoint, recover everything
	logStart      int64 // -1: none
	hw            int64 // -1: none
	firstDirty    int64 // -1: none
	cleanShutdown bool
	// create: the log is new (CreateLogs); see openLog.
	create bool
	// recovered, when set, counts the log bytes recovery reads.
	recovered *atomic.Int64
}

// openLog loads (and if needed recovers) the log in p.dir, creating the
// directory and a first segment when it does not exist. With p.create it
// first tries to make the directory itself: when that succeeds the
// directory is new and empty, and the log starts with one empty segment
// without the load's directory scans (the epoch cache, leftover files,
// producer snapshots); when the directory exists it is loaded as usual.
func openLog(p logLoad) (*Log, error) {
	if p.create {
		err := p.env.fs.Mkdir(p.dir, 0o755)
		if err == nil {
			return newEmptyLog(p)
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", p.dir, err)
		}
	}
	if err := p.env.fs.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", p.dir, err)
	}
	l := &Log{tp: p.tp, dir: p.dir, env: p.env, producers: newProducerStates(p.env.fs, p.dir)}
	l.cfg.Store(p.cfg)
	l.firstDirty.Store(p.firstDirty)
	l.touch()
	var err error
	if l.epochs, err = loadLeaderEpochCache(p.env.fs, p.dir); err != nil {
		return nil, err
	}
	segs, err := l.loadSegments(p)
	if err != nil {
		return nil, err
	}
	l.segs.Store(&segs)
	leo := l.LogEndOffset()
	l.logStart.Store(max(p.logStart, segs[0].base))
	if l.logStart.Load() > leo {
		l.logStart.Store(leo)
	}
	l.recoveryPoint.Store(leo)
	if !p.cleanShutdown {
		// Recovered segments are not yet known to be on disk: they stay to
		// be recovered until the next flush.
		l.recoveryPoint.Store(min(max(p.recoveryPoint, 0), leo))
	}
	l.hw.Store(min(max(p.hw, l.logStart.Load()), leo))
	l.lastFlushMs = p.env.nowMs()

	// Producer state: the newest snapshot at or below the log end, then the
	// batches after it. Segments whose transaction index must be rebuilt
	// (recovered, or the file missing or unreadable) are replayed from
	// the newest snapshot at or below the first of them, which rebuilds
	// their indexes on the way; with no snapshot left, from the log start.
	warn := func(path string, err error) {
		p.env.logger.Warn("unreadable producer snapshot, rebuilding from the log", "file", path, "err", err)
	}
	rebuildFrom := leo
	for _, s := range segs {
		if s.txn.rebuild {
			rebuildFrom = min(rebuildFrom, s.base)
			break
		}
	}
	l.producers.deleteSnapshots(-1, leo)
	from := l.producers.loadLatest(rebuildFrom, warn)
	l.producers.listed = nil // from now on snapshots come and go: read the directory
	if from < 0 {
		from = l.logStart.Load()
		// Every segment replayed gets its index rebuilt: with the
		// snapshots gone, nothing says the indexes are complete. A log
		// with no byte in it has nothing to replay or index (a log closed
		// empty leaves no snapshot, as Kafka's).
		if !emptySegments(segs) {
			for _, s := range segs {
				s.txn.rebuild = true
			}
		}
	}
	if err := l.replayProducers(from, leo, true); err != nil {
		return nil, err
	}
	if from == leo {
		// Nothing replayed: the snapshot at the log end (or the absence
		// of any, for an empty log) is the state; closing again need not
		// write it.
		l.producers.snapshotCurrent(leo)
	}
	l.producers.truncateHead(l.logStart.Load())
	l.producers.replicated(l.hw.Load())
	l.publishUnstableLocked()
	l.recountAbortedLocked()
	if err := l.epochs.truncateFromEnd(leo); err != nil {
		return nil, err
	}
	if err := l.epochs.truncateFromStart(l.logStart.Load()); err != nil {
		return nil, err
	}
	return l, nil
}

// newEmptyLog starts a log in the directory openLog has just made: one
// empty active segment at the log start, no epochs, no producers. Nothing
// is fsynced here: the caller fsyncs the log dir holding the new directory
// (CreateLogs), and an empty log lost to a crash is created again.
func newEmptyLog(p logLoad) (*Log, error) {
	l := &Log{tp: p.tp, dir: p.dir, env: p.env, producers: newProducerStates(p.env.fs, p.dir)}
	l.cfg.Store(p.cfg)
	l.firstDirty.Store(p.firstDirty)
	l.touch()
	l.epochs = &leaderEpochCache{fs: p.env.fs, path: p.dir + "/" + leaderEpochCheckpoint}
	start := max(p.logStart, 0)
	s, err := createSegment(p.env.fs, p.dir, start, &p.cfg.LogConfig, p.env.nowMs())
	if err != nil {
		return nil, fmt.Errorf("create first segment: %w", err)
	}
	segs := []*segment{s}
	l.segs.Store(&segs)
	l.logStart.Store(start)
	l.recoveryPoint.Store(start)
	l.hw.Store(start)
	l.lastFlushMs = p.env.nowMs()
	l.producers.snapshotCurrent(start)
	l.publishUnstableLocked()
	return l, nil
}

// emptySegments reports whether no segment holds a byte.
func emptySegments(segs []*segment) bool {
	for _, s := range segs {
		if s.size.Load() > 0 {
			return false
		}
	}
	return true
}

// replayProducers applies the batches in [from, to) to the producer state:
// the headers of data batches, and the end-transaction markers of control
// batches (read whole: 78 bytes). With rebuild, the segments marked for it
// get their transaction index from the aborts replayed (they must lie
// wholly at or after from), and are marked done. Lock l.mu (or own the log
// alone, at load).
func (l *Log) replayProducers(from, to int64, rebuild bool) error {
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	var ctl []byte
	rebuilt := map[*segment][]AbortedTxn{}
	for _, s := range l.segments() {
		if rebuild && s.txn.rebuild {
			rebuilt[s] = []AbortedTxn{}
		}
		if s.next.Load() <= from || s.base >= to {
			continue
		}
		f, err := s.acquire()
		if err != nil {
			return err
		}
		size := s.size.Load()
		pos := int64(0)
		if from > s.base {
			if pos, _, err = s.translate(f, from, size, hb[:], &h); err != nil {
				s.release()
				return err
			}
		}
		for pos < size {
			if err := readHeader(f, pos, size, hb[:], &h); err != nil {
				s.release()
				return fmt.Errorf("%s: producer state: %w", f.Name(), err)
			}
			if h.LastOffset() >= from && h.BaseOffset < to && h.ProducerID >= 0 {
				if !h.Control() {
					l.producers.update(&h)
				} else {
					ctl = slices.Grow(ctl[:0], h.Size())[:h.Size()]
					if _, err := f.ReadAt(ctl, pos); err != nil {
						s.release()
						return fmt.Errorf("%s: control batch at %d: %w", f.Name(), pos, err)
					}
					if a, ok := l.applyMarker(&h, ctl); ok {
						if es, ok := rebuilt[s]; ok {
							rebuilt[s] = append(es, a)
						}
					}
				}
			}
			pos += int64(h.Size())
		}
		s.release()
	}
	for s, es := range rebuilt {
		if err := s.txn.replace(es); err != nil {
			return fmt.Errorf("%s: rebuild transaction index: %w", l.tp, err)
		}
		s.txn.rebuild = false
		if len(es) > 0 {
			l.env.logger.Info("rebuilt transaction index from the log", "partition", l.tp.String(),
				"segment", s.base, "aborted_transactions", len(es))
		}
	}
	return nil
}

// loadSegments reads the directory: finishes or discards interrupted
// cleaner swaps, opens every segment, recovers the ones after the recovery
// point (all of them after an unclean shutdown without a checkpoint), and
// returns the segments with the last one active.
//
// A segment below the recovery point other than the last one (after a
// clean shutdown: every one but the last) is opened lazily, as Kafka opens
// its segments: its size is taken from the directory (a stat) and nothing
// else is read until the segment is used (segment.loadLocked). So a clean
// start reads, per log, its directory, its checkpoint and snapshot files
// and its last segment, whatever the number of segments.
func (l *Log) loadSegments(p logLoad) ([]*segment, error) {
	ents, err := p.env.fs.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("read log directory: %w", err)
	}
	var bases []int64
	var swaps []string
	listed := []int64{}
	for _, e := range ents {
		if o, ok := parseOffsetFileName(e.Name(), snapshotSuffix); ok && !e.IsDir() {
			listed = append(listed, o)
		}
	}
	slices.Sort(listed)
	l.producers.listed = listed
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(p.dir, name)
		if e.IsDir() {
			p.env.logger.Warn("ignoring a directory inside a partition directory", "path", path)
			continue
		}
		switch {
		case strings.HasSuffix(name, ".tmp"), strings.HasSuffix(name, cleanedSuffix), strings.HasSuffix(name, deletedSuffix):
			// Unfinished checkpoint writes, cleaner output that was never
			// swapped in, and files already deleted from the log.
			if err := p.env.fs.Remove(path); err != nil {
				return nil, fmt.Errorf("remove leftover %s: %w", path, err)
			}
		case strings.HasSuffix(name, swapSuffix):
			swaps = append(swaps, name)
		case strings.HasSuffix(name, corruptSuffix):
			p.env.logger.Warn("set-aside data from an earlier recovery is kept for inspection", "file", path)
		case name == leaderEpochCheckpoint, name == "partition.metadata":
		case strings.HasSuffix(name, logSuffix):
			base, ok := parseOffsetFileName(name, logSuffix)
			if !ok {
				return nil, fmt.Errorf("%s: not a segment name (want <20 digits>.log)", path)
			}
			bases = append(bases, base)
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, snapshotSuffix),
			strings.HasSuffix(name, txnIndexSuffix):
			suf := filepath.Ext(name)
			if _, ok := parseOffsetFileName(name, suf); !ok {
				return nil, fmt.Errorf("%s: not a segment file name (want <20 digits>%s)", path, suf)
			}
		default:
			p.env.logger.Warn("ignoring an unknown file in a partition directory", "file", path)
		}
	}
	if len(swaps) > 0 {
		if bases, err = l.completeSwaps(p, swaps, bases); err != nil {
			return nil, err
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	// Index files without a log are derived data left by an interrupted
	// deletion: remove them.
	for _, e := range ents {
		name := e.Name()
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if b, ok := parseOffsetFileName(name, suf); ok && !containsInt64(bases, b) {
				p.env.fs.Remove(filepath.Join(p.dir, name))
			}
		}
	}
	if len(bases) == 0 {
		start := max(p.logStart, 0)
		s, err := createSegment(p.env.fs, p.dir, start, &p.cfg.LogConfig, p.env.nowMs())
		if err != nil {
			return nil, fmt.Errorf("create first segment: %w", err)
		}
		return []*segment{s}, nil
	}

	// Recovery starts at the segment holding the recovery point.
	recoverFrom := len(bases)
	if !p.cleanShutdown {
		rp := max(p.recoveryPoint, 0)
		recoverFrom = sort.Search(len(bases), func(i int) bool { return bases[i] > rp }) - 1
		recoverFrom = max(recoverFrom, 0)
	}
	segs := make([]*segment, 0, len(bases))
	for i, base := range bases {
		last := i == len(bases)-1
		s := &segment{fs: p.env.fs, dir: p.dir, base: base}
		s.txn = newTxnIndex(s.fs, s.path(txnIndexSuffix), base)
		s.maxTS.Store(-1)
		s.offsetOfMaxTS.Store(base)
		st, err := p.env.fs.Stat(s.path(logSuffix))
		if err != nil {
			return nil, fmt.Errorf("segment: %w", err)
		}
		s.size.Store(st.Size())
		needRecover := i >= recoverFrom
		if !needRecover && !last {
			s.openLazily(p, bases[i+1])
			if err := s.txn.open(); err != nil {
				p.env.logger.Warn("unreadable transaction index, rebuilding it from the log", "file", s.txn.path, "err", err)
			} else if s.txn.rebuild {
				p.env.logger.Warn("missing transaction index, rebuilding it from the log", "file", s.txn.path)
			}
			segs = append(segs, s)
			continue
		}
		if !needRecover {
			if err := s.loadIndexes(); err != nil {
				p.env.logger.Warn("rebuilding index", "segment", s.path(logSuffix), "err", err)
				needRecover = true
			}
		}
		if needRecover {
			// Its aborted transactions are replayed from the log with
			// the producer state (openLog).
			s.txn.rebuild = true
			truncated, err := l.recoverSegment(p, s, last, i >= recoverFrom)
			if err != nil {
				return nil, err
			}
			segs = append(segs, s)
			if truncated && !last {
				// The log ends at the corrupt batch: segments after it can
				// no longer follow on. Keep their data aside, not in the log.
				for _, b := range bases[i+1:] {
					l.setAside(p, b)
				}
				break
			}
			continue
		}
		if err := s.txn.open(); err != nil {
			p.env.logger.Warn("unreadable transaction index, rebuilding it from the log", "file", s.txn.path, "err", err)
		} else if s.txn.rebuild {
			p.env.logger.Warn("missing transaction index, rebuilding it from the log", "file", s.txn.path)
		}
		segs = append(segs, s)
	}
	// The last segment takes appends. Its indexes are mapped (read-write,
	// extended to segment.index.bytes) by the first append or read, not
	// here: a log that is only read, or not used at all, never extends and
	// trims them again.
	act := segs[len(segs)-1]
	act.active, act.maxIdx, act.mapLen = true, p.cfg.maxIdx, p.cfg.SegmentBytes
	if err := act.loadRollState(); err != nil {
		return nil, err
	}
	return segs, nil
}

func containsInt64(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// setAside renames a segment's log out of the way (kept for an operator,
// never deleted) and removes its derived index files.
func (l *Log) setAside(p logLoad, base int64) {
	s := &segment{fs: p.env.fs, dir: p.dir, base: base}
	from, to := s.path(logSuffix), s.path(logSuffix)+corruptSuffix
	if err := p.env.fs.Rename(from, to); err != nil {
		p.env.logger.Error("cannot set aside segment after a corrupt batch", "file", from, "err", err)
		return
	}
	p.env.fs.Remove(s.path(indexSuffix))
	p.env.fs.Remove(s.path(timeIndexSuffix))
	p.env.fs.Remove(s.path(txnIndexSuffix))
	p.env.logger.Error("segment follows a corrupt batch and was set aside; it is no longer part of the log",
		"partition", p.tp.String(), "file", to)
}

// openLazily sets up a segment below the recovery point without reading
// any of its files (see segment.lazy): next is the base of the segment
// after it, the indexes are read at first use.
func (s *segment) openLazily(p logLoad, nextBase int64) {
	s.next.Store(nextBase)
	s.oi = &index{fs: s.fs, path: s.path(indexSuffix), base: s.base, entrySize: offsetIndexEntry}
	s.ti = &index{fs: s.fs, path: s.path(timeIndexSuffix), base: s.base, entrySize: timeIndexEntry}
	s.maxIdx = p.cfg.maxIdx
	s.interval = int64(p.cfg.IndexIntervalBytes)
	s.logger = p.env.logger
	s.lazy.Store(true)
}

// ensureLoaded reads a lazily opened segment's indexes (loadLocked).
func (s *segment) ensureLoaded() error {
	if !s.lazy.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked()
}

// loadLocked reads and checks a lazily opened segment's indexes, and
// finds its next offset and max timestamp from them, as the load did
// before segments were opened lazily; an index that fails its check (or
// is missing) is rebuilt from the log's batch headers and written again.
// A segment below the recovery point was flushed whole, so its batches
// are not CRC-checked here (recovery does that). Nothing for a segment
// already loaded. s.mu held for writing.
func (s *segment) loadLocked() error {
	if !s.lazy.Load() {
		return nil
	}
	if s.deleted {
		return errSegmentGone
	}
	if err := s.loadIndexes(); err != nil {
		if s.logger != nil {
			s.logger.Warn("rebuilding index", "segment", s.path(logSuffix), "err", err)
		}
		if err := s.rebuildIndexes(); err != nil {
			return fmt.Errorf("rebuild the indexes of %s: %w", s.path(logSuffix), err)
		}
	}
	s.lazy.Store(false)
	return nil
}

// maxTimestamp is the segment's largest batch timestamp and the offset
// of the batch carrying it, reading a lazily opened segment's indexes
// first ((-1, base) if they cannot be read: the caller falls back as for
// a segment without timestamps).
func (s *segment) maxTimestamp() (ts, offset int64) {
	if s.lazy.Load() {
		if err := s.ensureLoaded(); err != nil && !errors.Is(err, errSegmentGone) && s.logger != nil {
			s.logger.Error("cannot load segment", "segment", s.path(logSuffix), "err", err)
		}
	}
	return s.maxTS.Load(), s.offsetOfMaxTS.Load()
}

// rebuildIndexes builds a lazily opened segment's indexes from its batch
// headers, as recovery does (recoverSegment) but without checking CRCs or
// truncating, and writes them (truncating the old files first). s.mu held
// for writing.
func (s *segment) rebuildIndexes() error {
	oi0, ti0 := s.oi, s.ti
	f, err := vfs.Open(s.fs, s.path(logSuffix))
	if err != nil {
		return err
	}
	defer f.Close()
	size := s.size.Load()
	hint := int(min(size/max(s.interval, 1)+2, math.MaxInt32/timeIndexEntry))
	s.oi = buildIndex(s.fs, s.path(indexSuffix), s.base, offsetIndexEntry, s.maxIdx, hint*offsetIndexEntry)
	s.ti = buildIndex(s.fs, s.path(timeIndexSuffix), s.base, timeIndexEntry, s.maxIdx, hint*timeIndexEntry)
	s.maxTS.Store(-1)
	s.offsetOfMaxTS.Store(s.base)
	s.bytesSinceIndex = 0
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	next := s.base
	for pos := int64(0); pos < size; pos += int64(h.Size()) {
		if err = readHeader(f, pos, size, hb[:], &h); err != nil {
			break
		}
		s.indexBatch(pos, int64(h.Size()), h.LastOffset(), h.MaxTimestamp, s.interval)
		next = h.NextOffset()
	}
	if err == nil {
		s.appendFinalTimeEntry()
		if err = s.oi.writeBuilt(false); err == nil {
			err = s.ti.writeBuilt(false)
		}
	}
	if err != nil {
		s.oi, s.ti = oi0, ti0
		return err
	}
	s.next.Store(next)
	return nil
}

// loadIndexes reads a cleanly written segment's indexes, checks them, and
// finds the segment's next offset and max timestamp from them (and, for
// the last segment, the bytes appended since its last index entry). The
// indexes are set only when they pass.
func (s *segment) loadIndexes() error {
	oi, err := readIndex(s.fs, s.path(indexSuffix), s.base, offsetIndexEntry)
	if err != nil {
		return err
	}
	ti, err := readIndex(s.fs, s.path(timeIndexSuffix), s.base, timeIndexEntry)
	if err != nil {
		oi.forget()
		return err
	}
	defer oi.forget()
	defer ti.forget()
	size := s.size.Load()
	scanFrom := int64(0)
	// Kafka checks only the last entry; a full pass costs about a
	// nanosecond per entry and catches an index that would send reads to
	// the middle of a batch.
	prevO, prevP := int64(-1), int64(-1)
	for i := 0; i < oi.entries(); i++ {
		o, pos := oi.offsetEntry(i)
		if pos >= size || o < s.base || o <= prevO || pos <= prevP {
			return fmt.Errorf("offset index entry %d (%d, %d) out of order or past the log of %d bytes", i, o, pos, size)
		}
		prevO, prevP = o, pos
		scanFrom = pos
	}
	prevT := int64(-1)
	for i := 0; i < ti.entries(); i++ {
		ts, o := ti.timeEntry(i)
		if ts < prevT || o < s.base {
			return fmt.Errorf("time index entry %d (%d, %d) out of order", i, ts, o)
		}
		prevT = ts
	}
	maxTS, offMax := int64(-1), s.base
	if ts, o := ti.lastTimeEntry(); ti.entries() > 0 {
		if o < s.base {
			return fmt.Errorf("time index entry (%d, %d) is below the base offset", ts, o)
		}
		maxTS, offMax = ts, o
	}
	// Walk the headers after the last indexed batch to find the end.
	f, err := vfs.Open(s.fs, s.path(logSuffix))
	if err != nil {
		return err
	}
	defer f.Close()
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	next := s.base
	for pos := scanFrom; pos < size; pos += int64(h.Size()) {
		if err := readHeader(f, pos, size, hb[:], &h); err != nil {
			return err
		}
		next = h.NextOffset()
		if h.MaxTimestamp > maxTS {
			maxTS, offMax = h.MaxTimestamp, h.LastOffset()
		}
	}
	// Reads map the indexes when they need them.
	s.next.Store(next)
	s.maxTS.Store(maxTS)
	s.offsetOfMaxTS.Store(offMax)
	s.bytesSinceIndex = size
	if n := oi.entries(); n > 0 {
		_, p := oi.offsetEntry(n - 1)
		s.bytesSinceIndex = size - p
	}
	s.oi, s.ti = oi, ti
	return nil
}

// loadRollState sets what the active segment's roll decisions need: the
// timestamp segment.ms counts from (the bytes since the last index entry
// were counted when its indexes were loaded or rebuilt).
func (s *segment) loadRollState() error {
	s.rollTS = time.Now().UnixMilli()
	size := s.size.Load()
	if size == 0 {
		return nil
	}
	f, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	if err := readHeader(f, 0, size, hb[:], &h); err == nil && h.MaxTimestamp >= 0 {
		s.rollTS = h.MaxTimestamp
	} else if st, err := f.Stat(); err == nil {
		s.rollTS = st.ModTime().UnixMilli()
	}
	return nil
}

// recoverSegment reads every batch of the segment, checks its CRC, rebuilds
// both indexes, and truncates the file at the first torn or corrupt batch.
// Bytes cut off that hold more than zeros are first copied to
// <base>.log.<position>.corrupt so nothing recoverable is lost. A file that
// starts with a v0/v1 message (an old Kafka log, or not a log at all) is an
// error: it is not touched. afterRP: the segment is at or after the
// recovery point (not only one whose index failed its check), so a load
// after a crash recovers it again (see writeBuilt).
func (l *Log) recoverSegment(p logLoad, s *segment, last, afterRP bool) (truncated bool, err error) {
	path := s.path(logSuffix)
	f, err := p.env.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("recover segment: %w", err)
	}
	s.file = f
	s.maxIdx = p.cfg.maxIdx
	size := s.size.Load()
	interval := int64(p.cfg.IndexIntervalBytes)
	// The indexes are built in memory and written once at the end (see
	// buildIndex); the hint is the entries the segment's size makes.
	hint := int(min(size/max(interval, 1)+2, math.MaxInt32/timeIndexEntry))
	s.oi = buildIndex(s.fs, s.path(indexSuffix), s.base, offsetIndexEntry, s.maxIdx, hint*offsetIndexEntry)
	s.ti = buildIndex(s.fs, s.path(timeIndexSuffix), s.base, timeIndexEntry, s.maxIdx, hint*timeIndexEntry)
	sc := newBatchScanner(f, 0, size, true)
	next := s.base
	for sc.next() {
		h := &sc.h
		if h.BaseOffset < next || h.LastOffset() < h.BaseOffset {
			sc.bad = fmt.Errorf("%w: batch at position %d has offsets %d-%d after %d", record.ErrCorruptBatch, sc.pos, h.BaseOffset, h.LastOffset(), next)
			break
		}
		if h.LastOffset()-s.base > math.MaxInt32 || sc.pos > math.MaxInt32 {
			sc.bad = fmt.Errorf("%w: batch at position %d does not fit the segment's 32-bit index", record.ErrCorruptBatch, sc.pos)
			break
		}
		if s.oi.full() || s.ti.full() {
			sc.bad = fmt.Errorf("%w: index full at position %d", record.ErrCorruptBatch, sc.pos)
			break
		}
		s.indexBatch(sc.pos, int64(len(sc.batch)), h.LastOffset(), h.MaxTimestamp, interval)
		if h.PartitionLeaderEpoch >= 0 {
			if latest, ok := l.epochs.latest(); !ok || h.PartitionLeaderEpoch > latest {
				if _, err := l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
					return false, err
				}
			}
		}
		next = h.NextOffset()
	}
	if sc.err != nil {
		return false, fmt.Errorf("recover %s: %w", path, sc.err)
	}
	if sc.bad != nil {
		pos := sc.pos
		if pos == 0 && size > record.OffMagic {
			var m [record.OffMagic + 1]byte
			if _, err := readAt(f, m[:], 0); err == nil && (m[record.OffMagic] == 0 || m[record.OffMagic] == 1) {
				return false, fmt.Errorf("%s: holds message format v%d (magic %d at position 0), not record batch v2; convert or move it away", path, m[record.OffMagic], m[record.OffMagic])
			}
		}
		if err := saveTail(p.env.fs, f, pos, size); err != nil {
			return false, fmt.Errorf("save the corrupt tail of %s before truncating: %w", path, err)
		}
		p.env.logger.Warn("truncating a torn or corrupt batch found by recovery",
			"file", path, "position", pos, "bytes", size-pos, "reason", sc.bad.Error())
		if err := f.Truncate(pos); err != nil {
			return false, fmt.Errorf("truncate %s: %w", path, err)
		}
		s.size.Store(pos)
		truncated = true
	}
	s.next.Store(next)
	if !last {
		// The final entry an inactive segment's time index ends with
		// (deactivate); the last segment gets it when it rolls or closes.
		s.appendFinalTimeEntry()
	}
	// Written, not fsynced: the flush that moves the recovery point past
	// this segment fsyncs them (writeBuilt marks them unsynced; the active
	// segment's mapping is msynced), and an index lost before that is
	// checked and rebuilt at load. The last segment's indexes are mapped
	// read-write by its first append, as loaded ones are.
	if err := s.oi.writeBuilt(afterRP); err != nil {
		return truncated, fmt.Errorf("rebuild index: %w", err)
	}
	if err := s.ti.writeBuilt(afterRP); err != nil {
		return truncated, fmt.Errorf("rebuild index: %w", err)
	}
	s.active = last
	if afterRP || truncated {
		s.logDirty.Store(true) // the next flush fsyncs it
	}
	// The file is not fsynced here: the log's recovery point stays where
	// the checkpoint had it (openLog), so the next flush (a roll, flush.ms,
	// the close) makes the recovered segments durable and only then moves
	// it, and a crash before that recovers them again (Kafka's
	// LogLoader.recoverLog). A start after kill -9 does not wait for
	// one fsync per log.
	if p.recovered != nil {
		p.recovered.Add(size)
	}
	return truncated, nil
}

// saveTail copies [pos, size) of f to <file>.<pos>.corrupt unless it is all
// zeros (a file extended by the filesystem but never written) or it is a
// single torn batch: a valid v2 header whose batch runs past the end of the
// file, which can never be completed.
func saveTail(fsys vfs.FS, f vfs.File, pos, size int64) error {
	if size <= pos {
		return nil
	}
	tail := make([]byte, size-pos)
	if _, err := f.ReadAt(tail, pos); err != nil && err != io.EOF {
		return err
	}
	if len(bytes.Trim(tail, "\x00")) == 0 {
		return nil
	}
	if len(tail) >= record.BatchHeaderSize {
		var h record.BatchHeader
		if record.ParseBatchHeaderInto(tail, &h) == nil && h.Size() > len(tail) {
			return nil
		}
	} else if len(tail) > record.OffMagic && tail[record.OffMagic] == 2 {
		return nil // a header cut short
	} else if len(tail) <= record.OffMagic {
		return nil
	}
	name := fmt.Sprintf("%s.%d%s", f.Name(), pos, corruptSuffix)
	return writeFileAtomic(fsys, name, tail)
}

// completeSwaps finishes a compaction interrupted by a crash. A .swap file
// is a complete, fsynced cleaned segment: the segments it replaces (those
// whose base lies in its offset range) are removed and it takes its final
// name. .swap files are only created after the cleaned output was fsynced,
// so finishing is always safe.
func (l *Log) completeSwaps(p logLoad, swaps []string, bases []int64) ([]int64, error) {
	for _, name := range swaps {
		final := strings.TrimSuffix(name, swapSuffix)
		if !strings.HasSuffix(final, logSuffix) {
			continue
		}
		base, ok := parseOffsetFileName(final, logSuffix)
		if !ok {
			return nil, fmt.Errorf("%s: not a segment name", filepath.Join(p.dir, name))
		}
		swapPath := filepath.Join(p.dir, name)
		next, err := scanNextOffset(p.env.fs, swapPath, base)
		if err != nil {
			return nil, fmt.Errorf("cleaned segment %s: %w", swapPath, err)
		}
		kept := bases[:0]
		for _, b := range bases {
			if b >= base && b < next {
				s := &segment{fs: p.env.fs, dir: p.dir, base: b}
				for _, suf := range segmentFileSuffixes {
					if err := removeIfExists(p.env.fs, s.path(suf)); err != nil {
						return nil, err
					}
				}
				continue
			}
			kept = append(kept, b)
		}
		bases = kept
		if err := p.env.fs.Rename(swapPath, filepath.Join(p.dir, final)); err != nil {
			return nil, err
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			ip := filepath.Join(p.dir, offsetFileName(base, suf))
			if fileExists(p.env.fs, ip+swapSuffix) {
				if err := p.env.fs.Rename(ip+swapSuffix, ip); err != nil {
					return nil, err
				}
			}
		}
		bases = append(bases, base)
		p.env.logger.Info("completed an interrupted compaction swap", "file", filepath.Join(p.dir, final))
	}
	// Index swap files whose log swap was already renamed.
	ents, _ := p.env.fs.ReadDir(p.dir)
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, swapSuffix) {
			final := filepath.Join(p.dir, strings.TrimSuffix(n, swapSuffix))
			p.env.fs.Rename(filepath.Join(p.dir, n), final)
		}
	}
	return bases, syncDir(p.env.fs, p.dir)
}

// scanNextOffset returns the offset after the last batch of a segment file.
func scanNextOffset(fsys vfs.FS, path string, base int64) (int64, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	next := base
	for pos := int64(0); pos < st.Size(); pos += int64(h.Size()) {
		if err := readHeader(f, pos, st.Size(), hb[:], &h); err != nil {
			return 0, err
		}
		next = h.NextOffset()
	}
	return next, nil
}

package storage

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/sluice-io/sluice/record"
)

// DeleteOldSegments applies retention: it deletes, oldest first, whole
// segments that lie below the log start offset, that are older than
// retention.ms (their largest timestamp), or that retention.bytes says must
// go. The active segment is never deleted, nor a segment holding offsets at
// or above the high watermark (not yet replicated). Time and size retention
// apply only with cleanup.policy delete (or compact,delete). Returns how many
// segments were deleted.
//
// When segments were deleted, the OnRetention function is called (with no
// lock held).
func (l *Log) DeleteOldSegments() (int, error) {
	n, err := l.deleteOldSegments()
	if n > 0 {
		if fn := l.onRetention.Load(); fn != nil {
			(*fn)()
		}
	}
	return n, err
}

// OnRetention sets fn, called after retention deleted segments and so moved
// the log start offset; the broker tells the partition's fetch sessions and
// parked fetches, which otherwise learn of it only with the partition's next
// change. (DeleteRecordsBefore's caller knows when it moves the log start.)
func (l *Log) OnRetention(fn func()) { l.onRetention.Store(&fn) }

func (l *Log) deleteOldSegments() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, nil
	}
	cfg := l.cfg.Load()
	now := l.env.nowMs()
	segs := l.segments()
	lso := l.logStart.Load()
	hw := l.hw.Load()
	var excess int64 = -1
	if cfg.deletes && cfg.RetentionBytes >= 0 {
		excess = l.Size() - cfg.RetentionBytes
	}
	n := 0
	for ; n < len(segs)-1; n++ {
		s, next := segs[n], segs[n+1]
		if hw < next.base {
			break
		}
		byStart := next.base <= lso
		byTime := cfg.deletes && cfg.RetentionMs >= 0 && now-s.largestTimestamp() > cfg.RetentionMs
		bySize := excess >= 0 && excess-s.size.Load() >= 0
		if !byStart && !byTime && !bySize {
			break
		}
		if excess >= 0 {
			excess -= s.size.Load()
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, l.deleteSegmentsLocked(n, "retention")
}

// deleteSegmentsLocked removes the first n segments (never the active one)
// and moves the log start offset to the next segment's base.
func (l *Log) deleteSegmentsLocked(n int, reason string) error {
	segs := l.segments()
	if n >= len(segs) {
		n = len(segs) - 1
	}
	if n <= 0 {
		return nil
	}
	gone := segs[:n]
	rest := append([]*segment(nil), segs[n:]...)
	l.segs.Store(&rest)
	newStart := max(l.logStart.Load(), rest[0].base)
	l.logStart.Store(newStart)
	if l.hw.Load() < newStart {
		l.hw.Store(newStart)
	}
	if l.recoveryPoint.Load() < newStart {
		l.recoveryPoint.Store(newStart)
	}
	if d := l.firstDirty.Load(); d >= 0 && d < newStart {
		l.firstDirty.Store(newStart)
	}
	var errs []error
	for _, s := range gone {
		l.env.logger.Info("deleting segment", "partition", l.tp.String(), "base_offset", s.base,
			"size", s.size.Load(), "reason", reason)
		errs = append(errs, s.remove())
	}
	l.producers.truncateHead(newStart)
	l.publishUnstableLocked()
	l.recountAbortedLocked()
	l.producers.deleteSnapshots(rest[0].base, math.MaxInt64)
	errs = append(errs, l.epochs.truncateFromStart(newStart))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: delete segments: %w", l.tp, err)
	}
	return nil
}

// DeleteRecordsBefore advances the log start offset to offset (the
// DeleteRecords API; -1 means the high watermark) and deletes the segments
// wholly below it. offset must not pass the high watermark.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	hw := l.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return l.logStart.Load(), fmt.Errorf("%s: %w: delete records before %d, high watermark %d", l.tp, ErrOffsetOutOfRange, offset, hw)
	}
	if offset <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	l.logStart.Store(offset)
	segs := l.segments()
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= offset {
		n++
	}
	if n > 0 {
		if err := l.deleteSegmentsLocked(n, "delete records"); err != nil {
			return l.logStart.Load(), err
		}
	} else {
		l.producers.truncateHead(offset)
		l.publishUnstableLocked()
		if err := l.epochs.truncateFromStart(offset); err != nil {
			return offset, err
		}
		if d := l.firstDirty.Load(); d >= 0 && d < offset {
			l.firstDirty.Store(offset)
		}
	}
	return l.logStart.Load(), nil
}

// Truncate removes every offset >= toOffset (a follower diverged from its
// leader). Batches are removed whole: a batch that straddles toOffset goes,
// and the log end offset becomes toOffset. Producer state is rebuilt and the
// leader epoch cache truncated.
func (l *Log) Truncate(toOffset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkOpen(); err != nil {
		return err
	}
	if toOffset < 0 {
		return fmt.Errorf("%s: cannot truncate to negative offset %d", l.tp, toOffset)
	}
	if toOffset >= l.LogEndOffset() {
		return nil
	}
	segs := l.segments()
	if toOffset <= segs[0].base || toOffset < l.logStart.Load() {
		return l.truncateFullyLocked(toOffset)
	}
	l.env.logger.Info("truncating log", "partition", l.tp.String(), "to", toOffset, "log_end", l.LogEndOffset())
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base >= toOffset })
	// segs[i:] start at or after toOffset: drop them; segs[i-1] is cut.
	keep := append([]*segment(nil), segs[:i]...)
	drop := segs[i:]
	last := keep[len(keep)-1]
	cfg := l.cfg.Load()
	if !last.isActive() {
		if err := last.activate(cfg.maxIdx, cfg.SegmentBytes); err != nil {
			return fmt.Errorf("%s: truncate: %w", l.tp, err)
		}
	}
	l.truncations++
	if err := last.truncateTo(toOffset); err != nil {
		return fmt.Errorf("%s: truncate: %w", l.tp, err)
	}
	if err := last.txn.truncate(toOffset); err != nil {
		return fmt.Errorf("%s: truncate: %w", l.tp, err)
	}
	l.segs.Store(&keep)
	var errs []error
	for _, s := range drop {
		errs = append(errs, s.remove())
	}
	if l.recoveryPoint.Load() > toOffset {
		l.recoveryPoint.Store(toOffset)
	}
	if l.hw.Load() > toOffset {
		l.hw.Store(toOffset)
	}
	if d := l.firstDirty.Load(); d > toOffset {
		l.firstDirty.Store(toOffset)
	}
	errs = append(errs, l.epochs.truncateFromEnd(toOffset))
	errs = append(errs, l.reloadProducersLocked(toOffset))
	l.recountAbortedLocked()
	return errors.Join(errs...)
}

// reloadProducersLocked rebuilds producer state as of upTo from the newest
// snapshot at or below it and the log after it.
func (l *Log) reloadProducersLocked(upTo int64) error {
	l.producers.deleteSnapshots(-1, upTo)
	from := l.producers.loadLatest(upTo, func(path string, err error) {
		l.env.logger.Warn("unreadable producer snapshot", "file", path, "err", err)
	})
	if from < 0 {
		from = l.logStart.Load()
	}
	if err := l.replayProducers(from, upTo, false); err != nil {
		return err
	}
	l.producers.truncateHead(l.logStart.Load())
	l.producers.replicated(l.hw.Load())
	l.publishUnstableLocked()
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (a follower far behind a leader whose log starts later).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkOpen(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%s: cannot start at negative offset %d", l.tp, offset)
	}
	l.env.logger.Info("truncating log fully", "partition", l.tp.String(), "start", offset)
	l.truncations++
	segs := l.segments()
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.remove())
	}
	s, err := createSegment(l.env.fs, l.dir, offset, &l.cfg.Load().LogConfig, l.env.nowMs())
	if err != nil {
		return fmt.Errorf("%s: %w", l.tp, errors.Join(append(errs, err)...))
	}
	ns := []*segment{s}
	l.segs.Store(&ns)
	l.logStart.Store(offset)
	l.hw.Store(offset)
	l.recoveryPoint.Store(offset)
	if l.firstDirty.Load() >= 0 {
		l.firstDirty.Store(offset)
	}
	l.producers.reset()
	l.publishUnstableLocked()
	l.recountAbortedLocked()
	l.producers.deleteSnapshots(math.MaxInt64, -1)
	errs = append(errs, l.epochs.clear())
	return errors.Join(errs...)
}

func (s *segment) isActive() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.active
}

// truncateTo cuts the segment at the batch holding offset to (or the first
// batch after it) and sets its next offset to to. The segment is active.
func (s *segment) truncateTo(to int64) error {
	f, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	size := s.size.Load()
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	cut, found, err := s.translate(f, to, size, hb[:], &h)
	if err != nil {
		return err
	}
	if !found {
		cut = size
	}
	cutBase := h.BaseOffset
	if !found {
		cutBase = to
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.mapIndexesLocked(); err != nil {
		return err
	}
	s.unmapLogLocked() // before the file shrinks: no reader may fault on a cut page
	s.trimRecentLocked(cut)
	n := s.oi.entries()
	keep := sort.Search(n, func(i int) bool { _, p := s.oi.offsetEntry(i); return p >= cut })
	s.oi.truncateEntries(keep)
	n = s.ti.entries()
	keep = sort.Search(n, func(i int) bool { _, o := s.ti.timeEntry(i); return o >= cutBase })
	s.ti.truncateEntries(keep)
	if err := f.Truncate(cut); err != nil {
		return err
	}
	s.logDirty.Store(true)
	s.size.Store(cut)
	s.next.Store(max(to, s.base))
	// Max timestamp: the last time entry, then the batches after the last
	// offset entry.
	ts, off := s.ti.lastTimeEntry()
	scan := int64(0)
	if n := s.oi.entries(); n > 0 {
		_, scan = s.oi.offsetEntry(n - 1)
	}
	s.bytesSinceIndex = cut - scan
	for p := scan; p < cut; p += int64(h.Size()) {
		if err := readHeader(f, p, cut, hb[:], &h); err != nil {
			return err
		}
		if h.MaxTimestamp > ts {
			ts, off = h.MaxTimestamp, h.LastOffset()
		}
	}
	s.maxTS.Store(ts)
	s.offsetOfMaxTS.Store(off)
	return nil
}

// OffsetForTimestamp finds the first record (at or after the log start) with
// a timestamp >= ts: its offset and timestamp. found is false when every
// record is older.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	if err := l.checkOpen(); err != nil {
		return 0, 0, false, err
	}
	lso := l.LogStartOffset()
	for _, s := range l.segments() {
		if maxTS, _ := s.maxTimestamp(); maxTS < ts || s.next.Load() <= lso {
			continue
		}
		offset, timestamp, found, err = s.findTimestamp(ts, lso)
		if errors.Is(err, errSegmentGone) {
			return l.OffsetForTimestamp(ts)
		}
		if err != nil || found {
			if err != nil {
				err = fmt.Errorf("%s: %w", l.tp, err)
			}
			return offset, timestamp, found, err
		}
	}
	return -1, -1, false, nil
}

func (s *segment) findTimestamp(ts, lso int64) (int64, int64, bool, error) {
	f, err := s.acquire()
	if err != nil {
		return 0, 0, false, err
	}
	defer s.release()
	size := s.size.Load()
	from := s.base
	if err := s.withIndexes(func(_, ti *index) { from = ti.lookupTime(ts) }); err != nil {
		return 0, 0, false, err
	}
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	pos, found, err := s.translate(f, max(from, lso), size, hb[:], &h)
	if err != nil || !found {
		return 0, 0, false, err
	}
	var buf []byte
	for ; pos < size; pos += int64(h.Size()) {
		if err := readHeader(f, pos, size, hb[:], &h); err != nil {
			return 0, 0, false, err
		}
		if h.MaxTimestamp < ts || h.LastOffset() < lso || h.RecordCount == 0 {
			continue
		}
		if cap(buf) < h.Size() {
			buf = make([]byte, h.Size())
		}
		b := buf[:h.Size()]
		if _, err := f.ReadAt(b, pos); err != nil {
			return 0, 0, false, err
		}
		var off, t int64
		hit := false
		err := record.WalkRecords(&h, b, func(h *record.BatchHeader, r *record.Record) error {
			o := h.BaseOffset + int64(r.OffsetDelta)
			rts := h.BaseTimestamp + r.TimestampDelta
			if h.LogAppendTime() {
				rts = h.MaxTimestamp
			}
			if o >= lso && rts >= ts {
				off, t, hit = o, rts, true
				return errStopWalk
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopWalk) {
			return 0, 0, false, fmt.Errorf("batch at %d of %s: %w", pos, f.Name(), err)
		}
		if hit {
			return off, t, true, nil
		}
	}
	return 0, 0, false, nil
}

var errStopWalk = errors.New("stop")

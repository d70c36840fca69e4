package storage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/sluice-io/sluice/record"
)

// Compaction (cleanup.policy=compact), after Kafka's LogCleaner:
//
//   - The cleanable range ends at the active segment, the high watermark
//     and, with min.compaction.lag.ms, the first segment with a record newer
//     than the lag. Only whole segments in it are cleaned.
//   - The dirty part starts at the cleaner checkpoint (firstDirty); a log is
//     cleaned when dirty bytes / cleanable bytes >= min.cleanable.dirty.ratio.
//   - A map from key to its newest offset is built from the dirty part, then
//     every cleanable segment (clean and dirty) is rewritten keeping a record
//     when no newer record has its key. Offsets never change: batches keep
//     their base offset and last offset delta, so gaps appear instead.
//   - A tombstone (null value) stays until its batch's delete horizon
//     (KIP-534): the first cleaning that keeps it stamps the batch with
//     now + delete.retention.ms; a cleaning after that drops it.
//   - Consecutive segments are merged while they fit segment.bytes.
//   - Each group is written to <base>.log.cleaned (+ indexes), fsynced,
//     renamed to .swap, then the old segments are renamed to .deleted, the
//     .swap files take their final names and the .deleted files go. A crash
//     before the .swap rename leaves the old segments (and .cleaned files,
//     removed at start); after it, loading finishes the swap.
//   - Batches emptied by cleaning are dropped, except the last batch of a
//     producer the log still tracks, which stays as an empty batch so the
//     producer's sequence survives (Kafka does the same), and the last batch
//     of each group, so the output's offset range covers what it replaces.
//   - Transactions (Kafka's CleanedTransactionMetadata): cleaning never
//     passes the last stable offset; the batches of aborted transactions
//     (from the transaction index) are dropped whatever their keys and
//     never enter the offset map; an ABORT marker stays, and is written to
//     the cleaned segment's transaction index, while data of its
//     transaction survives in what is cleaned; a COMMIT marker whose
//     transaction has no data left, or an ABORT marker whose aborted data
//     is gone, is stamped with a delete horizon and removed once it passed
//     (delete.retention.ms), as tombstones are; a producer's last marker
//     stays (empty) while the producer has no data batch, for its epoch.

// CleanResult reports one cleaning.
type CleanResult struct {
	Cleaned              bool
	SegmentsBefore       int
	SegmentsAfter        int
	BytesBefore          int64
	BytesAfter           int64
	RecordsRemoved       int64
	FirstDirty, EndDirty int64
	DirtyRatio           float64
}

// RunCleaner compacts every log whose cleanup.policy includes compact and
// whose dirty ratio passes min.cleanable.dirty.ratio. Returns how many logs
// were cleaned.
func (m *Manager) RunCleaner() int {
	n := 0
	for _, l := range m.Logs() {
		if m.ctx != nil && m.ctx.Err() != nil {
			break
		}
		if !l.cfg.Load().compact {
			continue
		}
		res, err := l.Clean(false)
		if err != nil && !l.closed.Load() {
			m.cfg.Logger.Error("log cleaner", "partition", l.tp.String(), "err", err)
		}
		if res.Cleaned {
			n++
			m.cfg.Logger.Info("log cleaned", "partition", l.tp.String(), "bytes_before", res.BytesBefore,
				"bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved, "dirty_ratio", res.DirtyRatio)
		}
	}
	return n
}

// cleanerHook, when set (tests only), is called at each step of a swap with
// the step's name, while the files are exactly as a crash at that moment
// would leave them.
var cleanerHook func(step string)

func hook(step string) {
	if cleanerHook != nil {
		cleanerHook(step)
	}
}

// Clean compacts the log now when its dirty ratio passes
// min.cleanable.dirty.ratio, or regardless when force is set. It is a no-op
// for logs whose cleanup.policy has no compact.
func (l *Log) Clean(force bool) (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()

	var res CleanResult
	l.mu.Lock()
	if err := l.checkOpen(); err != nil {
		l.mu.Unlock()
		return res, err
	}
	cfg := l.cfg.Load()
	if !cfg.compact {
		l.mu.Unlock()
		return res, nil
	}
	now := l.env.nowMs()
	segs := l.segments()
	lso := l.logStart.Load()
	firstDirty := l.firstDirty.Load()
	if firstDirty < lso {
		firstDirty = lso
	}
	// Never past the last stable offset: what an open transaction wrote
	// may still be aborted.
	uncleanable := min(segs[len(segs)-1].base, l.hw.Load(), l.producers.firstUnstable())
	producerLast := make(map[int64]lastRecord, len(l.producers.producers))
	for id, st := range l.producers.producers {
		lr := lastRecord{dataOffset: -1, epoch: st.epoch}
		if b := st.last(); b != nil {
			lr.dataOffset = b.lastOffset
		}
		producerLast[id] = lr
	}
	l.mu.Unlock()

	// Whole segments below the uncleanable offset, minus those holding
	// records younger than min.compaction.lag.ms.
	end := 0
	for end < len(segs)-1 && segs[end+1].base <= uncleanable {
		if cfg.MinCompactionLagMs > 0 && segs[end].largestTimestamp() > now-cfg.MinCompactionLagMs {
			break
		}
		end++
	}
	if end == 0 {
		return res, nil
	}
	group := segs[:end]
	endDirty := segs[end].base
	var cleanBytes, dirtyBytes int64
	for i, s := range group {
		if segs[i+1].base <= firstDirty {
			cleanBytes += s.size.Load()
		} else {
			dirtyBytes += s.size.Load()
		}
	}
	res.FirstDirty, res.EndDirty = firstDirty, endDirty
	if dirtyBytes+cleanBytes > 0 {
		res.DirtyRatio = float64(dirtyBytes) / float64(dirtyBytes+cleanBytes)
	}
	if !force && (dirtyBytes == 0 || res.DirtyRatio < cfg.MinCleanableDirtyRatio) {
		return res, nil
	}

	// The offset map: newest offset of each key in the dirty part, but
	// for aborted transactions' records.
	offsets := make(map[string]int64)
	mapTxns := newCleanTxns()
	mapTxns.add(l.AbortedTransactions(firstDirty, endDirty))
	for i, s := range group {
		if segs[i+1].base <= firstDirty {
			continue
		}
		err := l.scanSegment(s, func(h *record.BatchHeader, batch []byte) error {
			if h.NextOffset() <= firstDirty {
				return nil
			}
			if h.Control() {
				mapTxns.onControl(h, batch)
				return nil
			}
			if mapTxns.onData(h) {
				return nil
			}
			return record.WalkRecords(h, batch, func(h *record.BatchHeader, r *record.Record) error {
				if off := h.BaseOffset + int64(r.OffsetDelta); r.Key != nil && off >= firstDirty {
					offsets[string(r.Key)] = off
				}
				return nil
			})
		})
		if err != nil {
			return res, err
		}
	}

	// Rewrite, group by group.
	c := &cleaner{l: l, cfg: cfg, now: now, offsets: offsets, producerLast: producerLast, txns: newCleanTxns()}
	res.SegmentsBefore = len(group)
	for start := 0; start < len(group); {
		stop := start + 1
		size := group[start].size.Load()
		for stop < len(group) && size+group[stop].size.Load() <= cfg.SegmentBytes &&
			segs[stop+1].base-group[start].base <= math.MaxInt32 {
			size += group[stop].size.Load()
			stop++
		}
		next := segs[stop].base
		before := size
		out, removed, err := c.cleanGroup(group[start:stop], next)
		if err != nil {
			return res, err
		}
		res.BytesBefore += before
		res.BytesAfter += out
		res.RecordsRemoved += removed
		res.SegmentsAfter++
		start = stop
	}
	res.Cleaned = true
	l.mu.Lock()
	if l.firstDirty.Load() < endDirty {
		l.firstDirty.Store(endDirty)
	}
	l.recountAbortedLocked()
	l.mu.Unlock()
	return res, nil
}

// scanSegment calls fn for each batch of a segment (CRC checked).
func (l *Log) scanSegment(s *segment, fn func(h *record.BatchHeader, batch []byte) error) error {
	f, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	sc := newBatchScanner(f, 0, s.size.Load(), true)
	for sc.next() {
		if err := fn(&sc.h, sc.batch); err != nil {
			return fmt.Errorf("%s at %d: %w", f.Name(), sc.pos, err)
		}
	}
	if sc.err != nil {
		return sc.err
	}
	if sc.bad != nil {
		return fmt.Errorf("%s: %w", f.Name(), sc.bad)
	}
	return nil
}

type cleaner struct {
	l            *Log
	cfg          *logConfig
	now          int64
	offsets      map[string]int64
	producerLast map[int64]lastRecord
	txns         *cleanTxns // carried from group to group
	body, out    []byte
}

// lastRecord is what the cleaner keeps of a producer the log tracks (Kafka's
// LastRecord): the batch holding its last sequence, or, when it has written
// only markers, its last marker (which carries its epoch).
type lastRecord struct {
	dataOffset int64 // last offset of its last data batch, -1: none
	epoch      int16
}

// cleanGroup writes the retained batches of group into one new segment and
// swaps it in. next is the base offset of the segment after the group.
func (c *cleaner) cleanGroup(group []*segment, next int64) (size, removed int64, err error) {
	l := c.l
	base := group[0].base
	ns, err := createSegmentExt(l.env.fs, l.dir, base, cleanedSuffix, &c.cfg.LogConfig, c.now)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: cleaner: %w", l.tp, err)
	}
	fail := func(err error) (int64, int64, error) {
		ns.close()
		for _, suf := range segmentFileSuffixes {
			l.env.fs.Remove(ns.path(suf))
		}
		return 0, 0, fmt.Errorf("%s: cleaner: %w", l.tp, err)
	}
	interval := int64(c.cfg.IndexIntervalBytes)
	c.txns.add(l.AbortedTransactions(base, next))
	c.txns.index = c.txns.index[:0]
	// The group's last batch always stays, emptied if need be: the output's
	// end offset then covers every segment it replaces, which is how a
	// crash-interrupted swap finds the old segments to remove at load.
	var lastDropped []byte
	for _, s := range group {
		err := l.scanSegment(s, func(h *record.BatchHeader, batch []byte) error {
			out, n, err := c.filterBatch(h, batch)
			if err != nil {
				return err
			}
			removed += n
			if len(out) == 0 {
				lastDropped = append(lastDropped[:0], batch[:record.BatchHeaderSize]...)
				return nil
			}
			lastDropped = lastDropped[:0]
			return ns.appendBatches(out, interval)
		})
		if err != nil {
			return fail(err)
		}
	}
	if len(lastDropped) > 0 {
		var h record.BatchHeader
		record.DecodeHeader(lastDropped, &h)
		c.out = append(c.out[:0], lastDropped...)
		if err := ns.appendBatches(c.emptyBatch(&h), interval); err != nil {
			return fail(err)
		}
	}
	ns.next.Store(next)
	// The aborted transactions whose marker stayed in the output.
	if err := ns.txn.replace(append([]AbortedTxn(nil), c.txns.index...)); err != nil {
		return fail(err)
	}
	if err := ns.deactivate(); err != nil {
		return fail(err)
	}
	if err := ns.flush(); err != nil {
		return fail(err)
	}
	// .cleaned -> .swap: from here a crash completes the swap at load.
	// Kafka's names: <base>.log.cleaned -> <base>.log.swap. The log file
	// goes last: a .log.swap means every file of the output is complete.
	swapName := func(suf string) string {
		return filepath.Join(l.dir, offsetFileName(base, suf)+swapSuffix)
	}
	for _, suf := range segmentFileSuffixes {
		if err := l.env.fs.Rename(ns.path(suf), swapName(suf)); err != nil {
			return fail(err)
		}
	}
	hook("swap")
	ns.setExt(swapSuffix)
	if err := syncDir(l.env.fs, l.dir); err != nil {
		return fail(err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	segs := l.segments()
	at := -1
	for i, s := range segs {
		if s == group[0] {
			at = i
			break
		}
	}
	ok := at >= 0 && at+len(group) < len(segs)
	for i := 0; ok && i < len(group); i++ {
		ok = segs[at+i] == group[i]
	}
	if !ok || l.closed.Load() {
		// Retention or truncation changed the log meanwhile: drop the output.
		_, _, err := fail(errors.New("log changed during cleaning"))
		if l.closed.Load() {
			return 0, 0, nil
		}
		l.env.logger.Info("cleaning abandoned", "partition", l.tp.String(), "reason", err)
		return 0, 0, nil
	}
	for i, s := range group {
		if err := s.retire(); err != nil {
			return 0, 0, fmt.Errorf("%s: cleaner: retire %s: %w", l.tp, s.path(logSuffix), err)
		}
		if i == 0 {
			hook("retired-first")
		}
	}
	hook("retired")
	for _, suf := range segmentFileSuffixes {
		final := (&segment{fs: l.env.fs, dir: l.dir, base: base}).path(suf)
		if err := l.env.fs.Rename(ns.path(suf), final); err != nil {
			return 0, 0, fmt.Errorf("%s: cleaner: %w", l.tp, err)
		}
		hook("renamed" + suf)
	}
	ns.setExt("")
	if err := syncDir(l.env.fs, l.dir); err != nil {
		return 0, 0, err
	}
	nsegs := make([]*segment, 0, len(segs)-len(group)+1)
	nsegs = append(nsegs, segs[:at]...)
	nsegs = append(nsegs, ns)
	nsegs = append(nsegs, segs[at+len(group):]...)
	l.segs.Store(&nsegs)
	for _, s := range group {
		s.removeRetired()
	}
	hook("done")
	return ns.size.Load(), removed, nil
}

// retainEmpty reports whether a batch whose records all go stays as an
// empty batch: the batch of a producer the log tracks that holds its last
// sequence, or, for a producer with only markers, its marker at its epoch
// (Kafka's isBatchLastRecordOfProducer).
func (c *cleaner) retainEmpty(h *record.BatchHeader) bool {
	if h.ProducerID < 0 {
		return false
	}
	last, ok := c.producerLast[h.ProducerID]
	if !ok {
		return false
	}
	if last.dataOffset >= 0 {
		return last.dataOffset == h.LastOffset()
	}
	return h.Control() && h.ProducerEpoch == last.epoch
}

// drop is the outcome of a batch whose records all go.
func (c *cleaner) drop(h *record.BatchHeader, batch []byte) ([]byte, int64, error) {
	if c.retainEmpty(h) {
		c.out = append(c.out[:0], batch[:record.BatchHeaderSize]...)
		return c.emptyBatch(h), int64(h.RecordCount), nil
	}
	return nil, int64(h.RecordCount), nil
}

// filterBatch returns the batch as it should be after cleaning (the input
// itself when nothing changes; nil when it goes) and how many records it lost.
func (c *cleaner) filterBatch(h *record.BatchHeader, batch []byte) ([]byte, int64, error) {
	if h.Control() {
		if !c.txns.onControl(h, batch) {
			return batch, 0, nil
		}
		// A marker whose transaction left nothing here: like a
		// tombstone, stamped with a delete horizon, then gone.
		if h.HasDeleteHorizon() && c.now >= h.BaseTimestamp {
			return c.drop(h, batch)
		}
		if h.HasDeleteHorizon() || h.RecordCount == 0 {
			return batch, 0, nil
		}
		return c.rebuild(h, batch, func(*record.BatchHeader, *record.Record) bool { return true }, h.RecordCount, true)
	}
	if c.txns.onData(h) {
		// An aborted transaction's records go whatever their keys.
		return c.drop(h, batch)
	}
	horizonPassed := h.HasDeleteHorizon() && c.now >= h.BaseTimestamp
	kept, tombstones := int32(0), false
	err := record.WalkRecords(h, batch, func(h *record.BatchHeader, r *record.Record) error {
		if c.retain(h, r, horizonPassed) {
			kept++
			tombstones = tombstones || r.Value == nil
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	removed := int64(h.RecordCount - kept)
	needHorizon := tombstones && !h.HasDeleteHorizon()
	if removed == 0 && !needHorizon {
		return batch, 0, nil
	}
	if kept == 0 {
		return c.drop(h, batch)
	}
	out, _, err := c.rebuild(h, batch, func(h *record.BatchHeader, r *record.Record) bool { return c.retain(h, r, horizonPassed) }, kept, needHorizon)
	return out, removed, err
}

// rebuild re-encodes the records of h that keep says stay (kept of them),
// stamping a delete horizon when needHorizon.
func (c *cleaner) rebuild(h *record.BatchHeader, batch []byte, keep func(*record.BatchHeader, *record.Record) bool, kept int32, needHorizon bool) ([]byte, int64, error) {
	// Rebuild: same base offset, producer fields, last offset delta and
	// codec; timestamps re-based when a delete horizon is stamped.
	newBase := h.BaseTimestamp
	if needHorizon {
		newBase = c.now + c.cfg.DeleteRetentionMs
	}
	maxTS := int64(-1)
	c.body = c.body[:0]
	err := record.WalkRecords(h, batch, func(h *record.BatchHeader, r *record.Record) error {
		if !keep(h, r) {
			return nil
		}
		ts := h.BaseTimestamp + r.TimestampDelta
		maxTS = max(maxTS, ts)
		rr := *r
		rr.TimestampDelta = ts - newBase
		c.body = record.AppendRecord(c.body, &rr, r.OffsetDelta)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if h.LogAppendTime() {
		maxTS = h.MaxTimestamp
	}
	c.out = append(c.out[:0], batch[:record.BatchHeaderSize]...)
	if c.out, err = record.Compress(h.Compression(), c.out, c.body); err != nil {
		return nil, 0, err
	}
	nh := *h
	nh.BatchLength = int32(len(c.out) - record.BatchLengthOverhead)
	nh.BaseTimestamp = newBase
	nh.MaxTimestamp = maxTS
	nh.RecordCount = kept
	if needHorizon || h.HasDeleteHorizon() {
		nh.Attributes |= record.AttrHasDeleteHorizon
	}
	record.PutHeader(c.out, &nh)
	binary.BigEndian.PutUint32(c.out[record.OffCRC:], record.BatchCRC(c.out))
	return c.out, int64(h.RecordCount - kept), nil
}

// emptyBatch turns c.out (a copy of h's header) into a batch with no records.
func (c *cleaner) emptyBatch(h *record.BatchHeader) []byte {
	nh := *h
	nh.BatchLength = record.MinBatchLength
	nh.RecordCount = 0
	nh.Attributes &^= record.AttrCompressionMask
	record.PutHeader(c.out, &nh)
	binary.BigEndian.PutUint32(c.out[record.OffCRC:], record.BatchCRC(c.out))
	return c.out
}

// retain decides one record: it needs a key, no newer record of that key
// may exist, and a tombstone goes once its batch's delete horizon passed.
func (c *cleaner) retain(h *record.BatchHeader, r *record.Record, horizonPassed bool) bool {
	if r.Key == nil {
		return false
	}
	if newest, ok := c.offsets[string(r.Key)]; ok && h.BaseOffset+int64(r.OffsetDelta) < newest {
		return false
	}
	if r.Value == nil && horizonPassed {
		return false
	}
	return true
}

// cleanTxns follows transactions through the batches a cleaning reads, in
// offset order (Kafka's CleanedTransactionMetadata): which data batches
// belong to aborted transactions, which markers may go, and the index
// entries of the abort markers that stay.
type cleanTxns struct {
	aborted   []AbortedTxn // from the transaction index, by first offset
	next      int          // aborted[next:] are not reached yet
	abortedBy map[int64]*cleanAborted
	committed map[int64]bool // producers with committed data read since their last marker
	index     []AbortedTxn   // abort markers kept in the current output
}

type cleanAborted struct {
	txn      AbortedTxn
	observed bool // data of the transaction was read (and dropped)
}

func newCleanTxns() *cleanTxns {
	return &cleanTxns{abortedBy: map[int64]*cleanAborted{}, committed: map[int64]bool{}}
}

// add takes aborted transactions of a range about to be read (ranges are
// added in offset order; an entry already known is skipped).
func (t *cleanTxns) add(es []AbortedTxn) {
	rest := t.aborted[t.next:]
	for _, a := range es {
		dup := false
		for _, b := range rest {
			if b == a {
				dup = true
				break
			}
		}
		for _, b := range t.abortedBy {
			if b.txn == a {
				dup = true
			}
		}
		if !dup {
			rest = append(rest, a)
		}
	}
	slices.SortFunc(rest, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	t.aborted, t.next = rest, 0
}

// reach starts the aborted transactions whose first offset is at or below
// offset.
func (t *cleanTxns) reach(offset int64) {
	for t.next < len(t.aborted) && t.aborted[t.next].FirstOffset <= offset {
		a := t.aborted[t.next]
		t.next++
		if _, ok := t.abortedBy[a.ProducerID]; !ok {
			t.abortedBy[a.ProducerID] = &cleanAborted{txn: a}
		}
	}
}

// onData reports whether a data batch belongs to an aborted transaction.
func (t *cleanTxns) onData(h *record.BatchHeader) bool {
	t.reach(h.LastOffset())
	if !h.Transactional() {
		return false
	}
	if a, ok := t.abortedBy[h.ProducerID]; ok {
		a.observed = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onControl reports whether a control batch may go: an abort marker once no
// data of its transaction is in what was read (else it stays, indexed), a
// commit marker once none of its transaction's data was read, an empty
// control batch always; other control records stay.
func (t *cleanTxns) onControl(h *record.BatchHeader, batch []byte) bool {
	t.reach(h.LastOffset())
	m, ok, err := record.ParseEndTxnMarker(h, batch)
	if err != nil {
		return false
	}
	if !ok {
		return h.RecordCount == 0
	}
	if !m.Commit {
		a, found := t.abortedBy[h.ProducerID]
		delete(t.abortedBy, h.ProducerID)
		if found && a.observed {
			t.index = append(t.index, a.txn)
			return false
		}
		return true
	}
	had := t.committed[h.ProducerID]
	delete(t.committed, h.ProducerID)
	return !had
}

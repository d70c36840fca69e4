package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// producerBatchesRemembered is how many recent batches of each producer are
// kept for duplicate detection: a producer has at most 5 requests in flight
// (max.in.flight.requests.per.connection with idempotence), so a retry can
// only repeat one of its last 5 batches.
const producerBatchesRemembered = 5

type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	timestamp               int64
}

// producerState is what the log knows about one producer id.
type producerState struct {
	id            int64
	epoch         int16
	batches       [producerBatchesRemembered]batchMeta // ring, oldest at head
	head, n       int
	lastTimestamp int64
	// coordinatorEpoch is that of the last end-transaction marker (-1:
	// none): a marker from an older coordinator is fenced.
	coordinatorEpoch int32
	// txnFirstOffset is the first offset of the producer's open
	// transaction, -1 when none is open.
	txnFirstOffset int64
}

func (p *producerState) last() *batchMeta {
	if p.n == 0 {
		return nil
	}
	return &p.batches[(p.head+p.n-1)%producerBatchesRemembered]
}

func (p *producerState) add(b batchMeta) {
	if p.n < producerBatchesRemembered {
		p.batches[(p.head+p.n)%producerBatchesRemembered] = b
		p.n++
	} else {
		p.batches[p.head] = b
		p.head = (p.head + 1) % producerBatchesRemembered
	}
	p.lastTimestamp = max(p.lastTimestamp, b.timestamp)
}

func (p *producerState) entry() ProducerEntry {
	e := ProducerEntry{ProducerID: p.id, Epoch: p.epoch, LastSequence: -1, LastOffset: -1, LastTimestamp: p.lastTimestamp,
		CoordinatorEpoch: p.coordinatorEpoch, CurrentTxnStartOffset: p.txnFirstOffset}
	if b := p.last(); b != nil {
		e.LastSequence, e.LastOffset = b.lastSeq, b.lastOffset
	}
	return e
}

// ProducerEntry is the public view of one producer's state (what
// DescribeProducers answers).
type ProducerEntry struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32
	LastOffset    int64
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// end-transaction marker (-1: none).
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction (-1: none open).
	CurrentTxnStartOffset int64
}

// openTxn is a transaction open on the partition: its producer and the
// offset of its first batch.
type openTxn struct {
	first int64
	pid   int64
}

// doneTxn is a transaction whose marker is in the log but not yet below the
// high watermark (Kafka's unreplicated transactions): it still holds the
// last stable offset at its first offset.
type doneTxn struct {
	pid         int64
	first, last int64 // first batch, marker
}

// completedTxn is a transaction a marker just ended (Kafka's CompletedTxn).
type completedTxn struct {
	pid         int64
	first, last int64 // first batch, marker
	abort       bool
}

// producerStates holds every producer of a log, the transactions open on
// it and those ended but not yet replicated. Writer only (Log.mu).
type producerStates struct {
	fs        vfs.FS
	dir       string
	producers map[int64]*producerState
	// open are the open transactions, by first offset (ascending).
	open []openTxn
	// unreplicated are ended transactions whose marker the high watermark
	// has not passed, by first offset (ascending).
	unreplicated []doneTxn
	// snapAt is the offset at which the directory's snapshots already
	// give this state (a snapshot written or loaded there, or none at all
	// for an empty log), or snapStale when the state changed since: a
	// close at snapAt need not write a snapshot (Kafka's takeSnapshot
	// writes only when the map end offset moved past the last snapshot).
	snapAt int64
	// listed, while the log loads, are the snapshot files the load's read
	// of the directory found (kept up to date by deleteSnapshots), so the
	// load reads the directory once; nil otherwise.
	listed []int64
}

// snapStale: no snapshot is known to hold the current state.
const snapStale = math.MinInt64

func newProducerStates(fsys vfs.FS, dir string) *producerStates {
	return &producerStates{fs: fsys, dir: dir, producers: make(map[int64]*producerState), snapAt: snapStale}
}

// snapshotCurrent records that loading the log's snapshots at or below
// offset gives the current state, with nothing to replay after it.
func (ps *producerStates) snapshotCurrent(offset int64) { ps.snapAt = offset }

// needSnapshot reports whether a snapshot at offset must be written to keep
// the state: not when the snapshots on disk already give it there.
func (ps *producerStates) needSnapshot(offset int64) bool { return ps.snapAt != offset }

// pendingProducer tracks a producer's state across the batches of one
// append before they are written.
type pendingProducer struct {
	id         int64
	epoch      int16
	lastSeq    int32
	known      bool
	inTxn      bool  // a transaction is open (stored, or opened earlier in the append)
	coordEpoch int32 // coordinator epoch of the last marker
}

func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == math.MaxInt32)
}

// check validates a producer batch's epoch and sequence as Kafka's
// ProducerAppendInfo does for a leader append, against the stored state and
// the earlier batches of the same append (pend). It returns the original
// batch when h repeats one of the producer's last 5 batches.
//
// A control batch (marker is its end-transaction marker) is checked for its
// epoch and coordinator epoch only. origin says how much is checked: a
// client's batches have their sequences checked and may not be control
// batches; the coordinators' (transactional offset commits, markers) have
// their epochs checked only.
func (ps *producerStates) check(h *record.BatchHeader, marker *record.EndTxnMarker, origin AppendOrigin, pend *[]pendingProducer) (*batchMeta, error) {
	var p *pendingProducer
	for i := range *pend {
		if (*pend)[i].id == h.ProducerID {
			p = &(*pend)[i]
		}
	}
	st := ps.producers[h.ProducerID]
	if p == nil {
		*pend = append(*pend, pendingProducer{id: h.ProducerID, epoch: -1, lastSeq: -1, coordEpoch: -1})
		p = &(*pend)[len(*pend)-1]
		if st != nil {
			p.epoch, p.known = st.epoch, true
			p.inTxn, p.coordEpoch = st.txnFirstOffset >= 0, st.coordinatorEpoch
			if b := st.last(); b != nil {
				p.lastSeq = b.lastSeq
			}
		}
	}
	if h.Control() {
		if origin == OriginClient {
			return nil, fmt.Errorf("%w: clients are not allowed to write control records", record.ErrInvalidRecord)
		}
		if p.known && h.ProducerEpoch < p.epoch {
			return nil, fmt.Errorf("%w: marker for producer %d at epoch %d, older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, p.epoch)
		}
		if marker != nil {
			if p.coordEpoch > marker.CoordinatorEpoch {
				return nil, fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, older than %d",
					ErrTransactionCoordinatorFenced, h.ProducerID, marker.CoordinatorEpoch, p.coordEpoch)
			}
			p.coordEpoch = marker.CoordinatorEpoch
			p.inTxn = false
		}
		if h.ProducerEpoch != p.epoch {
			p.lastSeq = -1
		}
		p.epoch, p.known = h.ProducerEpoch, true
		return nil, nil
	}
	if p.known && h.ProducerEpoch < p.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, p.epoch)
	}
	// A transaction's batches must all be transactional (Kafka's
	// appendDataBatch); the first transactional batch opens it.
	if p.inTxn && !h.Transactional() {
		return nil, fmt.Errorf("%w: producer %d wrote a non-transactional batch while its transaction is open", ErrInvalidTxnState, h.ProducerID)
	}
	p.inTxn = p.inTxn || h.Transactional()
	if origin == OriginCoordinator {
		// The coordinators' own writes carry no sequence to check (a
		// transactional offset commit starts every batch at 0).
		p.epoch, p.known = h.ProducerEpoch, true
		return nil, nil
	}
	if h.BaseSequence < 0 {
		// Transactional markers and non-idempotent batches with a
		// producer id: only the epoch matters.
		p.epoch, p.known = h.ProducerEpoch, true
		return nil, nil
	}
	if st != nil && h.ProducerEpoch == st.epoch {
		last := h.LastSequence()
		for i := 0; i < st.n; i++ {
			b := &st.batches[(st.head+i)%producerBatchesRemembered]
			if b.firstSeq == h.BaseSequence && b.lastSeq == last {
				return b, nil
			}
		}
	}
	switch {
	case !p.known || p.epoch == -1:
		// Unknown producer (new, or its state expired or was removed by
		// retention): any sequence is accepted, as Kafka does since KIP-360.
	case h.ProducerEpoch != p.epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
	case !inSequence(p.lastSeq, h.BaseSequence):
		return nil, fmt.Errorf("%w: producer %d epoch %d expected sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, p.lastSeq+1, h.BaseSequence)
	}
	p.epoch, p.known, p.lastSeq = h.ProducerEpoch, true, h.LastSequence()
	return nil, nil
}

// state returns the producer's state, created when new.
func (ps *producerStates) state(h *record.BatchHeader) *producerState {
	st := ps.producers[h.ProducerID]
	if st == nil {
		st = &producerState{id: h.ProducerID, epoch: h.ProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1}
		ps.producers[h.ProducerID] = st
	}
	if h.ProducerEpoch != st.epoch {
		st.epoch, st.head, st.n = h.ProducerEpoch, 0, 0
	}
	return st
}

// update records an appended data batch (leader, follower, recovery): its
// sequence, and the transaction it opens.
func (ps *producerStates) update(h *record.BatchHeader) {
	if h.ProducerID < 0 {
		return
	}
	ps.snapAt = snapStale
	st := ps.state(h)
	if h.BaseSequence >= 0 {
		st.add(batchMeta{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
			firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), timestamp: h.MaxTimestamp})
	} else {
		st.lastTimestamp = max(st.lastTimestamp, h.MaxTimestamp)
	}
	if h.Transactional() && st.txnFirstOffset < 0 {
		st.txnFirstOffset = h.BaseOffset
		ps.addOpen(openTxn{first: h.BaseOffset, pid: h.ProducerID})
	}
}

// endTxn records an appended end-transaction marker at offset, with its
// batch's timestamp: the producer takes the marker's epoch and coordinator
// epoch, and its open transaction, if any, ends (returned). A marker for a
// producer with nothing open changes nothing else (a marker written twice).
// The caller indexes an abort and then calls finish.
func (ps *producerStates) endTxn(h *record.BatchHeader, m record.EndTxnMarker) (completedTxn, bool) {
	ps.snapAt = snapStale
	st := ps.state(h)
	st.coordinatorEpoch = m.CoordinatorEpoch
	st.lastTimestamp = max(st.lastTimestamp, h.MaxTimestamp)
	if st.txnFirstOffset < 0 {
		return completedTxn{}, false
	}
	ct := completedTxn{pid: st.id, first: st.txnFirstOffset, last: h.BaseOffset, abort: !m.Commit}
	st.txnFirstOffset = -1
	return ct, true
}

// lastStableOffsetAt is the last stable offset an ended transaction's index
// entry records: the first offset of the earliest transaction still open
// of another producer, else the offset after the marker (Kafka's
// ProducerStateManager.lastStableOffset).
func (ps *producerStates) lastStableOffsetAt(ct completedTxn) int64 {
	for _, o := range ps.open {
		if o.pid != ct.pid {
			return o.first
		}
	}
	return ct.last + 1
}

// finish moves an ended transaction from open to unreplicated.
func (ps *producerStates) finish(ct completedTxn) {
	ps.removeOpen(ct.first)
	i := sort.Search(len(ps.unreplicated), func(i int) bool { return ps.unreplicated[i].first >= ct.first })
	ps.unreplicated = slices.Insert(ps.unreplicated, i, doneTxn{pid: ct.pid, first: ct.first, last: ct.last})
}

func (ps *producerStates) addOpen(o openTxn) {
	i := sort.Search(len(ps.open), func(i int) bool { return ps.open[i].first >= o.first })
	if i < len(ps.open) && ps.open[i].first == o.first {
		ps.open[i] = o
		return
	}
	ps.open = slices.Insert(ps.open, i, o)
}

func (ps *producerStates) removeOpen(first int64) {
	i := sort.Search(len(ps.open), func(i int) bool { return ps.open[i].first >= first })
	if i < len(ps.open) && ps.open[i].first == first {
		ps.open = slices.Delete(ps.open, i, i+1)
	}
}

// replicated drops the ended transactions whose marker is below hw: they
// no longer hold the last stable offset.
func (ps *producerStates) replicated(hw int64) {
	ps.unreplicated = slices.DeleteFunc(ps.unreplicated, func(d doneTxn) bool { return d.last < hw })
}

// firstUnstable is the first offset of the earliest open or unreplicated
// transaction, math.MaxInt64 when there is none.
func (ps *producerStates) firstUnstable() int64 {
	first := int64(math.MaxInt64)
	if len(ps.open) > 0 {
		first = ps.open[0].first
	}
	if len(ps.unreplicated) > 0 {
		first = min(first, ps.unreplicated[0].first)
	}
	return first
}

// rebuildOpen recomputes the open transactions from the producers (after
// loading a snapshot, which has no list of them) and forgets the
// unreplicated ones (a reload happens at or below the high watermark).
func (ps *producerStates) rebuildOpen() {
	ps.open = ps.open[:0]
	for _, st := range ps.producers {
		if st.txnFirstOffset >= 0 {
			ps.addOpen(openTxn{first: st.txnFirstOffset, pid: st.id})
		}
	}
	ps.unreplicated = nil
}

// reset forgets everything (a log truncated fully).
func (ps *producerStates) reset() {
	ps.producers = make(map[int64]*producerState)
	ps.open, ps.unreplicated = nil, nil
	ps.snapAt = snapStale
}

// truncateHead forgets producers whose last batch is below the log start,
// but for those with a transaction open, and ended transactions below it.
func (ps *producerStates) truncateHead(logStart int64) {
	for id, st := range ps.producers {
		if b := st.last(); st.txnFirstOffset < 0 && (b == nil || b.lastOffset < logStart) {
			delete(ps.producers, id)
			ps.snapAt = snapStale
		}
	}
	ps.replicated(logStart)
}

// expire forgets producers idle since before cutoff
// (producer.id.expiration.ms); a producer with an open transaction never
// expires.
func (ps *producerStates) expire(cutoffMs int64) {
	for id, st := range ps.producers {
		if st.lastTimestamp < cutoffMs && st.txnFirstOffset < 0 {
			delete(ps.producers, id)
			ps.snapAt = snapStale
		}
	}
}

// ---- snapshots ----
//
// <20-digit offset>.snapshot holds the state as of that offset (everything
// below it applied), in Kafka's ProducerStateManager format v1:
//
//	version int16 (1), crc uint32 (CRC-32C of what follows it),
//	count int32, then per entry: producerId int64, epoch int16,
//	lastSequence int32, lastOffset int64, offsetDelta int32,
//	timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64
//
// Sluice writes one entry per remembered batch, oldest first, so a restart
// keeps all 5 for duplicate detection; Kafka reading the file keeps the last
// entry of each producer, which is its newest batch.

const (
	snapshotVersion   = 1
	snapshotEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	snapshotHeader    = 2 + 4 + 4
)

func (ps *producerStates) snapshotPath(offset int64) string {
	return filepath.Join(ps.dir, offsetFileName(offset, snapshotSuffix))
}

// crc32c is the snapshot file's checksum table (CRC-32C, as Kafka's).
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// writeSnapshot writes the state as of offset.
func (ps *producerStates) writeSnapshot(offset int64) error {
	ids := make([]int64, 0, len(ps.producers))
	for id := range ps.producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := make([]byte, snapshotHeader, snapshotHeader+len(ids)*snapshotEntrySize)
	count := 0
	for _, id := range ids {
		st := ps.producers[id]
		put := func(bm *batchMeta) {
			b = binary.BigEndian.AppendUint64(b, uint64(st.id))
			b = binary.BigEndian.AppendUint16(b, uint16(st.epoch))
			seq, off, delta, ts := int32(-1), int64(-1), int32(0), st.lastTimestamp
			if bm != nil {
				seq, off, delta, ts = bm.lastSeq, bm.lastOffset, int32(bm.lastOffset-bm.firstOffset), bm.timestamp
			}
			b = binary.BigEndian.AppendUint32(b, uint32(seq))
			b = binary.BigEndian.AppendUint64(b, uint64(off))
			b = binary.BigEndian.AppendUint32(b, uint32(delta))
			b = binary.BigEndian.AppendUint64(b, uint64(ts))
			b = binary.BigEndian.AppendUint32(b, uint32(st.coordinatorEpoch))
			b = binary.BigEndian.AppendUint64(b, uint64(st.txnFirstOffset))
			count++
		}
		if st.n == 0 {
			put(nil)
		}
		for i := 0; i < st.n; i++ {
			put(&st.batches[(st.head+i)%producerBatchesRemembered])
		}
	}
	binary.BigEndian.PutUint16(b, snapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(count))
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], crc32c))
	if err := writeFileAtomic(ps.fs, ps.snapshotPath(offset), b); err != nil {
		ps.snapAt = snapStale
		return err
	}
	ps.snapAt = offset
	return nil
}

// readSnapshot replaces the state with the snapshot's.
func (ps *producerStates) readSnapshot(path string) error {
	b, err := vfs.ReadFile(ps.fs, path)
	if err != nil {
		return err
	}
	if len(b) < snapshotHeader {
		return fmt.Errorf("snapshot %s: %d bytes", path, len(b))
	}
	if v := binary.BigEndian.Uint16(b); v != snapshotVersion {
		return fmt.Errorf("snapshot %s: version %d", path, v)
	}
	if crc := crc32.Checksum(b[6:], crc32c); crc != binary.BigEndian.Uint32(b[2:]) {
		return fmt.Errorf("snapshot %s: crc mismatch", path)
	}
	n := int(int32(binary.BigEndian.Uint32(b[6:])))
	if n < 0 || len(b) != snapshotHeader+n*snapshotEntrySize {
		return fmt.Errorf("snapshot %s: %d entries in %d bytes", path, n, len(b))
	}
	producers := make(map[int64]*producerState)
	for e := b[snapshotHeader:]; len(e) > 0; e = e[snapshotEntrySize:] {
		id := int64(binary.BigEndian.Uint64(e))
		epoch := int16(binary.BigEndian.Uint16(e[8:]))
		seq := int32(binary.BigEndian.Uint32(e[10:]))
		off := int64(binary.BigEndian.Uint64(e[14:]))
		delta := int32(binary.BigEndian.Uint32(e[22:]))
		ts := int64(binary.BigEndian.Uint64(e[26:]))
		st := producers[id]
		if st == nil || st.epoch != epoch {
			st = &producerState{id: id, epoch: epoch}
			producers[id] = st
		}
		// The transaction fields are the producer's, whatever entry
		// carries them: the last one read wins (Kafka reads one entry per
		// producer).
		st.coordinatorEpoch = int32(binary.BigEndian.Uint32(e[34:]))
		st.txnFirstOffset = int64(binary.BigEndian.Uint64(e[38:]))
		if st.txnFirstOffset < -1 {
			st.txnFirstOffset = -1
		}
		if seq >= 0 && off >= 0 {
			st.add(batchMeta{firstSeq: seq - delta, lastSeq: seq, firstOffset: off - int64(delta), lastOffset: off, timestamp: ts})
		} else {
			st.lastTimestamp = max(st.lastTimestamp, ts)
		}
	}
	ps.producers = producers
	ps.snapAt = snapStale
	ps.rebuildOpen()
	return nil
}

// snapshotOffsets lists the snapshot files of the directory, ascending.
func (ps *producerStates) snapshotOffsets() []int64 {
	if ps.listed != nil {
		return slices.Clone(ps.listed)
	}
	ents, _ := ps.fs.ReadDir(ps.dir)
	var offs []int64
	for _, e := range ents {
		if o, ok := parseOffsetFileName(e.Name(), snapshotSuffix); ok {
			offs = append(offs, o)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs
}

// deleteSnapshots removes snapshots with offset > above or < below.
func (ps *producerStates) deleteSnapshots(below, above int64) {
	for _, o := range ps.snapshotOffsets() {
		if o > above || o < below {
			ps.fs.Remove(ps.snapshotPath(o))
			if o == ps.snapAt {
				ps.snapAt = snapStale
			}
			if ps.listed != nil {
				ps.listed = slices.DeleteFunc(ps.listed, func(x int64) bool { return x == o })
			}
		}
	}
}

// loadLatest loads the newest readable snapshot at or below offset and
// returns its offset (-1 when none: the state is empty). Unreadable
// snapshots are skipped, not deleted: they are rebuilt from the log.
func (ps *producerStates) loadLatest(offset int64, warn func(string, error)) int64 {
	offs := ps.snapshotOffsets()
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > offset {
			continue
		}
		if err := ps.readSnapshot(ps.snapshotPath(offs[i])); err != nil {
			warn(ps.snapshotPath(offs[i]), err)
			if strings.Contains(err.Error(), "crc") || strings.Contains(err.Error(), "bytes") {
				ps.fs.Rename(ps.snapshotPath(offs[i]), ps.snapshotPath(offs[i])+corruptSuffix)
			}
			continue
		}
		return offs[i]
	}
	ps.reset()
	return -1
}

func (ps *producerStates) entries() []ProducerEntry {
	out := make([]ProducerEntry, 0, len(ps.producers))
	for _, st := range ps.producers {
		out = append(out, st.entry())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

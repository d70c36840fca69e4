package broker

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/storage"
)

// IsolationLevel is a fetch's isolation level (KIP-98).
type IsolationLevel int8

const (
	// ReadUncommitted reads up to the high watermark.
	ReadUncommitted IsolationLevel = 0
	// ReadCommitted reads up to the last stable offset. Without
	// transactions that is the high watermark: the same bound.
	ReadCommitted IsolationLevel = 1
)

// FetchRequest is a Fetch as the broker serves it, from a consumer or a
// follower: package protocol folds the request's version into plain fields
// (a version without leader-epoch fencing passes -1) and reads each
// partition's outcome back from Partitions.
type FetchRequest struct {
	// ReplicaID is the follower's broker id, or -1 for a consumer (below
	// -1: a consumer too). A follower reads up to the log end and its
	// fetch offset moves the ISR and the high watermark; the caller has
	// checked that it may fetch as one.
	ReplicaID int32
	// MaxWait is how long a fetch that finds fewer than MinBytes waits for
	// more (0: answer at once).
	MaxWait time.Duration
	// MinBytes is the least record bytes worth answering with;
	// MaxBytes the most in the answer (a soft limit: the first batch of the
	// first partition with data comes whole, KIP-74). MaxBytes is lowered
	// to fetch.max.bytes and MinBytes to MaxBytes, as Kafka bounds them.
	MinBytes, MaxBytes int32
	// Isolation is where the fetch takes its isolation level: transactions
	// (read_committed up to the last stable offset, the aborted
	// transactions of each partition) land on it.
	Isolation IsolationLevel
	// Partitions are the partitions fetched, in the request's order, each
	// with its position and, once Fetch returns, its outcome.
	Partitions []FetchPartition
	// Session, for a fetch of a fetch session (KIP-227), is the session's
	// watch: each partition read is registered with it
	// (FetchPartition.Watch), and a parked fetch waits on it alone instead
	// of on every partition. More, when set, is called before each read
	// after a wake-up, to add the session's partitions that changed
	// meanwhile (SessionWatch.Take) to Partitions.
	Session *SessionWatch
	More    func(req *FetchRequest)

	// The client's quota is the caller's (package protocol throttles
	// around Fetch and bounds MaxBytes). Authorisation is the caller's,
	// per partition (Refused).
}

// FetchPartition is one partition of a FetchRequest and its outcome.
type FetchPartition struct {
	Topic     string
	Partition int32
	// FetchOffset is the offset to read from; PartitionMaxBytes the most
	// record bytes of this partition (the first batch of the answer comes
	// whole whatever its size).
	FetchOffset       int64
	PartitionMaxBytes int32
	// CurrentLeaderEpoch fences a client with stale metadata (-1: no
	// check): FENCED_LEADER_EPOCH when older than the leader's,
	// UNKNOWN_LEADER_EPOCH when newer.
	CurrentLeaderEpoch int32
	// LastFetchedEpoch is the epoch of the last batch the fetcher has (-1:
	// none given): a log that diverged from it answers with DivergingEpoch
	// and no records (KIP-595).
	LastFetchedEpoch int32
	// Refused, set by the caller before Fetch, is the partition's answer
	// without reading it (TOPIC_AUTHORIZATION_FAILED for a topic the
	// principal may not read). A refused partition does not end a long
	// poll early, as in Kafka, whose unauthorized partitions are answered
	// beside the fetch rather than by it.
	Refused error

	// Err is the partition's outcome (nil: read, perhaps nothing), and
	// ErrorCode its Kafka code (ErrorCode(Err), mapped once: the answer is
	// encoded and its errors counted without mapping again).
	Err       error
	ErrorCode int16
	// AbortedTxns are, for a read_committed fetch, the aborted
	// transactions overlapping the records (from the partition's
	// .txnindex), so that the client drops their batches; nil otherwise.
	AbortedTxns []storage.AbortedTxn
	// HighWatermark, LastStableOffset and LogStartOffset are the
	// partition's (-1 when unknown: an error before the partition was
	// read). The last stable offset is the high watermark while there are
	// no transactions.
	HighWatermark, LastStableOffset, LogStartOffset int64
	// Records are the batches read (Len 0: none).
	Records Records
	// DivergingEpoch and DivergingEndOffset: where the fetcher's log
	// diverged from the leader's (the largest epoch <= LastFetchedEpoch
	// and where it ends), -1 when it did not.
	DivergingEpoch     int32
	DivergingEndOffset int64
	// LeaderID and LeaderEpoch: on NOT_LEADER_OR_FOLLOWER, the leader the
	// metadata names (Fetch v12's CurrentLeader), -1 when unknown.
	LeaderID, LeaderEpoch int32
	// Hint is what the previous read of this partition by the same client
	// found when it found nothing to read (a fetch session keeps it from
	// one fetch to the next and hands it back); Fetch leaves the one for
	// the next read. The zero value is none.
	Hint ReadHint
	// Watch is the partition's registration with the fetch session's
	// watch (FetchRequest.Session); Fetch registers it when the session
	// does not hold it yet (or holds another incarnation of the
	// partition) and the caller keeps it for the next fetch.
	Watch *PartitionWatch

	p       *Partition // the partition read last (nil: an error before it)
	watched *Partition // the partition a parked fetch watches (the first read's)
	seen    uint64     // p's change count when it was last read
	// throttled: a follower's fetch of a replica the leader's throttle
	// covers (its bytes count against leader.replication.throttled.rate).
	throttled bool
}

// reset clears the partition's outcome before a read.
func (fp *FetchPartition) reset() {
	fp.Records.Release()
	fp.Err, fp.ErrorCode, fp.p = nil, 0, nil
	fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = -1, -1, -1
	fp.AbortedTxns = nil
	fp.DivergingEpoch, fp.DivergingEndOffset = -1, -1
	fp.LeaderID, fp.LeaderEpoch = -1, -1
	fp.throttled = false
}

// Fail sets the partition's outcome to err, with no offsets and no
// records: a refusal of the caller's before the broker reads (the follower
// check today, authorisation later).
func (fp *FetchPartition) Fail(err error) {
	fp.reset()
	fp.Err = err
	fp.ErrorCode, _ = ErrorCode(err)
}

// setOffsets records the partition's offsets when nothing was read.
func (fp *FetchPartition) setOffsets(p *Partition) {
	fp.HighWatermark, fp.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
	fp.LastStableOffset = p.LastStableOffset()
}

// ReadHint lets a fetch session's next read of an idle partition skip the
// read: it names the partition, the position read and the partition's
// change count (Partition.changes) at a read that found nothing to return
// — the position at the log end (a follower) or the high watermark (a
// consumer), no error. While the count has not moved, the same read would
// find the same: the next one then only records a follower's fetch (its
// lag clock, ISR expansion) and takes the offsets, instead of looking the
// partition up, checking the leadership, the epoch and the log again. An
// idle follower's fetch of thousands of partitions is mostly such reads.
type ReadHint struct {
	p                                    *Partition
	changes                              uint64
	offset                               int64
	currentLeaderEpoch, lastFetchedEpoch int32
	replicaID                            int32
}

// quiet reports whether fp may be answered from its hint: the same
// partition position, epochs and replica, and nothing changed since.
func (h *ReadHint) quiet(fp *FetchPartition, replicaID int32) bool {
	return h.p != nil && h.offset == fp.FetchOffset && h.currentLeaderEpoch == fp.CurrentLeaderEpoch &&
		h.lastFetchedEpoch == fp.LastFetchedEpoch && h.replicaID == replicaID && h.p.changes.Load() == h.changes &&
		fp.FetchOffset >= h.p.log.LogStartOffset()
}

// Records are the batches a fetch answers one partition with, never decoded:
// a region of a segment file, written to a socket with sendfile (WriteTo) or
// copied when small (AppendTo), or bytes in memory (MemoryRecords). A file
// region holds a reference on its segment: Release it once sent or
// dropped.
type Records struct {
	read storage.ReadInfo
	mem  []byte
}

// MemoryRecords are batches held in memory.
func MemoryRecords(b []byte) Records { return Records{mem: b} }

// Len is the number of bytes.
func (r *Records) Len() int64 {
	if r.read.Region.File != nil {
		return r.read.Region.Len
	}
	return int64(len(r.mem))
}

// InMemory reports whether the bytes are in memory (not a file region).
func (r *Records) InMemory() bool { return r.read.Region.File == nil }

// AppendTo appends the bytes to dst: from memory, or copied from the
// segment (its mapping when it covers them, else pread).
func (r *Records) AppendTo(dst []byte) ([]byte, error) {
	if r.read.Region.File == nil {
		return append(dst, r.mem...), nil
	}
	return r.read.AppendTo(dst)
}

// WriteTo writes the bytes to w; a file region goes by sendfile when w is a
// socket.
func (r *Records) WriteTo(w io.Writer) (int64, error) {
	if r.read.Region.File == nil {
		n, err := w.Write(r.mem)
		return int64(n), err
	}
	return r.read.Region.WriteTo(w)
}

// Release gives back a file region's segment reference (extra calls do
// nothing).
func (r *Records) Release() {
	r.read.Release()
	r.read = storage.ReadInfo{}
	r.mem = nil
}

// Release releases every partition's records (a response dropped or sent).
func (req *FetchRequest) Release() {
	for i := range req.Partitions {
		req.Partitions[i].Records.Release()
	}
}

// Fetch reads every partition of req: whole batches from each fetch offset,
// as file regions, bounded by the high watermark (the log end for a
// follower, whose fetch offset is recorded: see Partition.Read). Each
// partition's outcome is written beside its position; the caller sends the
// records and then releases them (req.Release).
//
// The response's budget is MaxBytes (at most fetch.max.bytes): the first
// batch of the first partition with data comes whole even when larger
// (KIP-74), later partitions get what is left, each at most
// PartitionMaxBytes. A partition whose LastFetchedEpoch the log diverged
// from answers with DivergingEpoch and no records (KIP-595).
//
// When fewer than MinBytes are there, no partition failed, the budget did
// not cut a read short and MaxWait is positive, the fetch parks (the long
// poll): waiting.BeforeWait is called (when waiting is not nil), the request
// counts in the fetch purgatory, and it waits on a notification from its
// partitions (an append for a follower, a high watermark move for a
// consumer, a leadership change for either: never a sleep loop) and reads
// again, until MinBytes are there, MaxWait passes or
// ctx is done; it then answers with what it has. What the final answer holds
// is counted as sent (the topic's bytes and messages out, or replication
// bytes out).
func (b *Broker) Fetch(ctx context.Context, req *FetchRequest, waiting WaitHook) {
	maxBytes := min(req.MaxBytes, b.cfg.FetchMaxBytes)
	minBytes := min(req.MinBytes, maxBytes)
	f := fetchRead{b: b, req: req, maxBytes: maxBytes}
	defer f.countSent()
	if req.Session != nil {
		req.Session.fetched(b.now())
	}
	f.read(true)
	// Answer now when min_bytes is there (min_bytes 0 or less: always), on
	// any partition error, or when the client will not wait.
	enough := func() bool { return minBytes <= 0 || f.bytes >= int64(minBytes) || f.hadError || f.full }
	if req.MaxWait <= 0 || enough() {
		return
	}

	// Not enough yet: park until an append, the deadline or shutdown.
	if waiting != nil {
		waiting.BeforeWait()
	}
	b.enterPurgatory(delayedFetch)
	defer b.leavePurgatory(delayedFetch)
	// A follower reads up to the log end: appends bring it more. A
	// consumer reads up to the high watermark: only its moves do.
	on := WakeOnHighWatermark
	if req.ReplicaID >= 0 {
		on = WakeOnAppend
	}
	w := NewWaiterOn(on)
	wake := w.C()
	if req.Session != nil {
		// The session's partitions are registered with its watch
		// already (settle): one channel for all of them.
		wake = req.Session.c
	}
	for i := range req.Partitions {
		if p := req.Partitions[i].watched; p != nil {
			p.Watch(w)
		}
	}
	defer func() {
		for i := range req.Partitions {
			if p := req.Partitions[i].watched; p != nil {
				p.Unwatch(w)
				req.Partitions[i].watched = nil
			}
		}
	}()
	timer := time.NewTimer(req.MaxWait)
	defer timer.Stop()
	// Read again after registering if a partition changed since its
	// first read: an append between that read and Watch would otherwise
	// be missed (it notified before the waiter was there).
	again := f.changed()
	for {
		if again {
			if req.More != nil {
				req.More(req)
			}
			f.read(false)
			if enough() {
				return
			}
		}
		again = true
		select {
		case <-wake:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// changed reports whether a partition read changed since (its change
// count moved).
func (f *fetchRead) changed() bool {
	for i := range f.req.Partitions {
		fp := &f.req.Partitions[i]
		if fp.p != nil && fp.p.changes.Load() != fp.seen {
			return true
		}
	}
	return false
}

// fetchRead is one Fetch's reads.
type fetchRead struct {
	b        *Broker
	req      *FetchRequest
	img      *Image
	maxBytes int32 // max_bytes bounded by fetch.max.bytes
	bytes    int64 // record bytes read
	hadError bool
	full     bool // the budget cut a read short: answer now
}

// read reads every partition. The first read records which partitions
// exist here (FetchPartition.watched): those are the ones a parked fetch
// watches.
func (f *fetchRead) read(first bool) {
	req := f.req
	remaining := max(int64(f.maxBytes), 0)
	minOne := true
	img := f.b.Image()
	f.img = img
	f.bytes, f.hadError, f.full = 0, false, false
	for i := range req.Partitions {
		fp := &req.Partitions[i]
		if fp.Refused != nil {
			fp.Fail(fp.Refused)
			continue
		}
		fp.reset()
		if h := &fp.Hint; h.quiet(fp, req.ReplicaID) && !(req.ReplicaID >= 0 && f.b.leaderQuota.active()) {
			// Nothing moved since the last read found nothing: record a
			// follower's fetch, take the offsets.
			p := h.p
			fp.p, fp.seen = p, h.changes
			if first && req.Session == nil {
				fp.watched = p
			}
			var err error
			if req.ReplicaID >= 0 {
				err = p.updateFollower(req.ReplicaID, fp.FetchOffset, true)
			}
			if err == nil {
				fp.setOffsets(p)
				f.settle(fp)
				continue
			}
			fp.Hint = ReadHint{} // and read it in full
		}
		fp.Hint = ReadHint{}
		p, err := f.b.Partition(fp.Topic, fp.Partition)
		if err == nil {
			fp.p = p
			fp.seen = p.changes.Load()
			if first && req.Session == nil {
				fp.watched = p
			}
			err = f.readPartition(p, fp, &remaining, &minOne)
			if err == nil && fp.Records.Len() == 0 && fp.DivergingEpoch < 0 && !fp.throttled && f.atLimit(p, fp) {
				fp.Hint = ReadHint{p: p, changes: fp.seen, offset: fp.FetchOffset, currentLeaderEpoch: fp.CurrentLeaderEpoch,
					lastFetchedEpoch: fp.LastFetchedEpoch, replicaID: req.ReplicaID}
			}
		}
		if err != nil {
			f.hadError = true
			fp.Err = err
			fp.ErrorCode, _ = ErrorCode(err)
			if errors.Is(err, kerr.NotLeaderForPartition) {
				if t, ok := img.Topics[fp.Topic]; ok && fp.Partition >= 0 && int(fp.Partition) < len(t.Partitions) {
					pi := t.Partitions[fp.Partition]
					fp.LeaderID, fp.LeaderEpoch = pi.Leader, pi.LeaderEpoch
				}
			}
		}
		f.settle(fp)
		f.bytes += fp.Records.Len()
	}
}

// settle keeps fp's registration with the fetch session's watch
// (req.Session): with the partition read, quiet when the read found nothing
// at the reader's limit (ReadHint's condition); a follower's quiet read links
// its lag clock to the session (linkFollower).
func (f *fetchRead) settle(fp *FetchPartition) {
	s, p := f.req.Session, fp.p
	if s == nil || p == nil {
		return
	}
	w := fp.Watch
	if w == nil || w.p != p || w.closed.Load() {
		w.Close()
		w = p.watchSession(s)
		fp.Watch = w
		if p.changes.Load() != fp.seen {
			// Changed between the read and the registration.
			w.mark(WakeOnAny)
		}
	}
	quiet := fp.Hint.p != nil
	if quiet && f.req.ReplicaID >= 0 {
		w.changedAt.Store(0)
		w.quiet.Store(true)
		p.linkFollower(f.req.ReplicaID, fp.FetchOffset, w)
		return
	}
	w.quiet.Store(quiet)
}

// atLimit reports whether fp's position is where its reads stop (the log
// end for a follower; the high watermark, or the last stable offset for
// read_committed, for a consumer), with the offsets fp was answered with:
// a read there finds nothing until the partition changes.
func (f *fetchRead) atLimit(p *Partition, fp *FetchPartition) bool {
	limit := fp.HighWatermark
	switch {
	case f.req.ReplicaID >= 0:
		limit = p.LogEndOffset()
	case f.req.Isolation == ReadCommitted:
		limit = fp.LastStableOffset
	}
	return fp.FetchOffset == limit && fp.FetchOffset >= fp.LogStartOffset
}

func (f *fetchRead) readPartition(p *Partition, fp *FetchPartition, remaining *int64, minOne *bool) error {
	req := f.req
	if fp.LastFetchedEpoch >= 0 {
		if err := p.CheckLeader(fp.CurrentLeaderEpoch); err != nil {
			return err
		}
		epoch, end, err := p.EndOffsetForEpoch(fp.LastFetchedEpoch, -1)
		if err != nil {
			return err
		}
		if epoch >= 0 && (epoch < fp.LastFetchedEpoch || end < fp.FetchOffset) {
			fp.DivergingEpoch, fp.DivergingEndOffset = epoch, end
			fp.setOffsets(p)
			return nil
		}
	}
	if req.ReplicaID >= 0 && f.b.leaderQuota.active() && f.img.isThrottled(p.tp, leaderThrottled) {
		fp.throttled = true
		if !p.inISR(req.ReplicaID) && f.b.leaderQuota.exceeded(f.b.now()) {
			// Held back by the leader's throttle (Kafka's
			// shouldLeaderThrottle): no records, while the follower's
			// position still counts.
			if err := p.CheckLeader(fp.CurrentLeaderEpoch); err != nil {
				return err
			}
			if err := p.UpdateFollower(req.ReplicaID, fp.FetchOffset); err != nil {
				return err
			}
			fp.setOffsets(p)
			return nil
		}
	}
	limit := min(int64(fp.PartitionMaxBytes), *remaining)
	opts := ReadOptions{
		Offset: fp.FetchOffset, MaxBytes: int32(max(limit, 0)), MinOneBatch: *minOne,
		ReplicaID:          max(req.ReplicaID, -1), // -2 and below are debug/consumer ids
		CurrentLeaderEpoch: fp.CurrentLeaderEpoch, ReadCommitted: req.Isolation == ReadCommitted,
	}
	var info storage.ReadInfo
	var err error
	if limit <= 0 && !*minOne {
		// Nothing left in the budget: report offsets, no records.
		err = p.CheckLeader(opts.CurrentLeaderEpoch)
	} else {
		info, err = p.Read(opts)
	}
	if err != nil {
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			fp.setOffsets(p)
		}
		return err
	}
	// The response's budget, not the partition's, stopped this read while
	// more was there: the response is as full as it may be, which is
	// enough whatever min_bytes (at most max_bytes) says, as Kafka counts
	// the bytes available rather than those that fit.
	readable := p.HighWatermark()
	if opts.ReadCommitted {
		readable = p.LastStableOffset()
	}
	if opts.ReplicaID >= 0 {
		readable = p.LogEndOffset()
	}
	budgetBound := *remaining < int64(fp.PartitionMaxBytes)
	if info.Region.Len > 0 {
		fp.Records = Records{read: info}
		*minOne = false
		*remaining -= info.Region.Len
		fp.HighWatermark, fp.LogStartOffset = info.HighWatermark, info.LogStartOffset
		if budgetBound && info.NextOffset < readable {
			f.full = true
		}
	} else {
		info.Release()
		fp.HighWatermark, fp.LogStartOffset = p.HighWatermark(), p.LogStartOffset()
		if budgetBound && fp.FetchOffset < readable {
			f.full = true
		}
	}
	fp.LastStableOffset = p.LastStableOffset()
	if opts.ReadCommitted && info.Region.Len > 0 {
		// Only the transaction index is read (nothing when the log has
		// no aborted transaction); the records stay a file region.
		fp.AbortedTxns = p.log.AbortedTransactions(info.FirstOffset, info.NextOffset)
	}
	return nil
}

// countSent counts what the answer holds as sent, once, when Fetch
// returns: not the reads a parked fetch repeats.
func (f *fetchRead) countSent() {
	for i := range f.req.Partitions {
		fp := &f.req.Partitions[i]
		if fp.p != nil && fp.Records.read.Region.File != nil {
			fp.p.countSent(&fp.Records.read, f.req.ReplicaID)
			if fp.throttled {
				f.b.leaderQuota.record(f.b.now(), int(fp.Records.read.Region.Len))
			}
		}
	}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/storage"
)

// Partition is this broker's replica of one partition: its log and, while
// it leads, the leader state Kafka keeps — leader epoch, ISR, the high
// watermark (the minimum log end offset over the ISR) and each follower's
// log end offset. On a single node the ISR is just this broker, so the high
// watermark follows the log end offset on every append.
type Partition struct {
	b       *Broker
	tp      storage.TopicPartition
	topicID cluster.TopicID
	log     *storage.Log

	// mu guards the leadership state below. Appends as leader hold it for
	// reading so leadership cannot change under an append.
	mu          sync.RWMutex
	leader      int32 // broker id of the leader, -1 none
	leaderEpoch int32
	replicas    []int32
	isr         []int32
	followers   map[int32]*replicaState // leader only: other replicas
	settings    topicSettings

	hwMu sync.Mutex // serialises high watermark moves so it only rises

	watchMu  sync.Mutex
	watchers map[*Waiter]struct{}
}

// replicaState is what the leader knows of a follower.
type replicaState struct {
	leo          int64     // log end offset from its last fetch
	lastFetch    time.Time // time of its last fetch
	lastCaughtUp time.Time // last time it had fetched up to the leader's log end
}

func newPartition(b *Broker, tp storage.TopicPartition, id cluster.TopicID, l *storage.Log) *Partition {
	return &Partition{
		b: b, tp: tp, topicID: id, log: l,
		leader: -1, leaderEpoch: -1,
		followers: map[int32]*replicaState{},
		watchers:  map[*Waiter]struct{}{},
	}
}

// TopicPartition names the partition.
func (p *Partition) TopicPartition() storage.TopicPartition { return p.tp }

// TopicID is the id of the partition's topic.
func (p *Partition) TopicID() cluster.TopicID { return p.topicID }

// Log is the partition's storage log (read-only uses: sizes, offsets).
func (p *Partition) Log() *storage.Log { return p.log }

// Leader reports whether this broker leads the partition, and at which
// leader epoch (the partition's current epoch either way).
func (p *Partition) Leader() (bool, int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leader == p.b.cfg.BrokerID, p.leaderEpoch
}

// State is a copy of the partition's leadership state.
type State struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// State returns the partition's leadership state.
func (p *Partition) State() State {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return State{p.leader, p.leaderEpoch, slices.Clone(p.replicas), slices.Clone(p.isr)}
}

// apply takes the coordinator's view of the partition. It returns the event
// to report when this broker's role or epoch changed.
func (p *Partition) apply(pi PartitionImage, settings topicSettings) (PartitionChange, bool) {
	p.mu.Lock()
	self := p.b.cfg.BrokerID
	wasLeader := p.leader == self
	oldEpoch := p.leaderEpoch
	if settings.log != p.settings.log {
		p.log.SetConfig(settings.log)
	}
	p.settings = settings
	p.replicas = slices.Clone(pi.Replicas)
	p.isr = slices.Clone(pi.ISR)
	p.leader = pi.Leader
	p.leaderEpoch = pi.LeaderEpoch
	isLeader := pi.Leader == self
	if isLeader && (!wasLeader || oldEpoch != pi.LeaderEpoch) {
		// Becoming leader (KIP-101): the new epoch starts at the current
		// log end; followers will be told where earlier epochs end.
		if err := p.log.AssignEpochStartOffset(pi.LeaderEpoch, p.log.LogEndOffset()); err != nil {
			p.b.log.Error("assign leader epoch", "partition", p.tp.String(), "epoch", pi.LeaderEpoch, "err", err)
		}
		now := p.b.now()
		p.followers = map[int32]*replicaState{}
		for _, r := range p.replicas {
			if r != self {
				p.followers[r] = &replicaState{leo: -1, lastCaughtUp: now}
			}
		}
	}
	if !isLeader {
		p.followers = map[int32]*replicaState{}
	}
	p.mu.Unlock()

	if isLeader {
		p.maybeAdvanceHighWatermark()
	}
	p.notify() // waiters re-check leadership and data
	if wasLeader != isLeader || oldEpoch != pi.LeaderEpoch {
		if isLeader {
			p.b.log.Info("leading partition", "partition", p.tp.String(), "leader_epoch", pi.LeaderEpoch, "isr", pi.ISR)
		}
		return PartitionChange{Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: isLeader, LeaderEpoch: pi.LeaderEpoch}, true
	}
	return PartitionChange{}, false
}

// resign drops leadership before the partition is removed; it returns
// whether this broker was the leader.
func (p *Partition) resign() bool {
	p.mu.Lock()
	was := p.leader == p.b.cfg.BrokerID
	p.leader = -1
	p.mu.Unlock()
	p.notify()
	return was
}

// checkLeaderEpoch fences a request carrying the client's idea of the
// leader epoch (-1 = no check): FENCED_LEADER_EPOCH when it is older than
// ours, UNKNOWN_LEADER_EPOCH when newer. Lock should be held (read).
func (p *Partition) checkLeaderEpochLocked(epoch int32) error {
	switch {
	case epoch < 0 || epoch == p.leaderEpoch:
		return nil
	case epoch < p.leaderEpoch:
		return errorf(kerr.FencedLeaderEpoch, "request epoch %d is older than the leader epoch %d", epoch, p.leaderEpoch)
	default:
		return errorf(kerr.UnknownLeaderEpoch, "request epoch %d is newer than the leader epoch %d", epoch, p.leaderEpoch)
	}
}

// CheckLeader returns nil when this broker leads the partition at an epoch
// compatible with currentLeaderEpoch (-1 = any).
func (p *Partition) CheckLeader(currentLeaderEpoch int32) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.leader != p.b.cfg.BrokerID {
		return errNotLeader
	}
	return p.checkLeaderEpochLocked(currentLeaderEpoch)
}

// AppendRecords appends one or more record batches (v2) as leader: storage
// validates them (CRC, sizes, max.message.bytes), checks idempotent producer
// sequences, assigns offsets in place and writes them. acks is the produce
// request's: with -1 the ISR must have at least min.insync.replicas members
// (else NOT_ENOUGH_REPLICAS) and the caller then waits with
// WaitForHighWatermark. A duplicate of one of an idempotent producer's
// recent batches is not written again; its original offsets are returned
// with a nil error, as Kafka does.
func (p *Partition) AppendRecords(records []byte, acks int16) (storage.AppendInfo, error) {
	info, err := p.appendAsLeader(records, acks)
	if err != nil {
		return info, err
	}
	p.maybeAdvanceHighWatermark()
	return info, nil
}

func (p *Partition) appendAsLeader(records []byte, acks int16) (storage.AppendInfo, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.leader != p.b.cfg.BrokerID {
		return storage.AppendInfo{}, errNotLeader
	}
	if acks == -1 && int32(len(p.isr)) < p.settings.minISR {
		return storage.AppendInfo{}, errorf(kerr.NotEnoughReplicas,
			"The size of the current ISR %v is insufficient to satisfy the min.isr requirement of %d for partition %s", p.isr, p.settings.minISR, p.tp)
	}
	info, err := p.log.AppendAsLeader(records, p.leaderEpoch)
	if errors.Is(err, storage.ErrDuplicateSequence) {
		return info, nil
	}
	return info, err
}

// maybeAdvanceHighWatermark moves the high watermark to the minimum log end
// offset over the ISR when that is higher, and wakes waiters.
func (p *Partition) maybeAdvanceHighWatermark() {
	p.hwMu.Lock()
	p.mu.RLock()
	self := p.b.cfg.BrokerID
	hw := p.log.LogEndOffset()
	if p.leader == self {
		for _, r := range p.isr {
			if r == self {
				continue
			}
			if f, ok := p.followers[r]; ok && f.leo < hw {
				hw = max(f.leo, 0)
			}
		}
	} else {
		hw = -1
	}
	p.mu.RUnlock()
	moved := hw > p.log.HighWatermark()
	if moved {
		p.log.SetHighWatermark(hw)
	}
	p.hwMu.Unlock()
	p.notify()
}

// UpdateFollower records a follower's fetch at fetchOffset (its log end
// offset) and moves the high watermark. For replication; a single node has
// no followers.
func (p *Partition) UpdateFollower(replicaID int32, fetchOffset int64) error {
	p.mu.Lock()
	if p.leader != p.b.cfg.BrokerID {
		p.mu.Unlock()
		return errNotLeader
	}
	f, ok := p.followers[replicaID]
	if !ok {
		p.mu.Unlock()
		return errorf(kerr.UnknownTopicOrPartition, "broker %d is not a replica of %s", replicaID, p.tp)
	}
	now := p.b.now()
	f.leo, f.lastFetch = fetchOffset, now
	if fetchOffset >= p.log.LogEndOffset() {
		f.lastCaughtUp = now
	}
	p.mu.Unlock()
	p.maybeAdvanceHighWatermark()
	return nil
}

// WaitForHighWatermark blocks until the high watermark reaches offset
// (acks=all: every ISR member has the data), leadership is lost
// (NOT_LEADER_OR_FOLLOWER), or ctx is done (REQUEST_TIMED_OUT).
func (p *Partition) WaitForHighWatermark(ctx context.Context, offset int64) error {
	if p.log.HighWatermark() >= offset {
		return nil
	}
	w := NewWaiter()
	p.Watch(w)
	defer p.Unwatch(w)
	for {
		if p.log.HighWatermark() >= offset {
			return nil
		}
		if leader, _ := p.Leader(); !leader {
			return errNotLeader
		}
		select {
		case <-ctx.Done():
			return errorf(kerr.RequestTimedOut, "the high watermark did not reach %d in time", offset)
		case <-w.C():
		}
	}
}

// Waiter is a delayed operation's wake-up: registered with one or more
// partitions (Watch), it is signalled whenever any of them appends, moves
// its high watermark or changes leadership. It coalesces signals.
type Waiter struct{ c chan struct{} }

// NewWaiter returns a Waiter.
func NewWaiter() *Waiter { return &Waiter{c: make(chan struct{}, 1)} }

// C is signalled on a change.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Watch registers w with the partition (the purgatory keyed by partition).
func (p *Partition) Watch(w *Waiter) {
	p.watchMu.Lock()
	p.watchers[w] = struct{}{}
	p.watchMu.Unlock()
}

// Unwatch removes w.
func (p *Partition) Unwatch(w *Waiter) {
	p.watchMu.Lock()
	delete(p.watchers, w)
	p.watchMu.Unlock()
}

func (p *Partition) notify() {
	p.watchMu.Lock()
	for w := range p.watchers {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
	p.watchMu.Unlock()
}

// ReadOptions says what a fetch wants from one partition.
type ReadOptions struct {
	Offset             int64
	MaxBytes           int32
	MinOneBatch        bool  // return the first batch even when larger than MaxBytes (KIP-74)
	ReplicaID          int32 // -1 for consumers; a follower's broker id
	CurrentLeaderEpoch int32 // -1 = no fencing
	ReadCommitted      bool  // isolation level 1 (no transactions: same bound as uncommitted)
}

// Read returns whole batches from opts.Offset as a file region, bounded by
// the high watermark for consumers and the log end for followers. The
// caller must Release the result. A follower's read also records its fetch
// offset.
func (p *Partition) Read(opts ReadOptions) (storage.ReadInfo, error) {
	if err := p.CheckLeader(opts.CurrentLeaderEpoch); err != nil {
		return storage.ReadInfo{}, err
	}
	maxOffset := p.log.HighWatermark()
	if opts.ReplicaID >= 0 {
		if err := p.UpdateFollower(opts.ReplicaID, opts.Offset); err != nil {
			return storage.ReadInfo{}, err
		}
		maxOffset = p.log.LogEndOffset()
	}
	return p.log.Read(opts.Offset, opts.MaxBytes, maxOffset, opts.MinOneBatch)
}

// ReadBatches copies whole committed batches (below the high watermark)
// from offset into dst, at most maxBytes (at least one batch), and returns
// dst extended. For in-process readers such as the group coordinator
// loading __consumer_offsets; clients are served by Read's file regions.
func (p *Partition) ReadBatches(offset int64, maxBytes int32, dst []byte) ([]byte, error) {
	info, err := p.log.Read(offset, maxBytes, p.log.HighWatermark(), true)
	if err != nil {
		return dst, err
	}
	defer info.Release()
	n := int(info.Region.Len)
	if n == 0 {
		return dst, nil
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	if _, err := info.Region.File.ReadAt(dst[start:], info.Region.Pos); err != nil {
		return dst[:start], fmt.Errorf("read %s at %d: %w", p.tp, offset, err)
	}
	return dst, nil
}

// HighWatermark is the offset up to which consumers may read.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// ListOffset answers ListOffsets for one partition as leader: timestamp -2
// is the log start, -1 the high watermark (the last stable offset for
// read_committed: the same here, there are no transactions), -3 the record
// with the largest timestamp, and any other value the first offset whose
// timestamp is at or after it (-1, -1 when there is none below the high
// watermark). It returns the offset, the timestamp (-1 where Kafka gives
// none) and the leader epoch of the answer.
func (p *Partition) ListOffset(timestamp int64, currentLeaderEpoch int32) (offset, ts int64, epoch int32, err error) {
	p.mu.RLock()
	if p.leader != p.b.cfg.BrokerID {
		p.mu.RUnlock()
		return 0, 0, 0, errNotLeader
	}
	if err := p.checkLeaderEpochLocked(currentLeaderEpoch); err != nil {
		p.mu.RUnlock()
		return 0, 0, 0, err
	}
	epoch = p.leaderEpoch
	p.mu.RUnlock()
	hw := p.log.HighWatermark()
	switch timestamp {
	case -2:
		return p.log.LogStartOffset(), -1, epoch, nil
	case -1:
		return hw, -1, epoch, nil
	case -3:
		ts, off := p.log.MaxTimestampAndOffset()
		if off < 0 || off >= hw {
			return -1, -1, epoch, nil
		}
		return off, ts, p.epochOf(off, epoch), nil
	}
	if timestamp < 0 {
		return 0, 0, 0, errorf(kerr.InvalidRequest, "timestamp %d", timestamp)
	}
	off, ts, found, err := p.log.OffsetForTimestamp(timestamp)
	if err != nil {
		return 0, 0, 0, err
	}
	if !found || off >= hw {
		return -1, -1, -1, nil
	}
	return off, ts, p.epochOf(off, epoch), nil
}

// epochOf is the leader epoch under which offset was written, as far as the
// epoch cache knows (fallback: current).
func (p *Partition) epochOf(offset int64, current int32) int32 {
	// The start of epoch e is where the epoch before it ends: step down
	// the known epochs until one starts at or below offset.
	e := current
	for e > 0 {
		prev, prevEnd := p.log.EndOffsetForEpoch(e - 1)
		if prev < 0 || prevEnd <= offset {
			return e
		}
		e = prev
	}
	return e
}

// DeleteRecords moves the log start offset up to offset (-1 = the high
// watermark) and returns the new low watermark. OFFSET_OUT_OF_RANGE when
// offset is beyond the high watermark.
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	if err := p.CheckLeader(-1); err != nil {
		return -1, err
	}
	hw := p.log.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, errorf(kerr.OffsetOutOfRange, "cannot delete records before %d: the high watermark is %d", offset, hw)
	}
	lso, err := p.log.DeleteRecordsBefore(offset)
	if err != nil {
		return -1, err
	}
	p.notify()
	return lso, nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for one partition as
// leader: the largest epoch <= epoch the log knows and the offset where it
// ends (the start of the next epoch, or the log end for the current one).
func (p *Partition) EndOffsetForEpoch(epoch, currentLeaderEpoch int32) (int32, int64, error) {
	if err := p.CheckLeader(currentLeaderEpoch); err != nil {
		return -1, -1, err
	}
	found, end := p.log.EndOffsetForEpoch(epoch)
	return found, end, nil
}

// Size is the partition's size on disk in bytes.
func (p *Partition) Size() int64 { return p.log.Size() }

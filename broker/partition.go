package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/metrics"
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
	mx      *metrics.Topic // the topic's traffic counters, resolved once here

	// mu guards the leadership state below. Appends as leader hold it for
	// reading so leadership cannot change under an append.
	mu          sync.RWMutex
	leader      int32 // broker id of the leader, -1 none
	leaderEpoch int32
	replicas    []int32
	isr         []int32
	isrVersion  int32                   // store version of the state the ISR came from
	followers   map[int32]*replicaState // leader only: other replicas
	epochStart  int64                   // leader only: the log end when this leader epoch began
	removed     bool                    // resigned before deletion: no more appends of any kind
	settings    topicSettings

	hwMu sync.Mutex // serialises high watermark moves so it only rises

	watchMu  sync.Mutex
	watchers map[*Waiter]struct{}
	sessions map[*PartitionWatch]struct{} // fetch sessions holding the partition (SessionWatch)
	// changes counts notify calls: every change a read could answer
	// differently after (an append, a high watermark, log start or
	// leadership move) is followed by one. A fetch that saw the same count
	// before and after a quiet read knows nothing moved in between
	// (ReadHint, Broker.Fetch's parked re-check).
	changes atomic.Uint64

	// leaderHW is, on a follower, the leader's high watermark as its last
	// fetch answered (-1: none yet), for the reassignment progress.
	leaderHW atomic.Int64
}

// replicaState is what the leader knows of a follower.
type replicaState struct {
	leo          int64     // log end offset from its last fetch (-1: none yet)
	lastFetch    time.Time // time of its last fetch
	lastCaughtUp time.Time // last time it was caught up with the leader (Kafka's rule, see UpdateFollower)
	// The leader's log end offset at the follower's previous fetch, and
	// that fetch's time.
	prevLeaderLEO int64
	prevFetch     time.Time
	// watch is the follower's fetch session's watch of the partition
	// while its last read there was quiet (nil: none): the session's
	// fetches keep it caught up (SessionWatch).
	watch *PartitionWatch
}

func newPartition(b *Broker, tp storage.TopicPartition, id cluster.TopicID, l *storage.Log) *Partition {
	p := &Partition{
		b: b, tp: tp, topicID: id, log: l, mx: b.mx.Topic(tp.Topic),
		leader: -1, leaderEpoch: -1,
		followers: map[int32]*replicaState{},
		watchers:  map[*Waiter]struct{}{},
		sessions:  map[*PartitionWatch]struct{}{},
	}
	p.leaderHW.Store(-1)
	// A log start moved by retention is a change of the partition, as one
	// moved by DeleteRecords is: sessions and read hints must not hide it.
	l.OnRetention(func() { p.notify(WakeOnHighWatermark) })
	return p
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

// current reports whether the partition already holds exactly pi and
// settings, so apply would change nothing (a refresh then leaves it alone:
// no lock taken for writing, no waiter woken).
func (p *Partition) current(pi PartitionImage, settings topicSettings) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return !p.removed && p.leader == pi.Leader && p.leaderEpoch == pi.LeaderEpoch && p.settings == settings &&
		slices.Equal(p.replicas, pi.Replicas) && (slices.Equal(p.isr, pi.ISR) || pi.StateVersion < p.isrVersion)
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
	// The ISR as the store has it. A leader's own ISR change that the
	// image does not show yet (setISR ran after the image was read) is
	// not undone: the newer store version wins.
	if !(wasLeader && pi.Leader == self && oldEpoch == pi.LeaderEpoch && pi.StateVersion < p.isrVersion) {
		p.isr = slices.Clone(pi.ISR)
		p.isrVersion = pi.StateVersion
	}
	p.leader = pi.Leader
	p.leaderEpoch = pi.LeaderEpoch
	isLeader := pi.Leader == self
	now := p.b.now()
	if isLeader && (!wasLeader || oldEpoch != pi.LeaderEpoch) {
		// Becoming leader (KIP-101): the new epoch starts at the current
		// log end; followers will be told where earlier epochs end, and
		// join the ISR only once they reach it.
		leo := p.log.LogEndOffset()
		if err := p.log.AssignEpochStartOffset(pi.LeaderEpoch, leo); err != nil {
			p.b.log.Error("assign leader epoch", "partition", p.tp.String(), "epoch", pi.LeaderEpoch, "err", err)
		}
		p.epochStart = leo
		p.followers = map[int32]*replicaState{}
	}
	if isLeader {
		// Every other replica is a follower (replicas added by a
		// reassignment included); what is known of one is kept.
		fs := make(map[int32]*replicaState, len(p.replicas))
		for _, r := range p.replicas {
			if r == self {
				continue
			}
			if f, ok := p.followers[r]; ok {
				fs[r] = f
			} else {
				fs[r] = newFollower(now)
			}
		}
		p.followers = fs
	} else {
		p.followers = map[int32]*replicaState{}
	}
	p.mu.Unlock()

	if isLeader {
		p.maybeAdvanceHighWatermark()
	}
	p.notify(WakeOnAny) // waiters re-check leadership and data
	if wasLeader != isLeader || oldEpoch != pi.LeaderEpoch {
		if isLeader {
			p.b.log.Info("leading partition", "partition", p.tp.String(), "leader_epoch", pi.LeaderEpoch, "isr", pi.ISR)
		}
		return PartitionChange{Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: isLeader, LeaderEpoch: pi.LeaderEpoch}, true
	}
	return PartitionChange{}, false
}

// resign drops leadership before the partition is removed; it reports
// whether it had been resigned already (a deletion tried again).
func (p *Partition) resign() (already bool) {
	p.mu.Lock()
	already = p.removed
	p.leader = -1
	p.removed = true
	p.mu.Unlock()
	p.notify(WakeOnAny)
	return already
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
	return p.appendRecords(records, acks, nil)
}

// appendRecords is AppendRecords with admit asked about every batch (see
// storage.Admit): a client's produce refuses transactional batches.
func (p *Partition) appendRecords(records []byte, acks int16, admit storage.Admit) (storage.AppendInfo, error) {
	info, err := p.appendAsLeader(records, acks, admit)
	if err != nil {
		return info, err
	}
	what := WakeOnAppend
	if p.advanceHighWatermark() {
		what |= WakeOnHighWatermark
	}
	p.notify(what) // one pass over the waiters for both
	return info, nil
}

func (p *Partition) appendAsLeader(records []byte, acks int16, admit storage.Admit) (storage.AppendInfo, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.leader != p.b.cfg.BrokerID {
		return storage.AppendInfo{}, errNotLeader
	}
	if acks == -1 && int32(len(p.isr)) < p.settings.minISR {
		return storage.AppendInfo{}, errorf(kerr.NotEnoughReplicas,
			"The size of the current ISR %v is insufficient to satisfy the min.isr requirement of %d for partition %s", p.isr, p.settings.minISR, p.tp)
	}
	info, err := p.log.AppendAsLeaderAdmit(records, p.leaderEpoch, admit)
	if errors.Is(err, storage.ErrDuplicateSequence) {
		return info, nil // not appended again: not counted again
	}
	if err == nil {
		p.mx.In(len(records), int(info.RecordCount))
	}
	return info, err
}

// maybeAdvanceHighWatermark moves the high watermark to the minimum log end
// offset over the ISR when that is higher, and then wakes the waiters of
// the high watermark (only then: a follower's fetch that does not move it
// wakes nobody).
func (p *Partition) maybeAdvanceHighWatermark() {
	if p.advanceHighWatermark() {
		p.notify(WakeOnHighWatermark)
	}
}

// advanceHighWatermark is maybeAdvanceHighWatermark without the wake-up:
// it reports whether the high watermark moved.
func (p *Partition) advanceHighWatermark() bool {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
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
	if hw <= p.log.HighWatermark() {
		return false
	}
	p.log.SetHighWatermark(hw)
	return true
}

// UpdateFollower records a follower's fetch at fetchOffset (its log end
// offset) and moves the high watermark. For replication; a single node has
// no followers.
//
// A follower counts as caught up (Kafka's Replica.updateFetchState) when it
// fetches at the leader's log end, or at or past the log end the leader had
// at its previous fetch — then it was caught up at that previous fetch's
// time. A follower outside the ISR that reaches the high watermark and the
// start of the current leader epoch is proposed for the ISR.
func (p *Partition) UpdateFollower(replicaID int32, fetchOffset int64) error {
	return p.updateFollower(replicaID, fetchOffset, false)
}

// updateFollower is UpdateFollower; quiet: the fetch is a quiet re-read
// (ReadHint), which moves the high watermark only if the follower's log
// end moved.
func (p *Partition) updateFollower(replicaID int32, fetchOffset int64, quiet bool) error {
	p.mu.Lock()
	if p.leader != p.b.cfg.BrokerID {
		p.mu.Unlock()
		return errNotLeader
	}
	f, ok := p.followers[replicaID]
	if !ok {
		p.mu.Unlock()
		return errorf(kerr.NotLeaderForPartition, "broker %d is not a replica of %s (yet)", replicaID, p.tp)
	}
	moved := f.leo != fetchOffset
	// What its session showed since its last read counts first; the
	// session's link is made again if this read is quiet (linkFollower).
	p.foldSessionLocked(f)
	f.watch = nil
	*f = observeFetch(*f, fetchOffset, p.log.LogEndOffset(), p.b.now())
	expand := !slices.Contains(p.isr, replicaID) && canJoin(fetchOffset, p.log.HighWatermark(), p.epochStart)
	p.mu.Unlock()
	if expand && p.b.isr != nil {
		p.b.isr.schedule(p)
	}
	if moved || !quiet {
		// A follower whose log end did not move cannot move the high
		// watermark (the ISR changes move it themselves, setISR).
		p.maybeAdvanceHighWatermark()
	}
	return nil
}

// wantISR is the ISR this leader wants, starting from the store's state st:
// followers that were not caught up within lagMax leave, followers that
// reached the high watermark and the start of the leader epoch join. It
// returns false when nothing should change or st is not this broker's
// leadership at the current epoch.
func (p *Partition) wantISR(st cluster.PartitionState, now time.Time, lagMax time.Duration) ([]int32, bool) {
	self := p.b.cfg.BrokerID
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed || p.leader != self || st.Leader != self || st.LeaderEpoch != p.leaderEpoch {
		return nil, false
	}
	p.foldSessionsLocked()
	return decideISR(isrInput{self: self, replicas: p.replicas, isr: st.ISR, hw: p.log.HighWatermark(),
		epochStart: p.epochStart, followers: p.followers, now: now, lagMax: lagMax})
}

// lagging reports whether an ISR follower has not caught up within lagMax
// (the leader should shrink the ISR).
func (p *Partition) lagging(now time.Time, lagMax time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed || p.leader != p.b.cfg.BrokerID {
		return false
	}
	if !shrinkDue(p.isr, p.followers, now, lagMax) {
		return false
	}
	// An idle follower's session may show it caught up since.
	p.foldSessionsLocked()
	return shrinkDue(p.isr, p.followers, now, lagMax)
}

// setISR records an ISR this leader wrote to the store at version, then
// moves the high watermark (a shrink can let it advance).
func (p *Partition) setISR(epoch int32, isr []int32, version int32) {
	p.mu.Lock()
	if p.leader == p.b.cfg.BrokerID && p.leaderEpoch == epoch && version > p.isrVersion {
		p.isr, p.isrVersion = slices.Clone(isr), version
	}
	p.mu.Unlock()
	p.maybeAdvanceHighWatermark()
}

// errStaleFollower: the partition's role or epoch changed under a fetch.
var errStaleFollower = errors.New("broker: the partition is no longer followed at that epoch")

// appendAsFollower appends batches fetched from the leader at epoch (with the
// leader's offsets), then sets the high watermark to min(leader's, log end)
// and moves the log start up to the leader's.
func (p *Partition) appendAsFollower(epoch int32, records []byte, leaderHW, leaderLogStart int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.removed || p.leader == p.b.cfg.BrokerID || p.leaderEpoch != epoch {
		return errStaleFollower
	}
	if len(records) > 0 {
		if _, err := p.log.AppendAsFollower(records); err != nil {
			return err
		}
		p.b.mx.ReplicationIn(len(records))
	}
	if hw := min(leaderHW, p.log.LogEndOffset()); hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
	}
	if leaderLogStart > p.log.LogStartOffset() && leaderLogStart <= p.log.HighWatermark() {
		if _, err := p.log.DeleteRecordsBefore(leaderLogStart); err != nil {
			p.b.log.Warn("follower: move log start", "partition", p.tp.String(), "to", leaderLogStart, "err", err)
		}
	}
	p.notify(WakeOnAppend | WakeOnHighWatermark)
	return nil
}

// truncateAsFollower removes offsets >= to (a divergent tail) while
// following at epoch.
func (p *Partition) truncateAsFollower(epoch int32, to int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.removed || p.leader == p.b.cfg.BrokerID || p.leaderEpoch != epoch {
		return errStaleFollower
	}
	if to >= p.log.LogEndOffset() {
		return nil
	}
	p.b.log.Info("follower truncating divergent log", "partition", p.tp.String(), "leader_epoch", epoch,
		"to", to, "log_end", p.log.LogEndOffset())
	return p.log.Truncate(to)
}

// restartAsFollower empties the log and starts it at offset (the leader's
// log starts after this follower's log end).
func (p *Partition) restartAsFollower(epoch int32, offset int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.removed || p.leader == p.b.cfg.BrokerID || p.leaderEpoch != epoch {
		return errStaleFollower
	}
	p.b.log.Info("follower behind the leader's log start; starting over", "partition", p.tp.String(), "at", offset)
	return p.log.TruncateFullyAndStartAt(offset)
}

// WaitForHighWatermark blocks until the high watermark reaches offset
// (acks=all: every ISR member has the data), leadership is lost
// (NOT_LEADER_OR_FOLLOWER), or ctx is done (REQUEST_TIMED_OUT).
//
// When the high watermark passes offset but the ISR has shrunk below
// min.insync.replicas meanwhile, the answer is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND: the records are written, but on fewer
// replicas than the producer asked for.
func (p *Partition) WaitForHighWatermark(ctx context.Context, offset int64) error {
	if p.log.HighWatermark() >= offset {
		return p.checkEnoughReplicasAfterAppend()
	}
	w := NewWaiterOn(WakeOnHighWatermark)
	p.Watch(w)
	defer p.Unwatch(w)
	for {
		if p.log.HighWatermark() >= offset {
			return p.checkEnoughReplicasAfterAppend()
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

func (p *Partition) checkEnoughReplicasAfterAppend() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if int32(len(p.isr)) < p.settings.minISR {
		return errorf(kerr.NotEnoughReplicasAfterAppend,
			"The size of the current ISR %v is insufficient to satisfy the min.isr requirement of %d for partition %s", p.isr, p.settings.minISR, p.tp)
	}
	return nil
}

// Waiter is a delayed operation's wake-up: registered with one or more
// partitions (Watch), it is signalled whenever any of them changes in a way
// it waits for (its WakeOn: an append, a high watermark move; a leadership
// change or the partition's removal always). It coalesces signals.
type Waiter struct {
	c  chan struct{}
	on WakeOn
}

// WakeOn says which changes of a partition signal a Waiter.
type WakeOn uint8

const (
	// WakeOnAppend: the log end moved (an append as leader). What a
	// follower's fetch, which reads up to the log end, waits for.
	WakeOnAppend WakeOn = 1 << iota
	// WakeOnHighWatermark: the high watermark or the log start moved.
	// What a consumer's fetch (it reads up to the high watermark) and an
	// acks=all produce wait for.
	WakeOnHighWatermark
	// wakeOnState: leadership changed, the partition was removed, the
	// broker stops. Every waiter is woken by it.
	wakeOnState

	// WakeOnAny is every change.
	WakeOnAny = WakeOnAppend | WakeOnHighWatermark | wakeOnState
)

// NewWaiter returns a Waiter signalled on any change.
func NewWaiter() *Waiter { return NewWaiterOn(WakeOnAny) }

// NewWaiterOn returns a Waiter signalled on the changes in on (and on
// leadership changes, always). Waking a waiter only for what it waits for
// matters: with replication every append would otherwise wake the
// consumers' parked fetches (the high watermark has not moved yet) and
// every follower fetch moving the high watermark would wake the other
// followers' parked fetches, each reading again for nothing.
func NewWaiterOn(on WakeOn) *Waiter { return &Waiter{c: make(chan struct{}, 1), on: on | wakeOnState} }

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

// notify signals the waiters waiting for what changed.
func (p *Partition) notify(what WakeOn) {
	p.changes.Add(1)
	p.watchMu.Lock()
	for w := range p.sessions {
		w.mark(what)
	}
	for w := range p.watchers {
		if w.on&what == 0 {
			continue
		}
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
	ReadCommitted      bool  // isolation level 1: consumers read up to the last stable offset
}

// Read returns whole batches from opts.Offset as a file region, bounded by
// the high watermark for consumers (the last stable offset with
// ReadCommitted) and the log end for followers. The
// caller must Release the result. A follower's read also records its fetch
// offset.
func (p *Partition) Read(opts ReadOptions) (storage.ReadInfo, error) {
	if err := p.CheckLeader(opts.CurrentLeaderEpoch); err != nil {
		return storage.ReadInfo{}, err
	}
	maxOffset := p.log.HighWatermark()
	if opts.ReadCommitted {
		maxOffset = p.log.LastStableOffset()
	}
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

// LastStableOffset is the offset up to which read_committed consumers may
// read: the first offset of the earliest open transaction, else the high
// watermark.
func (p *Partition) LastStableOffset() int64 { return p.log.LastStableOffset() }

// HighWatermark is the offset up to which consumers may read.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// ListOffset answers ListOffsets for one partition as leader: timestamp -2
// is the log start, -1 the high watermark, -3 the record with the largest
// timestamp, and any other value the first offset whose timestamp is at or
// after it (-1, -1 when there is none below the high watermark). It returns
// the offset, the timestamp (-1 where Kafka gives none) and the leader
// epoch of the answer.
func (p *Partition) ListOffset(timestamp int64, currentLeaderEpoch int32) (offset, ts int64, epoch int32, err error) {
	return p.ListOffsetIsolated(timestamp, currentLeaderEpoch, false)
}

// ListOffsetIsolated is ListOffset with an isolation level: for
// read_committed the last stable offset takes the high watermark's place
// (latest is the LSO; no answer at or above it), as Kafka's
// fetchOffsetForTimestamp.
func (p *Partition) ListOffsetIsolated(timestamp int64, currentLeaderEpoch int32, readCommitted bool) (offset, ts int64, epoch int32, err error) {
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
	epochStart := p.epochStart
	p.mu.RUnlock()
	hw := p.log.HighWatermark()
	if timestamp != -2 && hw < epochStart {
		// KIP-207: a new leader whose high watermark has not yet reached
		// the start of its epoch (its followers have not fetched from it)
		// would answer with an offset below records already committed.
		return 0, 0, 0, errorf(kerr.OffsetNotAvailable, "the leader's high watermark %d has not reached the start of its epoch %d", hw, epochStart)
	}
	limit := hw
	if readCommitted {
		limit = p.log.LastStableOffset()
	}
	switch timestamp {
	case -2:
		return p.log.LogStartOffset(), -1, epoch, nil
	case -1:
		return limit, -1, epoch, nil
	case -3:
		ts, off := p.log.MaxTimestampAndOffset()
		if off < 0 || off >= limit {
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
	if !found || off >= limit {
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
// watermark) and returns the new low watermark, for a client's
// DeleteRecords. OFFSET_OUT_OF_RANGE when offset is beyond the high
// watermark; INVALID_TOPIC_EXCEPTION on an internal topic (see
// checkClientAppend).
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	if IsInternalTopic(p.tp.Topic) {
		return -1, errorf(kerr.InvalidTopicException, "Cannot delete records of internal topic %s", p.tp.Topic)
	}
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
	p.notify(WakeOnHighWatermark)
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

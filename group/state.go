package group

import (
	"bytes"
	"container/heap"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// groupState is a classic group's state (Kafka's ClassicGroupState).
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return "Unknown"
}

// topicPartition keys committed offsets.
type topicPartition struct {
	topic     string
	partition int32
}

// member is one group member.
type member struct {
	id         string
	instanceID string // "" for a dynamic member
	clientID   string
	clientHost string

	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol // in the member's order of preference; owned copies
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte

	// join is the member's parked JoinGroup (PreparingRebalance), nil when
	// none; sync its parked SyncGroup (CompletingRebalance). A member with a
	// parked request is alive: the coordinator holds its request.
	join *joinWait
	sync *syncWait

	// deadline is when the member's session expires unless it heartbeats,
	// commits, joins or syncs first. Session timers are lazy: a heartbeat
	// only moves deadline, and the entry in the heap (at timerAt), when it
	// fires early, re-arms at the new deadline. An entry whose time is not
	// timerAt is stale and ignored.
	deadline time.Time
	timerAt  time.Time
}

type joinWait struct {
	req   *kmsg.JoinGroupRequest
	reply func(*kmsg.JoinGroupResponse)
}

type syncWait struct {
	req   *kmsg.SyncGroupRequest
	reply func(*kmsg.SyncGroupResponse)
}

// metadataFor returns the member's metadata for protocol.
func (m *member) metadataFor(protocol string) ([]byte, bool) {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata, true
		}
	}
	return nil, false
}

// sameProtocols reports whether protocols are exactly the member's.
func (m *member) sameProtocols(protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(m.protocols) != len(protocols) {
		return false
	}
	for i := range protocols {
		if m.protocols[i].Name != protocols[i].Name || !bytes.Equal(m.protocols[i].Metadata, protocols[i].Metadata) {
			return false
		}
	}
	return true
}

func copyProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

// group is one consumer group: its membership and its committed offsets.
type group struct {
	name      string
	partition int32

	state        groupState
	stateTime    time.Time // when the group entered its state
	protocolType string    // "" for a group that only stores offsets
	protocol     string    // selected protocol; "" outside a generation
	generation   int32
	leader       string

	members map[string]*member
	statics map[string]string    // group.instance.id -> member id
	pending map[string]time.Time // member ids handed out with MEMBER_ID_REQUIRED -> expiry

	offsets map[topicPartition]offsetCommit
	// Transactional commits waiting for their marker, by producer id,
	// and the store order of each committed offset (a plain commit
	// written after a pending one wins over it).
	pendingTxn map[int64]map[topicPartition]pendingOffset
	offsetSeq  map[topicPartition]uint64

	// Rebalance bookkeeping. seq invalidates the timers of earlier phases.
	seq              uint64
	inInitialDelay   bool
	initialRemaining time.Duration // rebalance timeout left after the delays so far
	newMemberAdded   bool
}

func newGroup(name string, partition int32, now time.Time) *group {
	return &group{
		name:      name,
		partition: partition,
		state:     stateEmpty,
		stateTime: now,
		members:   make(map[string]*member),
		statics:   make(map[string]string),
		pending:   make(map[string]time.Time),
		offsets:   make(map[topicPartition]offsetCommit),
	}
}

func (g *group) transition(s groupState, now time.Time) {
	g.state = s
	g.stateTime = now
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocols: a joining member must use the group's protocol type
// and support at least one protocol every current member supports.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return false
}

func (g *group) allSupport(protocol string) bool {
	for _, m := range g.members {
		if _, ok := m.metadataFor(protocol); !ok {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol of the next generation as Kafka does:
// among the protocols every member supports, each member votes for the one
// it prefers most; most votes wins. Ties go to the protocol preferred by
// the member listed first in id order, so the choice is deterministic.
func (g *group) selectProtocol() string {
	ids := sortedKeys(g.members)
	votes := make(map[string]int)
	var order []string
	for _, id := range ids {
		for _, p := range g.members[id].protocols {
			if g.allSupport(p.Name) {
				if _, seen := votes[p.Name]; !seen {
					order = append(order, p.Name)
				}
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", 0
	for _, name := range order {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// allJoined: every member's JoinGroup is parked and no member id handed
// out with MEMBER_ID_REQUIRED is still outstanding.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// fenced reports whether a request naming instanceID and memberID comes
// from an old incarnation of a static member (FENCED_INSTANCE_ID).
func (g *group) fenced(instanceID, memberID string) bool {
	if instanceID == "" {
		return false
	}
	cur, ok := g.statics[instanceID]
	return ok && cur != memberID
}

// isEmpty: no members and nothing pending.
func (g *group) hasMembers() bool { return len(g.members) > 0 }

// partitionState is one __consumer_offsets partition this broker leads.
type partitionState struct {
	id     int32
	epoch  int32
	loaded bool
	groups map[string]*group
}

// appendOp is an effect of the state machine: records to append to a
// __consumer_offsets partition. The driver appends the batches of one
// partition in order and calls done under the Coordinator's mutex.
type appendOp struct {
	partition int32
	epoch     int32
	batch     []byte
	done      func(error)
}

// state is the group coordinator's state machine. It does no I/O and starts
// no goroutines: time comes in as now (set by the driver before each event
// and in advance), appends go out as appendOps in appends, and replies are
// callbacks that must not block. The Coordinator's mutex guards it;
// tests drive it directly.
type state struct {
	cfg   Config
	log   *slog.Logger
	now   time.Time
	newID func() string // a fresh unique suffix for member ids

	partitions map[int32]*partitionState
	groups     map[string]*group // every group of every loaded partition
	timers     timerHeap
	appends    []appendOp
	nextExpiry time.Time // next offset-retention check
	seq        uint64    // store order of commits (nextSeq)

	// Scratch space of appendRecords and storeOffsets.
	recordScratch []record.Record
	encScratch    []byte
	endScratch    []int
	recsScratch   []offsetsRecord
}

func newState(cfg Config, log *slog.Logger, now time.Time, newID func() string) *state {
	st := &state{
		cfg:        cfg,
		log:        log,
		now:        now,
		newID:      newID,
		partitions: make(map[int32]*partitionState),
		groups:     make(map[string]*group),
	}
	st.nextExpiry = now.Add(cfg.OffsetsRetentionCheckInterval)
	st.schedule(timer{at: st.nextExpiry, kind: timerOffsetExpiry})
	return st
}

// coordinatorError says whether this broker coordinates group now:
// NOT_COORDINATOR when it does not lead the group's partition,
// COORDINATOR_LOAD_IN_PROGRESS while that partition loads.
func (st *state) coordinatorError(group string) int16 {
	p, ok := st.partitions[PartitionFor(group, st.cfg.NumPartitions)]
	if !ok {
		return kerr.NotCoordinator.Code
	}
	if !p.loaded {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// getOrCreate returns the named group, creating an Empty one. The caller
// checked coordinatorError.
func (st *state) getOrCreate(name string) *group {
	if g, ok := st.groups[name]; ok {
		return g
	}
	pid := PartitionFor(name, st.cfg.NumPartitions)
	g := newGroup(name, pid, st.now)
	st.groups[name] = g
	st.partitions[pid].groups[name] = g
	return g
}

// removeGroup forgets a group (it is Dead or was never used).
func (st *state) removeGroup(g *group) {
	g.transition(stateDead, st.now)
	delete(st.groups, g.name)
	if p, ok := st.partitions[g.partition]; ok {
		delete(p.groups, g.name)
	}
}

// maybeDropUnused removes a group a failed request created: Empty, without
// members, pending members or offsets.
func (st *state) maybeDropUnused(g *group) {
	if g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && len(g.pendingTxn) == 0 && g.generation == 0 {
		st.removeGroup(g)
	}
}

// appendRecords queues records for g's partition, as the coordinator's
// own batch or, with producer set, as that producer's transactional batch;
// done runs under the Coordinator's mutex with the append's outcome, after which
// the records are durable (and, with replication, committed).
func (st *state) appendRecords(partition int32, records []offsetsRecord, producer *txnProducer, done func(error)) {
	p, ok := st.partitions[partition]
	if !ok {
		done(kerr.NotCoordinator)
		return
	}
	var batch []byte
	var err error
	batch, st.recordScratch, err = buildBatch(st.recordScratch, records, st.now.UnixMilli(), producer)
	if err != nil {
		done(err)
		return
	}
	st.appends = append(st.appends, appendOp{partition: partition, epoch: p.epoch, batch: batch, done: done})
}

// takeAppends hands the queued appends to the driver.
func (st *state) takeAppends() []appendOp {
	ops := st.appends
	st.appends = nil
	return ops
}

// ---- timers ----

type timerKind int8

const (
	timerSession      timerKind = iota // a member's session
	timerPending                       // a MEMBER_ID_REQUIRED member id
	timerRebalance                     // PreparingRebalance: initial delay or rebalance timeout
	timerSync                          // CompletingRebalance: members that never sent SyncGroup
	timerOffsetExpiry                  // offsets.retention.check.interval.ms
)

type timer struct {
	at     time.Time
	kind   timerKind
	group  string
	member string
	seq    uint64
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

func (st *state) schedule(t timer) { heap.Push(&st.timers, t) }

// nextDeadline is when advance next has work (zero when none).
func (st *state) nextDeadline() time.Time {
	if len(st.timers) == 0 {
		return time.Time{}
	}
	return st.timers[0].at
}

// advance moves the clock to now, firing every timer due on the way, each
// at its own time (so a timer that schedules another sees its due time as
// now, and a chain of delays plays out as it would have in real time).
func (st *state) advance(now time.Time) {
	for len(st.timers) > 0 && !st.timers[0].at.After(now) {
		t := heap.Pop(&st.timers).(timer)
		if t.at.After(st.now) {
			st.now = t.at
		}
		st.fire(t)
	}
	if now.After(st.now) {
		st.now = now
	}
}

func (st *state) fire(t timer) {
	if t.kind == timerOffsetExpiry {
		st.expireOffsets()
		st.nextExpiry = st.now.Add(st.cfg.OffsetsRetentionCheckInterval)
		st.schedule(timer{at: st.nextExpiry, kind: timerOffsetExpiry})
		return
	}
	g, ok := st.groups[t.group]
	if !ok {
		return
	}
	switch t.kind {
	case timerSession:
		m, ok := g.members[t.member]
		if !ok || !t.at.Equal(m.timerAt) {
			return
		}
		m.timerAt = time.Time{}
		if m.join != nil || m.sync != nil {
			// Parked in a rebalance: alive while we hold its request.
			st.touch(g, m)
			return
		}
		if m.deadline.After(st.now) {
			st.armSession(g, m)
			return
		}
		st.log.Info("group member session expired", "group", g.name, "member", m.id, "session_timeout", m.sessionTimeout)
		st.removeMemberAndUpdate(g, m, "session timeout")
	case timerPending:
		if exp, ok := g.pending[t.member]; ok && !exp.After(st.now) {
			delete(g.pending, t.member)
			st.maybeCompleteJoin(g)
			st.maybeDropUnused(g)
		}
	case timerRebalance:
		if t.seq != g.seq || g.state != statePreparingRebalance {
			return
		}
		if g.inInitialDelay {
			if g.newMemberAdded && g.initialRemaining > 0 {
				g.newMemberAdded = false
				d := min(st.cfg.InitialRebalanceDelay, g.initialRemaining)
				g.initialRemaining -= d
				st.schedule(timer{at: st.now.Add(d), kind: timerRebalance, group: g.name, seq: g.seq})
				return
			}
			g.inInitialDelay = false
		}
		st.completeJoin(g)
	case timerSync:
		if t.seq != g.seq || g.state != stateCompletingRebalance {
			return
		}
		var removed bool
		for _, id := range sortedKeys(g.members) {
			m := g.members[id]
			if m.sync == nil {
				st.log.Info("group member did not sync within the rebalance timeout", "group", g.name, "member", m.id)
				st.removeMember(g, m, kerr.UnknownMemberID.Code)
				removed = true
			}
		}
		if removed {
			st.prepareRebalance(g, "members failed to sync")
		}
	}
}

// touch extends m's session from now, as a heartbeat does.
func (st *state) touch(g *group, m *member) {
	m.deadline = st.now.Add(m.sessionTimeout)
	st.armSession(g, m)
}

// armSession makes sure a timer fires at or before m's deadline.
func (st *state) armSession(g *group, m *member) {
	if !m.timerAt.IsZero() && !m.timerAt.After(m.deadline) {
		return
	}
	m.timerAt = m.deadline
	st.schedule(timer{at: m.deadline, kind: timerSession, group: g.name, member: m.id})
}

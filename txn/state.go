package txn

import (
	"maps"
	"math"
	"slices"
	"strings"
)

// State is a transaction's state; the values are Kafka's, the status byte
// of a __transaction_state value.
type State int8

// Kafka's transaction states (TransactionState.scala).
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
	noState           State = -1
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions,
// ListTransactions).
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState returns the state named s (case-insensitive), false if none.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if strings.EqualFold(n, s) {
			return State(i), true
		}
	}
	return noState, false
}

// validPrevious are the states each state may be entered from
// (TransactionState.validPreviousStates).
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteCommit, CompleteAbort},
	PrepareEpochFence: {Ongoing},
}

// canTransit reports whether Kafka allows from -> to.
func canTransit(from, to State) bool { return slices.Contains(validPrevious[to], from) }

// TopicPartition names a partition of a transaction. It is an alias of a
// plain struct so that package protocol names the same type without
// importing txn (which imports group, whose tests import protocol).
type TopicPartition = struct {
	Topic     string
	Partition int32
}

// metadata is one transactional id's state (Kafka's TransactionMetadata).
type metadata struct {
	id             string
	producerID     int64
	lastProducerID int64 // -1: none (not persisted)
	epoch          int16
	lastEpoch      int16 // -1: none (not persisted)
	timeoutMs      int32
	state          State
	pending        State // the transition being written, noState when none
	partitions     map[TopicPartition]struct{}
	startMs        int64 // -1 when no transaction started
	updateMs       int64
}

// clone is md as a transition starts from it (pending cleared).
func (md *metadata) clone() *metadata {
	n := *md
	n.partitions = maps.Clone(md.partitions)
	if n.partitions == nil {
		n.partitions = make(map[TopicPartition]struct{})
	}
	n.pending = noState
	return &n
}

// install makes n (a written transition) md's state.
func (md *metadata) install(n *metadata) {
	pending := md.pending
	*md = *n
	md.pending = pending
}

// sortedPartitions is md's partitions in topic, partition order.
func (md *metadata) sortedPartitions() []TopicPartition {
	out := slices.Collect(maps.Keys(md.partitions))
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}

// epochExhausted: the epoch cannot be bumped again; InitProducerId rotates
// to a new producer id (TransactionMetadata.isEpochExhausted).
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

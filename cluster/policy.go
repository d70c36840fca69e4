package cluster

import (
	"maps"
	"slices"
)

// The controller's policy, as pure functions of what it read: each decision
// returns the states to write, and the Controller does the reading, the
// writing and the logging around it (the habit of etcd's raft: decisions
// return actions, the caller does the I/O). No function here touches a
// Coordinator, a clock or a logger, so every rule is tested from golden
// files (testdata/controller/*.txt, policy_test.go) without a store.

// View is what a decision knows of the brokers: the live ones, and those
// shutting down (a controlled shutdown in progress), which may not lead and
// leave every ISR.
type View struct {
	Live         map[int32]Broker
	ShuttingDown map[int32]bool
}

// IsLive reports whether broker id is registered.
func (v View) IsLive(id int32) bool { _, ok := v.Live[id]; return ok }

// Eligible reports whether broker id may lead or be in an ISR: live and
// not shutting down.
func (v View) Eligible(id int32) bool { return v.IsLive(id) && !v.ShuttingDown[id] }

// NewView is the view of the registered brokers, with shuttingDown (broker
// id -> registration timestamp of the incarnation that asked for a
// controlled shutdown) applied. A request of a broker that is gone, or that
// registered again since (another incarnation), no longer counts: such
// entries are returned as stale, for the caller to forget.
func NewView(brokers []Broker, shuttingDown map[int32]int64) (v View, stale []int32) {
	v = View{Live: make(map[int32]Broker, len(brokers)), ShuttingDown: map[int32]bool{}}
	for _, b := range brokers {
		v.Live[b.ID] = b
	}
	for id, ts := range shuttingDown {
		if b, ok := v.Live[id]; !ok || b.Timestamp != ts {
			stale = append(stale, id)
			continue
		}
		v.ShuttingDown[id] = true
	}
	slices.Sort(stale)
	return v, stale
}

// TopicSnapshot is one topic as a decision sees it: its assignment, its
// partitions' states (a partition without an entry has no state yet) and
// whether unclean leader election applies to it (the broker's
// unclean.leader.election.enable, or the topic's own).
type TopicSnapshot struct {
	Topic   Topic
	States  map[int32]PartitionState
	Unclean bool
}

// Decision is what Decide concluded for one partition.
type Decision struct {
	State   PartitionState // the state the partition should have
	Changed bool           // State differs from the current one: write it
	// Done: the partition's reassignment completes with State (or needed
	// no write): the assignment becomes the target.
	Done bool
	// Unclean: a replica outside the ISR was made leader (records may be
	// lost; the caller warns).
	Unclean bool
}

// Decide returns the state partition p of t should have, given its current
// state st:
//
//   - a partition whose leader went away (or is shutting down with another
//     in-sync replica to take over, or was reassigned away) gets a new
//     leader: the first replica in assignment order that is eligible and in
//     the ISR; with none, the first eligible replica when unclean election
//     is allowed (the ISR becomes just it), else the partition goes offline
//     (leader -1, the ISR kept so that a returning member can lead again);
//   - the ISR keeps the leader and the eligible replicas;
//   - a reassignment completes once every target replica is live and in the
//     ISR: the leader moves into the target, the removed replicas leave the
//     ISR and the epoch is bumped to fence them;
//   - every leader change bumps the leader epoch.
func Decide(t Topic, p int32, st PartitionState, v View, unclean bool) Decision {
	replicas := t.Replicas[p]
	next := st.Clone()
	var d Decision
	inISR := func(r int32) bool { return slices.Contains(next.ISR, r) }

	// Leadership.
	leaderOK := st.Leader >= 0 && v.IsLive(st.Leader) && slices.Contains(replicas, st.Leader)
	if leaderOK && v.ShuttingDown[st.Leader] {
		// Controlled shutdown: move it if another ISR member can lead.
		for _, r := range replicas {
			if r != st.Leader && v.Eligible(r) && inISR(r) {
				leaderOK = false
				break
			}
		}
	}
	if !leaderOK {
		next.Leader = -1
		for _, r := range replicas {
			if v.Eligible(r) && inISR(r) {
				next.Leader = r
				break
			}
		}
		if next.Leader < 0 && unclean {
			for _, r := range replicas {
				if v.Eligible(r) {
					next.Leader = r
					next.ISR = []int32{r}
					d.Unclean = true
					break
				}
			}
		}
	}

	// The ISR keeps the leader and the live replicas that are not shutting
	// down (an offline partition keeps its ISR, so a returning member can
	// lead again).
	if next.Leader >= 0 {
		isr := make([]int32, 0, len(next.ISR))
		for _, r := range next.ISR {
			if r == next.Leader || (v.Eligible(r) && slices.Contains(replicas, r)) {
				isr = append(isr, r)
			}
		}
		if !slices.Contains(isr, next.Leader) {
			isr = append([]int32{next.Leader}, isr...)
		}
		next.ISR = isr
	}

	// A reassignment completes once every target replica is in the ISR:
	// the leader must be a target replica, and the removed replicas leave.
	if t.Reassigning(p) && next.Leader >= 0 {
		target := t.Target(p)
		all := len(target) > 0
		for _, r := range target {
			if !slices.Contains(next.ISR, r) || !v.IsLive(r) {
				all = false
			}
		}
		if all {
			if !slices.Contains(target, next.Leader) {
				for _, r := range target {
					if v.Eligible(r) && slices.Contains(next.ISR, r) {
						next.Leader = r
						break
					}
				}
			}
			if slices.Contains(target, next.Leader) {
				next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return !slices.Contains(target, r) })
				d.Done = true
				if len(t.Removing[p]) > 0 {
					// Fence the removed replicas with a new epoch.
					next.LeaderEpoch = max(next.LeaderEpoch, st.LeaderEpoch+1)
				}
			}
		}
	}

	if next.Leader != st.Leader {
		next.LeaderEpoch = max(next.LeaderEpoch, st.LeaderEpoch+1)
	}
	d.Changed = next.Leader != st.Leader || next.LeaderEpoch != st.LeaderEpoch || !slices.Equal(next.ISR, st.ISR)
	if !d.Changed {
		d.State = st
		return d
	}
	d.State = next
	return d
}

// Pass is what one controller pass decided.
type Pass struct {
	Writes []StateWrite
	// Before holds, for each write, the state it replaces (Leader -2 for a
	// partition's first state), for the log.
	Before []PartitionState
	// Complete holds, per topic, the partitions whose reassignment
	// completes once their write (if any) succeeded.
	Complete map[string][]int32
	// Unclean lists the partitions whose new leader comes from outside
	// the ISR.
	Unclean []UncleanElection
}

// UncleanElection is a partition whose new leader was outside the ISR.
type UncleanElection struct {
	TopicPartitionID
	Leader int32
	ISR    []int32 // the ISR before: the replicas that had every record
}

// PlanPass decides one controller pass at controller epoch epoch over the
// topics: a first state (InitialState) for each partition that has none,
// and Decide for the others. Running it again on the result decides nothing.
func PlanPass(topics []TopicSnapshot, v View, epoch int32) Pass {
	pass := Pass{Complete: map[string][]int32{}}
	for _, ts := range topics {
		t := ts.Topic
		for p := range t.Replicas {
			pid := int32(p)
			st, ok := ts.States[pid]
			if !ok {
				first := InitialState(t.Replicas[p], v.Eligible)
				first.ControllerEpoch = epoch
				pass.Writes = append(pass.Writes, StateWrite{Topic: t.Name, Partition: pid, State: first, Create: true})
				pass.Before = append(pass.Before, PartitionState{Leader: -2})
				continue
			}
			d := Decide(t, pid, st, v, ts.Unclean)
			if d.Done {
				pass.Complete[t.Name] = append(pass.Complete[t.Name], pid)
			}
			if d.Unclean {
				pass.Unclean = append(pass.Unclean, UncleanElection{TopicPartitionID{t.Name, pid}, d.State.Leader, st.ISR})
			}
			if d.Changed {
				d.State.ControllerEpoch = epoch
				pass.Writes = append(pass.Writes, StateWrite{Topic: t.Name, Partition: pid, State: d.State})
				pass.Before = append(pass.Before, st)
			}
		}
	}
	return pass
}

// CompleteReassignments ends the reassignments of parts of t, except those
// in failed (their state write failed) and those not being reassigned: the
// assignment becomes the target. It returns the partitions it completed.
func CompleteReassignments(t *Topic, parts []int32, failed map[int32]bool) []int32 {
	var done []int32
	for _, p := range parts {
		if failed[p] || !t.Reassigning(p) {
			continue
		}
		t.Replicas[p] = t.Target(p)
		delete(t.Adding, p)
		delete(t.Removing, p)
		done = append(done, p)
	}
	return done
}

// ElectOnRequest decides an election asked for by ElectLeaders for a
// partition with state st and assignment replicas: preferred (leadership to
// the first replica, when it is eligible and in the ISR) or, with unclean,
// a leader for a partition whose leader is gone (an eligible ISR member,
// else any eligible replica, the ISR becoming just it). It returns the
// state to write (new leader epoch, controller epoch epoch) or why there is
// none: ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable or
// ErrEligibleLeadersNotAvailable.
func ElectOnRequest(st PartitionState, replicas []int32, v View, unclean bool, epoch int32) (PartitionState, error) {
	next := st.Clone()
	if unclean {
		if st.Leader >= 0 && v.IsLive(st.Leader) {
			return st, ErrElectionNotNeeded
		}
		next.Leader = -1
		for _, r := range replicas {
			if v.Eligible(r) && slices.Contains(st.ISR, r) {
				next.Leader = r
				break
			}
		}
		if next.Leader < 0 {
			for _, r := range replicas {
				if v.Eligible(r) {
					next.Leader, next.ISR = r, []int32{r}
					break
				}
			}
		}
		if next.Leader < 0 {
			return st, ErrEligibleLeadersNotAvailable
		}
	} else {
		if len(replicas) == 0 {
			return st, ErrPreferredLeaderNotAvailable
		}
		pref := replicas[0]
		if st.Leader == pref {
			return st, ErrElectionNotNeeded
		}
		if !v.Eligible(pref) || !slices.Contains(st.ISR, pref) {
			return st, ErrPreferredLeaderNotAvailable
		}
		next.Leader = pref
	}
	next.LeaderEpoch = st.LeaderEpoch + 1
	next.ControllerEpoch = epoch
	return next, nil
}

// PlanRebalance is the auto.leader.rebalance.enable decision: on each
// eligible broker whose share of the partitions it prefers (it is their
// first replica) that are led by another broker exceeds thresholdPercent,
// leadership goes back to it wherever it is in the ISR. Partitions being
// reassigned and partitions without a state are left alone (the latter
// still count in the share). The writes come in broker id order.
func PlanRebalance(topics []TopicSnapshot, v View, thresholdPercent int, epoch int32) []StateWrite {
	type cand struct {
		tp TopicPartitionID
		st PartitionState
	}
	preferred := map[int32]int{}
	imbalanced := map[int32][]cand{}
	for _, ts := range topics {
		t := ts.Topic
		for p, replicas := range t.Replicas {
			if len(replicas) == 0 || t.Reassigning(int32(p)) {
				continue
			}
			pref := replicas[0]
			preferred[pref]++
			st, ok := ts.States[int32(p)]
			if !ok || st.Leader == pref {
				continue
			}
			imbalanced[pref] = append(imbalanced[pref], cand{TopicPartitionID{t.Name, int32(p)}, st})
		}
	}
	var writes []StateWrite
	for _, b := range slices.Sorted(maps.Keys(imbalanced)) {
		cands := imbalanced[b]
		ratio := float64(len(cands)) * 100 / float64(preferred[b])
		if ratio <= float64(thresholdPercent) || !v.Eligible(b) {
			continue
		}
		for _, cd := range cands {
			if !slices.Contains(cd.st.ISR, b) {
				continue
			}
			next := cd.st.Clone()
			next.Leader, next.LeaderEpoch, next.ControllerEpoch = b, cd.st.LeaderEpoch+1, epoch
			writes = append(writes, StateWrite{Topic: cd.tp.Topic, Partition: cd.tp.Partition, State: next})
		}
	}
	return writes
}

// StillLeads lists the partitions with more than one replica that broker
// leads: what a controlled shutdown could not move (no other in-sync
// replica).
func StillLeads(topics []TopicSnapshot, broker int32) []TopicPartitionID {
	var out []TopicPartitionID
	for _, ts := range topics {
		for p, replicas := range ts.Topic.Replicas {
			if len(replicas) < 2 {
				continue
			}
			if st, ok := ts.States[int32(p)]; ok && st.Leader == broker {
				out = append(out, TopicPartitionID{ts.Topic.Name, int32(p)})
			}
		}
	}
	return out
}

// InitialState is a new partition's first state: the first live replica in
// assignment order leads, every live replica is in the ISR, epoch 0. With no
// live replica the partition starts offline (leader -1, ISR = assignment).
func InitialState(replicas []int32, live func(int32) bool) PartitionState {
	st := PartitionState{Leader: -1}
	for _, r := range replicas {
		if live(r) {
			if st.Leader < 0 {
				st.Leader = r
			}
			st.ISR = append(st.ISR, r)
		}
	}
	if st.Leader < 0 {
		st.ISR = slices.Clone(replicas)
	}
	return st
}

// ElectLeader decides whether a partition needs a new leader: when its
// leader is gone (or it has none), the first replica in assignment order that
// is live and in the ISR leads; failing that, with unclean election allowed,
// the first live replica (the ISR becomes just it); failing that, the
// partition goes offline (leader -1, the ISR kept so a returning member can
// lead again). The epoch is bumped on every leader change. It returns the
// new state and whether it differs from st (Version is carried over for the
// compare-and-set).
func ElectLeader(st PartitionState, replicas []int32, live func(int32) bool, unclean bool) (PartitionState, bool) {
	if st.Leader >= 0 && live(st.Leader) {
		return st, false
	}
	next := st.Clone()
	next.Leader = -1
	for _, r := range replicas {
		if live(r) && slices.Contains(st.ISR, r) {
			next.Leader = r
			break
		}
	}
	if next.Leader >= 0 {
		next.ISR = slices.DeleteFunc(next.ISR, func(b int32) bool { return !live(b) })
	} else if unclean {
		for _, r := range replicas {
			if live(r) {
				next.Leader = r
				next.ISR = []int32{r}
				break
			}
		}
	}
	if next.Leader == st.Leader {
		return st, false // still offline
	}
	next.LeaderEpoch = st.LeaderEpoch + 1
	return next, true
}

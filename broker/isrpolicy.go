package broker

import (
	"slices"
	"time"
)

// The ISR rules of a partition leader as pure functions: they read what the
// leader knows (its log end and high watermark, each follower's fetches, the
// stored ISR, the time) and return a decision; the callers in partition.go
// take the partition's lock to gather the input and apply the result, and
// isrManager writes the decided ISR to the coordinator. Kafka's
// Partition.maybeShrinkIsr/maybeExpandIsr and Replica.updateFetchState are
// the model. testdata/isr/ holds scripts of these decisions (isrpolicy_test.go).

// newFollower is what a leader knows of a follower it has not heard from
// yet: nothing fetched, counted as caught up from now (when the leadership
// or the assignment began), so it has lagMax to fetch before it counts as
// lagging.
func newFollower(now time.Time) *replicaState {
	return &replicaState{leo: -1, lastCaughtUp: now, prevLeaderLEO: -1}
}

// observeFetch is what a follower's fetch at fetchOffset tells the leader,
// whose log ends at leaderLEO, at now (Kafka's Replica.updateFetchState): a
// fetch at the log end means the follower is caught up now; a fetch at or
// past the log end the leader had at the follower's previous fetch means it
// was caught up at that previous fetch's time.
func observeFetch(f replicaState, fetchOffset, leaderLEO int64, now time.Time) replicaState {
	switch {
	case fetchOffset >= leaderLEO:
		f.lastCaughtUp = now
	case f.prevLeaderLEO >= 0 && fetchOffset >= f.prevLeaderLEO && f.prevFetch.After(f.lastCaughtUp):
		f.lastCaughtUp = f.prevFetch
	}
	f.prevLeaderLEO, f.prevFetch = leaderLEO, now
	f.leo, f.lastFetch = fetchOffset, now
	return f
}

// canJoin reports whether a follower that fetched at fetchOffset may join the
// ISR: it has everything below the high watermark and the start of the
// current leader epoch (KIP-101), so that electing it loses no committed
// record and no record of this epoch that it would have to truncate.
func canJoin(fetchOffset, hw, epochStart int64) bool {
	return fetchOffset >= hw && fetchOffset >= epochStart
}

// isrInput is what an ISR decision reads: the leader's view of the
// partition at one instant.
type isrInput struct {
	self       int32
	replicas   []int32 // assignment order
	isr        []int32 // the ISR as stored in the coordinator
	hw         int64
	epochStart int64
	followers  map[int32]*replicaState
	now        time.Time
	lagMax     time.Duration // replica.lag.time.max.ms
}

// shrinkDue reports whether some follower in isr has not been caught up
// within lagMax, so the leader should take it out (Kafka's
// getOutOfSyncReplicas): isrManager's periodic check.
func shrinkDue(isr []int32, followers map[int32]*replicaState, now time.Time, lagMax time.Duration) bool {
	for _, r := range isr {
		if f, ok := followers[r]; ok && now.Sub(f.lastCaughtUp) > lagMax {
			return true
		}
	}
	return false
}

// decideISR is the ISR the leader wants, starting from the stored one:
// members that were not caught up within lagMax leave (the leader itself
// never does), followers outside it that fetched within lagMax and can
// join (canJoin) come in, in assignment order after the members that stay.
// It returns false when that is the stored ISR.
func decideISR(in isrInput) ([]int32, bool) {
	out := make([]int32, 0, len(in.replicas))
	for _, r := range in.isr {
		if r == in.self {
			out = append(out, r)
			continue
		}
		f, ok := in.followers[r]
		if !ok || in.now.Sub(f.lastCaughtUp) > in.lagMax {
			continue // not a replica any more, or lagging
		}
		out = append(out, r)
	}
	for _, r := range in.replicas {
		f, ok := in.followers[r]
		if !ok || slices.Contains(out, r) {
			continue
		}
		if f.leo >= 0 && canJoin(f.leo, in.hw, in.epochStart) && in.now.Sub(f.lastFetch) <= in.lagMax {
			out = append(out, r)
		}
	}
	if slices.Equal(out, in.isr) {
		return nil, false
	}
	return out, true
}

// isrCheckInterval is how often isrManager looks for laggards: several times
// per lag period (Kafka checks at half of it), within [50 ms, 5 s].
func isrCheckInterval(lagMax time.Duration) time.Duration {
	return min(max(lagMax/4, 50*time.Millisecond), 5*time.Second)
}

// isrRetryBackoff is the wait before writing a failed ISR change again,
// given the previous wait (0: the first failure): doubling from 200 ms to
// 5 s, since the store may be away for a while.
func isrRetryBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return 200 * time.Millisecond
	}
	return min(2*prev, 5*time.Second)
}

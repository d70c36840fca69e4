package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Replication throttles (Kafka's KIP-73): the broker keys
// leader.replication.throttled.rate and follower.replication.throttled.rate
// bound the bytes per second of the replication of the replicas the topic
// configs leader.replication.throttled.replicas and
// follower.replication.throttled.replicas name. A reassignment tool sets
// both for the partitions it moves and removes them when the moves are
// done.

// The throttle keys.
const (
	LeaderThrottledRate       = "leader.replication.throttled.rate"
	FollowerThrottledRate     = "follower.replication.throttled.rate"
	LeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

// NoThrottle is the rates' default, Kafka's Long.MAX_VALUE: no throttle.
const NoThrottle int64 = 1<<63 - 1

// ThrottledReplicas is a throttled-replica list parsed: every replica ("*")
// or partition:broker pairs.
type ThrottledReplicas struct {
	All   bool
	Pairs []ReplicaRef
}

// ReplicaRef is one partition:broker entry.
type ReplicaRef struct {
	Partition, Broker int32
}

// ParseThrottledReplicas reads a throttled-replica list as Kafka's
// ThrottledReplicaListValidator accepts it: empty, "*", or comma-separated
// partition:broker pairs of non-negative integers (spaces around them
// allowed).
func ParseThrottledReplicas(s string) (ThrottledReplicas, error) {
	var out ThrottledReplicas
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	if s == "*" {
		out.All = true
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		p, b, ok := strings.Cut(item, ":")
		pn, perr := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bn, berr := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if !ok || perr != nil || berr != nil || pn < 0 || bn < 0 {
			return ThrottledReplicas{}, fmt.Errorf("%q is not partition:broker; the list is * or partition:broker pairs separated by commas, such as 0:101,1:102", item)
		}
		out.Pairs = append(out.Pairs, ReplicaRef{Partition: int32(pn), Broker: int32(bn)})
	}
	return out, nil
}

// PartitionsOf are the partitions the list throttles on broker (all: every
// partition).
func (t ThrottledReplicas) PartitionsOf(broker int32) (parts []int32, all bool) {
	if t.All {
		return nil, true
	}
	for _, r := range t.Pairs {
		if r.Broker == broker {
			parts = append(parts, r.Partition)
		}
	}
	return parts, false
}

// String formats the list as the topic config takes it.
func (t ThrottledReplicas) String() string {
	if t.All {
		return "*"
	}
	var b strings.Builder
	for i, r := range t.Pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", r.Partition, r.Broker)
	}
	return b.String()
}

// throttledReplicasRule checks a throttled-replica list.
var throttledReplicasRule = Rule{Doc: "* or partition:broker,...", check: func(v any) error {
	_, err := ParseThrottledReplicas(strings.Join(v.([]string), ","))
	return err
}}

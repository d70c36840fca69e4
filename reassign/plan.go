// Package reassign moves partition replicas between brokers, as Kafka's
// kafka-reassign-partitions.sh does, for both the CLI (`sluice reassign`,
// `sluice broker add|drain`) and the console's partition moves page: the
// plans (Kafka's reassignment JSON; drain a broker, add a broker until it
// holds its share, spread a topic over a broker set), starting and
// cancelling them over AlterPartitionReassignments, the throttle a move
// sets and removes (the topics' throttled-replica lists and the brokers'
// throttle rates), and the progress of the moves in bytes
// (ListPartitionReassignments and DescribeLogDirs).
package reassign

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// Plan is Kafka's reassignment JSON (kafka-reassign-partitions.sh
// --reassignment-json-file).
type Plan struct {
	Version    int     `json:"version"`
	Partitions []Entry `json:"partitions"`
}

// Entry is one partition's target replicas, preferred leader first.
type Entry struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas,omitempty"`
}

// ParsePlan reads and checks a plan: at least one partition, each with a
// topic and a partition.
func ParsePlan(b []byte) (Plan, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return p, err
	}
	if len(p.Partitions) == 0 {
		return p, fmt.Errorf("no partitions")
	}
	for i, e := range p.Partitions {
		if e.Topic == "" || e.Partition < 0 {
			return p, fmt.Errorf("entry %d needs a topic and a partition", i)
		}
	}
	return p, nil
}

// Topics are the plan's topics, sorted.
func (p Plan) Topics() []string {
	var out []string
	for _, e := range p.Partitions {
		if !slices.Contains(out, e.Topic) {
			out = append(out, e.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// Part names a partition.
type Part struct {
	Topic     string
	Partition int32
}

func (k Part) String() string { return fmt.Sprintf("%s-%d", k.Topic, k.Partition) }

// Assignment is every partition's replicas (from Metadata), the
// partitions sorted by topic and partition.
type Assignment struct {
	Parts   []Part
	Current map[Part][]int32
}

// Load counts the replicas each broker holds.
func (a Assignment) Load() map[int32]int {
	n := map[int32]int{}
	for _, rs := range a.Current {
		for _, r := range rs {
			n[r]++
		}
	}
	return n
}

// SameSet reports whether a and b hold the same brokers; a nil b (a
// cancellation: whatever the original was) matches anything.
func SameSet(a, b []int32) bool {
	if b == nil {
		return true
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Drain moves every replica on broker off it: each goes to the live
// broker, not already a replica of that partition, holding the fewest
// replicas (ties: the lowest id); it takes the drained broker's place in
// the list, so a drained preferred leader's replacement becomes the
// preferred leader. Partitions whose every live broker already holds a
// replica cannot move and are returned apart.
func Drain(a Assignment, broker int32, live []int32) (plan Plan, stuck []Part) {
	load := a.Load()
	plan.Version = 1
	for _, k := range a.Parts {
		reps := a.Current[k]
		i := slices.Index(reps, broker)
		if i < 0 {
			continue
		}
		best := int32(-1)
		for _, b := range live {
			if b == broker || slices.Contains(reps, b) {
				continue
			}
			if best < 0 || load[b] < load[best] || load[b] == load[best] && b < best {
				best = b
			}
		}
		if best < 0 {
			stuck = append(stuck, k)
			continue
		}
		next := slices.Clone(reps)
		next[i] = best
		load[best]++
		load[broker]--
		plan.Partitions = append(plan.Partitions, Entry{Topic: k.Topic, Partition: k.Partition, Replicas: next})
	}
	return plan, stuck
}

// Add moves replicas onto broker until it holds its share (the total
// replica count over the number of brokers, rounded down): each move takes
// a replica of the most loaded broker, from a partition the new broker is
// not yet a replica of, keeping its place in the replica list.
func Add(a Assignment, broker int32, live []int32) Plan {
	load := a.Load()
	total := 0
	for _, n := range load {
		total += n
	}
	brokers := slices.Clone(live)
	if !slices.Contains(brokers, broker) {
		brokers = append(brokers, broker)
	}
	share := total / len(brokers)
	next := map[Part][]int32{}
	var order []Part
	for load[broker] < share {
		// The most loaded broker, then the first partition it can give.
		donors := slices.Clone(brokers)
		slices.SortFunc(donors, func(x, y int32) int { return cmp.Or(cmp.Compare(load[y], load[x]), cmp.Compare(x, y)) })
		moved := false
		for _, d := range donors {
			if d == broker || load[d] <= share {
				continue
			}
			for _, k := range a.Parts {
				reps := next[k]
				if reps == nil {
					reps = a.Current[k]
				}
				i := slices.Index(reps, d)
				if i < 0 || slices.Contains(reps, broker) {
					continue
				}
				reps = slices.Clone(reps)
				reps[i] = broker
				if next[k] == nil {
					order = append(order, k)
				}
				next[k] = reps
				load[d]--
				load[broker]++
				moved = true
				break
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	plan := Plan{Version: 1}
	for _, k := range order {
		plan.Partitions = append(plan.Partitions, Entry{Topic: k.Topic, Partition: k.Partition, Replicas: next[k]})
	}
	return plan
}

// Spread places every partition of topic on brokers with rf replicas each
// (rf 0 keeps each partition's replica count): a partition keeps, in
// their order, those of its replicas that are among brokers (up to rf), and
// gets the rest from the brokers holding the fewest replicas in the
// cluster (ties: the lowest id). A replica that stays keeps its place
// before the new ones, so leadership stays where it can. Partitions that
// already match are left out of the plan.
func Spread(a Assignment, topic string, brokers []int32, rf int) (Plan, error) {
	plan := Plan{Version: 1}
	if len(brokers) == 0 {
		return plan, fmt.Errorf("choose at least one broker")
	}
	if rf < 0 {
		return plan, fmt.Errorf("replication factor %d: give 1 or more (0: keep each partition's)", rf)
	}
	if rf > len(brokers) {
		return plan, fmt.Errorf("replication factor %d needs at least %d brokers; %d chosen", rf, rf, len(brokers))
	}
	load := a.Load()
	found := false
	for _, k := range a.Parts {
		if k.Topic != topic {
			continue
		}
		found = true
		cur := a.Current[k]
		n := rf
		if n == 0 {
			n = len(cur)
		}
		if n > len(brokers) {
			return plan, fmt.Errorf("%s has %d replicas; %d brokers chosen (choose more, or set a lower replication factor)", k, n, len(brokers))
		}
		var next []int32
		for _, r := range cur {
			if len(next) < n && slices.Contains(brokers, r) {
				next = append(next, r)
			}
		}
		for len(next) < n {
			best := int32(-1)
			for _, b := range brokers {
				if slices.Contains(next, b) {
					continue
				}
				if best < 0 || load[b] < load[best] || load[b] == load[best] && b < best {
					best = b
				}
			}
			next = append(next, best)
			load[best]++
		}
		for _, r := range cur {
			if !slices.Contains(next, r) {
				load[r]--
			}
		}
		if !slices.Equal(next, cur) {
			plan.Partitions = append(plan.Partitions, Entry{Topic: k.Topic, Partition: k.Partition, Replicas: next})
		}
	}
	if !found {
		return plan, fmt.Errorf("topic %s has no partitions (does it exist?)", topic)
	}
	return plan, nil
}

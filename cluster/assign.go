package cluster

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sluice-io/sluice/config"
)

// ErrInvalidReplicationFactor is returned when a topic asks for more replicas
// than there are live brokers, or fewer than one.
var ErrInvalidReplicationFactor = errors.New("invalid replication factor")

// ErrInvalidTopic marks a topic name Kafka would refuse.
var ErrInvalidTopic = errors.New("invalid topic name")

// MaxRecordsPerRequest bounds the metadata one admin request may create or
// change: Kafka's controller refuses a request that would write more than
// 10,000 metadata records (QuorumController.MAX_RECORDS_PER_USER_OP: a
// topic is one record, each of its partitions and each config another)
// with POLICY_VIOLATION, "Unable to perform excessively large batch
// operation.", and so does Sluice, checking the counts a client sends
// before anything is allocated for them. Assignments are made for no more
// partitions either.
const MaxRecordsPerRequest = 10000

// ErrTooManyPartitions is returned for an assignment of more than
// MaxRecordsPerRequest partitions.
var ErrTooManyPartitions = errors.New("too many partitions for one request")

// ValidateTopicName checks a topic name as Kafka does
// (config.ValidateTopicName); the error wraps ErrInvalidTopic.
func ValidateTopicName(name string) error {
	if err := config.ValidateTopicName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidTopic, err)
	}
	return nil
}

// Collision returns the existing topic whose name differs from name only by
// '.' versus '_' (Kafka refuses such pairs: they map to the same metric
// names), or "" when there is none. It allocates nothing per existing
// topic (CreateTopics checks every topic of a request against all).
func Collision(name string, existing []string) string {
	return CollisionIn(name, slices.Values(existing))
}

// CollisionIn is Collision over a sequence of names (the keys of a map).
func CollisionIn(name string, existing iter.Seq[string]) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	for e := range existing {
		if e != name && sameButDotsAndUnderscores(e, name) {
			return e
		}
	}
	return ""
}

// sameButDotsAndUnderscores reports whether a and b are equal once every
// '.' is read as '_'.
func sameButDotsAndUnderscores(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '.' {
			x = '_'
		}
		if y == '.' {
			y = '_'
		}
		if x != y {
			return false
		}
	}
	return true
}

// AssignReplicas spreads partitions [startPartition, startPartition+count)
// over brokers the way Kafka's rack-unaware assignment does: the first
// replica of each partition walks round the brokers from a random start, and
// the followers are shifted by an amount that changes every time the walk
// wraps, so that leaders and followers both spread evenly. rnd may be nil
// (a random source is used).
func AssignReplicas(brokers []int32, count, replicationFactor int, startPartition int, rnd *rand.Rand) ([][]int32, error) {
	n := len(brokers)
	if replicationFactor < 1 {
		return nil, fmt.Errorf("%w: %d, it must be at least 1", ErrInvalidReplicationFactor, replicationFactor)
	}
	if replicationFactor > n {
		return nil, fmt.Errorf("%w: %d is larger than the number of available brokers (%d)", ErrInvalidReplicationFactor, replicationFactor, n)
	}
	if err := checkCount(count); err != nil {
		return nil, err
	}
	ids := slices.Clone(brokers)
	slices.Sort(ids)
	intn := rand.IntN
	if rnd != nil {
		intn = rnd.IntN
	}
	startIndex := intn(n)
	shift := intn(n)
	out := make([][]int32, 0, count)
	p := max(startPartition, 0)
	for range count {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		replicas := []int32{ids[first]}
		for j := 0; j < replicationFactor-1; j++ {
			replicas = append(replicas, ids[replicaIndex(first, shift, j, n)])
		}
		out = append(out, replicas)
		p++
	}
	return out, nil
}

// checkCount refuses a partition count an assignment cannot be made for
// (negative) or should not be (above MaxRecordsPerRequest), before
// anything is allocated for it.
func checkCount(count int) error {
	switch {
	case count < 0:
		return fmt.Errorf("partition count %d", count)
	case count > MaxRecordsPerRequest:
		return fmt.Errorf("%w: %d, at most %d", ErrTooManyPartitions, count, MaxRecordsPerRequest)
	}
	return nil
}

func replicaIndex(first, secondShift, j, n int) int {
	s := 1 + (secondShift+j)%(n-1)
	return (first + s) % n
}

// ValidateAssignment checks an explicit assignment (CreateTopics with
// assignments, CreatePartitions with assignments, reassignments): every
// partition has the same number of replicas, no broker twice, and only
// known brokers. It allocates nothing in proportion to the lists it is
// given: a list is refused at its first unknown or repeated broker, so
// what it remembers is bounded by the brokers there are.
func ValidateAssignment(assignment [][]int32, known func(int32) bool) error {
	rf := -1
	for p, replicas := range assignment {
		if rf >= 0 && len(replicas) != rf && len(replicas) > 0 {
			return fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d", ErrInvalidReplicationFactor, p, len(replicas), rf)
		}
		if err := ValidateReplicas(int32(p), replicas, known); err != nil {
			return err
		}
		rf = len(replicas)
	}
	return nil
}

// ValidateReplicas checks partition p's replica list: not empty, known
// brokers, none twice.
func ValidateReplicas(p int32, replicas []int32, known func(int32) bool) error {
	if len(replicas) == 0 {
		return fmt.Errorf("partition %d has no replicas", p)
	}
	for i, b := range replicas {
		if !known(b) {
			return fmt.Errorf("partition %d names unknown broker %d", p, b)
		}
		if slices.Contains(replicas[:i], b) {
			return fmt.Errorf("partition %d lists broker %d twice", p, b)
		}
	}
	return nil
}

// Assign spreads partitions over the live brokers: rack-aware when every
// broker has broker.rack set (AssignReplicasRackAware), Kafka's
// rack-unaware walk otherwise (a mix of brokers with and without racks is
// treated as no racks, where Kafka would refuse to create the topic).
func Assign(brokers []Broker, count, replicationFactor, startPartition int, rnd *rand.Rand) ([][]int32, error) {
	ids := make([]int32, len(brokers))
	racks := make(map[int32]string, len(brokers))
	allRacks := len(brokers) > 0
	for i, b := range brokers {
		ids[i] = b.ID
		racks[b.ID] = b.Rack
		if b.Rack == "" {
			allRacks = false
		}
	}
	if allRacks {
		return AssignReplicasRackAware(racks, count, replicationFactor, startPartition, rnd)
	}
	return AssignReplicas(ids, count, replicationFactor, startPartition, rnd)
}

// AssignReplicasRackAware is Kafka's rack-aware assignment
// (AdminUtils.assignReplicasToBrokersRackAware): brokers are listed
// alternating between racks (racks sorted, brokers sorted within each
// rack); the first replica of each partition walks that list from a random
// start, and each further replica is the next broker, after a shift that
// grows every time the walk wraps, on a rack that holds no replica of the
// partition yet (once every rack has one, any broker without one). So the
// replicas of a partition span min(replicationFactor, racks) racks and
// leaders and followers spread evenly.
func AssignReplicasRackAware(racks map[int32]string, count, replicationFactor, startPartition int, rnd *rand.Rand) ([][]int32, error) {
	n := len(racks)
	if replicationFactor < 1 {
		return nil, fmt.Errorf("%w: %d, it must be at least 1", ErrInvalidReplicationFactor, replicationFactor)
	}
	if replicationFactor > n {
		return nil, fmt.Errorf("%w: %d is larger than the number of available brokers (%d)", ErrInvalidReplicationFactor, replicationFactor, n)
	}
	if err := checkCount(count); err != nil {
		return nil, err
	}
	byRack := map[string][]int32{}
	for id, r := range racks {
		byRack[r] = append(byRack[r], id)
	}
	rackNames := make([]string, 0, len(byRack))
	for r, ids := range byRack {
		slices.Sort(ids)
		rackNames = append(rackNames, r)
	}
	slices.Sort(rackNames)
	numRacks := len(rackNames)
	// The rack-alternated broker list.
	arranged := make([]int32, 0, n)
	next := make(map[string]int, numRacks)
	for ri := 0; len(arranged) < n; ri = (ri + 1) % numRacks {
		r := rackNames[ri]
		if i := next[r]; i < len(byRack[r]) {
			arranged = append(arranged, byRack[r][i])
			next[r] = i + 1
		}
	}
	intn := rand.IntN
	if rnd != nil {
		intn = rnd.IntN
	}
	startIndex := intn(n)
	shift := intn(n)
	out := make([][]int32, 0, count)
	p := max(startPartition, 0)
	for range count {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		leader := arranged[first]
		replicas := []int32{leader}
		racksWith := map[string]bool{racks[leader]: true}
		brokersWith := map[int32]bool{leader: true}
		k := 0
		for range replicationFactor - 1 {
			for {
				b := arranged[replicaIndex(first, shift*numRacks, k, n)]
				k++
				r := racks[b]
				if (!racksWith[r] || len(racksWith) == numRacks) && (!brokersWith[b] || len(brokersWith) == n) {
					replicas = append(replicas, b)
					racksWith[r] = true
					brokersWith[b] = true
					break
				}
			}
		}
		out = append(out, replicas)
		p++
	}
	return out, nil
}

package cluster

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestElectLeader(t *testing.T) {
	live := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	replicas := []int32{1, 2, 3}
	base := PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}, Version: 9}
	for _, tc := range []struct {
		name    string
		st      PartitionState
		live    func(int32) bool
		unclean bool
		leader  int32
		isr     []int32
		changed bool
	}{
		{"leader alive", base, live(1, 2, 3), false, 1, []int32{1, 2, 3}, false},
		{"leader dies, next in ISR", base, live(2, 3), false, 2, []int32{2, 3}, true},
		{"assignment order wins", PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{3, 2, 1}}, live(2, 3), false, 2, []int32{3, 2}, true},
		{"no ISR member alive: offline", PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1}}, live(2, 3), false, -1, []int32{1}, true},
		{"unclean election", PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1}}, live(3), true, 3, []int32{3}, true},
		{"offline stays offline", PartitionState{Leader: -1, LeaderEpoch: 5, ISR: []int32{1}}, live(2), false, -1, []int32{1}, false},
		{"offline comes back", PartitionState{Leader: -1, LeaderEpoch: 5, ISR: []int32{1}}, live(1), false, 1, []int32{1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, changed := ElectLeader(tc.st, replicas, tc.live, tc.unclean)
			if changed != tc.changed || next.Leader != tc.leader || !slices.Equal(next.ISR, tc.isr) {
				t.Fatalf("got leader %d isr %v changed %v", next.Leader, next.ISR, changed)
			}
			if changed && next.LeaderEpoch != tc.st.LeaderEpoch+1 {
				t.Fatalf("epoch %d after a change from %d", next.LeaderEpoch, tc.st.LeaderEpoch)
			}
			if next.Version != tc.st.Version {
				t.Fatal("version not carried for the compare-and-set")
			}
		})
	}
}

func TestAssignReplicasSpreads(t *testing.T) {
	brokers := []int32{3, 1, 2, 4}
	a, err := AssignReplicas(brokers, 12, 3, 0, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for p, r := range a {
		if len(r) != 3 {
			t.Fatalf("partition %d has %d replicas", p, len(r))
		}
		seen := map[int32]bool{}
		for _, b := range r {
			if seen[b] || !slices.Contains(brokers, b) {
				t.Fatalf("partition %d replicas %v", p, r)
			}
			seen[b] = true
		}
		leaders[r[0]]++
	}
	for _, b := range brokers {
		if leaders[b] != 3 {
			t.Fatalf("leaders not spread evenly: %v", leaders)
		}
	}
	if _, err := AssignReplicas(brokers, 1, 5, 0, nil); err == nil {
		t.Fatal("replication factor above broker count accepted")
	}
	if a, _ := AssignReplicas([]int32{9}, 3, 1, 5, nil); len(a) != 3 || a[0][0] != 9 {
		t.Fatalf("single broker assignment %v", a)
	}
}

func TestTopicNames(t *testing.T) {
	for _, ok := range []string{"a", "orders.v2", "A_b-c", string(make([]byte, 0)) + "x"} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	long := make([]byte, 250)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", ".", "..", "a b", "ü", "a/b", string(long)} {
		if err := ValidateTopicName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if c := Collision("a.b", []string{"a_b", "c"}); c != "a_b" {
		t.Fatalf("collision %q", c)
	}
	if c := Collision("a.b", []string{"a.b"}); c != "" {
		t.Fatalf("a topic collides with itself: %q", c)
	}
}

// TestAssignRackAware: with three racks and RF 3 every partition has one
// replica per rack; with two racks and RF 2 both racks; leaders spread
// evenly over the brokers.
func TestAssignRackAware(t *testing.T) {
	racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
	rnd := rand.New(rand.NewPCG(3, 4))
	as, err := AssignReplicasRackAware(racks, 60, 3, 0, rnd)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for p, rs := range as {
		seen := map[string]bool{}
		for _, b := range rs {
			seen[racks[b]] = true
		}
		if len(rs) != 3 || len(seen) != 3 {
			t.Fatalf("partition %d: replicas %v span racks %v", p, rs, seen)
		}
		leaders[rs[0]]++
	}
	for b, n := range leaders {
		if n != 10 {
			t.Fatalf("broker %d leads %d of 60 partitions: %v", b, n, leaders)
		}
	}
	as, err = AssignReplicasRackAware(map[int32]string{1: "x", 2: "x", 3: "y"}, 12, 2, 0, rnd)
	if err != nil {
		t.Fatal(err)
	}
	for p, rs := range as {
		if (rs[0] == 3) == (rs[1] == 3) {
			t.Fatalf("partition %d: replicas %v on one rack", p, rs)
		}
	}
	if _, err := AssignReplicasRackAware(map[int32]string{1: "x"}, 1, 2, 0, rnd); err == nil {
		t.Fatal("replication factor above the broker count was accepted")
	}
	// Mixed: some brokers without a rack fall back to the plain walk.
	as, err = Assign([]Broker{{ID: 1, Rack: "a"}, {ID: 2}, {ID: 3, Rack: "b"}}, 3, 3, 0, rnd)
	if err != nil || len(as) != 3 || len(as[0]) != 3 {
		t.Fatalf("mixed racks: %v %v", as, err)
	}
}

// TestAssignBounds: no assignment is made for more partitions than one
// request may create, whatever count is asked for (nothing is allocated
// for it first), and an explicit replica list is refused at its first
// unknown or repeated broker.
func TestAssignBounds(t *testing.T) {
	brokers := []Broker{{ID: 1}, {ID: 2}}
	for _, count := range []int{MaxRecordsPerRequest + 1, math.MaxInt32} {
		if _, err := Assign(brokers, count, 1, 0, nil); !errors.Is(err, ErrTooManyPartitions) {
			t.Fatalf("Assign of %d partitions: %v", count, err)
		}
		if _, err := AssignReplicasRackAware(map[int32]string{1: "a", 2: "b"}, count, 1, 0, nil); !errors.Is(err, ErrTooManyPartitions) {
			t.Fatalf("rack-aware Assign of %d partitions: %v", count, err)
		}
	}
	if a, err := Assign(brokers, MaxRecordsPerRequest, 2, 0, nil); err != nil || len(a) != MaxRecordsPerRequest {
		t.Fatalf("Assign of %d partitions: %d, %v", MaxRecordsPerRequest, len(a), err)
	}
	known := func(id int32) bool { return id == 1 || id == 2 }
	long := make([]int32, 1<<20)
	for i := range long {
		long[i] = 1
	}
	if err := ValidateAssignment([][]int32{long}, known); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a list repeating broker 1: %v", err)
	}
	for i := range long {
		long[i] = int32(i + 3)
	}
	if err := ValidateAssignment([][]int32{long}, known); err == nil || !strings.Contains(err.Error(), "unknown broker 3") {
		t.Fatalf("a list of unknown brokers: %v", err)
	}
}

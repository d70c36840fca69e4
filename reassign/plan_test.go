package reassign

import (
	"slices"
	"testing"
)

func testAssignment(m map[Part][]int32) Assignment {
	a := Assignment{Current: m}
	for k := range m {
		a.Parts = append(a.Parts, k)
	}
	slices.SortFunc(a.Parts, func(x, y Part) int {
		if x.Topic != y.Topic {
			if x.Topic < y.Topic {
				return -1
			}
			return 1
		}
		return int(x.Partition - y.Partition)
	})
	return a
}

// TestDrainPlan: every replica leaves the drained broker, keeps its place
// in the list, and goes to the least loaded broker that is not already a
// replica; a partition that cannot move is reported.
func TestDrainPlan(t *testing.T) {
	a := testAssignment(map[Part][]int32{
		{"t", 0}: {3, 1},
		{"t", 1}: {1, 3},
		{"t", 2}: {1, 2},
		{"u", 0}: {3, 4},
	})
	plan, stuck := Drain(a, 3, []int32{1, 2, 3, 4})
	if len(stuck) != 0 {
		t.Fatalf("stuck %v", stuck)
	}
	got := map[Part][]int32{}
	for _, e := range plan.Partitions {
		got[Part{e.Topic, e.Partition}] = e.Replicas
	}
	if len(got) != 3 || got[Part{"t", 2}] != nil {
		t.Fatalf("plan %+v", plan)
	}
	for k, reps := range got {
		if slices.Contains(reps, 3) || len(reps) != 2 || reps[0] == reps[1] {
			t.Fatalf("%v: %v", k, reps)
		}
	}
	// t-0's preferred leader was 3: its replacement leads.
	if r := got[Part{"t", 0}]; r[1] != 1 || r[0] == 3 {
		t.Fatalf("t-0: %v", r)
	}
	_, stuck = Drain(testAssignment(map[Part][]int32{{"x", 0}: {1, 2, 3}}), 3, []int32{1, 2, 3})
	if len(stuck) != 1 {
		t.Fatalf("an RF 3 partition on 3 brokers cannot be drained; stuck %v", stuck)
	}
}

// TestAddPlan: a new broker takes replicas from the most loaded brokers
// until it holds its share, never twice in one partition.
func TestAddPlan(t *testing.T) {
	m := map[Part][]int32{}
	for p := int32(0); p < 6; p++ {
		m[Part{"t", p}] = []int32{1 + p%3, 1 + (p+1)%3}
	}
	plan := Add(testAssignment(m), 4, []int32{1, 2, 3, 4})
	load := map[int32]int{}
	for k, reps := range m {
		for _, e := range plan.Partitions {
			if e.Topic == k.Topic && e.Partition == k.Partition {
				reps = e.Replicas
			}
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] {
				t.Fatalf("%v lists %d twice: %v", k, r, reps)
			}
			seen[r] = true
			load[r]++
		}
	}
	if load[4] != 3 || load[1]+load[2]+load[3] != 9 {
		t.Fatalf("loads after adding broker 4: %v (plan %+v)", load, plan)
	}
	for b := int32(1); b <= 3; b++ {
		if load[b] != 3 {
			t.Fatalf("loads after adding broker 4: %v", load)
		}
	}
}

func TestPlanThrottles(t *testing.T) {
	plan := Plan{Version: 1, Partitions: []Entry{
		{Topic: "a", Partition: 0, Replicas: []int32{1, 4}}, // 2 -> 4
		{Topic: "a", Partition: 1, Replicas: []int32{3, 2}}, // not moving (same set)
		{Topic: "b", Partition: 0, Replicas: []int32{1}},    // shrinks: nothing added
	}}
	cur := map[Part][]int32{{"a", 0}: {1, 2}, {"a", 1}: {2, 3}, {"b", 0}: {1, 3}}
	th := PlanThrottles(plan, cur)
	if got := th.Leader["a"].String(); got != "0:1,0:2" {
		t.Errorf("leader list of a: %q", got)
	}
	if got := th.Follower["a"].String(); got != "0:4" {
		t.Errorf("follower list of a: %q", got)
	}
	if got := th.Leader["b"].String(); got != "0:1,0:3" {
		t.Errorf("leader list of b: %q", got)
	}
	if _, ok := th.Follower["b"]; ok {
		t.Errorf("b adds no replica but has a follower list %q", th.Follower["b"].String())
	}
	if !slices.Equal(th.Brokers, []int32{1, 2, 3, 4}) {
		t.Errorf("brokers %v", th.Brokers)
	}
}

// TestSpread: a topic moves onto a broker set, replicas that stay keep
// their place first, new ones go to the least loaded chosen brokers, a
// higher replication factor adds replicas, and impossible requests are
// refused.
func TestSpread(t *testing.T) {
	a := testAssignment(map[Part][]int32{
		{"t", 0}: {1, 2},
		{"t", 1}: {2, 3},
		{"t", 2}: {3, 1},
		{"u", 0}: {4, 1},
	})
	plan, err := Spread(a, "t", []int32{2, 3, 4}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32][]int32{}
	for _, e := range plan.Partitions {
		if e.Topic != "t" {
			t.Fatalf("plan moves %s", e.Topic)
		}
		got[e.Partition] = e.Replicas
	}
	// t-1 already on {2,3}: not moved. t-0 keeps 2 first, t-2 keeps 3 first.
	if _, ok := got[1]; ok || len(got) != 2 {
		t.Fatalf("plan %+v", plan)
	}
	if r := got[0]; len(r) != 2 || r[0] != 2 || slices.Contains(r, 1) {
		t.Fatalf("t-0 -> %v", r)
	}
	if r := got[2]; len(r) != 2 || r[0] != 3 || slices.Contains(r, 1) {
		t.Fatalf("t-2 -> %v", r)
	}
	plan, err = Spread(a, "t", []int32{1, 2, 3}, 3)
	if err != nil || len(plan.Partitions) != 3 {
		t.Fatalf("rf 3: %+v %v", plan, err)
	}
	for _, e := range plan.Partitions {
		if len(e.Replicas) != 3 || !SameSet(e.Replicas, []int32{1, 2, 3}) {
			t.Fatalf("rf 3: %+v", e)
		}
		if cur := a.Current[Part{e.Topic, e.Partition}]; e.Replicas[0] != cur[0] {
			t.Fatalf("rf 3 moved the preferred leader of %d: %v -> %v", e.Partition, cur, e.Replicas)
		}
	}
	for _, bad := range []struct {
		brokers []int32
		rf      int
		topic   string
	}{{nil, 0, "t"}, {[]int32{1}, 2, "t"}, {[]int32{1}, 0, "t"}, {[]int32{1, 2}, 0, "nope"}, {[]int32{1}, -1, "t"}} {
		if _, err := Spread(a, bad.topic, bad.brokers, bad.rf); err == nil {
			t.Errorf("Spread(%s, %v, %d) accepted", bad.topic, bad.brokers, bad.rf)
		}
	}
}

func TestParsePlanAndSteps(t *testing.T) {
	p, err := ParsePlan([]byte(`{"version":1,"partitions":[{"topic":"b","partition":0,"replicas":[1,3]},{"topic":"a","partition":2,"replicas":[2]}]}`))
	if err != nil || !slices.Equal(p.Topics(), []string{"a", "b"}) {
		t.Fatalf("%+v %v", p, err)
	}
	for _, bad := range []string{`{`, `{"partitions":[]}`, `{"partitions":[{"partition":1}]}`, `{"partitions":[{"topic":"x","partition":-1}]}`} {
		if _, err := ParsePlan([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	cur := map[Part][]int32{{"b", 0}: {1, 2}, {"a", 2}: {1, 2}}
	steps := Steps(p, cur, map[Part]map[int32]int64{{"b", 0}: {1: 100, 2: 90}})
	// a-2: 1,2 -> 2: nothing added, nothing to copy (sizes unknown or not).
	if len(steps) != 2 || steps[0].Topic != "a" || steps[0].Bytes != 0 || len(steps[0].Adding) != 0 || !slices.Equal(steps[0].Removing, []int32{1}) {
		t.Fatalf("steps %+v", steps)
	}
	if s := steps[1]; !slices.Equal(s.Adding, []int32{3}) || !slices.Equal(s.Removing, []int32{2}) || s.Bytes != 100 {
		t.Fatalf("b-0 %+v", s)
	}
}

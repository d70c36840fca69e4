package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func testAssignment(m map[partKey][]int32) assignment {
	a := assignment{current: m}
	for k := range m {
		a.parts = append(a.parts, k)
	}
	slices.SortFunc(a.parts, func(x, y partKey) int {
		if x.topic != y.topic {
			if x.topic < y.topic {
				return -1
			}
			return 1
		}
		return int(x.partition - y.partition)
	})
	return a
}

// TestDrainPlan: every replica leaves the drained broker, keeps its place
// in the list, and goes to the least loaded broker that is not already a
// replica; a partition that cannot move is reported.
func TestDrainPlan(t *testing.T) {
	a := testAssignment(map[partKey][]int32{
		{"t", 0}: {3, 1},
		{"t", 1}: {1, 3},
		{"t", 2}: {1, 2},
		{"u", 0}: {3, 4},
	})
	plan, stuck := drainPlan(a, 3, []int32{1, 2, 3, 4})
	if len(stuck) != 0 {
		t.Fatalf("stuck %v", stuck)
	}
	got := map[partKey][]int32{}
	for _, e := range plan.Partitions {
		got[partKey{e.Topic, e.Partition}] = e.Replicas
	}
	if len(got) != 3 || got[partKey{"t", 2}] != nil {
		t.Fatalf("plan %+v", plan)
	}
	for k, reps := range got {
		if slices.Contains(reps, 3) || len(reps) != 2 || reps[0] == reps[1] {
			t.Fatalf("%v: %v", k, reps)
		}
	}
	// t-0's preferred leader was 3: its replacement leads.
	if r := got[partKey{"t", 0}]; r[1] != 1 || r[0] == 3 {
		t.Fatalf("t-0: %v", r)
	}
	_, stuck = drainPlan(testAssignment(map[partKey][]int32{{"x", 0}: {1, 2, 3}}), 3, []int32{1, 2, 3})
	if len(stuck) != 1 {
		t.Fatalf("an RF 3 partition on 3 brokers cannot be drained; stuck %v", stuck)
	}
}

// TestAddPlan: a new broker takes replicas from the most loaded brokers
// until it holds its share, never twice in one partition.
func TestAddPlan(t *testing.T) {
	m := map[partKey][]int32{}
	for p := int32(0); p < 6; p++ {
		m[partKey{"t", p}] = []int32{1 + p%3, 1 + (p+1)%3}
	}
	plan := addPlan(testAssignment(m), 4, []int32{1, 2, 3, 4})
	load := map[int32]int{}
	for k, reps := range m {
		for _, e := range plan.Partitions {
			if e.Topic == k.topic && e.Partition == k.partition {
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

func TestReadPlan(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[3,1]}]}`), 0o644)
	p, err := readPlan(good)
	if err != nil || len(p.Partitions) != 1 || !slices.Equal(p.Partitions[0].Replicas, []int32{3, 1}) {
		t.Fatalf("%+v %v", p, err)
	}
	for name, body := range map[string]string{"empty.json": `{"version":1,"partitions":[]}`, "bad.json": `{`, "notopic.json": `{"partitions":[{"partition":1}]}`} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := readPlan(path); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

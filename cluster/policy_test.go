package cluster

import (
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/testutil"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files under testdata/ with what the tests produce")

// TestPolicyGolden runs the controller's decisions (policy.go) through the
// scripts in testdata/controller/: each holds commands, each followed by
// "----" and the output it must produce (go test ./cluster -run
// TestPolicyGolden -rewrite writes the output back). The commands act on
// one model cluster, each decision's writes applied to it as the
// Controller applies them, so a script reads as a story:
//
//	brokers 1 2 3@7          the live brokers (@: registration timestamp)
//	shutdown 3               broker 3 asks for a controlled shutdown
//	topic NAME [unclean]     a topic; one line per partition follows:
//	  P: replicas=R,R [adding=R,..] [removing=R,..] [leader=L epoch=E isr=R,..]
//	                         (no leader: the partition has no state yet)
//	set TOPIC-P [leader=L] [epoch=E] [isr=R,..]   a state written by another
//	                         (a leader's ISR change, an earlier controller)
//	view                     the brokers as a decision sees them (NewView)
//	pass epoch=N             a controller pass (PlanPass), applied
//	elect preferred|unclean epoch=N TOPIC-P...|all   ElectOnRequest, applied
//	rebalance epoch=N threshold=PCT   PlanRebalance, applied
//	still-leads B            what a controlled shutdown of B leaves (StillLeads)
//	reassign TOPIC P=R,R|P=cancel...  ApplyReassignments (live brokers known)
//	state                    every partition
func TestPolicyGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "controller", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/controller: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

func runScript(t *testing.T, file string) {
	m := &model{t: t, shutting: map[int32]int64{}}
	testutil.RunScript(t, file, *rewrite, m.run)
}

// model is the cluster a script acts on.
type model struct {
	t        *testing.T
	brokers  []Broker
	shutting map[int32]int64 // as Controller.shuttingDown
	topics   []TopicSnapshot
}

func (m *model) view() View {
	v, stale := NewView(m.brokers, m.shutting)
	for _, id := range stale {
		delete(m.shutting, id)
	}
	return v
}

func (m *model) topic(name string) *TopicSnapshot {
	for i := range m.topics {
		if m.topics[i].Topic.Name == name {
			return &m.topics[i]
		}
	}
	return nil
}

// apply writes a decision's states into the model, checking what the
// Controller relies on: updates carry the version they replace, creates
// are for partitions without a state, and each write is the controller's.
func (m *model) apply(c *testutil.ScriptCase, writes []StateWrite, epoch int32) {
	for _, w := range writes {
		ts := m.topic(w.Topic)
		old, had := ts.States[w.Partition]
		switch {
		case w.Create == had:
			m.t.Errorf("line %d: %s-%d: create %v on a partition with state %v", c.Line, w.Topic, w.Partition, w.Create, had)
		case had && w.State.Version != old.Version:
			m.t.Errorf("line %d: %s-%d: version %d does not replace %d", c.Line, w.Topic, w.Partition, w.State.Version, old.Version)
		case w.State.ControllerEpoch != epoch:
			m.t.Errorf("line %d: %s-%d: controller epoch %d, want %d", c.Line, w.Topic, w.Partition, w.State.ControllerEpoch, epoch)
		}
		st := w.State.Clone()
		st.Version = old.Version + 1
		ts.States[w.Partition] = st
	}
}

func (m *model) run(c *testutil.ScriptCase) []string {
	f := strings.Fields(c.Cmd)
	args := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok && f[0] != "reassign" {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	epoch := int32(atoi(m.t, args["epoch"]))
	var out []string
	switch f[0] {
	case "brokers":
		m.brokers = nil
		for _, a := range pos {
			id, ts, _ := strings.Cut(a, "@")
			b := Broker{ID: int32(atoi(m.t, id))}
			if ts != "" {
				b.Timestamp = int64(atoi(m.t, ts))
			}
			m.brokers = append(m.brokers, b)
		}
	case "shutdown":
		id := int32(atoi(m.t, pos[0]))
		i := slices.IndexFunc(m.brokers, func(b Broker) bool { return b.ID == id })
		if i < 0 {
			return []string{"error: broker not registered"}
		}
		m.shutting[id] = m.brokers[i].Timestamp
	case "topic":
		ts := TopicSnapshot{Topic: Topic{Name: pos[0]}, States: map[int32]PartitionState{}, Unclean: slices.Contains(pos, "unclean")}
		for _, l := range c.Input {
			p, rest, _ := strings.Cut(strings.TrimSpace(l), ":")
			pid := int32(atoi(m.t, p))
			kv := map[string]string{}
			for _, a := range strings.Fields(rest) {
				k, v, _ := strings.Cut(a, "=")
				kv[k] = v
			}
			if int(pid) != len(ts.Topic.Replicas) {
				m.t.Fatalf("line %d: partitions must come in order", c.Line)
			}
			ts.Topic.Replicas = append(ts.Topic.Replicas, ids(m.t, kv["replicas"]))
			if a := ids(m.t, kv["adding"]); a != nil {
				if ts.Topic.Adding == nil {
					ts.Topic.Adding = map[int32][]int32{}
				}
				ts.Topic.Adding[pid] = a
			}
			if r := ids(m.t, kv["removing"]); r != nil {
				if ts.Topic.Removing == nil {
					ts.Topic.Removing = map[int32][]int32{}
				}
				ts.Topic.Removing[pid] = r
			}
			if l, ok := kv["leader"]; ok {
				ts.States[pid] = PartitionState{Leader: int32(atoi(m.t, l)), LeaderEpoch: int32(atoi(m.t, kv["epoch"])), ISR: ids(m.t, kv["isr"]), Version: 1}
			}
		}
		m.topics = append(m.topics, ts)
	case "set":
		// A state written by someone else (a leader changing its ISR, an
		// earlier controller): TOPIC-P [leader=L] [epoch=E] [isr=R,..].
		i := strings.LastIndex(pos[0], "-")
		ts := m.topic(pos[0][:i])
		p := int32(atoi(m.t, pos[0][i+1:]))
		st := ts.States[p].Clone()
		if l, ok := args["leader"]; ok {
			st.Leader = int32(atoi(m.t, l))
		}
		if e, ok := args["epoch"]; ok {
			st.LeaderEpoch = int32(atoi(m.t, e))
		}
		if isr, ok := args["isr"]; ok {
			st.ISR = ids(m.t, isr)
		}
		st.Version++
		ts.States[p] = st
	case "view":
		before := len(m.shutting)
		v := m.view()
		live := slices.Sorted(maps.Keys(v.Live))
		out = append(out, fmt.Sprintf("live %v shutting-down %v", live, slices.Sorted(maps.Keys(v.ShuttingDown))))
		if n := before - len(m.shutting); n > 0 {
			out = append(out, fmt.Sprintf("forgot %d shutdown request(s)", n))
		}
	case "pass":
		pass := PlanPass(m.topics, m.view(), epoch)
		for i, w := range pass.Writes {
			out = append(out, writeLine(w, pass.Before[i]))
		}
		for _, u := range pass.Unclean {
			out = append(out, fmt.Sprintf("unclean %s-%d: leader %d from outside the ISR %v", u.Topic, u.Partition, u.Leader, u.ISR))
		}
		m.apply(c, pass.Writes, epoch)
		for _, name := range slices.Sorted(maps.Keys(pass.Complete)) {
			ts := m.topic(name)
			for _, p := range CompleteReassignments(&ts.Topic, pass.Complete[name], nil) {
				out = append(out, fmt.Sprintf("reassignment of %s-%d complete: replicas %v", name, p, ts.Topic.Replicas[p]))
			}
		}
	case "elect":
		unclean := pos[0] == "unclean"
		parts := pos[1:]
		if len(parts) == 1 && parts[0] == "all" {
			parts = nil
			for _, ts := range m.topics {
				for p := range ts.Topic.Replicas {
					parts = append(parts, fmt.Sprintf("%s-%d", ts.Topic.Name, p))
				}
			}
		}
		v := m.view()
		var writes []StateWrite
		for _, tp := range parts {
			i := strings.LastIndex(tp, "-")
			name, p := tp[:i], int32(atoi(m.t, tp[i+1:]))
			ts := m.topic(name)
			if ts == nil || p < 0 || int(p) >= len(ts.Topic.Replicas) {
				out = append(out, tp+": "+ErrUnknownPartition.Error())
				continue
			}
			st, ok := ts.States[p]
			if !ok {
				out = append(out, tp+": "+ErrUnknownPartition.Error())
				continue
			}
			next, err := ElectOnRequest(st, ts.Topic.Replicas[p], v, unclean, epoch)
			if err != nil {
				out = append(out, tp+": "+err.Error())
				continue
			}
			w := StateWrite{Topic: name, Partition: p, State: next}
			writes = append(writes, w)
			out = append(out, writeLine(w, st))
		}
		m.apply(c, writes, epoch)
	case "rebalance":
		writes := PlanRebalance(m.topics, m.view(), atoi(m.t, args["threshold"]), epoch)
		for _, w := range writes {
			out = append(out, writeLine(w, m.topic(w.Topic).States[w.Partition]))
		}
		m.apply(c, writes, epoch)
	case "still-leads":
		for _, tp := range StillLeads(m.topics, int32(atoi(m.t, pos[0]))) {
			out = append(out, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
	case "reassign":
		ts := m.topic(pos[0])
		targets := map[int32][]int32{}
		for _, a := range pos[1:] {
			p, r, _ := strings.Cut(a, "=")
			if r == "cancel" {
				r = ""
			}
			targets[int32(atoi(m.t, p))] = ids(m.t, r)
		}
		v := m.view()
		results, changed := ApplyReassignments(&ts.Topic, targets, v.IsLive)
		for _, p := range slices.Sorted(maps.Keys(results)) {
			res := "accepted"
			if err := results[p]; err != nil {
				res = err.Error()
			}
			out = append(out, fmt.Sprintf("%s-%d: %s", ts.Topic.Name, p, res))
		}
		out = append(out, fmt.Sprintf("changed %v", changed))
		for p := range ts.Topic.Replicas {
			out = append(out, topicLine(ts.Topic, int32(p)))
		}
	case "state":
		for _, ts := range m.topics {
			for p := range ts.Topic.Replicas {
				l := topicLine(ts.Topic, int32(p))
				if st, ok := ts.States[int32(p)]; ok {
					l += " " + stateText(st)
				}
				out = append(out, l)
			}
		}
	default:
		m.t.Fatalf("line %d: unknown command %q", c.Line, f[0])
	}
	if len(out) == 0 {
		out = []string{"ok"}
	}
	return out
}

func writeLine(w StateWrite, before PartitionState) string {
	if w.Create {
		return fmt.Sprintf("create %s-%d: %s", w.Topic, w.Partition, stateText(w.State))
	}
	return fmt.Sprintf("write %s-%d: %s (was %s)", w.Topic, w.Partition, stateText(w.State), stateText(before))
}

func stateText(st PartitionState) string {
	return fmt.Sprintf("leader %d epoch %d isr %v", st.Leader, st.LeaderEpoch, st.ISR)
}

func topicLine(t Topic, p int32) string {
	l := fmt.Sprintf("%s-%d replicas %v", t.Name, p, t.Replicas[p])
	if a := t.Adding[p]; len(a) > 0 {
		l += fmt.Sprintf(" adding %v", a)
	}
	if r := t.Removing[p]; len(r) > 0 {
		l += fmt.Sprintf(" removing %v", r)
	}
	return l
}

func ids(t *testing.T, s string) []int32 {
	if s == "" {
		return nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		out = append(out, int32(atoi(t, f)))
	}
	return out
}

func atoi(t *testing.T, s string) int {
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: not a number", s)
	}
	return n
}

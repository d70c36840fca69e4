package reassign

// The cluster side of moves, over kadm: read the assignment, start and
// cancel reassignments, list those in progress with their progress in
// bytes.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaMessage is a Kafka error with the broker's message, if any.
func kafkaMessage(err error, msg string) string {
	var ke *kerr.Error
	if msg != "" && errors.As(err, &ke) {
		return ke.Message + ": " + msg
	}
	return err.Error()
}

// LoadAssignment reads the replicas of every partition of topics (every
// topic when none is given) and the live brokers, sorted.
func LoadAssignment(ctx context.Context, adm *kadm.Client, topics ...string) (Assignment, []int32, error) {
	a := Assignment{Current: map[Part][]int32{}}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return a, nil, fmt.Errorf("metadata: %w", err)
	}
	var live []int32
	for _, b := range md.Brokers {
		live = append(live, b.NodeID)
	}
	slices.Sort(live)
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			return a, live, fmt.Errorf("topic %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			k := Part{t.Topic, p.Partition}
			a.Parts = append(a.Parts, k)
			a.Current[k] = slices.Clone(p.Replicas)
		}
	}
	return a, live, nil
}

// CurrentReplicas reads the replicas of the plan's partitions.
func CurrentReplicas(ctx context.Context, adm *kadm.Client, plan Plan) (map[Part][]int32, error) {
	md, err := adm.Metadata(ctx, plan.Topics()...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := map[Part][]int32{}
	for _, e := range plan.Partitions {
		t, ok := md.Topics[e.Topic]
		if !ok || t.Err != nil {
			return nil, fmt.Errorf("topic %s: %v", e.Topic, t.Err)
		}
		p, ok := t.Partitions[e.Partition]
		if !ok {
			return nil, fmt.Errorf("%s-%d: no such partition", e.Topic, e.Partition)
		}
		out[Part{e.Topic, e.Partition}] = slices.Clone(p.Replicas)
	}
	return out, nil
}

// AllPartitions is every partition of the cluster (kadm lists the
// reassignments of the partitions it is given only, never all).
func AllPartitions(ctx context.Context, adm *kadm.Client) (kadm.TopicsSet, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	set := kadm.TopicsSet{}
	for _, t := range md.Topics {
		for p := range t.Partitions {
			set.Add(t.Topic, p)
		}
	}
	return set, nil
}

// Start starts the plan's reassignments, throttled to rate bytes per
// second when rate is positive (the throttle is set first, from the
// partitions' current replicas; see SetThrottles). It returns the
// throttle set (nothing when rate is 0 or nothing moves) and the
// partitions the controller refused, in words; err is a request-wide
// failure.
func Start(ctx context.Context, adm *kadm.Client, plan Plan, rate int64) (th Throttles, refused []string, err error) {
	if rate > 0 {
		cur, err := CurrentReplicas(ctx, adm, plan)
		if err != nil {
			return th, nil, err
		}
		if t := PlanThrottles(plan, cur); len(t.Brokers) > 0 {
			if err := SetThrottles(ctx, adm, t, rate); err != nil {
				return th, nil, err
			}
			th = t
		}
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, e := range plan.Partitions {
		req.Assign(e.Topic, e.Partition, e.Replicas)
	}
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return th, nil, fmt.Errorf("alter partition reassignments: %w", err)
	}
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			refused = append(refused, fmt.Sprintf("%s-%d: %s", r.Topic, r.Partition, kafkaMessage(r.Err, r.ErrMessage)))
		}
	}
	return th, refused, nil
}

// Cancel cancels the reassignments of parts (each goes back to its
// original replicas), returning the partitions not cancelled in words.
// The throttle is the caller's to remove (ClearFinished).
func Cancel(ctx context.Context, adm *kadm.Client, parts []Part) ([]string, error) {
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, k := range parts {
		req.CancelAssign(k.Topic, k.Partition)
	}
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("alter partition reassignments: %w", err)
	}
	var failed []string
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("%s-%d: %s", r.Topic, r.Partition, kafkaMessage(r.Err, r.ErrMessage)))
		}
	}
	return failed, nil
}

// Moving is a partition being reassigned.
type Moving struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`          // target and original, as Kafka lists them
	Adding    []int32 `json:"adding_replicas"`   // being copied to
	Removing  []int32 `json:"removing_replicas"` // dropped once done
}

// InProgress lists the reassignments in progress in partitions (all of
// the cluster's when set is nil), sorted.
func InProgress(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) ([]Moving, error) {
	if set == nil {
		var err error
		if set, err = AllPartitions(ctx, adm); err != nil {
			return nil, err
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	lr, err := adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w", err)
	}
	out := []Moving{}
	for _, r := range lr.Sorted() {
		out = append(out, Moving{Topic: r.Topic, Partition: r.Partition, Replicas: nonNil(r.Replicas),
			Adding: nonNil(r.AddingReplicas), Removing: nonNil(r.RemovingReplicas)})
	}
	return out, nil
}

func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

// Sizes are the bytes of each replica of the partitions in set, by
// partition and broker (the largest when a broker reports a partition in
// several log dirs), from DescribeLogDirs on every broker. Brokers that
// do not answer are left out.
func Sizes(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) (map[Part]map[int32]int64, error) {
	out := map[Part]map[int32]int64{}
	if len(set) == 0 {
		return out, nil
	}
	all, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil && len(all) == 0 {
		return nil, fmt.Errorf("describe log dirs: %w", err)
	}
	for broker, dirs := range all {
		for _, d := range dirs {
			if d.Err != nil {
				continue
			}
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				k := Part{p.Topic, p.Partition}
				if out[k] == nil {
					out[k] = map[int32]int64{}
				}
				out[k][broker] = max(out[k][broker], p.Size)
			})
		}
	}
	return out, nil
}

// Progress is a move's progress in bytes: what its adding replicas hold
// against the leader's log (each adding replica copies the whole log).
type Progress struct {
	Moving
	Leader int32 `json:"leader"`
	// LeaderBytes is the leader's log size; Total the bytes the adding
	// replicas copy (LeaderBytes each); Copied what they hold (at most
	// LeaderBytes each). -1 when the brokers did not report.
	LeaderBytes int64 `json:"leader_bytes"`
	Total       int64 `json:"bytes_total"`
	Copied      int64 `json:"bytes_copied"`
}

// Percent is Copied over Total, 0-100 (100 when nothing is to copy).
func (p Progress) Percent() int {
	if p.Total <= 0 {
		if p.Total == 0 {
			return 100
		}
		return 0
	}
	return int(min(100, p.Copied*100/p.Total))
}

// MeasureProgress reads the progress of the moves in bytes.
func MeasureProgress(ctx context.Context, adm *kadm.Client, moves []Moving) ([]Progress, error) {
	out := make([]Progress, 0, len(moves))
	if len(moves) == 0 {
		return out, nil
	}
	set := kadm.TopicsSet{}
	var topics []string
	for _, m := range moves {
		set.Add(m.Topic, m.Partition)
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	sizes, err := Sizes(ctx, adm, set)
	if err != nil {
		return nil, err
	}
	for _, m := range moves {
		p := Progress{Moving: m, Leader: -1, LeaderBytes: -1, Total: -1, Copied: -1}
		if pm, ok := md.Topics[m.Topic].Partitions[m.Partition]; ok {
			p.Leader = pm.Leader
		}
		k := Part{m.Topic, m.Partition}
		if lb, ok := sizes[k][p.Leader]; ok {
			p.LeaderBytes = lb
			p.Total = lb * int64(len(m.Adding))
			p.Copied = 0
			for _, b := range m.Adding {
				p.Copied += min(sizes[k][b], lb)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Step is one partition's move in a plan preview: from which replicas to
// which, the replicas added and removed, and the bytes to copy (the
// largest replica's log, once per added replica; -1 when not reported).
type Step struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
	Bytes     int64   `json:"bytes_to_copy"`
}

// Preview describes the plan's moves against the current replicas, with
// the bytes each copies; the total is -1 when a size was not reported.
func Preview(ctx context.Context, adm *kadm.Client, plan Plan, current map[Part][]int32) ([]Step, int64, error) {
	set := kadm.TopicsSet{}
	for _, e := range plan.Partitions {
		set.Add(e.Topic, e.Partition)
	}
	sizes, err := Sizes(ctx, adm, set)
	if err != nil {
		return nil, -1, err
	}
	steps := Steps(plan, current, sizes)
	var total int64
	for _, s := range steps {
		if s.Bytes < 0 || total < 0 {
			total = -1
			continue
		}
		total += s.Bytes
	}
	return steps, total, nil
}

// Steps are the plan's moves against the current replicas, with the bytes
// from sizes (see Preview), sorted by topic and partition.
func Steps(plan Plan, current map[Part][]int32, sizes map[Part]map[int32]int64) []Step {
	var out []Step
	for _, e := range plan.Partitions {
		k := Part{e.Topic, e.Partition}
		cur := current[k]
		s := Step{Topic: e.Topic, Partition: e.Partition, From: nonNil(slices.Clone(cur)), To: nonNil(slices.Clone(e.Replicas)),
			Adding: []int32{}, Removing: []int32{}, Bytes: -1}
		for _, r := range e.Replicas {
			if !slices.Contains(cur, r) {
				s.Adding = append(s.Adding, r)
			}
		}
		for _, r := range cur {
			if !slices.Contains(e.Replicas, r) {
				s.Removing = append(s.Removing, r)
			}
		}
		if len(s.Adding) == 0 {
			s.Bytes = 0
		} else if bs, ok := sizes[k]; ok && len(bs) > 0 {
			var largest int64
			for _, b := range bs {
				largest = max(largest, b)
			}
			s.Bytes = largest * int64(len(s.Adding))
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y Step) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

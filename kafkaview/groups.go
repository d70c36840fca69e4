package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/lag"
)

// Lag returns the lag of the named groups, or of every group when none are
// named, sorted by name (package lag does the work).
func (c *Client) Lag(ctx context.Context, groups ...string) ([]lag.Group, error) {
	return c.lag.Collect(ctx, groups...)
}

// Member is one member of a consumer group and what it was assigned.
type Member struct {
	ID         string
	InstanceID string
	ClientID   string
	Host       string
	Topics     []string // subscribed topics
	Assigned   []Assignment
}

// Assignment is a topic's partitions assigned to a member.
type Assignment struct {
	Topic      string
	Partitions []int32
}

// GroupDetail is what the group page shows.
type GroupDetail struct {
	Lag          lag.Group
	ProtocolType string
	Coordinator  int32
	Members      []Member
}

// ErrUnknownGroup is returned for a group the cluster does not know.
var ErrUnknownGroup = errors.New("no such consumer group")

// Group describes one group: lag per partition, members and assignments.
func (c *Client) Group(ctx context.Context, name string) (*GroupDetail, error) {
	described, err := c.adm.DescribeGroups(ctx, name)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe group %s: %w", name, err)
	}
	dg, err := described.On(name, nil)
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", name, err)
	}
	if errors.Is(dg.Err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownGroup, name)
	}
	if dg.Err != nil {
		return nil, &KafkaError{Op: "describe group " + name, Err: dg.Err, Message: dg.ErrMessage}
	}
	lags, err := c.lag.Collect(ctx, name)
	if err != nil {
		return nil, err
	}
	d := &GroupDetail{ProtocolType: dg.ProtocolType, Coordinator: dg.Coordinator.NodeID}
	if len(lags) == 1 {
		d.Lag = lags[0]
	} else {
		d.Lag = lag.Group{Group: name, State: dg.State, Protocol: dg.Protocol, Members: len(dg.Members)}
	}
	if (dg.State == "Dead" || dg.State == "") && len(d.Lag.Partitions) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownGroup, name)
	}
	for _, m := range dg.Members {
		mm := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.InstanceID != nil {
			mm.InstanceID = *m.InstanceID
		}
		if md, ok := m.Join.AsConsumer(); ok {
			mm.Topics = append(mm.Topics, md.Topics...)
			sort.Strings(mm.Topics)
		}
		if as, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range as.Topics {
				ps := append([]int32(nil), t.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				mm.Assigned = append(mm.Assigned, Assignment{Topic: t.Topic, Partitions: ps})
			}
			sort.Slice(mm.Assigned, func(i, j int) bool { return mm.Assigned[i].Topic < mm.Assigned[j].Topic })
		}
		d.Members = append(d.Members, mm)
	}
	return d, nil
}

// ResetMode is where a reset moves a group's committed offsets.
type ResetMode string

const (
	ResetEarliest  ResetMode = "earliest"
	ResetLatest    ResetMode = "latest"
	ResetTimestamp ResetMode = "timestamp"
	ResetOffset    ResetMode = "offset"
)

// ResetSpec is a requested offset reset.
type ResetSpec struct {
	Group     string
	Topic     string // "" for every topic the group has commits on
	Partition int32  // -1 for every partition
	Mode      ResetMode
	Time      time.Time // ResetTimestamp
	Offset    int64     // ResetOffset
}

// ResetRow is one partition of a reset preview.
type ResetRow struct {
	Topic     string
	Partition int32
	Current   int64 // committed now, -1 when none
	New       int64
	Start     int64
	End       int64
}

// LagBefore and LagAfter are the lag in records now and after the reset.
func (r ResetRow) LagBefore() int64 {
	if r.Current < 0 {
		return max(0, r.End-r.Start)
	}
	return max(0, r.End-r.Current)
}

func (r ResetRow) LagAfter() int64 { return max(0, r.End-r.New) }

// ErrGroupNotEmpty is returned when a reset is asked of a group with members.
var ErrGroupNotEmpty = errors.New("the group has active members: stop its consumers first, offsets can only be reset while the group is empty")

// PlanReset computes the offsets a reset would commit, without committing.
// It also reports the group's state.
func (c *Client) PlanReset(ctx context.Context, spec ResetSpec) ([]ResetRow, string, error) {
	described, err := c.adm.DescribeGroups(ctx, spec.Group)
	if err != nil && len(described) == 0 {
		return nil, "", fmt.Errorf("describe group %s: %w", spec.Group, err)
	}
	dg, _ := described.On(spec.Group, nil)
	state := dg.State
	committed, err := c.adm.FetchOffsets(ctx, spec.Group)
	if err != nil {
		return nil, state, fmt.Errorf("fetch offsets of %s: %w", spec.Group, err)
	}
	var topics []string
	if spec.Topic != "" {
		topics = []string{spec.Topic}
	} else {
		seen := map[string]bool{}
		committed.Each(func(o kadm.OffsetResponse) {
			if !seen[o.Topic] {
				seen[o.Topic] = true
				topics = append(topics, o.Topic)
			}
		})
		sort.Strings(topics)
	}
	if len(topics) == 0 {
		return nil, state, fmt.Errorf("group %s has no committed offsets: choose a topic to reset", spec.Group)
	}
	starts, err := c.adm.ListStartOffsets(ctx, topics...)
	if err != nil && len(starts) == 0 {
		return nil, state, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, topics...)
	if err != nil && len(ends) == 0 {
		return nil, state, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if spec.Mode == ResetTimestamp {
		atTime, err = c.adm.ListOffsetsAfterMilli(ctx, spec.Time.UnixMilli(), topics...)
		if err != nil && len(atTime) == 0 {
			return nil, state, fmt.Errorf("list offsets after %s: %w", spec.Time.Format(time.RFC3339), err)
		}
	}
	var rows []ResetRow
	for _, t := range topics {
		ps, ok := ends[t]
		if !ok {
			return nil, state, fmt.Errorf("topic %s: %w", t, kerr.UnknownTopicOrPartition)
		}
		parts := make([]int32, 0, len(ps))
		for p := range ps {
			if spec.Partition < 0 || p == spec.Partition {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			return nil, state, fmt.Errorf("topic %s has no partition %d", t, spec.Partition)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			e := ps[p]
			s, _ := starts.Lookup(t, p)
			if e.Err != nil || s.Err != nil {
				return nil, state, fmt.Errorf("offsets of %s/%d: %w", t, p, errors.Join(e.Err, s.Err))
			}
			r := ResetRow{Topic: t, Partition: p, Current: -1, Start: s.Offset, End: e.Offset}
			if o, ok := committed.Lookup(t, p); ok && o.Err == nil && o.At >= 0 {
				r.Current = o.At
			}
			switch spec.Mode {
			case ResetEarliest:
				r.New = r.Start
			case ResetLatest:
				r.New = r.End
			case ResetTimestamp:
				o, ok := atTime.Lookup(t, p)
				if !ok || o.Err != nil || o.Offset < 0 {
					r.New = r.End // no record at or after the time: the end
				} else {
					r.New = o.Offset
				}
			case ResetOffset:
				r.New = spec.Offset
			default:
				return nil, state, fmt.Errorf("unknown reset mode %q", spec.Mode)
			}
			r.New = max(r.Start, min(r.New, r.End))
			rows = append(rows, r)
		}
	}
	return rows, state, nil
}

// ApplyReset commits rows' New offsets for group, after checking that the
// group is empty. Offsets outside a partition's current range are clamped to
// it (the range may have moved since the preview).
func (c *Client) ApplyReset(ctx context.Context, group string, rows []ResetRow) error {
	described, err := c.adm.DescribeGroups(ctx, group)
	if err != nil && len(described) == 0 {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	dg, _ := described.On(group, nil)
	if dg.State != "Empty" && dg.State != "Dead" && dg.State != "" {
		return fmt.Errorf("%w (state %s, %d members)", ErrGroupNotEmpty, dg.State, len(dg.Members))
	}
	topics := map[string]bool{}
	var names []string
	for _, r := range rows {
		if !topics[r.Topic] {
			topics[r.Topic] = true
			names = append(names, r.Topic)
		}
	}
	starts, err := c.adm.ListStartOffsets(ctx, names...)
	if err != nil && len(starts) == 0 {
		return fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, names...)
	if err != nil && len(ends) == 0 {
		return fmt.Errorf("list end offsets: %w", err)
	}
	var os kadm.Offsets
	for _, r := range rows {
		s, ok1 := starts.Lookup(r.Topic, r.Partition)
		e, ok2 := ends.Lookup(r.Topic, r.Partition)
		if !ok1 || !ok2 {
			return fmt.Errorf("%s/%d: %w", r.Topic, r.Partition, kerr.UnknownTopicOrPartition)
		}
		if s.Err != nil || e.Err != nil {
			return fmt.Errorf("offsets of %s/%d: %w", r.Topic, r.Partition, errors.Join(s.Err, e.Err))
		}
		at := max(s.Offset, min(r.New, e.Offset))
		os.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: at, LeaderEpoch: -1})
	}
	resps, err := c.adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	if err := resps.Error(); err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
			return fmt.Errorf("%w: %v", ErrGroupNotEmpty, err)
		}
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	return nil
}

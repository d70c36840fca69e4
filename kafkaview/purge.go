package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PurgeMode is how far a topic purge deletes records (DeleteRecords).
type PurgeMode string

const (
	PurgeOffset    PurgeMode = "offset"    // every record before an offset
	PurgeTimestamp PurgeMode = "timestamp" // every record before the first one at or after a time
	PurgeAll       PurgeMode = "all"       // every record, up to the high watermark
)

// PurgeSpec is a requested purge of a topic's records.
type PurgeSpec struct {
	Topic     string
	Partition int32 // -1 for every partition
	Mode      PurgeMode
	Offset    int64     // PurgeOffset
	Time      time.Time // PurgeTimestamp
}

// PurgeRow is one partition of a purge preview: records from Start up to
// (not including) To are deleted, and To becomes the log start offset.
type PurgeRow struct {
	Partition int32
	Start     int64 // log start offset now
	End       int64 // high watermark now
	To        int64 // the new log start offset
}

// Deleted is the number of records the purge deletes from the partition.
func (r PurgeRow) Deleted() int64 { return max(0, r.To-r.Start) }

// Left is the number of records the partition keeps.
func (r PurgeRow) Left() int64 { return max(0, r.End-r.To) }

// PlanPurge computes, per partition, the new log start offset a purge
// would set, without deleting. Offsets are clamped to each partition's
// current range.
func (c *Client) PlanPurge(ctx context.Context, spec PurgeSpec) ([]PurgeRow, error) {
	starts, err := c.adm.ListStartOffsets(ctx, spec.Topic)
	if err != nil && len(starts) == 0 {
		return nil, fmt.Errorf("list start offsets of %s: %w", spec.Topic, err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, spec.Topic)
	if err != nil && len(ends) == 0 {
		return nil, fmt.Errorf("list end offsets of %s: %w", spec.Topic, err)
	}
	var atTime kadm.ListedOffsets
	if spec.Mode == PurgeTimestamp {
		atTime, err = c.adm.ListOffsetsAfterMilli(ctx, spec.Time.UnixMilli(), spec.Topic)
		if err != nil && len(atTime) == 0 {
			return nil, fmt.Errorf("list offsets after %s: %w", spec.Time.Format(time.RFC3339), err)
		}
	}
	ps, ok := ends[spec.Topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: %w", spec.Topic, kerr.UnknownTopicOrPartition)
	}
	parts := make([]int32, 0, len(ps))
	for p, e := range ps {
		if errors.Is(e.Err, kerr.UnknownTopicOrPartition) && len(ps) == 1 {
			return nil, fmt.Errorf("topic %s: %w", spec.Topic, e.Err)
		}
		if spec.Partition < 0 || p == spec.Partition {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("topic %s has no partition %d", spec.Topic, spec.Partition)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	rows := make([]PurgeRow, 0, len(parts))
	for _, p := range parts {
		e := ps[p]
		s, _ := starts.Lookup(spec.Topic, p)
		if e.Err != nil || s.Err != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", spec.Topic, p, errors.Join(e.Err, s.Err))
		}
		r := PurgeRow{Partition: p, Start: s.Offset, End: e.Offset}
		switch spec.Mode {
		case PurgeOffset:
			r.To = spec.Offset
		case PurgeTimestamp:
			o, ok := atTime.Lookup(spec.Topic, p)
			if !ok || o.Err != nil || o.Offset < 0 {
				r.To = r.End // no record at or after the time: all of them are older
			} else {
				r.To = o.Offset
			}
		case PurgeAll:
			r.To = r.End
		default:
			return nil, fmt.Errorf("unknown purge mode %q", spec.Mode)
		}
		r.To = max(r.Start, min(r.To, r.End))
		rows = append(rows, r)
	}
	return rows, nil
}

// Purge deletes the records of topic before each row's To offset
// (DeleteRecords), clamped to the partition's current high watermark;
// partitions whose start is already at or past To are left alone. It
// returns the new log start offset per partition.
func (c *Client) Purge(ctx context.Context, topic string, rows []PurgeRow) (map[int32]int64, error) {
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil && len(ends) == 0 {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	var os kadm.Offsets
	for _, r := range rows {
		if _, ok := ends[topic]; !ok {
			return nil, fmt.Errorf("topic %s: %w", topic, kerr.UnknownTopicOrPartition)
		}
		e, ok := ends.Lookup(topic, r.Partition)
		if !ok {
			return nil, fmt.Errorf("topic %s has no partition %d", topic, r.Partition)
		}
		if e.Err != nil {
			return nil, fmt.Errorf("end offset of %s/%d: %w", topic, r.Partition, e.Err)
		}
		os.Add(kadm.Offset{Topic: topic, Partition: r.Partition, At: min(r.To, e.Offset), LeaderEpoch: -1})
	}
	resps, err := c.adm.DeleteRecords(ctx, os)
	if err != nil {
		return nil, fmt.Errorf("delete records of %s: %w", topic, err)
	}
	starts := map[int32]int64{}
	var errs []error
	for _, ps := range resps {
		for p, r := range ps {
			if r.Err != nil {
				errs = append(errs, &KafkaError{Op: fmt.Sprintf("delete records of %s/%d", topic, p), Err: r.Err})
				continue
			}
			starts[p] = r.LowWatermark
		}
	}
	return starts, errors.Join(errs...)
}

// ErrGroupHasMembers is returned when Kafka refuses to delete a group, or
// its offsets for a topic, because members still consume it.
var ErrGroupHasMembers = errors.New("the group has active members")

// DeleteGroup deletes a consumer group and its committed offsets
// (DeleteGroups). Kafka refuses a group with members (NON_EMPTY_GROUP).
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	resps, err := c.adm.DeleteGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("delete group %s: %w", group, err)
	}
	r, ok := resps[group]
	if !ok {
		return fmt.Errorf("delete group %s: no answer for the group", group)
	}
	if r.Err != nil {
		if errors.Is(r.Err, kerr.NonEmptyGroup) {
			return fmt.Errorf("%w: Kafka refuses to delete group %s while consumers are in it (%v); stop them first", ErrGroupHasMembers, group, r.Err)
		}
		if errors.Is(r.Err, kerr.GroupIDNotFound) {
			return fmt.Errorf("delete group %s: %w", group, ErrUnknownGroup)
		}
		return &KafkaError{Op: "delete group " + group, Err: r.Err, Message: r.ErrMessage}
	}
	return nil
}

// DeleteGroupOffsets deletes group's committed offsets for the given
// partitions of topic (OffsetDelete). Kafka refuses it while a member of the
// group consumes the topic (GROUP_SUBSCRIBED_TO_TOPIC).
func (c *Client) DeleteGroupOffsets(ctx context.Context, group, topic string, partitions []int32) error {
	var set kadm.TopicsSet
	set.Add(topic, partitions...)
	resps, err := c.adm.DeleteOffsets(ctx, group, set)
	if err != nil {
		if errors.Is(err, kerr.NonEmptyGroup) || errors.Is(err, kerr.GroupSubscribedToTopic) {
			return fmt.Errorf("%w: Kafka refuses to delete the offsets of group %s for %s while a member consumes the topic (%v); stop it first", ErrGroupHasMembers, group, topic, err)
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			return fmt.Errorf("delete offsets of %s: %w", group, ErrUnknownGroup)
		}
		return fmt.Errorf("delete offsets of %s for %s: %w", group, topic, err)
	}
	if err := resps.Error(); err != nil {
		if errors.Is(err, kerr.GroupSubscribedToTopic) {
			return fmt.Errorf("%w: Kafka refuses to delete the offsets of group %s for %s while a member consumes the topic (%v); stop it first", ErrGroupHasMembers, group, topic, err)
		}
		return &KafkaError{Op: "delete offsets of " + group + " for " + topic, Err: err}
	}
	return nil
}

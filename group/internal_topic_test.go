package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/record"
)

// commitAt commits offset for partition 0 of topic as group (a simple
// consumer's commit: no members).
func commitAt(t *testing.T, n *node, grp, topic string, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
	if err := n.admin().CommitAllOffsets(ctx, grp, os); err != nil {
		t.Fatalf("commit %s %d: %v", grp, offset, err)
	}
}

// committedAt returns group's committed offset of partition 0 of topic (-1
// when none), failing the test when the coordinator does not answer within
// d (a partition it cannot load answers COORDINATOR_LOAD_IN_PROGRESS).
func committedAt(t *testing.T, n *node, grp, topic string, d time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	resp, err := n.admin().FetchOffsets(ctx, grp)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", grp, err)
	}
	o, ok := resp.Lookup(topic, 0)
	if !ok {
		return -1
	}
	if o.Err != nil {
		t.Fatalf("offset of %s: %v", grp, o.Err)
	}
	return o.At
}

// TestClientsCannotWriteOffsetsTopic: a client's Produce, DeleteRecords,
// CreatePartitions and DeleteTopics on __consumer_offsets are refused, as
// Kafka refuses them without any ACL: a forged offset commit record for
// another group is not stored, so after a restart the group's committed
// offset is still its own.
func TestClientsCannotWriteOffsetsTopic(t *testing.T) {
	n := startNode(t)
	n.createTopic("orders", 1)
	commitAt(t, n, "victim", "orders", 5)

	// A commit record of offset 999 for the victim, in its partition.
	key := kmsg.NewOffsetCommitKey()
	key.Version, key.Group, key.Topic, key.Partition = 1, "victim", "orders", 0
	val := kmsg.NewOffsetCommitValue()
	val.Version, val.Offset, val.CommitTimestamp, val.LeaderEpoch = 3, 999, time.Now().UnixMilli(), -1
	batch, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		[]record.Record{{Key: key.AppendTo(nil), Value: val.AppendTo(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	part := group.PartitionFor("victim", offsetsPartitions)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := n.client()
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = group.OffsetsTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = part, batch
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	presp, err := prod.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(code))
	}

	adm := n.admin()
	del, err := adm.DeleteRecords(ctx, kadm.Offsets{group.OffsetsTopic: {part: {Topic: group.OffsetsTopic, Partition: part, At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := del.Lookup(group.OffsetsTopic, part); !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("DeleteRecords on __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", r.Err)
	}
	cp, err := adm.UpdatePartitions(ctx, int(offsetsPartitions)+5, group.OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if r := cp[group.OffsetsTopic]; !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Fatalf("CreatePartitions on __consumer_offsets: %v, want INVALID_PARTITIONS", r.Err)
	}
	dt, err := adm.DeleteTopics(ctx, group.OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if r := dt[group.OffsetsTopic]; !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("DeleteTopics on __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", r.Err)
	}

	n.restart()
	if got := committedAt(t, n, "victim", "orders", 20*time.Second); got != 5 {
		t.Fatalf("victim's offset after restart %d, want its own commit 5", got)
	}
	if p, err := n.broker().Partition(group.OffsetsTopic, part); err != nil || p.LogStartOffset() != 0 {
		t.Fatalf("offsets partition after restart: %v", err)
	}
}

// TestLoadStartsAtLogStart: a __consumer_offsets partition whose log start
// is not 0 (DeleteRecords before it was refused, retention) loads from its
// log start: records before it are gone, the ones after it count, and a
// partition whose every record is gone loads empty rather than answering
// COORDINATOR_LOAD_IN_PROGRESS forever.
func TestLoadStartsAtLogStart(t *testing.T) {
	n := startNode(t)
	n.createTopic("orders", 1)
	const grp = "loader"
	part := group.PartitionFor(grp, offsetsPartitions)
	commitAt(t, n, grp, "orders", 5)
	commitAt(t, n, grp, "orders", 6)
	p, err := n.broker().Partition(group.OffsetsTopic, part)
	if err != nil {
		t.Fatal(err)
	}
	// Drop the first commit only: the log starts at the second.
	second := p.HighWatermark() - 1
	if _, err := p.Log().DeleteRecordsBefore(second); err != nil {
		t.Fatal(err)
	}
	n.restart()
	if got := committedAt(t, n, grp, "orders", 10*time.Second); got != 6 {
		t.Fatalf("offset after a restart with the log start at %d: %d, want 6", second, got)
	}

	// Drop everything: the log start is the log end.
	p, err = n.broker().Partition(group.OffsetsTopic, part)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Log().DeleteRecordsBefore(p.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	if p.LogStartOffset() != p.LogEndOffset() || p.LogStartOffset() == 0 {
		t.Fatalf("log start %d, log end %d", p.LogStartOffset(), p.LogEndOffset())
	}
	n.restart()
	if got := committedAt(t, n, grp, "orders", 10*time.Second); got != -1 {
		t.Fatalf("offset after every record was deleted: %d, want none", got)
	}
	commitAt(t, n, grp, "orders", 7)
	if got := committedAt(t, n, grp, "orders", 10*time.Second); got != 7 {
		t.Fatalf("offset after a new commit: %d, want 7", got)
	}
}

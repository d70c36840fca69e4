package broker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
	"github.com/sluice-io/sluice/storage/vfs/errorfs"
)

// hook counts BeforeWait calls.
type hook struct{ n atomic.Int32 }

func (h *hook) BeforeWait() { h.n.Add(1) }

// newSingleNode runs broker 1 leading the one-partition topics names.
func newSingleNode(t *testing.T, cfg Config, names ...string) *Broker {
	t.Helper()
	b, co := startBroker(t, cfg, false)
	for _, name := range names {
		addTopic(t, b, co, name, []int32{1}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, nil)
	}
	return b
}

func produceOne(t *testing.T, b *Broker, topic string, records []byte) ProducePartition {
	t.Helper()
	req := ProduceRequest{Acks: 1, Timeout: time.Second, Partitions: []ProducePartition{{Topic: topic, Records: records}}}
	b.Produce(context.Background(), &req, nil)
	return req.Partitions[0]
}

// plainOf is an idempotent, non-transactional batch of producer pid.
func plainOf(t *testing.T, pid int64, seq int32) []byte {
	t.Helper()
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq,
		BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func transactional(t *testing.T) []byte {
	t.Helper()
	b, err := record.BuildBatch(record.BatchOptions{Transactional: true, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0,
		BaseTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceRefusals: what Produce refuses, partition by partition: one
// partition's error leaves the others appended, and a refused partition's
// log is unchanged.
func TestProduceRefusals(t *testing.T) {
	b := newSingleNode(t, Config{}, "t")
	cat := func(bs ...[]byte) []byte { return slices.Concat(bs...) }
	for _, tc := range []struct {
		name        string
		topic       string
		acks        int16
		messageSets bool
		records     []byte
		want        *kerr.Error // nil: appended
	}{
		{"appended", "t", 1, false, batchOf(t, 2), nil},
		{"acks 2", "t", 2, false, batchOf(t, 1), kerr.InvalidRequiredAcks},
		{"internal topic", OffsetsTopic, 1, false, batchOf(t, 1), kerr.InvalidTopicException},
		{"unknown topic", "nope", 1, false, batchOf(t, 1), kerr.UnknownTopicOrPartition},
		{"no records", "t", 1, false, nil, kerr.CorruptMessage},
		{"transactional: opens the producer's transaction", "t", 1, false, transactional(t), nil},
		{"plain batch of a producer in a transaction", "t", 1, false, cat(batchOf(t, 1), plainOf(t, 7, 1)), kerr.InvalidTxnState},
		{"message set where v2 is due", "t", 1, false, recordtest.Capture(t, "kcat-v1-none.bin"), kerr.InvalidRecord},
		{"v2 where a message set is due", "t", 1, true, batchOf(t, 1), kerr.InvalidRecord},
		{"corrupt message set", "t", 1, true, recordtest.Capture(t, "kcat-v1-none.bin")[:20], kerr.CorruptMessage},
		{"message set converted", "t", 1, true, recordtest.Capture(t, "kcat-v1-none.bin"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := b.LeaderPartition("t", 0)
			end := p.LogEndOffset()
			req := ProduceRequest{Acks: tc.acks, MessageSets: tc.messageSets, Partitions: []ProducePartition{
				{Topic: tc.topic, Records: tc.records},
				{Topic: "t", Records: batchOf(t, 1)}, // a v2 batch: fails only with the request's acks or format
			}}
			b.Produce(context.Background(), &req, nil)
			got := req.Partitions[0]
			if tc.want == nil {
				if got.Err != nil || got.BaseOffset != end {
					t.Fatalf("err %v, base offset %d, want %d", got.Err, got.BaseOffset, end)
				}
				return
			}
			if code, _ := ErrorCode(got.Err); code != tc.want.Code {
				t.Fatalf("err %v (code %d), want %s", got.Err, code, tc.want.Message)
			}
			if got.BaseOffset != -1 || got.LogAppendTime != -1 || got.LogStartOffset != -1 {
				t.Fatalf("a failed partition has offsets: %+v", got)
			}
			if other := req.Partitions[1]; (other.Err == nil) != (tc.acks == 1 && !tc.messageSets) {
				t.Fatalf("the other partition: %v", other.Err)
			}
			if p.LogEndOffset() != end+int64(btoi(req.Partitions[1].Err == nil)) {
				t.Fatalf("log end %d -> %d", end, p.LogEndOffset())
			}
		})
	}
}

// TestProduceStorageError: a disk that fails or fills up answers the
// producer KAFKA_STORAGE_ERROR (which clients retry) with the cause, the
// partition keeps what was acknowledged, and once the disk takes writes
// again the retried batch is appended at the next offset.
func TestProduceStorageError(t *testing.T) {
	fsys := errorfs.New(nil)
	b, co := startBrokerOn(t, Config{}, false, fsys)
	addTopic(t, b, co, "t", []int32{1}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, nil)
	if got := produceOne(t, b, "t", batchOf(t, 2)); got.Err != nil || got.BaseOffset != 0 {
		t.Fatalf("produce: %v at %d", got.Err, got.BaseOffset)
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		remove := fsys.Inject(errorfs.Fault{Ops: errorfs.OpWrite, Match: errorfs.Suffix(".log"), Err: errno})
		got := produceOne(t, b, "t", batchOf(t, 1))
		code, msg := ErrorCode(got.Err)
		if code != kerr.KafkaStorageError.Code || !strings.Contains(msg, errno.Error()) || !kerr.IsRetriable(kerr.ErrorForCode(code)) {
			t.Fatalf("produce on a failing disk (%v): code %d %q, want KAFKA_STORAGE_ERROR with the cause", errno, code, msg)
		}
		if got.BaseOffset != -1 {
			t.Fatalf("a failed produce has an offset: %+v", got)
		}
		p, _ := b.LeaderPartition("t", 0)
		if p.LogEndOffset() != 2 {
			t.Fatalf("log end %d after a failed append, want 2", p.LogEndOffset())
		}
		remove()
	}
	if got := produceOne(t, b, "t", batchOf(t, 1)); got.Err != nil || got.BaseOffset != 2 {
		t.Fatalf("produce once the disk works: %v at %d, want offset 2", got.Err, got.BaseOffset)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestProduceAcksAllWaits: acks=-1 parks until the follower has the
// records (the hook is told once, the request counts in the purgatory), a
// single-replica partition answers at once without parking, and a follower
// that never comes fails the partition with REQUEST_TIMED_OUT when the
// request's timeout ends.
func TestProduceAcksAllWaits(t *testing.T) {
	b, co, p := newLeaderBroker(t, time.Minute)
	addTopic(t, b, co, "single", []int32{1}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, nil)

	var h hook
	single := ProduceRequest{Acks: -1, Timeout: time.Minute, Partitions: []ProducePartition{{Topic: "single", Records: batchOf(t, 1)}}}
	b.Produce(context.Background(), &single, &h)
	if err := single.Partitions[0].Err; err != nil || h.n.Load() != 0 {
		t.Fatalf("single replica: %v, hook called %d times", err, h.n.Load())
	}

	req := ProduceRequest{Acks: -1, Timeout: time.Minute, Partitions: []ProducePartition{{Topic: "r", Records: batchOf(t, 3)}}}
	done := make(chan struct{})
	go func() {
		b.Produce(context.Background(), &req, &h)
		close(done)
	}()
	eventually(t, "the produce parked", func() bool { return b.purgatory[delayedProduce].Load() == 1 })
	if h.n.Load() != 1 {
		t.Fatalf("hook called %d times before parking", h.n.Load())
	}
	select {
	case <-done:
		t.Fatal("acks=-1 answered before the follower had the records")
	case <-time.After(50 * time.Millisecond):
	}
	if err := p.UpdateFollower(2, p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	<-done
	if got := req.Partitions[0]; got.Err != nil || got.BaseOffset != 0 {
		t.Fatalf("after the follower caught up: %+v", got)
	}
	if n := b.purgatory[delayedProduce].Load(); n != 0 {
		t.Fatalf("purgatory %d after the answer", n)
	}

	late := ProduceRequest{Acks: -1, Timeout: 50 * time.Millisecond, Partitions: []ProducePartition{{Topic: "r", Records: batchOf(t, 1)}}}
	b.Produce(context.Background(), &late, &h)
	if err := late.Partitions[0].Err; !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("no follower: %v", err)
	}
}

// TestFetchLongPoll: a fetch at the log end parks (the hook told once,
// counted in the purgatory) and answers as soon as an append brings
// min_bytes; with max_wait 0 it answers at once, empty; after max_wait it
// answers empty, without error.
func TestFetchLongPoll(t *testing.T) {
	b := newSingleNode(t, Config{}, "t")
	fetch := func(offset int64, maxWait time.Duration, h WaitHook) *FetchRequest {
		req := &FetchRequest{ReplicaID: -1, MaxWait: maxWait, MinBytes: 1, MaxBytes: 1 << 20, Partitions: []FetchPartition{
			{Topic: "t", FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}}}
		b.Fetch(context.Background(), req, h)
		t.Cleanup(req.Release)
		return req
	}
	var h hook
	if got := fetch(0, 0, &h).Partitions[0]; got.Err != nil || got.Records.Len() != 0 || got.HighWatermark != 0 || h.n.Load() != 0 {
		t.Fatalf("max_wait 0 on an empty log: %+v, hook %d", got, h.n.Load())
	}
	start := time.Now()
	if got := fetch(0, 100*time.Millisecond, &h).Partitions[0]; got.Err != nil || got.Records.Len() != 0 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("max_wait passed: %+v after %v", got, time.Since(start))
	}
	if h.n.Load() != 1 {
		t.Fatalf("hook called %d times", h.n.Load())
	}

	batch := batchOf(t, 4)
	res := make(chan *FetchRequest, 1)
	go func() { res <- fetch(0, 10*time.Second, &h) }()
	eventually(t, "the fetch parked", func() bool { return b.purgatory[delayedFetch].Load() == 1 })
	if pp := produceOne(t, b, "t", slices.Clone(batch)); pp.Err != nil {
		t.Fatal(pp.Err)
	}
	select {
	case req := <-res:
		got := req.Partitions[0]
		if got.Err != nil || got.Records.Len() != int64(len(batch)) || got.HighWatermark != 4 || got.LastStableOffset != 4 {
			t.Fatalf("woken fetch: %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the append did not wake the fetch")
	}
	if n := b.purgatory[delayedFetch].Load(); n != 0 {
		t.Fatalf("purgatory %d after the answer", n)
	}
}

// TestFetchBudget (KIP-74): the first batch comes whole even beyond
// max_bytes; a later partition gets nothing once the budget is spent, but
// its offsets; fetch.max.bytes caps max_bytes; an error answers at once
// with the partition's error and, for NOT_LEADER_OR_FOLLOWER, the leader.
func TestFetchBudget(t *testing.T) {
	b, co := startBroker(t, Config{FetchMaxBytes: 1 << 20}, true)
	for _, name := range []string{"a", "b"} {
		addTopic(t, b, co, name, []int32{1}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, nil)
	}
	addTopic(t, b, co, "elsewhere", []int32{2}, cluster.PartitionState{Leader: 2, LeaderEpoch: 3, ISR: []int32{2}}, nil)
	big := recordtest.Batch(t, 10, 1000, time.Now().UnixMilli(), record.CompressionNone)
	for _, name := range []string{"a", "b"} {
		if pp := produceOne(t, b, name, slices.Clone(big)); pp.Err != nil {
			t.Fatal(pp.Err)
		}
	}
	part := func(topic string) FetchPartition {
		return FetchPartition{Topic: topic, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}
	}
	req := FetchRequest{ReplicaID: -1, MaxWait: time.Minute, MinBytes: 1 << 30, MaxBytes: 100, Partitions: []FetchPartition{part("a"), part("b")}}
	b.Fetch(context.Background(), &req, nil) // answers at once: the budget is spent
	defer req.Release()
	if a := req.Partitions[0]; a.Err != nil || a.Records.Len() != int64(len(big)) {
		t.Fatalf("first partition: %v, %d bytes", a.Err, a.Records.Len())
	}
	if p := req.Partitions[1]; p.Err != nil || p.Records.Len() != 0 || p.HighWatermark != 10 || p.LogStartOffset != 0 {
		t.Fatalf("second partition: %+v", p)
	}

	// fetch.max.bytes (1 MiB) lowers max_bytes, and min_bytes with it: the
	// two batches (20 KB) are not enough for min_bytes 2 MiB, but the
	// fetch answers once max_wait ends.
	capped := FetchRequest{ReplicaID: -1, MaxWait: 10 * time.Millisecond, MinBytes: 2 << 20, MaxBytes: 1 << 30, Partitions: []FetchPartition{part("a"), part("b")}}
	b.Fetch(context.Background(), &capped, nil)
	defer capped.Release()
	if capped.Partitions[1].Records.Len() != int64(len(big)) {
		t.Fatalf("second partition under fetch.max.bytes: %d bytes", capped.Partitions[1].Records.Len())
	}

	start := time.Now()
	failed := FetchRequest{ReplicaID: -1, MaxWait: time.Minute, MinBytes: 1 << 30, MaxBytes: 1 << 20, Partitions: []FetchPartition{part("elsewhere")}}
	b.Fetch(context.Background(), &failed, nil)
	got := failed.Partitions[0]
	if !errors.Is(got.Err, kerr.NotLeaderForPartition) || got.ErrorCode != kerr.NotLeaderForPartition.Code || got.LeaderID != 2 || got.LeaderEpoch != 3 || time.Since(start) > 10*time.Second {
		t.Fatalf("partition led elsewhere: %+v", got)
	}
}

// TestFetchDivergingEpoch (KIP-595): a fetcher whose last fetched epoch
// ended earlier on the leader learns where, with no records; one that
// agrees reads on.
func TestFetchDivergingEpoch(t *testing.T) {
	b, co, p := newLeaderBroker(t, time.Minute)
	ctx := context.Background()
	if _, err := p.AppendRecords(batchOf(t, 5), 1); err != nil { // epoch 1: offsets 0-4
		t.Fatal(err)
	}
	st, err := co.PartitionState(ctx, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.LeaderEpoch = 2
	if _, err := co.SetPartitionState(ctx, "r", 0, st); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 3), 1); err != nil { // epoch 2: offsets 5-7
		t.Fatal(err)
	}
	fetch := func(offset int64, lastEpoch int32) FetchPartition {
		req := FetchRequest{ReplicaID: 2, MaxBytes: 1 << 20, Partitions: []FetchPartition{{Topic: "r", FetchOffset: offset,
			PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: 2, LastFetchedEpoch: lastEpoch}}}
		b.Fetch(ctx, &req, nil)
		t.Cleanup(req.Release)
		return req.Partitions[0]
	}
	if got := fetch(7, 1); got.Err != nil || got.DivergingEpoch != 1 || got.DivergingEndOffset != 5 || got.Records.Len() != 0 {
		t.Fatalf("diverged follower: %+v", got)
	}
	if got := fetch(5, 1); got.Err != nil || got.DivergingEpoch != -1 || got.Records.Len() == 0 {
		t.Fatalf("agreeing follower: %+v", got)
	}
	if got := fetch(5, 1); got.HighWatermark != 5 {
		t.Fatalf("high watermark %d after the follower fetched at 5", got.HighWatermark)
	}
}

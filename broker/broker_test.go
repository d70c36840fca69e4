package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
	"github.com/sluice-io/sluice/storage/vfs"
)

// newTestBroker runs broker 1 over a standalone coordinator and a storage
// manager in temporary directories. With follower, broker 2 is registered
// too but has no process: it is the follower the test plays by hand.
func newTestBroker(t *testing.T, follower bool) (*Broker, *cluster.Standalone) {
	t.Helper()
	return startBroker(t, Config{DeleteTopicEnable: true, AutoCreateTopics: true,
		TopicDefaults: map[string]TopicDefault{"retention.ms": {BrokerKey: "log.retention.hours", Value: "7200000", Static: true}}}, follower)
}

// startBroker runs broker 1 with cfg (its id, logs and coordinator filled
// in) over a standalone coordinator and a storage manager in temporary
// directories, closed when the test ends. With follower, broker 2 is
// registered too (live, no process: the test plays it).
func startBroker(t *testing.T, cfg Config, follower bool) (*Broker, *cluster.Standalone) {
	t.Helper()
	return startBrokerOn(t, cfg, follower, nil)
}

// startBrokerOn is startBroker with the logs on fsys (nil: the disk).
func startBrokerOn(t *testing.T, cfg Config, follower bool, fsys vfs.FS) (*Broker, *cluster.Standalone) {
	t.Helper()
	ctx := context.Background()
	co, err := cluster.OpenStandalone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs, err := storage.OpenManager(storage.ManagerConfig{Dirs: []string{t.TempDir()}, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	cfg.BrokerID, cfg.Logs, cfg.Coordinator = 1, logs, co
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if follower {
		if err := co.RegisterBroker(ctx, cluster.Broker{ID: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		logs.Close()
		co.Close()
	})
	return b, co
}

func batchOf(t *testing.T, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHighWatermarkFollowsISR: with a follower in the ISR the high
// watermark is the minimum log end offset over the ISR, acks=all waits for
// it, and min.insync.replicas refuses acks=all when the ISR is too small.
func TestHighWatermarkFollowsISR(t *testing.T) {
	b, co := newTestBroker(t, true)
	ctx := context.Background()
	if err := co.CreateTopic(ctx, cluster.Topic{Name: "r", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreatePartitionState(ctx, "r", 0, cluster.PartitionState{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := b.LeaderPartition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if leader, epoch := p.Leader(); !leader || epoch != 3 {
		t.Fatalf("leader %v epoch %d", leader, epoch)
	}
	info, err := p.AppendRecords(batchOf(t, 5), -1)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 4 {
		t.Fatalf("append: %+v %v", info, err)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the follower fetched", hw)
	}
	done := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done <- p.WaitForHighWatermark(wctx, 5)
	}()
	select {
	case err := <-done:
		t.Fatalf("acks=all wait returned before the follower caught up: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.UpdateFollower(2, 3); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, follower at 3", hw)
	}
	if err := p.UpdateFollower(2, 5); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("acks=all wait: %v", err)
	}
	// A consumer read stops at the high watermark.
	ri, err := p.Read(ReadOptions{Offset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil || ri.HighWatermark != 5 {
		t.Fatalf("read %+v %v", ri, err)
	}
	ri.Release()
	// Fencing by leader epoch.
	if _, err := p.Read(ReadOptions{Offset: 0, MaxBytes: 100, ReplicaID: -1, CurrentLeaderEpoch: 2}); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	if _, err := p.Read(ReadOptions{Offset: 0, MaxBytes: 100, ReplicaID: -1, CurrentLeaderEpoch: 4}); !errors.Is(err, kerr.UnknownLeaderEpoch) {
		t.Fatalf("new epoch: %v", err)
	}

	// The ISR shrinks to the leader alone: acks=all is refused, acks=1 is not.
	st, _ := co.PartitionState(ctx, "r", 0)
	st.ISR = []int32{1}
	if _, err := co.SetPartitionState(ctx, "r", 0, st); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 1), -1); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR below min.insync.replicas: %v", err)
	}
	if _, err := p.AppendRecords(batchOf(t, 1), 1); err != nil {
		t.Fatalf("acks=1: %v", err)
	}
	// Leadership moves away: appends and reads are refused, and a listener
	// hears of it (after being told of the current leadership).
	events := make(chan PartitionChange, 10)
	cancel := b.OnPartitionChange(func(c PartitionChange) { events <- c })
	defer cancel()
	st, _ = co.PartitionState(ctx, "r", 0)
	st.Leader, st.LeaderEpoch = 2, 4
	if _, err := co.SetPartitionState(ctx, "r", 0, st); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 1), 1); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append as follower: %v", err)
	}
	if e := <-events; !e.Leader || e.LeaderEpoch != 3 {
		t.Fatalf("first event %+v, want the current leadership", e)
	}
	if e := <-events; e.Leader || e.LeaderEpoch != 4 || e.Topic != "r" {
		t.Fatalf("second event %+v, want leadership lost at epoch 4", e)
	}
}

func TestTopicConfigValidationAndSources(t *testing.T) {
	b, _ := newTestBroker(t, false)
	for _, tc := range []struct {
		cfg  map[string]string
		code *kerr.Error
	}{
		{map[string]string{"retention.ms": "60000", "cleanup.policy": "compact,delete"}, nil},
		{map[string]string{"bogus": "1"}, kerr.InvalidConfig},
		{map[string]string{"retention.ms": "an hour"}, kerr.InvalidConfig},
		{map[string]string{"message.timestamp.type": "Whenever"}, kerr.InvalidConfig},
		{map[string]string{"retention.ms": "-2"}, kerr.PolicyViolation},
		{map[string]string{"segment.bytes": "10"}, kerr.PolicyViolation},
		{map[string]string{"min.insync.replicas": "2"}, kerr.PolicyViolation}, // rf 1
	} {
		err := b.validateTopicConfigs(tc.cfg, 1)
		if tc.code == nil && err != nil || tc.code != nil && !errors.Is(err, tc.code) {
			t.Errorf("%v: %v, want %v", tc.cfg, err, tc.code)
		}
	}
	entries := b.describeTopicConfigs(map[string]string{"segment.ms": "1000"}, true)
	find := func(name string) ConfigEntry {
		for _, e := range entries {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("%s not described", name)
		return ConfigEntry{}
	}
	if e := find("segment.ms"); *e.Value != "1000" || e.Source != SourceDynamicTopic || len(e.Synonyms) != 2 {
		t.Fatalf("segment.ms %+v", e)
	}
	if e := find("retention.ms"); *e.Value != "7200000" || e.Source != SourceStaticBroker || e.Synonyms[0].Name != "log.retention.hours" {
		t.Fatalf("retention.ms %+v", e)
	}
	if e := find("max.message.bytes"); *e.Value != "1048588" || e.Source != SourceDefault {
		t.Fatalf("max.message.bytes %+v", e)
	}
	lc := TopicLogConfig(b.cfg.TopicDefaults, map[string]string{"segment.bytes": "2048"})
	if lc.SegmentBytes != 2048 || lc.RetentionMs != 7200000 {
		t.Fatalf("log config %+v", lc)
	}
}

func TestProducerIDsDoNotRepeat(t *testing.T) {
	b, _ := newTestBroker(t, false)
	b.cfg.ProducerIDBlockSize = 3
	seen := map[int64]bool{}
	for range 10 {
		id, err := b.AllocateProducerID(context.Background())
		if err != nil || seen[id] {
			t.Fatalf("id %d err %v (seen before: %v)", id, err, seen[id])
		}
		seen[id] = true
	}
}

func TestCreateAndDeleteTopic(t *testing.T) {
	b, co := newTestBroker(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: co, BrokerID: 1})
	go ctl.Run(ctx)
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "a.b", Partitions: 2, ReplicationFactor: 1}, false, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "a_b", Partitions: 1, ReplicationFactor: 1}, false, 5*time.Second); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("colliding name: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "a.b", Partitions: 1, ReplicationFactor: 1}, false, 5*time.Second); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: 2}, false, 5*time.Second); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 2 with 1 broker: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "x", Partitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1}, {5}}}, false, 5*time.Second); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("assignment to an unknown broker: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "x", Partitions: 0, ReplicationFactor: 1}, false, 5*time.Second); !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("0 partitions: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "v", Partitions: 1, ReplicationFactor: 1}, true, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Image().Topics["v"]; ok {
		t.Fatal("validate_only created the topic")
	}
	if p, err := b.LeaderPartition("a.b", 1); err != nil || p == nil {
		t.Fatalf("partition a.b-1 not led after create: %v", err)
	}
	if err := b.DeleteTopic(ctx, "a.b", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Partition("a.b", 0); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("partition after delete: %v", err)
	}
	if _, ok := b.cfg.Logs.Log(storage.TopicPartition{Topic: "a.b", Partition: 0}); ok {
		t.Fatal("log still open after delete")
	}
	// Recreating the name gives a new, empty topic.
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "a.b", Partitions: 1, ReplicationFactor: 1}, false, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := b.LeaderPartition("a.b", 0)
	if err != nil {
		t.Fatalf("recreated topic: %v", err)
	}
	if p.LogEndOffset() != 0 {
		t.Fatalf("recreated topic has log end %d", p.LogEndOffset())
	}
}

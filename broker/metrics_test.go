package broker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/record"
)

// newMetricsBroker runs broker 1 over a standalone coordinator with its
// metrics on reg; broker 2 is registered (live) but played by the test.
func newMetricsBroker(t *testing.T, reg *metrics.Registry, lag time.Duration) (*Broker, *cluster.Standalone) {
	t.Helper()
	return startBroker(t, Config{DeleteTopicEnable: true, ReplicaLagTimeMax: lag, Metrics: reg}, true)
}

// addTopic creates a one-partition topic with the given replicas and
// partition state and applies it.
func addTopic(t *testing.T, b *Broker, co *cluster.Standalone, name string, replicas []int32, st cluster.PartitionState, configs map[string]string) {
	t.Helper()
	ctx := context.Background()
	if err := co.CreateTopic(ctx, cluster.Topic{Name: name, ID: cluster.NewUUID(), Replicas: [][]int32{replicas}}, configs); err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreatePartitionState(ctx, name, 0, st); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
}

// series returns the value of the series of family name whose labels
// include every "key=value" of labels, as a scrape would see it.
func series(t *testing.T, reg *metrics.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = v
	}
	return testutil.MetricSum(testutil.ByName(fams), name, want)
}

func wantSeries(t *testing.T, reg *metrics.Registry, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := series(t, reg, name, labels...)
	if !ok {
		t.Errorf("no series %s%v", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// TestTrafficMetrics: produced bytes and records count after the leader
// append (a retried idempotent duplicate does not count twice); what a
// consumer is sent counts as the topic's bytes and messages out (whole
// batches: a fetch inside a batch counts it all), what a follower is sent
// as replication bytes out, and a follower's appends as replication bytes
// in.
func TestTrafficMetrics(t *testing.T) {
	reg := metrics.New()
	b, co := newMetricsBroker(t, reg, 30*time.Second)
	addTopic(t, b, co, "t", []int32{1, 2}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}}, nil)
	p, err := b.LeaderPartition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	topic := []string{"broker=1", "topic=t"}

	var bytesIn int
	for _, n := range []int{5, 3, 7} {
		batch := batchOf(t, n)
		bytesIn += len(batch)
		if _, err := p.AppendRecords(batch, 1); err != nil {
			t.Fatal(err)
		}
	}
	recs := []record.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}}
	idem, err := record.BuildBatch(record.BatchOptions{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	bytesIn += len(idem)
	for range 2 { // the second is a producer's retry: answered, not appended
		if info, err := p.AppendRecords(slices.Clone(idem), 1); err != nil || info.FirstOffset != 15 {
			t.Fatalf("idempotent append: %+v %v", info, err)
		}
	}
	wantSeries(t, reg, float64(bytesIn), "sluice_broker_topic_bytes_in_total", topic...)
	wantSeries(t, reg, 17, "sluice_broker_topic_messages_in_total", topic...)

	// The follower fetches everything (replication out), which moves the
	// high watermark; then consumers can read.
	ri, err := p.Read(ReadOptions{Offset: 0, MaxBytes: 1 << 20, ReplicaID: 2, CurrentLeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	p.countSent(&ri, 2)
	ri.Release()
	if err := p.UpdateFollower(2, p.LogEndOffset()); err != nil || p.HighWatermark() != 17 {
		t.Fatalf("follower caught up: hw %d, %v", p.HighWatermark(), err)
	}
	wantSeries(t, reg, float64(bytesIn), "sluice_broker_replication_bytes_out_total", "broker=1")
	wantSeries(t, reg, 0, "sluice_broker_topic_bytes_out_total", topic...)

	ri, err = p.Read(ReadOptions{Offset: 0, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil || ri.Region.Len != int64(bytesIn) {
		t.Fatalf("consumer read %d bytes, %v", ri.Region.Len, err)
	}
	p.countSent(&ri, -1)
	ri.Release()
	wantSeries(t, reg, float64(bytesIn), "sluice_broker_topic_bytes_out_total", topic...)
	wantSeries(t, reg, 17, "sluice_broker_topic_messages_out_total", topic...)

	// From offset 6, inside the second batch (5..7): batches 5..16 go.
	ri, err = p.Read(ReadOptions{Offset: 6, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: -1})
	if err != nil || ri.FirstOffset != 5 {
		t.Fatalf("read from 6: first %d, %v", ri.FirstOffset, err)
	}
	p.countSent(&ri, -1)
	ri.Release()
	wantSeries(t, reg, 17+12, "sluice_broker_topic_messages_out_total", topic...)

	// A partition followed here: its appends are replication in, not
	// topic bytes in.
	addTopic(t, b, co, "f", []int32{2, 1}, cluster.PartitionState{Leader: 2, LeaderEpoch: 4, ISR: []int32{2, 1}}, nil)
	fp, err := b.Partition("f", 0)
	if err != nil {
		t.Fatal(err)
	}
	fb := batchOf(t, 4)
	if err := fp.appendAsFollower(4, fb, 4, 0); err != nil {
		t.Fatal(err)
	}
	wantSeries(t, reg, float64(len(fb)), "sluice_broker_replication_bytes_in_total", "broker=1")
	wantSeries(t, reg, 0, "sluice_broker_topic_bytes_in_total", "broker=1", "topic=f")
}

// TestMetricsDoNotAllocate: the produce and fetch paths with their counting
// — a leader append, a consumer's and a follower's read counted as sent,
// the purgatory counts — allocate nothing.
func TestMetricsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under the race detector")
	}
	reg := metrics.New()
	b, co := newMetricsBroker(t, reg, 30*time.Second)
	addTopic(t, b, co, "t", []int32{1, 2}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}}, nil)
	p, err := b.LeaderPartition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	batch := batchOf(t, 10)
	for range 20 { // warm up: segment buffers, producer state, series
		if _, err := p.AppendRecords(batch, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(300, func() {
		if _, err := p.AppendRecords(batch, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a leader append with its counting allocates %v times", n)
	}
	if n := testing.AllocsPerRun(300, func() {
		ri, err := p.Read(ReadOptions{Offset: p.LogEndOffset() - 50, MaxBytes: 1 << 16, ReplicaID: 2, CurrentLeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		p.countSent(&ri, 2)
		ri.Release()
	}); n != 0 {
		t.Errorf("a follower read counted as sent allocates %v times", n)
	}
	if err := p.UpdateFollower(2, p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(300, func() {
		ri, err := p.Read(ReadOptions{Offset: 0, MaxBytes: 1 << 16, ReplicaID: -1, CurrentLeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		p.countSent(&ri, -1)
		ri.Release()
	}); n != 0 {
		t.Errorf("a consumer read counted as sent allocates %v times", n)
	}
	if n := testing.AllocsPerRun(300, func() {
		b.enterPurgatory(delayedFetch)
		b.leavePurgatory(delayedFetch)
		b.enterPurgatory(delayedProduce)
		b.leavePurgatory(delayedProduce)
	}); n != 0 {
		t.Errorf("purgatory counting allocates %v times", n)
	}
	if v, _ := series(t, reg, "sluice_broker_topic_messages_out_total", "topic=t"); v == 0 {
		t.Error("the reads were not counted")
	}
}

// TestStateMetrics: at scrape time the broker reports the partitions it
// holds and leads, the under-replicated and under-min-ISR ones, whether it
// is the active controller and how many partitions have no live leader,
// each log's size, offsets and segments, and the purgatory.
func TestStateMetrics(t *testing.T) {
	reg := metrics.New()
	b, co := newMetricsBroker(t, reg, 30*time.Second)
	ctx := context.Background()
	addTopic(t, b, co, "a", []int32{1}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, nil)
	addTopic(t, b, co, "u", []int32{1, 2}, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, map[string]string{"min.insync.replicas": "2"})
	addTopic(t, b, co, "f", []int32{2, 1}, cluster.PartitionState{Leader: 2, LeaderEpoch: 0, ISR: []int32{2, 1}}, nil)
	addTopic(t, b, co, "o", []int32{3}, cluster.PartitionState{Leader: 3, LeaderEpoch: 0, ISR: []int32{3}}, nil) // broker 3 is not alive
	p, err := b.LeaderPartition("a", 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.AppendRecords(batchOf(t, 5), 1); err != nil {
			t.Fatal(err)
		}
	}

	brk := "broker=1"
	wantSeries(t, reg, 3, "sluice_broker_partitions", brk)
	wantSeries(t, reg, 2, "sluice_broker_leader_partitions", brk)
	wantSeries(t, reg, 1, "sluice_broker_under_replicated_partitions", brk)
	wantSeries(t, reg, 1, "sluice_broker_under_min_isr_partitions", brk)
	wantSeries(t, reg, 0, "sluice_controller_active", brk)
	wantSeries(t, reg, 0, "sluice_controller_offline_partitions", brk)
	wantSeries(t, reg, float64(p.Size()), "sluice_log_size_bytes", brk, "topic=a", "partition=0")
	wantSeries(t, reg, 0, "sluice_log_start_offset", brk, "topic=a", "partition=0")
	wantSeries(t, reg, 15, "sluice_log_end_offset", brk, "topic=a", "partition=0")
	wantSeries(t, reg, 1, "sluice_log_segments", brk, "topic=a", "partition=0")
	if _, ok := series(t, reg, "sluice_log_end_offset", "topic=o"); ok {
		t.Error("a log is reported for a partition this broker holds no replica of")
	}
	if p.Size() == 0 {
		t.Fatal("log size 0 after appends")
	}

	// This broker becomes the controller: it reports the partition whose
	// leader (broker 3) is not alive.
	if _, err := co.Campaign(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantSeries(t, reg, 1, "sluice_controller_active", brk)
	wantSeries(t, reg, 1, "sluice_controller_offline_partitions", brk)

	b.enterPurgatory(delayedFetch)
	b.enterPurgatory(delayedFetch)
	b.enterPurgatory(delayedProduce)
	wantSeries(t, reg, 2, "sluice_broker_purgatory_size", brk, "operation=fetch")
	wantSeries(t, reg, 1, "sluice_broker_purgatory_size", brk, "operation=produce")
	b.leavePurgatory(delayedFetch)
	b.leavePurgatory(delayedFetch)
	b.leavePurgatory(delayedProduce)
	wantSeries(t, reg, 0, "sluice_broker_purgatory_size", brk, "operation=fetch")
	wantSeries(t, reg, 0, "sluice_broker_purgatory_size", brk, "operation=produce")

	// A closed broker reports no state any more.
	b.Close()
	if _, ok := series(t, reg, "sluice_broker_partitions", brk); ok {
		t.Error("a closed broker still reports its partitions")
	}
}

// TestISRChangeMetrics: a follower that stops fetching leaves the ISR (one
// shrink) and rejoins when it catches up (one expand).
func TestISRChangeMetrics(t *testing.T) {
	reg := metrics.New()
	b, co := newMetricsBroker(t, reg, 300*time.Millisecond)
	addTopic(t, b, co, "r", []int32{1, 2}, cluster.PartitionState{Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}}, nil)
	p, err := b.LeaderPartition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 3), 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lagging follower leaves the ISR", func() bool { return slices.Equal(storedISR(t, co), []int32{1}) })
	wantSeries(t, reg, 1, "sluice_broker_isr_shrinks_total", "broker=1")
	wantSeries(t, reg, 0, "sluice_broker_isr_expands_total", "broker=1")
	if err := p.UpdateFollower(2, p.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower rejoins the ISR", func() bool { return slices.Equal(storedISR(t, co), []int32{1, 2}) })
	wantSeries(t, reg, 1, "sluice_broker_isr_shrinks_total", "broker=1")
	wantSeries(t, reg, 1, "sluice_broker_isr_expands_total", "broker=1")
}

// TestTopicSeriesRemovedOnDelete: deleting a topic removes its traffic and
// log series; a topic created again under the name starts from zero.
func TestTopicSeriesRemovedOnDelete(t *testing.T) {
	reg := metrics.New()
	b, co := newMetricsBroker(t, reg, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: co, BrokerID: 1})
	go ctl.Run(ctx)
	for _, name := range []string{"gone", "kept"} {
		if _, err := b.CreateTopic(ctx, TopicSpec{Name: name, Partitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1}, {1}}}, false, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		for part := range int32(2) {
			p, err := b.LeaderPartition(name, part)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.AppendRecords(batchOf(t, 2), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantSeries(t, reg, 4, "sluice_broker_topic_messages_in_total", "topic=gone")
	if err := b.DeleteTopic(ctx, "gone", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sluice_broker_topic_messages_in_total", "sluice_broker_topic_bytes_in_total",
		"sluice_broker_topic_messages_out_total", "sluice_broker_topic_bytes_out_total", "sluice_log_end_offset"} {
		if _, ok := series(t, reg, name, "topic=gone"); ok {
			t.Errorf("%s{topic=gone} still exported after the delete", name)
		}
	}
	wantSeries(t, reg, 4, "sluice_broker_topic_messages_in_total", "topic=kept")

	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "gone", Partitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1}}}, false, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := b.LeaderPartition("gone", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 1), 1); err != nil {
		t.Fatal(err)
	}
	wantSeries(t, reg, 1, "sluice_broker_topic_messages_in_total", "topic=gone")
}

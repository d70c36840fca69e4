package protocol_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/protocol"
)

// TestFetchCountsWhatIsSent: a fetch that parks for min_bytes is counted in
// the fetch purgatory while it waits; it reads the partition again after
// each append, but only the response it finally sends counts as the topic's
// bytes and messages out. An acks=all produce on a single node answers at
// once, without entering the produce purgatory.
func TestFetchCountsWhatIsSent(t *testing.T) {
	reg := metrics.New()
	n := startBenchNode(t, nil, func(c *protocol.Config) { c.Metrics = reg })
	c := dialRaw(t, n.addr)
	defer c.Close()
	b1, b2 := benchBatch(t, 10, 100), benchBatch(t, 7, 100)
	if p := produceResp(t, c.recv(c.send(produceFrame(-1, b1)))); p.ErrorCode != 0 {
		t.Fatalf("produce: error %d", p.ErrorCode)
	}

	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, 20_000, int32(len(b1)+1), 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "bench"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = 1<<20, -1, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	fc := c.send(frame(req))
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := scrape(t, reg, "sluice_broker_purgatory_size", `operation="fetch"`); got != 1 {
			return fmt.Errorf("fetch purgatory %v while the fetch waits for min_bytes", got)
		}
		return nil
	})
	// Appends wake it; the second brings enough.
	c2 := dialRaw(t, n.addr)
	defer c2.Close()
	if p := produceResp(t, c2.recv(c2.send(produceFrame(1, b2)))); p.ErrorCode != 0 {
		t.Fatalf("produce: error %d", p.ErrorCode)
	}
	got := fetchResp(t, c.recv(fc))
	if got.ErrorCode != 0 || len(got.RecordBatches) != len(b1)+len(b2) {
		t.Fatalf("fetch answer: error %d, %d record bytes, want %d", got.ErrorCode, len(got.RecordBatches), len(b1)+len(b2))
	}

	sent := float64(len(b1) + len(b2))
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_broker_topic_bytes_in_total", []string{`broker="1"`, `topic="bench"`}, sent},
		{"sluice_broker_topic_messages_in_total", []string{`topic="bench"`}, 17},
		{"sluice_broker_topic_bytes_out_total", []string{`topic="bench"`}, sent},
		{"sluice_broker_topic_messages_out_total", []string{`topic="bench"`}, 17},
		{"sluice_broker_replication_bytes_out_total", []string{`broker="1"`}, 0},
		{"sluice_broker_purgatory_size", []string{`operation="fetch"`}, 0},
		{"sluice_broker_purgatory_size", []string{`operation="produce"`}, 0},
		{"sluice_broker_requests_total", []string{`api="Fetch"`}, 1},
	}
	testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		for _, ch := range checks {
			if got := scrape(t, reg, ch.name, ch.labels...); got != ch.want {
				return fmt.Errorf("%s%v = %v, want %v", ch.name, ch.labels, got, ch.want)
			}
		}
		return nil
	})
}

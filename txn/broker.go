package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/storage"
)

// BrokerBackend is the Backend over a *broker.Broker.
type BrokerBackend struct {
	b    *broker.Broker
	spec broker.TxnStateTopicSpec
}

var _ Backend = (*BrokerBackend)(nil)

// NewBrokerBackend returns the Backend of b; spec is how
// __transaction_state is created.
func NewBrokerBackend(b *broker.Broker, spec broker.TxnStateTopicSpec) *BrokerBackend {
	return &BrokerBackend{b: b, spec: spec}
}

// EnsureTopic creates __transaction_state with the transaction.state.log.*
// settings.
func (bb *BrokerBackend) EnsureTopic(ctx context.Context) error {
	return bb.b.EnsureTransactionStateTopic(ctx, bb.spec)
}

// Leader returns the leader of __transaction_state-partition.
func (bb *BrokerBackend) Leader(partition int32, listener string) (Node, bool) {
	img := bb.b.Image()
	t, ok := img.Topic(broker.TransactionStateTopic)
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return Node{}, false
	}
	leader := t.Partitions[partition].Leader
	if leader < 0 {
		return Node{}, false
	}
	br, ok := img.Broker(leader)
	if !ok {
		return Node{}, false
	}
	ep, ok := br.Endpoint(listener)
	if !ok {
		return Node{}, false
	}
	return Node{ID: br.ID, Host: ep.Host, Port: ep.Port}, true
}

// Append appends as leader at leaderEpoch and waits for acks=all.
func (bb *BrokerBackend) Append(ctx context.Context, partition, leaderEpoch int32, batch []byte) error {
	p, err := bb.b.LeaderPartition(broker.TransactionStateTopic, partition)
	if err != nil {
		return kerrOf(err)
	}
	if _, epoch := p.Leader(); epoch != leaderEpoch {
		return kerr.NotCoordinator
	}
	info, err := p.AppendRecords(batch, -1)
	if err != nil {
		return kerrOf(err)
	}
	return kerrOf(p.WaitForHighWatermark(ctx, info.LastOffset+1))
}

// kerrOf turns a broker error into its Kafka error.
func kerrOf(err error) error {
	if err == nil {
		return nil
	}
	code, _ := broker.ErrorCode(err)
	if ke := kerr.ErrorForCode(code); ke != nil {
		return ke
	}
	return err
}

// Read reads whole batches of the partition up to its log end.
func (bb *BrokerBackend) Read(ctx context.Context, partition int32, offset int64, maxBytes int32) ([]byte, int64, int64, error) {
	p, err := bb.b.Partition(broker.TransactionStateTopic, partition)
	if err != nil {
		return nil, 0, 0, err
	}
	l := p.Log()
	end := l.LogEndOffset()
	offset = max(offset, l.LogStartOffset())
	if offset >= end {
		return nil, offset, end, nil
	}
	info, err := l.Read(offset, maxBytes, end, true)
	if errors.Is(err, storage.ErrOffsetOutOfRange) {
		offset = max(offset, l.LogStartOffset())
		if offset >= end {
			return nil, offset, end, nil
		}
		info, err = l.Read(offset, maxBytes, end, true)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer info.Release()
	buf := make([]byte, info.Region.Len)
	if _, err := info.Region.File.ReadAt(buf, info.Region.Pos); err != nil {
		return nil, 0, 0, fmt.Errorf("read %s-%d at %d: %w", broker.TransactionStateTopic, partition, offset, err)
	}
	return buf, offset, end, nil
}

// AllocateProducerID hands out a producer id from the broker's blocks.
func (bb *BrokerBackend) AllocateProducerID(ctx context.Context) (int64, error) {
	return bb.b.AllocateProducerID(ctx)
}

// PartitionExists reports whether topic has partition.
func (bb *BrokerBackend) PartitionExists(topic string, partition int32) bool {
	t, ok := bb.b.Image().Topic(topic)
	return ok && partition >= 0 && int(partition) < len(t.Partitions)
}

// WriteTxnMarkers groups the marker's partitions by their leader and sends
// each leader its part: this broker's directly, another's as a
// WriteTxnMarkers request over the inter-broker listener. A partition
// without a leader, or whose leader cannot be reached, answers
// NOT_LEADER_OR_FOLLOWER (the sender retries).
func (bb *BrokerBackend) WriteTxnMarkers(ctx context.Context, m kmsg.WriteTxnMarkersRequestMarker) map[TopicPartition]int16 {
	out := make(map[TopicPartition]int16)
	img := bb.b.Image()
	byLeader := make(map[int32]*kmsg.WriteTxnMarkersRequestMarker)
	for _, t := range m.Topics {
		ti, ok := img.Topic(t.Topic)
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p}
			if !ok || p < 0 || int(p) >= len(ti.Partitions) {
				out[tp] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			leader := ti.Partitions[p].Leader
			if leader < 0 {
				out[tp] = kerr.NotLeaderForPartition.Code
				continue
			}
			lm, ok := byLeader[leader]
			if !ok {
				c := m
				c.Topics = nil
				lm = &c
				byLeader[leader] = lm
			}
			if n := len(lm.Topics); n > 0 && lm.Topics[n-1].Topic == t.Topic {
				lm.Topics[n-1].Partitions = append(lm.Topics[n-1].Partitions, p)
			} else {
				lt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				lt.Topic, lt.Partitions = t.Topic, []int32{p}
				lm.Topics = append(lm.Topics, lt)
			}
		}
	}
	for leader, lm := range byLeader {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(1)
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{*lm}
		var resp *kmsg.WriteTxnMarkersResponse
		if leader == bb.b.Config().BrokerID {
			resp = bb.b.WriteTxnMarkers(ctx, req)
		} else {
			r, err := bb.b.RequestBroker(ctx, leader, req)
			if err == nil {
				resp, _ = r.(*kmsg.WriteTxnMarkersResponse)
			}
		}
		for _, t := range lm.Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p}] = kerr.NotLeaderForPartition.Code
			}
		}
		if resp == nil {
			continue
		}
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					out[TopicPartition{rt.Topic, rp.Partition}] = rp.ErrorCode
				}
			}
		}
	}
	return out
}

// Attach makes c follow b's leadership of __transaction_state partitions.
func Attach(b *broker.Broker, c *Coordinator) (detach func()) {
	return b.OnPartitionChange(func(pc broker.PartitionChange) {
		if pc.Topic != broker.TransactionStateTopic {
			return
		}
		if pc.Leader && !pc.Deleted {
			c.BecomeLeader(pc.Partition, pc.LeaderEpoch)
			return
		}
		c.Resign(pc.Partition)
	})
}

// ForBroker is a coordinator attached to a broker.
type ForBroker struct {
	*Coordinator
	detach, unregister func()
}

// NewForBroker builds the transaction coordinator of b.
func NewForBroker(b *broker.Broker, cfg Config, spec broker.TxnStateTopicSpec, logger *slog.Logger) (*ForBroker, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	spec.Partitions = cfg.withDefaults().NumPartitions
	c, err := New(Options{Config: cfg, Backend: NewBrokerBackend(b, spec), Logger: logger.With("component", "txn")})
	if err != nil {
		return nil, err
	}
	unregister := b.Metrics().Transactions(b.Config().BrokerID, c.metricStats)
	return &ForBroker{Coordinator: c, detach: Attach(b, c), unregister: unregister}, nil
}

// Close detaches from the broker, unregisters the metrics and closes the
// coordinator.
func (f *ForBroker) Close() error {
	f.detach()
	f.unregister()
	return f.Coordinator.Close()
}

// metricStats is Stats as package metrics reports it: the oldest open
// transaction's age in seconds (0 when none) by the coordinator's clock.
func (c *Coordinator) metricStats() metrics.TransactionStats {
	s := c.Stats()
	m := metrics.TransactionStats{Open: s.Open, Committed: s.Commits, Aborted: s.Aborts, TimedOut: s.TimedOut}
	if s.OldestOpenMs >= 0 {
		m.OldestOpenSeconds = max(0, float64(c.nowMs()-s.OldestOpenMs)/1000)
	}
	return m
}

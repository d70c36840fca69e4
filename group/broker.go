package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/storage"
)

// BrokerBackend is the Backend over a *broker.Broker: __consumer_offsets is
// one of the broker's topics, appended to with acks=all.
type BrokerBackend struct{ b *broker.Broker }

// NewBrokerBackend returns the Backend of b.
func NewBrokerBackend(b *broker.Broker) *BrokerBackend { return &BrokerBackend{b: b} }

var _ Backend = (*BrokerBackend)(nil)

// EnsureOffsetsTopic creates __consumer_offsets with the broker's
// offsets.topic.* settings.
func (bb *BrokerBackend) EnsureOffsetsTopic(ctx context.Context) error {
	return bb.b.EnsureOffsetsTopic(ctx)
}

// OffsetsLeader returns the leader of __consumer_offsets-partition.
func (bb *BrokerBackend) OffsetsLeader(partition int32, listener string) (Node, bool) {
	img := bb.b.Image()
	t, ok := img.Topic(OffsetsTopic)
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

// Append appends as the partition's leader at leaderEpoch and waits for
// the high watermark to pass the records (acks=all), at most timeout.
func (bb *BrokerBackend) Append(ctx context.Context, partition, leaderEpoch int32, batches []byte, timeout time.Duration) error {
	p, err := bb.b.LeaderPartition(OffsetsTopic, partition)
	if err != nil {
		return err
	}
	if _, epoch := p.Leader(); epoch != leaderEpoch {
		return fmt.Errorf("%s-%d: leader epoch %d, coordinating %d: %w", OffsetsTopic, partition, epoch, leaderEpoch, kerr.NotCoordinator)
	}
	// As coordinator: transactional offset commits carry their producer,
	// whose epoch (not sequence) is checked.
	info, err := p.AppendAsCoordinator(batches)
	if err != nil {
		return err
	}
	if p.Log().HighWatermark() > info.LastOffset {
		// Committed already (a single replica in the ISR): no timer.
		return p.WaitForHighWatermark(ctx, info.LastOffset+1)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.WaitForHighWatermark(ctx, info.LastOffset+1)
}

// Read reads whole batches of the partition up to its log end, from offset
// or the log start, whichever is later: a new leader loads what the
// previous one wrote, committed or about to be.
func (bb *BrokerBackend) Read(ctx context.Context, partition int32, offset int64, maxBytes int32) ([]byte, int64, int64, error) {
	p, err := bb.b.Partition(OffsetsTopic, partition)
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
		// The log start moved (retention) between the two calls: again.
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
		return nil, 0, 0, fmt.Errorf("read %s-%d at %d: %w", OffsetsTopic, partition, offset, err)
	}
	return buf, offset, end, nil
}

// PartitionExists reports whether the topic has the partition.
func (bb *BrokerBackend) PartitionExists(topic string, partition int32) bool {
	t, ok := bb.b.Image().Topic(topic)
	return ok && partition >= 0 && int(partition) < len(t.Partitions)
}

// Attach makes c follow b's leadership of __consumer_offsets partitions:
// c loads a partition when b becomes its leader and drops it when b stops
// leading it. It returns the function that detaches.
func Attach(b *broker.Broker, c *Coordinator) (detach func()) {
	return b.OnPartitionChange(func(pc broker.PartitionChange) {
		if pc.Topic != OffsetsTopic {
			return
		}
		if pc.Leader && !pc.Deleted {
			c.BecomeLeader(pc.Partition, pc.LeaderEpoch)
			return
		}
		c.Resign(pc.Partition, -1)
	})
}

// ForBroker is a coordinator attached to a broker.
type ForBroker struct {
	*Coordinator
	detach func()
}

// NewForBroker builds the group coordinator of b: cfg's offsets.topic.*
// settings must be those b creates __consumer_offsets with (the appliance
// gives both the same values; NumPartitions is taken from b's config).
func NewForBroker(b *broker.Broker, cfg Config, logger *slog.Logger) (*ForBroker, error) {
	if n := b.Config().OffsetsTopicPartitions; n > 0 {
		cfg.NumPartitions = n
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, err := New(Options{Config: cfg, Backend: NewBrokerBackend(b), Logger: logger.With("component", "group")})
	if err != nil {
		return nil, err
	}
	// A __consumer_offsets created with another partition count (an old
	// data directory) still decides where groups live.
	if t, ok := b.Image().Topic(OffsetsTopic); ok && int32(len(t.Partitions)) != cfg.NumPartitions {
		logger.Warn("__consumer_offsets has a different partition count than offsets.topic.num.partitions; groups are placed by the configured count, as Kafka does",
			"partitions", len(t.Partitions), "offsets.topic.num.partitions", cfg.NumPartitions)
	}
	b.OnTxnMarker(func(topic string, partition int32, producerID int64, commit bool) {
		if topic == OffsetsTopic {
			c.TxnMarker(partition, producerID, commit)
		}
	})
	return &ForBroker{Coordinator: c, detach: Attach(b, c)}, nil
}

// Close detaches from the broker and closes the coordinator.
func (f *ForBroker) Close() error {
	f.detach()
	return f.Coordinator.Close()
}

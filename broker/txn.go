package broker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
)

// TransactionStateTopic is the transaction coordinator's topic.
const TransactionStateTopic = "__transaction_state"

// TxnStateTopicSpec says how EnsureTransactionStateTopic creates
// __transaction_state (the transaction.state.log.* keys).
type TxnStateTopicSpec struct {
	Partitions        int32
	ReplicationFactor int16 // capped at the live brokers
	MinISR            int32 // capped at the replication factor
	SegmentBytes      int64
}

// EnsureTransactionStateTopic creates __transaction_state unless it exists
// (compacted, uncompressed, no unclean election, as Kafka forces) and waits
// until ctx ends for its leaders.
func (b *Broker) EnsureTransactionStateTopic(ctx context.Context, s TxnStateTopicSpec) error {
	rf := max(min(int(s.ReplicationFactor), len(b.liveBrokerIDs())), 1)
	return b.ensureInternalTopic(ctx, TopicSpec{
		Name: TransactionStateTopic, Partitions: s.Partitions, ReplicationFactor: int16(rf),
		Configs: map[string]string{
			"cleanup.policy":                 "compact",
			"segment.bytes":                  strconv.FormatInt(s.SegmentBytes, 10),
			"compression.type":               "uncompressed",
			"min.insync.replicas":            strconv.Itoa(max(min(int(s.MinISR), rf), 1)),
			"unclean.leader.election.enable": "false",
		},
	})
}

// ensureInternalTopic creates an internal topic unless it exists and waits
// for its leaders.
func (b *Broker) ensureInternalTopic(ctx context.Context, spec TopicSpec) error {
	if t, ok := b.Image().Topics[spec.Name]; ok {
		return b.waitLeaders(ctx, untilDeadline(ctx), spec.Name, t.ID, len(t.Partitions))
	}
	_, err := b.CreateTopic(ctx, spec, false, untilDeadline(ctx))
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	var t *TopicImage
	if err := b.waitImage(ctx, func(img *Image) bool { t = img.Topics[spec.Name]; return t != nil }); err != nil {
		return errorf(kerr.CoordinatorNotAvailable, "%s is being created", spec.Name)
	}
	return b.waitLeaders(ctx, untilDeadline(ctx), spec.Name, t.ID, len(t.Partitions))
}

// AppendAsCoordinator appends batches as the partition's leader on behalf of
// a coordinator (transactional offset commits, end-transaction markers):
// only producer and coordinator epochs are checked, not sequences. The
// caller waits for the high watermark when it needs acks=all.
func (p *Partition) AppendAsCoordinator(records []byte) (storage.AppendInfo, error) {
	info, err := func() (storage.AppendInfo, error) {
		p.mu.RLock()
		defer p.mu.RUnlock()
		if p.leader != p.b.cfg.BrokerID {
			return storage.AppendInfo{}, errNotLeader
		}
		if int32(len(p.isr)) < p.settings.minISR {
			return storage.AppendInfo{}, errorf(kerr.NotEnoughReplicas,
				"The size of the current ISR %v is insufficient to satisfy the min.isr requirement of %d for partition %s", p.isr, p.settings.minISR, p.tp)
		}
		return p.log.AppendAsLeaderWith(records, p.leaderEpoch, storage.AppendOptions{Origin: storage.OriginCoordinator})
	}()
	if err != nil {
		return info, err
	}
	// As appendRecords: followers' parked fetches wait for the append.
	what := WakeOnAppend
	if p.advanceHighWatermark() {
		what |= WakeOnHighWatermark
	}
	p.notify(what)
	return info, nil
}

// TxnMarkerListener learns of an end-transaction marker written on a
// partition this broker leads (the group coordinator applies or drops the
// transactional offsets of __consumer_offsets partitions).
type TxnMarkerListener func(topic string, partition int32, producerID int64, commit bool)

type txnListeners struct {
	mu sync.Mutex
	fn []TxnMarkerListener
}

// OnTxnMarker registers fn; it is called after each marker is committed,
// on the goroutine that wrote it.
func (b *Broker) OnTxnMarker(fn TxnMarkerListener) {
	b.txnL.mu.Lock()
	b.txnL.fn = append(b.txnL.fn, fn)
	b.txnL.mu.Unlock()
}

// markerWait bounds how long a marker waits for its replication.
const markerWait = 30 * time.Second

// WriteTxnMarkers writes the end-transaction markers of req (Kafka's
// WriteTxnMarkers, sent by a transaction coordinator or by an operator
// aborting a hanging transaction) on the partitions this broker leads: a
// control batch per partition, appended as coordinator and committed
// (acks=all) before its partition answers NONE. Per partition errors are
// Kafka's: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH (an older epoch than the producer's),
// TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch),
// NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT.
func (b *Broker) WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	now := time.Now().UnixMilli()
	var batch []byte
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, part := range t.Partitions {
				batch = record.AppendEndTxnMarker(batch[:0], record.EndTxnMarker{
					ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
					CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed,
				}, now)
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = part
				rp.ErrorCode, _ = ErrorCode(b.writeMarker(ctx, t.Topic, part, batch))
				if rp.ErrorCode == 0 {
					b.txnL.mu.Lock()
					fns := b.txnL.fn
					b.txnL.mu.Unlock()
					for _, fn := range fns {
						fn(t.Topic, part, m.ProducerID, m.Committed)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

func (b *Broker) writeMarker(ctx context.Context, topic string, partition int32, batch []byte) error {
	p, err := b.LeaderPartition(topic, partition)
	if err != nil {
		return err
	}
	info, err := p.AppendAsCoordinator(batch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, markerWait)
	defer cancel()
	if err := p.WaitForHighWatermark(ctx, info.LastOffset+1); err != nil {
		if ctx.Err() != nil {
			return kerr.RequestTimedOut
		}
		return err
	}
	return nil
}

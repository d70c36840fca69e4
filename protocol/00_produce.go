package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/storage"
)

// Produce: v0-9
//
// Behaviour:
//   - v0-v2 carry message sets (magic 0 and 1); they are converted to
//     record batch v2 (storage.ConvertMessageSet, as Kafka 3.x does) before
//     the append. librdkafka only compresses when v0 is advertised.
//   - v3+ must carry record batch v2 (else INVALID_RECORD). Storage validates
//     each batch (length, CRC-32C, record count, max.message.bytes), checks
//     idempotent sequences per producer id and epoch, assigns offsets in
//     place and appends; a retried duplicate of one of a producer's recent
//     batches answers with the original offsets and no error.
//   - acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=-1 needs
//     min.insync.replicas members in the ISR (NOT_ENOUGH_REPLICAS); when
//     the high watermark has not passed the batch yet it then parks (in the
//     purgatory, without holding up the connection) until it does or
//     timeout_ms ends (REQUEST_TIMED_OUT), else it answers at once. acks=0 gets
//     no response; if any partition failed the connection is closed, which
//     is how Kafka tells such a producer.
//   - Internal topics (__consumer_offsets) are refused
//     (INVALID_TOPIC_EXCEPTION), as Kafka refuses client appends to them
//     even without ACLs: only the group coordinator writes them. The
//     console's topics (__sluice_console*) are refused the same way unless
//     the connection comes from a broker's host (s.fromBrokerHost), where
//     the console runs.
//   - Transactional batches are refused (INVALID_TXN_STATE): transactions
//     are not implemented, and no transactional producer id is ever issued.
//   - Partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//     INVALID_TOPIC_EXCEPTION, CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
//     OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
//     UNKNOWN_PRODUCER_ID, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT.
//
// Version notes:
//   - v1: ThrottleMillis. v2: LogAppendTime (-1 unless the topic uses
//     LogAppendTime). v3: record batch v2, TransactionalID. v5:
//     LogStartOffset. v7: zstd allowed. v8: ErrorMessage, RecordErrors.
//   - v9: flexible.

func init() { register(0, 0, 9, handleProduce) }

func handleProduce(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b := s.cfg.Broker

	type waitFor struct {
		p      *broker.Partition
		offset int64
		rp     *kmsg.ProduceResponseTopicPartition
	}
	var (
		waits  []waitFor
		failed bool
	)
	setErr := func(rp *kmsg.ProduceResponseTopicPartition, err error) {
		code, msg := broker.ErrorCode(err)
		rp.ErrorCode = code
		if req.Version >= 8 && msg != "" {
			rp.ErrorMessage = &msg
		}
		rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
		failed = true
	}

	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, pr := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = pr.Partition
			if req.Acks != -1 && req.Acks != 0 && req.Acks != 1 {
				setErr(sp, &broker.Error{Code: kerr.InvalidRequiredAcks, Msg: "acks must be -1, 0 or 1"})
				continue
			}
			if err := broker.CheckClientAppend(rt.Topic, func() bool { return s.fromBrokerHost(ctx, r) }); err != nil {
				setErr(sp, err)
				continue
			}
			p, err := b.LeaderPartition(rt.Topic, pr.Partition)
			if err != nil {
				setErr(sp, err)
				continue
			}
			records, err := produceRecords(req.Version, pr.Records)
			if err != nil {
				setErr(sp, err)
				continue
			}
			info, err := p.AppendRecords(records, req.Acks)
			if err != nil {
				setErr(sp, err)
				continue
			}
			sp.BaseOffset = info.FirstOffset
			sp.LogAppendTime = info.LogAppendTime
			sp.LogStartOffset = info.LogStartOffset
			if req.Acks == -1 {
				waits = append(waits, waitFor{p: p, offset: info.LastOffset + 1, rp: sp})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}

	if req.Acks == 0 {
		if failed {
			return nil, errCloseConnection
		}
		return nil, nil
	}
	if len(waits) == 0 {
		return resp, nil
	}
	// acks=all: wait for the high watermark. It has usually passed the
	// batch already (a single node, whose ISR is just this broker, or
	// followers that are caught up): then answer now, on this goroutine.
	// Only a request that must wait is detached (a new goroutine carries
	// on reading the connection) and counted in the purgatory.
	mustWait := false
	for _, w := range waits {
		if w.p.HighWatermark() < w.offset {
			mustWait = true
			break
		}
	}
	if !mustWait {
		for _, w := range waits {
			// Passed, but the ISR may have shrunk below
			// min.insync.replicas since the append.
			if err := w.p.WaitForHighWatermark(ctx, w.offset); err != nil {
				setErr(w.rp, err)
			}
		}
		return resp, nil
	}
	r.Detach()
	b.EnterPurgatory(broker.DelayedProduce)
	defer b.LeavePurgatory(broker.DelayedProduce)
	wctx, cancel := context.WithTimeout(ctx, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, w := range waits {
		if err := w.p.WaitForHighWatermark(wctx, w.offset); err != nil {
			setErr(w.rp, err)
		}
	}
	return resp, nil
}

// produceRecords checks a partition's records for the request version and
// converts v0/v1 message sets to record batch v2.
func produceRecords(version int16, records []byte) ([]byte, error) {
	if len(records) == 0 {
		return nil, &broker.Error{Code: kerr.CorruptMessage, Msg: "no records"}
	}
	if version < 3 {
		if storage.IsMessageSetV2(records) {
			return nil, &broker.Error{Code: kerr.InvalidRecord, Msg: "produce v0-v2 must carry message format v0 or v1"}
		}
		out, err := storage.ConvertMessageSet(records)
		if err != nil {
			return nil, &broker.Error{Code: kerr.CorruptMessage, Msg: err.Error()}
		}
		return out, nil
	}
	if !storage.IsMessageSetV2(records) {
		return nil, &broker.Error{Code: kerr.InvalidRecord, Msg: "produce v3+ must carry record batch v2"}
	}
	if len(records) >= storage.BatchHeaderSize {
		h, err := storage.ParseBatchHeader(records)
		if err == nil && h.Transactional() {
			return nil, &broker.Error{Code: kerr.InvalidTxnState, Msg: "transactions are not supported"}
		}
	}
	return records, nil
}

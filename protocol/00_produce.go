package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/quota"
	"github.com/sluice-io/sluice/security"
)

// Produce: v0-9
//
// Behaviour (broker.Produce's: this handler decodes, calls it, encodes):
//   - v0-v2 carry message sets (magic 0 and 1); they are converted to
//     record batch v2 (record.ConvertMessageSet, as Kafka 3.x does) before
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
//   - Authorization: Write on each topic (else TOPIC_AUTHORIZATION_FAILED
//     on its partitions, nothing appended); a request with a
//     transactional id needs Write on it (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition).
//   - Transactional batches open or continue their producer's transaction
//     on the partition (broker.Produce); the coordinator's markers end it.
//   - The request's partitions are appended in order, each on its own: one
//     partition's error fails that partition only.
//   - Quotas: the request's size counts against the client's
//     producer_byte_rate; over it, throttle_time_ms says for how long the
//     connection is muted (quotas.go).
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
	// The broker's request lives on this goroutine's stack, and so does
	// its partition list for a request of one partition (the common case).
	var one [1]broker.ProducePartition
	pr := broker.ProduceRequest{
		Acks:        req.Acks,
		Timeout:     time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond,
		MessageSets: req.Version < 3,
		Partitions:  one[:0],
	}
	// A transactional producer needs Write on its transactional id, else
	// the whole request fails; every producer needs Write on each topic.
	txnDenied := req.TransactionID != nil && !s.allowed(r, security.OpWrite, security.ResourceTransactionalID, *req.TransactionID)
	for _, rt := range req.Topics {
		if !pr.ConsoleWriter && broker.IsConsoleTopic(rt.Topic) {
			pr.ConsoleWriter = s.fromBrokerHost(ctx, r)
		}
		var refused error
		switch {
		case txnDenied:
			refused = errTxnIDAuthorization
		case !s.allowedTopic(r, security.OpWrite, rt.Topic):
			refused = errTopicAuthorization
		}
		for _, rp := range rt.Partitions {
			pr.Partitions = append(pr.Partitions, broker.ProducePartition{Topic: rt.Topic, Partition: rp.Partition, Records: rp.Records, Refused: refused})
		}
	}
	if q := s.cfg.Quotas; q != nil && q.Enabled(quota.Produce) {
		s.recordBandwidth(r, quota.Produce, int64(r.size))
	}
	s.cfg.Broker.Produce(ctx, &pr, r)

	if req.Acks == 0 {
		for i := range pr.Partitions {
			if pr.Partitions[i].Err != nil {
				return nil, errCloseConnection
			}
		}
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	i := 0
	for t, rt := range req.Topics {
		st := &resp.Topics[t]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			pp := &pr.Partitions[i]
			i++
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = pp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = pp.BaseOffset, pp.LogAppendTime, pp.LogStartOffset
			if pp.Err != nil {
				code, msg := broker.ErrorCode(pp.Err)
				sp.ErrorCode = code
				if req.Version >= 8 && msg != "" {
					sp.ErrorMessage = &msg
				}
			}
		}
	}
	return resp, nil
}

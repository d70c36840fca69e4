package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// TxnCoordinator is what the transaction handlers (10 FindCoordinator key
// type 1, 22 InitProducerId with a transactional id, 24
// AddPartitionsToTxn, 25 AddOffsetsToTxn, 26 EndTxn, 65
// DescribeTransactions, 66 ListTransactions) call; *txn.Coordinator
// implements it. Nil: those requests answer COORDINATOR_NOT_AVAILABLE.
//
// Authorisation (with an authorizer, as Kafka's KafkaApis): Write on the
// transactional id for InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn and TxnOffsetCommit (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
// Write on each topic added (TOPIC_AUTHORIZATION_FAILED, the others
// OPERATION_NOT_ATTEMPTED); Read on the group for AddOffsetsToTxn and
// TxnOffsetCommit and on each committed topic; ClusterAction for the
// brokers' batched AddPartitionsToTxn (v4+) and for WriteTxnMarkers;
// Describe on the transactional id for DescribeTransactions and
// ListTransactions; Read on the topic for DescribeProducers.
type TxnCoordinator interface {
	FindCoordinator(ctx context.Context, listener string, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse
	InitProducerID(ctx context.Context, id string, timeoutMs int32, producerID int64, epoch int16) (int64, int16, int16)
	AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []TxnPartition) map[TxnPartition]int16
	VerifyPartitions(id string, producerID int64, epoch int16, parts []TxnPartition) map[TxnPartition]int16
	AddOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string) int16
	EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool) int16
	DescribeTransactions(req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse
	ListTransactions(req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse
}

// TxnPartition is a partition of a transaction (txn.TopicPartition: the
// same type).
type TxnPartition = struct {
	Topic     string
	Partition int32
}

// TxnOffsetCommitter is the group coordinator's TxnOffsetCommit (28).
type TxnOffsetCommitter interface {
	TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error)
}

// SetTxn sets the transaction coordinator of a bound server before it
// serves.
func (b *Bound) SetTxn(t TxnCoordinator) { b.s.cfg.Txn = t }

// fencedCode answers PRODUCER_FENCED as INVALID_PRODUCER_EPOCH to the
// versions that predate it (InitProducerId <4, EndTxn <2,
// AddPartitionsToTxn <2, AddOffsetsToTxn <2), as Kafka does.
func fencedCode(key, version, code int16) int16 {
	if code != kerr.ProducerFenced.Code {
		return code
	}
	limit := int16(2)
	if key == 22 {
		limit = 4
	}
	if version < limit {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// AddPartitionsToTxn: v0-5
//
// Behaviour:
//   - v0-3 (clients): the partitions join the transactional id's
//     transaction (Ongoing); a partition that does not exist fails with
//     UNKNOWN_TOPIC_OR_PARTITION and the others get OPERATION_NOT_ATTEMPTED.
//     Coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH below v2)) go on every partition.
//   - v4+ (brokers, KIP-890): each transaction is added the same way;
//     VerifyOnly transactions are answered from the coordinator's state.
//
// Version notes:
//   - v3: flexible. v4: batched transactions, top-level error code.
func init() { register(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	add := func(id string, pid int64, epoch int16, topics []kmsg.AddPartitionsToTxnRequestTopic) []kmsg.AddPartitionsToTxnResponseTopic {
		var parts []TxnPartition
		for _, t := range topics {
			for _, p := range t.Partitions {
				parts = append(parts, TxnPartition{Topic: t.Topic, Partition: p})
			}
		}
		var codes map[TxnPartition]int16
		if s.cfg.Txn != nil {
			codes = s.cfg.Txn.AddPartitions(ctx, id, pid, epoch, parts)
		}
		var out []kmsg.AddPartitionsToTxnResponseTopic
		for _, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
				if codes != nil {
					rp.ErrorCode = fencedCode(24, req.Version, codes[TxnPartition{Topic: t.Topic, Partition: p}])
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			out = append(out, rt)
		}
		return out
	}
	if req.Version < 4 {
		if refused := refusedTxnTopics(s, r, req.TransactionalID, req.Topics); refused != nil {
			resp.Topics = refused
			return resp, nil
		}
		resp.Topics = add(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topics)
		return resp, nil
	}
	if !s.allowedCluster(r, security.OpClusterAction) {
		// v4+ is the brokers' (KIP-890): ClusterAction, top-level error.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, t := range req.Transactions {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		var parts []TxnPartition
		for _, tt := range t.Topics {
			for _, p := range tt.Partitions {
				parts = append(parts, TxnPartition{Topic: tt.Topic, Partition: p})
			}
		}
		var codes map[TxnPartition]int16
		switch {
		case s.cfg.Txn == nil:
		case t.VerifyOnly:
			codes = s.cfg.Txn.VerifyPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
		default:
			codes = s.cfg.Txn.AddPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
		}
		for _, tt := range t.Topics {
			rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rtt.Topic = tt.Topic
			for _, p := range tt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.CoordinatorNotAvailable.Code
				if codes != nil {
					rp.ErrorCode = codes[TxnPartition{Topic: tt.Topic, Partition: p}]
				}
				rtt.Partitions = append(rtt.Partitions, rp)
			}
			rt.Topics = append(rt.Topics, rtt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp, nil
}

// AddOffsetsToTxn: v0-4
//
// Behaviour:
//   - Adds the group's __consumer_offsets partition to the transaction, so
//     that TxnOffsetCommit may follow and the transaction's marker reaches
//     the group coordinator. Errors as AddPartitionsToTxn's.
//
// Version notes:
//   - v3: flexible.
func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	switch {
	case !s.allowed(r, security.OpWrite, security.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.allowedGroup(r, security.OpRead, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case s.cfg.Txn != nil:
		resp.ErrorCode = fencedCode(25, req.Version, s.cfg.Txn.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group))
	}
	return resp, nil
}

// EndTxn: v0-4
//
// Behaviour:
//   - Commits or aborts the transaction: answered once PrepareCommit or
//     PrepareAbort is stored; the markers follow in the background. A
//     retry answers NONE once complete, CONCURRENT_TRANSACTIONS while the
//     markers are written; the other outcome is INVALID_TXN_STATE.
//
// Version notes:
//   - v2: PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before). v3: flexible.
func init() { register(26, 0, 4, handleEndTxn) }

func handleEndTxn(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	switch {
	case !s.allowed(r, security.OpWrite, security.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case s.cfg.Txn != nil:
		resp.ErrorCode = fencedCode(26, req.Version, s.cfg.Txn.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit))
	}
	return resp, nil
}

// WriteTxnMarkers: v0-1
//
// Behaviour:
//   - Sent by a transaction coordinator (or an operator aborting a hanging
//     transaction, as kafka-transactions.sh abort does) to a partition
//     leader: each partition gets a COMMIT or ABORT control batch,
//     answered once committed. Per partition: NOT_LEADER_OR_FOLLOWER,
//     UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
//     TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS,
//     REQUEST_TIMED_OUT.
//   - Authorisation seam: ClusterAction (brokers) once principals exist;
//     operators' aborts must stay possible.
//
// Version notes:
//   - v1: flexible.
func init() { register(27, 0, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.WriteTxnMarkersRequest)
	if !s.allowedCluster(r, security.OpClusterAction) {
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	}
	return s.cfg.Broker.WriteTxnMarkers(ctx, req), nil
}

// TxnOffsetCommit: v0-4
//
// Behaviour:
//   - The group coordinator stores the offsets as a transactional batch of
//     the producer in the group's __consumer_offsets partition; they stay
//     pending (OffsetFetch with require_stable answers
//     UNSTABLE_OFFSET_COMMIT) until the transaction's marker commits or
//     drops them. v3+ carry the member (KIP-447): UNKNOWN_MEMBER_ID,
//     FENCED_INSTANCE_ID, ILLEGAL_GENERATION.
//
// Version notes:
//   - v2: leader epoch. v3: flexible, generation, member and instance id.
func init() { register(28, 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	tc, ok := s.cfg.Groups.(TxnOffsetCommitter)
	if !ok || s.cfg.Groups == nil {
		return txnOffsetCommitError(req, kerr.CoordinatorNotAvailable.Code), nil
	}
	if !s.allowed(r, security.OpWrite, security.ResourceTransactionalID, req.TransactionalID) {
		return txnOffsetCommitError(req, kerr.TransactionalIDAuthorizationFailed.Code), nil
	}
	if !s.allowedGroup(r, security.OpRead, req.Group) {
		return txnOffsetCommitError(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	// Topics the principal may not read fail alone; the rest are committed.
	var refused []kmsg.TxnOffsetCommitRequestTopic
	kept := req.Topics[:0:0]
	for _, t := range req.Topics {
		if s.allowedTopic(r, security.OpRead, t.Topic) {
			kept = append(kept, t)
		} else {
			refused = append(refused, t)
		}
	}
	if refused != nil {
		req.Topics = kept
	}
	resp, err := tc.TxnOffsetCommit(ctx, req)
	if err == nil && refused != nil {
		denied := txnOffsetCommitError(&kmsg.TxnOffsetCommitRequest{Topics: refused}, kerr.TopicAuthorizationFailed.Code)
		resp.Topics = append(resp.Topics, denied.Topics...)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return txnOffsetCommitError(req, kerr.CoordinatorNotAvailable.Code), nil
	}
	return resp, nil
}

func txnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// DescribeProducers: v0
//
// Behaviour:
//   - For each partition this broker leads, the producers in its producer
//     state (id, epoch, last sequence and timestamp, coordinator epoch,
//     the first offset of the open transaction or -1), as
//     kafka-transactions.sh find-hanging reads them.
//     NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION otherwise.
func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, pi := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = pi
			if !s.allowedTopic(r, security.OpRead, t.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			p, err := s.cfg.Broker.LeaderPartition(t.Topic, pi)
			if err != nil {
				rp.ErrorCode, _ = broker.ErrorCode(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, e := range p.Log().Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = e.ProducerID, int32(e.Epoch), e.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = e.LastTimestamp, e.CoordinatorEpoch, e.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// DescribeTransactions: v0
//
// Behaviour:
//   - The state of each transactional id this broker coordinates (state,
//     producer, timeout, start, partitions); TRANSACTIONAL_ID_NOT_FOUND,
//     NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS otherwise.
func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeTransactionsRequest)
	var refused []string
	kept := req.TransactionalIDs[:0:0]
	for _, id := range req.TransactionalIDs {
		if s.allowed(r, security.OpDescribe, security.ResourceTransactionalID, id) {
			kept = append(kept, id)
		} else {
			refused = append(refused, id)
		}
	}
	if refused != nil {
		req.TransactionalIDs = kept
	}
	var resp *kmsg.DescribeTransactionsResponse
	if s.cfg.Txn == nil {
		resp = req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			rt := kmsg.NewDescribeTransactionsResponseTransactionState()
			rt.TransactionalID, rt.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			resp.TransactionStates = append(resp.TransactionStates, rt)
		}
	} else {
		resp = s.cfg.Txn.DescribeTransactions(req)
	}
	for _, id := range refused {
		rt := kmsg.NewDescribeTransactionsResponseTransactionState()
		rt.TransactionalID, rt.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
		resp.TransactionStates = append(resp.TransactionStates, rt)
	}
	return resp, nil
}

// ListTransactions: v0-1
//
// Behaviour:
//   - The transactional ids this broker coordinates, filtered by state
//     and producer id, and (v1) by how long they have been running;
//     clients ask every broker.
func init() { register(66, 0, 1, handleListTransactions) }

func handleListTransactions(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ListTransactionsRequest)
	if s.cfg.Txn == nil {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp := s.cfg.Txn.ListTransactions(req)
	// Only the ids the principal may describe are listed.
	kept := resp.TransactionStates[:0]
	for _, st := range resp.TransactionStates {
		if s.permitted(r, security.OpDescribe, security.ResourceTransactionalID, st.TransactionalID) {
			kept = append(kept, st)
		}
	}
	resp.TransactionStates = kept
	return resp, nil
}

// refusedTxnTopics is AddPartitionsToTxn's (v0-3) answer when the principal
// may not write the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or some topic (those
// TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED), as Kafka;
// nil when everything is allowed.
func refusedTxnTopics(s *Server, r *Request, id string, topics []kmsg.AddPartitionsToTxnRequestTopic) []kmsg.AddPartitionsToTxnResponseTopic {
	idOK := s.allowed(r, security.OpWrite, security.ResourceTransactionalID, id)
	var denied map[string]bool
	for _, t := range topics {
		if idOK && !s.allowedTopic(r, security.OpWrite, t.Topic) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[t.Topic] = true
		}
	}
	if idOK && len(denied) == 0 {
		return nil
	}
	var out []kmsg.AddPartitionsToTxnResponseTopic
	for _, t := range topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code := kerr.OperationNotAttempted.Code
		switch {
		case !idOK:
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case denied[t.Topic]:
			code = kerr.TopicAuthorizationFailed.Code
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

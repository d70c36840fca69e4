package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// InitProducerId: v0-5
//
// Behaviour:
//   - For an idempotent producer (no transactional id) it returns a new
//     producer id at epoch 0, every time, as Kafka does: ids come from blocks
//     reserved in the coordinator, so they never repeat across restarts. A
//     v3+ request naming its current id and epoch (after an
//     OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID) also gets a fresh
//     id. Sequence checks per partition are storage's, and its producer
//     state survives restarts.
//   - With a transactional id the transaction coordinator answers: a new id
//     gets a producer id at epoch 0, a known one its epoch bumped (fencing
//     the previous producer) once its open transaction is aborted
//     (CONCURRENT_TRANSACTIONS until then); an empty id is INVALID_REQUEST,
//     a timeout above transaction.max.timeout.ms INVALID_TRANSACTION_TIMEOUT;
//     a stale (producer id, epoch) PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
//     below v4).
//
// Version notes:
//   - v2: flexible. v3: ProducerID/ProducerEpoch in the request (KIP-360).
//   - v4: PRODUCER_FENCED. v5: same shape (KIP-890's clients).

func init() { register(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if !s.allowed(r, security.OpWrite, security.ResourceTransactionalID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
		if s.cfg.Txn == nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp, nil
		}
		pid, epoch, expEpoch := int64(-1), int16(-1), int16(-1)
		if req.Version >= 3 {
			pid, expEpoch = req.ProducerID, req.ProducerEpoch
		}
		var code int16
		resp.ProducerID, epoch, code = s.cfg.Txn.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, pid, expEpoch)
		resp.ProducerEpoch, resp.ErrorCode = epoch, fencedCode(22, req.Version, code)
		return resp, nil
	}
	if !s.permittedCluster(r, security.OpIdempotentWrite) && !s.allowedWriteOnSomeTopic(r) {
		// Kafka (KIP-679): IdempotentWrite on the cluster, or Write on
		// some topic.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, err := s.cfg.Broker.AllocateProducerID(ctx)
	if err != nil {
		s.log.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

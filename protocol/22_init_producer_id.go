package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// InitProducerId: v0-4
//
// Behaviour:
//   - For an idempotent producer (no transactional id) it returns a new
//     producer id at epoch 0, every time, as Kafka does: ids come from blocks
//     reserved in the coordinator, so they never repeat across restarts. A
//     v3+ request naming its current id and epoch (after an
//     OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID) also gets a fresh
//     id. Sequence checks per partition are storage's, and its producer
//     state survives restarts.
//   - A transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     (transactions are not implemented; the transaction APIs are not
//     advertised).
//
// Version notes:
//   - v2: flexible. v3: ProducerID/ProducerEpoch in the request (KIP-360).

func init() { register(22, 0, 4, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil && *req.TransactionalID != "" {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if !s.allowedCluster(r, security.OpIdempotentWrite) && !s.allowedWriteOnSomeTopic(r) {
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

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4
//
// Behaviour:
//   - A group's coordinator is the leader of its __consumer_offsets
//     partition, abs(javaStringHashCode(group)) % offsets.topic.num.partitions;
//     the answer is that broker's address on the listener the request came in
//     on.
//   - The first lookup creates __consumer_offsets (compacted) and waits
//     briefly for its leaders; COORDINATOR_NOT_AVAILABLE while there is none.
//   - Key type 1: a transactional id's coordinator, the leader of its
//     __transaction_state partition (the transaction coordinator creates
//     the topic on first use). Other key types are INVALID_REQUEST.
//
// Version notes:
//   - v1: key type, error message, throttle. v3: flexible.
//   - v4: a batch of keys, one answer per key.

func init() { register(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	if req.CoordinatorType == 1 {
		if s.cfg.Txn == nil {
			return groupErrorResponse(req, kerr.CoordinatorNotAvailable.Code), nil
		}
		return s.cfg.Txn.FindCoordinator(ctx, r.Listener, req), nil
	}
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.FindCoordinatorResponse, error) {
		return g.FindCoordinator(ctx, r.Listener, req)
	})
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
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
//   - Key type 1 (transactions) is INVALID_REQUEST: Sluice has no
//     transaction coordinator.
//
// Version notes:
//   - v1: key type, error message, throttle. v3: flexible.
//   - v4: a batch of keys, one answer per key.

func init() { register(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	// Kafka: Describe on the group (GROUP_AUTHORIZATION_FAILED) or on the
	// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key.
	rt, code := security.ResourceGroup, kerr.GroupAuthorizationFailed.Code
	if req.CoordinatorType == 1 {
		rt, code = security.ResourceTransactionalID, kerr.TransactionalIDAuthorizationFailed.Code
	}
	if req.Version < 4 {
		if !s.allowed(r, security.OpDescribe, rt, req.CoordinatorKey) {
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
			return resp, nil
		}
	}
	var denied []kmsg.FindCoordinatorResponseCoordinator
	if req.Version >= 4 {
		kept := req.CoordinatorKeys[:0:0]
		for _, k := range req.CoordinatorKeys {
			if s.allowed(r, security.OpDescribe, rt, k) {
				kept = append(kept, k)
				continue
			}
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, code
			denied = append(denied, c)
		}
		if denied != nil {
			req.CoordinatorKeys = kept
		}
	}
	resp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.FindCoordinatorResponse, error) {
		return g.FindCoordinator(ctx, r.Listener, req)
	})
	if fc, ok := resp.(*kmsg.FindCoordinatorResponse); ok && denied != nil {
		fc.Coordinators = append(fc.Coordinators, denied...)
	}
	return resp, err
}

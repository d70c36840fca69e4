package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// Heartbeat: v0-4
//
// Behaviour:
//   - Keeps a member's session alive. REBALANCE_IN_PROGRESS while the group
//     prepares a rebalance (the member must rejoin), ILLEGAL_GENERATION for
//     another generation, UNKNOWN_MEMBER_ID for a member the group does not
//     know (expired, left, or an Empty group), FENCED_INSTANCE_ID for an old
//     incarnation of a static member.
//
// Version notes:
//   - v1: throttle. v3: group.instance.id. v4: flexible.

func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.HeartbeatRequest)
	if s.groupDenied(r, security.OpRead, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.HeartbeatResponse, error) {
		return g.Heartbeat(ctx, req)
	})
}

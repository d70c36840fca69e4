package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// LeaveGroup: v0-4
//
// Behaviour:
//   - Removes the member at once (a Stable group rebalances without waiting
//     for its session to expire).
//
// Version notes:
//   - v0-2: one member id; its error is the top-level error code.
//   - v1: throttle.
//   - v3: a batch of members, by member id or group.instance.id, each with
//     its own error code (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
//   - v4: flexible.

func init() { register(13, 0, 4, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.LeaveGroupRequest)
	if s.groupDenied(r, security.OpRead, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.LeaveGroupResponse, error) {
		return g.LeaveGroup(ctx, req)
	})
}

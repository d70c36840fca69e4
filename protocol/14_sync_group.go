package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// SyncGroup: v0-5
//
// Behaviour:
//   - After a JoinGroup round, the leader sends every member's assignment;
//     it is stored with the group metadata in __consumer_offsets and then
//     handed to each member, and the group is Stable. A follower's request
//     waits for the leader's. In a Stable group a member gets its current
//     assignment back.
//   - REBALANCE_IN_PROGRESS while the group prepares a rebalance,
//     ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID as for
//     Heartbeat.
//
// Version notes:
//   - v1: throttle. v3: group.instance.id. v4: flexible.
//   - v5: protocol type and name, checked against the group's
//     (INCONSISTENT_GROUP_PROTOCOL) and returned.

func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.SyncGroupRequest)
	if s.groupDenied(r, security.OpRead, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.SyncGroupResponse, error) {
		return g.SyncGroup(ctx, req)
	})
}

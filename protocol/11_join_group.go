package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// JoinGroup: v0-7
//
// Behaviour (Kafka's classic group protocol):
//   - The request waits while the group rebalances: until every member has
//     rejoined or the rebalance timeout (the largest of the members') passed;
//     an Empty group's first rebalance waits group.initial.rebalance.delay.ms.
//   - The answer carries the generation, the protocol chosen from those all
//     members support (each member votes for its first choice), and the
//     leader; the leader also gets every member's metadata.
//   - INVALID_SESSION_TIMEOUT outside [group.min.session.timeout.ms,
//     group.max.session.timeout.ms]; INCONSISTENT_GROUP_PROTOCOL for another
//     protocol type or no protocol in common; UNKNOWN_MEMBER_ID for a member
//     id the group does not know.
//
// Version notes:
//   - v0: no rebalance timeout (the session timeout is used).
//   - v1: rebalance timeout. v2: throttle.
//   - v4: a new dynamic member first gets MEMBER_ID_REQUIRED with its id.
//   - v5: group.instance.id (static membership: a member that restarts with
//     the same instance id takes its old place without a rebalance; the old
//     member id is FENCED_INSTANCE_ID).
//   - v6: flexible. v7: protocol type in the response, nullable protocol name.

func init() { register(11, 0, 7, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.JoinGroupRequest)
	if s.groupDenied(r, security.OpRead, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.JoinGroupResponse, error) {
		return g.JoinGroup(ctx, r.ClientID, clientHost(r.Remote), req)
	})
}

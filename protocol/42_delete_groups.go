package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// DeleteGroups: v0-2
//
// Behaviour:
//   - Deletes an Empty group: tombstones for its committed offsets and its
//     metadata in __consumer_offsets. NON_EMPTY_GROUP while it has members,
//     GROUP_ID_NOT_FOUND for a group the coordinator does not know.
//
// Version notes:
//   - v1: throttle. v2: flexible.

func init() { register(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DeleteGroupsRequest)
	// Kafka: Delete on each group (GROUP_AUTHORIZATION_FAILED).
	var denied []kmsg.DeleteGroupsResponseGroup
	kept := req.Groups[:0:0]
	for _, g := range req.Groups {
		if !s.groupDenied(r, security.OpDelete, g) {
			kept = append(kept, g)
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		denied = append(denied, rg)
	}
	if denied != nil {
		req.Groups = kept
	}
	resp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.DeleteGroupsResponse, error) {
		return g.DeleteGroups(ctx, req)
	})
	if dg, ok := resp.(*kmsg.DeleteGroupsResponse); ok && denied != nil {
		dg.Groups = append(dg.Groups, denied...)
	}
	return resp, err
}

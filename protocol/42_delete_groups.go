package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
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
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.DeleteGroupsResponse, error) {
		return g.DeleteGroups(ctx, req)
	})
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-4
//
// Behaviour:
//   - The groups this broker coordinates (clients ask every broker),
//     sorted by name; COORDINATOR_LOAD_IN_PROGRESS while one of its
//     __consumer_offsets partitions is still loading.
//
// Version notes:
//   - v1: throttle. v3: flexible.
//   - v4: states filter (case-insensitive) and each group's state.

func init() { register(16, 0, 4, handleListGroups) }

func handleListGroups(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ListGroupsRequest)
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.ListGroupsResponse, error) {
		return g.ListGroups(ctx, req)
	})
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
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
	resp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.ListGroupsResponse, error) {
		return g.ListGroups(ctx, req)
	})
	// Kafka: every group for a principal with Describe on the cluster,
	// else only the groups it may describe (no error).
	if lg, ok := resp.(*kmsg.ListGroupsResponse); ok && !s.permittedCluster(r, security.OpDescribe) {
		kept := lg.Groups[:0]
		for _, g := range lg.Groups {
			if s.permitted(r, security.OpDescribe, security.ResourceGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		lg.Groups = kept
	}
	return resp, err
}

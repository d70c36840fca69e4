package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-5
//
// Behaviour:
//   - State, protocol type, protocol and members (member id, instance id,
//     client id, client host); like Kafka, the members' metadata and
//     assignments and the protocol are given only for a Stable group.
//   - A group the coordinator does not know is "Dead" with no error.
//
// Version notes:
//   - v1: throttle. v3: authorized operations (when asked: READ, DELETE and
//     DESCRIBE, as Sluice has no ACLs). v4: group.instance.id. v5: flexible.

func init() { register(15, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.DescribeGroupsResponse, error) {
		return g.DescribeGroups(ctx, req)
	})
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-5
//
// Behaviour:
//   - State, protocol type, protocol and members (member id, instance id,
//     client id, client host); like Kafka, the members' metadata and
//     assignments and the protocol are given only for a Stable group.
//   - A group the coordinator does not know is "Dead" with no error.
//   - A group named again in the same request: INVALID_REQUEST for the
//     repeats (each group is described once per request).
//
// Version notes:
//   - v1: throttle. v3: authorized operations (when asked: READ, DELETE and
//     DESCRIBE, as Sluice has no ACLs). v4: group.instance.id. v5: flexible.

func init() { register(15, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	dup := repeats(len(req.Groups), func(i int) string { return req.Groups[i] })
	if dup == nil {
		return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.DescribeGroupsResponse, error) {
			return g.DescribeGroups(ctx, req)
		})
	}
	// Each group described once; its repeats answer INVALID_REQUEST.
	all := req.Groups
	unique := make([]string, 0, len(all))
	for i, name := range all {
		if !dup[i] {
			unique = append(unique, name)
		}
	}
	req.Groups = unique
	kresp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.DescribeGroupsResponse, error) {
		return g.DescribeGroups(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeGroupsResponse)
	described := resp.Groups
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, 0, len(all))
	next := 0
	for i, name := range all {
		if !dup[i] && next < len(described) {
			resp.Groups = append(resp.Groups, described[next])
			next++
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = name, kerr.InvalidRequest.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

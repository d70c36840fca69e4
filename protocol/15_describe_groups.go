package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
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
	// Kafka: Describe on each group (GROUP_AUTHORIZATION_FAILED); the
	// groups' authorized operations are the principal's.
	var denied []kmsg.DescribeGroupsResponseGroup
	kept := req.Groups[:0:0]
	for _, g := range req.Groups {
		if !s.groupDenied(r, security.OpDescribe, g) {
			kept = append(kept, g)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		denied = append(denied, rg)
	}
	if denied != nil {
		req.Groups = kept
	}
	resp, err := describeGroups(ctx, s, req)
	if dg, ok := resp.(*kmsg.DescribeGroupsResponse); ok {
		if req.IncludeAuthorizedOperations && s.cfg.Broker.Authorizer() != nil {
			for i := range dg.Groups {
				if g := &dg.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = s.authorizedOps(r, security.ResourceGroup, g.Group)
				}
			}
		}
		dg.Groups = append(dg.Groups, denied...)
	}
	return resp, err
}

func describeGroups(ctx context.Context, s *Server, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
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

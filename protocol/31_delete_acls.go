package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// DeleteAcls: v0-3
//
// Behaviour (Kafka's AclApis.handleDeleteAcls, AclAuthorizer.deleteAcls):
//   - Needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED on
//     every filter); without an authorizer, SECURITY_DISABLED.
//   - Each filter selects as in DescribeAcls (an Unknown element:
//     INVALID_REQUEST for that filter, which deletes nothing); every
//     binding some filter selects is removed and answered under the first
//     filter that selected it, with its resource's write error if the
//     store refused. This broker's cache is reloaded before the answer.
//
// Version notes:
//   - v1: resource pattern type (v0: literal). v2: flexible. v3: the User
//     resource type.

func init() { register(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	setErr := func(code int16, msg string, ec *int16, em **string) {
		*ec = code
		if msg != "" {
			*em = &msg
		}
	}
	failAll := func(err error) (kmsg.Response, error) {
		code, msg := broker.ErrorCode(err)
		for i := range resp.Results {
			setErr(code, msg, &resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage)
		}
		return resp, nil
	}
	if s.cfg.Broker.Authorizer() != nil && !s.allowedCluster(r, security.OpAlter) {
		return failAll(errClusterAuthorization)
	}
	filters := make([]security.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = aclFilter(req.Version, f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
	}
	r.Detach()
	deleted, filterErrs, err := s.cfg.Broker.DeleteACLs(ctx, filters)
	if err != nil {
		return failAll(err)
	}
	for i := range resp.Results {
		res := &resp.Results[i]
		if err := filterErrs[i]; err != nil {
			code, msg := broker.ErrorCode(err)
			setErr(code, msg, &res.ErrorCode, &res.ErrorMessage)
			continue
		}
		for _, d := range deleted[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(d.ACL.Resource.Type), d.ACL.Resource.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(d.ACL.Resource.Pattern)
			m.Principal, m.Host = d.ACL.Entry.Principal, d.ACL.Entry.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(d.ACL.Entry.Operation), kmsg.ACLPermissionType(d.ACL.Entry.Permission)
			if d.Err != nil {
				code, msg := broker.ErrorCode(d.Err)
				setErr(code, msg, &m.ErrorCode, &m.ErrorMessage)
			}
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
	}
	return resp, nil
}

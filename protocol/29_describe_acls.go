package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// DescribeAcls: v0-3
//
// Behaviour (Kafka's AclApis.handleDescribeAcls):
//   - Needs Describe on the cluster (else CLUSTER_AUTHORIZATION_FAILED);
//     without an authorizer, SECURITY_DISABLED.
//   - The filter selects as Kafka's AclBindingFilter does: resource type
//     Any and a null name match all; pattern type Any is the literal and
//     prefixed pattern of exactly the name, Match every pattern that applies
//     to a resource of that name (the literal, "*", the prefixes); a null
//     principal or host, operation Any and permission Any match all. An
//     Unknown element is INVALID_REQUEST.
//   - The bindings are answered from this broker's ACL cache, grouped by
//     resource pattern.
//
// Version notes:
//   - v1: resource pattern type (v0: literal). v2: flexible. v3: the User
//     resource type.

func init() { register(29, 0, 3, handleDescribeACLs) }

func handleDescribeACLs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(err error) (kmsg.Response, error) {
		code, msg := broker.ErrorCode(err)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	if s.cfg.Broker.Authorizer() != nil && !s.allowedCluster(r, security.OpDescribe) {
		return fail(errClusterAuthorization)
	}
	acls, err := s.cfg.Broker.DescribeACLs(aclFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType,
		req.Principal, req.Host, req.Operation, req.PermissionType))
	if err != nil {
		return fail(err)
	}
	for i, a := range acls {
		if i == 0 || a.Resource != acls[i-1].Resource {
			rr := kmsg.NewDescribeACLsResponseResource()
			rr.ResourceType = kmsg.ACLResourceType(a.Resource.Type)
			rr.ResourceName = a.Resource.Name
			rr.ResourcePatternType = kmsg.ACLResourcePatternType(a.Resource.Pattern)
			resp.Resources = append(resp.Resources, rr)
		}
		ra := kmsg.NewDescribeACLsResponseResourceACL()
		ra.Principal, ra.Host = a.Entry.Principal, a.Entry.Host
		ra.Operation, ra.PermissionType = kmsg.ACLOperation(a.Entry.Operation), kmsg.ACLPermissionType(a.Entry.Permission)
		rr := &resp.Resources[len(resp.Resources)-1]
		rr.ACLs = append(rr.ACLs, ra)
	}
	return resp, nil
}

// aclFilter is a DescribeAcls or DeleteAcls filter as security's (v0 has
// literal patterns only).
func aclFilter(version int16, rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) security.Filter {
	p := security.PatternType(pattern)
	if version == 0 {
		p = security.PatternLiteral
	}
	return security.Filter{
		Resource: security.ResourceFilter{Type: security.ResourceType(rt), Name: name, Pattern: p},
		Entry:    security.EntryFilter{Principal: principal, Host: host, Operation: security.Operation(op), Permission: security.Permission(perm)},
	}
}

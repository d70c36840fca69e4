package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// CreateAcls: v0-3
//
// Behaviour (Kafka's AclApis.handleCreateAcls, AclAuthorizer.createAcls):
//   - Needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED on
//     every creation); without an authorizer, SECURITY_DISABLED.
//   - Each binding is checked (known, concrete type, pattern, operation
//     and permission; a name without '/'; kafka-cluster as the only
//     cluster name; a principal Type:name; a host) and stored, else
//     INVALID_REQUEST with the reason. A binding already there is not
//     stored twice. The bindings of one resource are one write to the
//     store (ZooKeeper's /kafka-acl node and a change notification, which
//     the other brokers follow); this broker's cache is reloaded before
//     the answer.
//
// Version notes:
//   - v1: resource pattern type (v0: literal). v2: flexible. v3: the User
//     resource type.

func init() { register(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	set := func(i int, err error) {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		if err != nil {
			code, msg := broker.ErrorCode(err)
			resp.Results[i].ErrorCode = code
			if msg != "" {
				resp.Results[i].ErrorMessage = &msg
			}
		}
	}
	if s.cfg.Broker.Authorizer() != nil && !s.allowedCluster(r, security.OpAlter) {
		for i := range req.Creations {
			set(i, errClusterAuthorization)
		}
		return resp, nil
	}
	acls := make([]security.ACL, len(req.Creations))
	for i, c := range req.Creations {
		pattern := security.PatternType(c.ResourcePatternType)
		if req.Version == 0 {
			pattern = security.PatternLiteral
		}
		acls[i] = security.ACL{
			Resource: security.Resource{Type: security.ResourceType(c.ResourceType), Name: c.ResourceName, Pattern: pattern},
			Entry: security.Entry{Principal: c.Principal, Host: c.Host,
				Operation: security.Operation(c.Operation), Permission: security.Permission(c.PermissionType)},
		}
	}
	r.Detach()
	for i, err := range s.cfg.Broker.CreateACLs(ctx, acls) {
		set(i, err)
	}
	return resp, nil
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// Authorization: the checks Kafka's KafkaApis makes before each API, with
// its error codes (the table is in docs/acls.md). The handlers call them;
// the decisions are the broker's authorizer's (security.Authorizer, over
// the cluster's ACLs), and without an authorizer (authorizer.class.name
// unset) every check allows, as Kafka's AuthHelper does.
//
// A check reads one immutable ACL snapshot and allocates nothing: the
// allowed path of a produce or a fetch costs two map lookups per topic.
// The errors below are shared values for the same reason.

var (
	errTopicAuthorization   = &broker.Error{Code: kerr.TopicAuthorizationFailed}
	errGroupAuthorization   = &broker.Error{Code: kerr.GroupAuthorizationFailed}
	errClusterAuthorization = &broker.Error{Code: kerr.ClusterAuthorizationFailed}
	errTxnIDAuthorization   = &broker.Error{Code: kerr.TransactionalIDAuthorizationFailed}
)

// allowed reports whether r's principal may perform op on the resource of
// type rt named name.
func (s *Server) allowed(r *Request, op security.Operation, rt security.ResourceType, name string) bool {
	a := s.cfg.Broker.Authorizer()
	if a == nil {
		return true
	}
	return a.Authorize(r.Principal, security.HostOf(r.Remote), op, rt, name)
}

// permitted is allowed without counting or logging a denial (the
// authorizer's Permits), for the checks Kafka makes with
// logIfDenied=false: a listing filtered (the topics of an all-topics
// Metadata, the groups of ListGroups), a first check that a second may
// still grant, the authorized-operations bit sets. A denial through
// allowed refuses something and is counted in
// sluice_broker_authorization_denials_total; one through permitted is not.
func (s *Server) permitted(r *Request, op security.Operation, rt security.ResourceType, name string) bool {
	a := s.cfg.Broker.Authorizer()
	if a == nil {
		return true
	}
	return a.Permits(r.Principal, security.HostOf(r.Remote), op, rt, name)
}

func (s *Server) permittedCluster(r *Request, op security.Operation) bool {
	return s.permitted(r, op, security.ResourceCluster, security.ClusterName)
}

// allowedTopic, allowedGroup and allowedCluster are allowed on one
// resource type.
func (s *Server) allowedTopic(r *Request, op security.Operation, topic string) bool {
	return s.allowed(r, op, security.ResourceTopic, topic)
}

func (s *Server) allowedGroup(r *Request, op security.Operation, group string) bool {
	return s.allowed(r, op, security.ResourceGroup, group)
}

func (s *Server) allowedCluster(r *Request, op security.Operation) bool {
	return s.allowed(r, op, security.ResourceCluster, security.ClusterName)
}

// authorizedOps is the *_authorized_operations bit set of a resource:
// every supported operation without an authorizer.
func (s *Server) authorizedOps(r *Request, rt security.ResourceType, name string) int32 {
	a := s.cfg.Broker.Authorizer()
	if a == nil {
		var bits int32
		for _, op := range security.SupportedOperations(rt) {
			if op != security.OpAll {
				bits |= 1 << op
			}
		}
		return bits
	}
	return a.AuthorizedOperations(r.Principal, security.HostOf(r.Remote), rt, name)
}

// checkClusterAction decides a request only brokers send (ControlledShutdown,
// a follower's Fetch) on behalf of broker brokerID. With an authorizer it
// is Kafka's check, ClusterAction on the cluster (the brokers' principal
// is in super.users or holds it); without one the connection must come
// from an address that broker registered (authorizeClusterAction).
func (s *Server) checkClusterAction(ctx context.Context, r *Request, brokerID int32) error {
	if s.cfg.Broker.Authorizer() == nil {
		return s.authorizeClusterAction(ctx, r, brokerID)
	}
	if s.allowedCluster(r, security.OpClusterAction) {
		return nil
	}
	return &broker.Error{Code: kerr.ClusterAuthorizationFailed, Msg: r.Principal.String() + " may not perform ClusterAction on the cluster"}
}

// allowedWriteOnSomeTopic is Kafka's authorizeByResourceType(Write, Topic):
// whether r's principal may write some topic (InitProducerId without a
// transactional id, KIP-679).
func (s *Server) allowedWriteOnSomeTopic(r *Request) bool {
	a := s.cfg.Broker.Authorizer()
	if a == nil {
		return true
	}
	return a.AuthorizeByResourceType(r.Principal, security.HostOf(r.Remote), security.OpWrite, security.ResourceTopic)
}

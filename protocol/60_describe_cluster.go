package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// DescribeCluster: v0-1
//
// Behaviour:
//   - The cluster id, the controller and the live brokers with their
//     endpoint for the listener the request came in on (as Metadata).
//   - Cluster authorized operations are all allowed (no ACLs).
//   - v1 endpoint_type 2 (KRaft controllers) is UNSUPPORTED_ENDPOINT_TYPE:
//     the controller is a broker here.
//
// Version notes:
//   - v0: flexible. v1: EndpointType.

func init() { register(60, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		if req.EndpointType != 1 {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg := "only broker endpoints are served"
			resp.ErrorMessage = &msg
			return resp, nil
		}
	}
	img := s.cfg.Broker.Image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = img.Controller
	if req.IncludeClusterAuthorizedOperations {
		// Kafka: the bit set only for a principal that may describe the
		// cluster; 0 for others.
		resp.ClusterAuthorizedOperations = 0
		if s.permittedCluster(r, security.OpDescribe) {
			resp.ClusterAuthorizedOperations = s.authorizedOps(r, security.ResourceCluster, security.ClusterName)
		}
	}
	for _, br := range img.Brokers {
		ep, ok := br.Endpoint(r.Listener)
		if !ok {
			continue
		}
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = br.ID, ep.Host, ep.Port
		if br.Rack != "" {
			rack := br.Rack
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp, nil
}

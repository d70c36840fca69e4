package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
)

// ControlledShutdown: v0-3
//
// Behaviour:
//   - Sent by a broker about to stop, to the controller: leadership of the
//     partitions it leads moves to other in-sync replicas, and it leaves the
//     ISR of the partitions it follows, so clients move before it goes.
//   - The response lists the partitions it still leads (no other in-sync
//     replica to take over, replication factor above 1); the broker retries
//     (controlled.shutdown.max.retries) and then stops anyway.
//   - Errors: NOT_CONTROLLER on a broker that is not the controller,
//     CLUSTER_AUTHORIZATION_FAILED unless the broker id is a registered
//     broker and the request comes from an address it registered (Kafka:
//     ClusterAction; see authorizeClusterAction), BROKER_NOT_AVAILABLE for
//     a broker that is not registered (any more) at the controller.
//
// Version notes:
//   - v0 has no client id in its request header (kmsg handles it). v2:
//     broker epoch (not checked: registrations are compared by their
//     registration time instead). v3: flexible.

func init() { register(7, 0, 3, handleControlledShutdown) }

func handleControlledShutdown(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ControlledShutdownRequest)
	resp := req.ResponseKind().(*kmsg.ControlledShutdownResponse)
	if err := s.checkClusterAction(ctx, r, req.BrokerID); err != nil {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if s.cfg.Controller == nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	r.Detach()
	remaining, err := s.cfg.Controller.ControlledShutdown(ctx, req.BrokerID)
	resp.ErrorCode, _ = broker.ErrorCode(err)
	if resp.ErrorCode == kerr.UnknownServerError.Code {
		s.log.Warn("controlled shutdown", "broker", req.BrokerID, "err", err)
	}
	for _, tp := range remaining {
		p := kmsg.NewControlledShutdownResponsePartitionsRemaining()
		p.Topic, p.Partition = tp.Topic, tp.Partition
		resp.PartitionsRemaining = append(resp.PartitionsRemaining, p)
	}
	return resp, nil
}

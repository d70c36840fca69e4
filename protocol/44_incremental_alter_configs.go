package protocol

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// IncrementalAlterConfigs: v0-1
//
// Behaviour:
//   - TOPIC resources: each operation applies to the topic's overrides: SET
//     (0) overrides a value, DELETE (1) returns it to its default, APPEND (2)
//     and SUBTRACT (3) add to or remove from a list config (cleanup.policy;
//     INVALID_CONFIG for others). validate_only only validates. Errors as
//     AlterConfigs; a config named twice is INVALID_REQUEST; more than
//     10,000 configs in the request: POLICY_VIOLATION for every resource.
//   - BROKER resources: dynamic broker configs of this broker (its id) or
//     of the cluster default (""), the same operations; applied without
//     a restart and kept by the coordinator (/config/brokers/<entity>).
//     A key Sluice reads at start only: INVALID_REQUEST saying to restart;
//     an unknown key or a bad value: INVALID_CONFIG; another broker's id:
//     INVALID_REQUEST (send it to that broker).
//   - BROKER_LOGGER resources (this broker's id): SET a logger's level
//     (root or a component), DELETE a component's own level (back to the
//     root's); at once, not kept across a restart. Unknown logger or level:
//     INVALID_CONFIG; APPEND/SUBTRACT: INVALID_REQUEST.
//
// Version notes:
//   - v1: flexible.

func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	// Each config set is a metadata record: a request of more than one
	// request may write is refused for every resource, as Kafka refuses
	// the batch.
	configs := 0
	for _, rr := range req.Resources {
		configs += len(rr.Configs)
	}
	if configs > cluster.MaxRecordsPerRequest {
		code, msg := broker.ErrorCode(broker.ErrExcessiveBatch)
		for _, rr := range req.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			sr.ErrorCode, sr.ErrorMessage = code, &msg
			resp.Resources = append(resp.Resources, sr)
		}
		return resp, nil
	}
	r.Detach()
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		switch {
		case rr.ResourceType == resourceTopic && !s.allowedTopic(r, security.OpAlterConfigs, rr.ResourceName):
			err = errTopicAuthorization
		case rr.ResourceType == resourceBroker && !s.allowedCluster(r, security.OpAlterConfigs):
			err = errClusterAuthorization
		case rr.ResourceType == resourceTopic:
			err = s.cfg.Broker.IncrementalAlterTopicConfigs(ctx, rr.ResourceName, configOps(rr.Configs), req.ValidateOnly)
		case rr.ResourceType == resourceBroker:
			err = s.cfg.Broker.IncrementalAlterBrokerConfigs(ctx, rr.ResourceName, configOps(rr.Configs), req.ValidateOnly)
		case rr.ResourceType == resourceBrokerLogger && !s.allowedCluster(r, security.OpAlterConfigs):
			err = errClusterAuthorization
		case rr.ResourceType == resourceBrokerLogger:
			err = s.cfg.Broker.AlterLoggers(rr.ResourceName, configOps(rr.Configs), req.ValidateOnly)
		default:
			err = &broker.Error{Code: kerr.InvalidRequest, Msg: "unsupported resource type " + strconv.Itoa(int(rr.ResourceType))}
		}
		if err != nil {
			code, msg := broker.ErrorCode(err)
			sr.ErrorCode, sr.ErrorMessage = code, &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// configOps are a resource's config operations as the broker takes them.
func configOps(cs []kmsg.IncrementalAlterConfigsRequestResourceConfig) []broker.ConfigOp {
	ops := make([]broker.ConfigOp, 0, len(cs))
	for _, c := range cs {
		op := broker.ConfigOp{Name: c.Name, Op: int8(c.Op)}
		if c.Value != nil {
			op.Value = *c.Value
		}
		ops = append(ops, op)
	}
	return ops
}

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

// AlterConfigs: v0-2
//
// Behaviour:
//   - TOPIC resources: the given configs replace all of the topic's
//     overrides (keys left out return to their defaults); validate_only
//     only validates. Unknown config or unparsable value: INVALID_CONFIG;
//     out of range or contradicting the broker: POLICY_VIOLATION; unknown
//     topic: UNKNOWN_TOPIC_OR_PARTITION. More than 10,000 configs in the
//     request (Kafka's limit on one request's metadata records):
//     POLICY_VIOLATION for every resource.
//   - BROKER resources: the given configs replace all dynamic broker
//     configs of this broker (its id) or of the cluster default (""), as
//     IncrementalAlterConfigs describes.
//
// Version notes:
//   - v1: ThrottleMillis semantics. v2: flexible.

func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
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
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			sr.ErrorCode, sr.ErrorMessage = code, &msg
			resp.Resources = append(resp.Resources, sr)
		}
		return resp, nil
	}
	r.Detach()
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		switch {
		case rr.ResourceType == resourceTopic && !s.allowedTopic(r, security.OpAlterConfigs, rr.ResourceName):
			err = errTopicAuthorization
		case rr.ResourceType == resourceBroker && !s.allowedCluster(r, security.OpAlterConfigs):
			err = errClusterAuthorization
		case rr.ResourceType == resourceTopic:
			err = s.cfg.Broker.AlterTopicConfigs(ctx, rr.ResourceName, configSet(rr.Configs), req.ValidateOnly)
		case rr.ResourceType == resourceBroker:
			err = s.cfg.Broker.AlterBrokerConfigs(ctx, rr.ResourceName, configSet(rr.Configs), req.ValidateOnly)
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

// configSet is a resource's configs as the broker takes them: the values
// set (a null value leaves its key out, as Kafka's AlterConfigs).
func configSet(cs []kmsg.AlterConfigsRequestResourceConfig) map[string]string {
	set := make(map[string]string, len(cs))
	for _, c := range cs {
		if c.Value != nil {
			set[c.Name] = *c.Value
		}
	}
	return set
}

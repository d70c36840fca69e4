package protocol

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// DescribeConfigs: v0-4
//
// Behaviour:
//   - TOPIC resources: every topic config Sluice honours (Kafka's names),
//     with its value and source: DYNAMIC_TOPIC_CONFIG when set on the topic,
//     STATIC_BROKER_CONFIG when its broker key (log.retention.ms, ...) is
//     set in the config file or an override, else DEFAULT_CONFIG with
//     Kafka's default. config_names filters. Unknown topic:
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER resources: this broker's id: every broker key with the value
//     in force and its source (DYNAMIC_BROKER_CONFIG,
//     DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG)
//     and synonyms in that order; dynamic keys are not read-only. Name "":
//     the cluster default, the dynamic defaults set, as Kafka. Another
//     broker's id is INVALID_REQUEST (ask that broker).
//   - BROKER_LOGGER resources (this broker's id): "root" and each component
//     logger (broker, storage, protocol, ...) with its level (TRACE, DEBUG,
//     INFO, WARN, ERROR), source DYNAMIC_BROKER_LOGGER_CONFIG. Other types:
//     INVALID_REQUEST.
//   - A resource named again in the same request: INVALID_REQUEST for the
//     repeats (each resource is described once per request, so an answer
//     stays as large as the configs there are, not as the request's
//     repetitions make it).
//
// Version notes:
//   - v0: is_default instead of a source. v1: sources and synonyms
//     (include_synonyms). v2: ThrottleMillis semantics.
//   - v3: config type and documentation (include_documentation).
//   - v4: flexible.

func init() { register(32, 0, 4, handleDescribeConfigs) }

const (
	resourceTopic        = 2
	resourceBroker       = 4
	resourceBrokerLogger = 8
)

func handleDescribeConfigs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	b := s.cfg.Broker
	type resource struct {
		kind int8
		name string
	}
	seen := make(map[resource]struct{}, len(req.Resources))
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var (
			entries []broker.ConfigEntry
			err     error
		)
		key := resource{int8(rr.ResourceType), rr.ResourceName}
		_, dup := seen[key]
		seen[key] = struct{}{}
		switch {
		case dup:
			// Described once per request: a resource named a
			// million times must not make a million copies of its
			// configs.
			err = &broker.Error{Code: kerr.InvalidRequest, Msg: "resource " + rr.ResourceName + " is named more than once in the request"}
		case rr.ResourceType == resourceTopic && !s.allowedTopic(r, security.OpDescribeConfigs, rr.ResourceName):
			err = errTopicAuthorization
		case rr.ResourceType == resourceBroker && !s.allowedCluster(r, security.OpDescribeConfigs):
			err = errClusterAuthorization
		case rr.ResourceType == resourceTopic:
			entries, err = b.DescribeTopicConfigs(ctx, rr.ResourceName, rr.ConfigNames, req.IncludeSynonyms)
		case rr.ResourceType == resourceBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.ID())) {
				err = &broker.Error{Code: kerr.InvalidRequest, Msg: "describe broker " + rr.ResourceName + " on that broker"}
			} else {
				entries = b.DescribeBrokerConfigsOf(rr.ResourceName, rr.ConfigNames, req.IncludeSynonyms)
			}
		case rr.ResourceType == resourceBrokerLogger:
			entries, err = b.DescribeLoggers(rr.ResourceName, rr.ConfigNames)
		default:
			err = &broker.Error{Code: kerr.InvalidRequest, Msg: "unsupported resource type " + strconv.Itoa(int(rr.ResourceType))}
		}
		if err != nil {
			code, msg := broker.ErrorCode(err)
			sr.ErrorCode, sr.ErrorMessage = code, &msg
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		for _, e := range entries {
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.ReadOnly, c.IsSensitive = e.Name, e.ReadOnly, e.Sensitive
			if !e.Sensitive {
				c.Value = e.Value
			}
			c.Source = kmsg.ConfigSource(e.Source)
			c.IsDefault = e.Source == broker.SourceDefault
			if req.Version >= 1 && req.IncludeSynonyms {
				for _, syn := range e.Synonyms {
					cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					v := syn.Value
					cs.Name, cs.Value, cs.Source = syn.Name, &v, kmsg.ConfigSource(syn.Source)
					c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
				}
			}
			if req.Version >= 3 {
				c.ConfigType = kmsg.ConfigType(e.Type)
				if req.IncludeDocumentation {
					doc := e.Doc
					c.Documentation = &doc
				}
			}
			sr.Configs = append(sr.Configs, c)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

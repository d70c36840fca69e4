package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// CreateTopics: v0-7
//
// Behaviour:
//   - Each topic is validated (name, partitions, replication factor,
//     explicit assignments, configs) and created through the coordinator;
//     the controller gives its partitions their leaders. The response waits
//     up to timeout_ms for those leaders, for the whole request as Kafka
//     does (REQUEST_TIMED_OUT after, the topic existing anyway, as in
//     Kafka).
//   - validate_only (v1+) validates and describes without creating.
//   - Controller mutation quota (KIP-599, quotas.go): each valid topic
//     takes its partitions from the client's controller_mutation_rate
//     bucket; from v6 a topic beyond an empty bucket gets
//     THROTTLING_QUOTA_EXCEEDED, before v6 it is created and the
//     response throttled.
//   - Errors: THROTTLING_QUOTA_EXCEEDED (v6+), INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
//     INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
//     INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST (a topic listed twice, or
//     assignments together with a count), INVALID_CONFIG (unknown config,
//     unparsable value), POLICY_VIOLATION (value out of range or
//     contradicting the broker, e.g. min.insync.replicas above the
//     replication factor; or, for every topic of the request, more than
//     10,000 metadata records in all — a topic, each partition and each
//     config is one — as Kafka's controller refuses such a batch, even
//     with validate_only).
//
// Version notes:
//   - v1: ErrorMessage, validate_only. v2: ThrottleMillis.
//   - v4: -1 partitions / replication factor take the broker defaults.
//   - v5: flexible; NumPartitions, ReplicationFactor and Configs in the
//     response. v7: TopicID in the response.

func init() { register(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	b := s.cfg.Broker

	// The whole request is refused when its topics, partitions and configs
	// add up to more metadata records than one request may make, as Kafka
	// refuses the batch: counted from the request, before anything is
	// allocated for them.
	var records int64
	for _, t := range req.Topics {
		records += b.TopicRecords(t.NumPartitions, len(t.ReplicaAssignment), len(t.Configs))
	}
	if records > cluster.MaxRecordsPerRequest {
		resp.Topics = make([]kmsg.CreateTopicsResponseTopic, 0, len(req.Topics))
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			setCreateErr(req.Version, &st, broker.ErrExcessiveBatch)
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	wait := newRequestWait(req.TimeoutMillis)
	mq := s.mutationQuota(r)
	defer endMutations(r, mq)
	r.Detach()
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		if !s.permittedCluster(r, security.OpCreate) && !s.allowedTopic(r, security.OpCreate, rt.Topic) {
			// Kafka: Create on the cluster, or on the topic.
			setCreateErr(req.Version, &st, errTopicAuthorization)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if count[rt.Topic] > 1 {
			setCreateErr(req.Version, &st, &broker.Error{Code: kerr.InvalidRequest, Msg: "Create topics request from client contains multiple entries for the topic " + rt.Topic})
			resp.Topics = append(resp.Topics, st)
			continue
		}
		spec := broker.TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor}
		for _, a := range rt.ReplicaAssignment {
			if int(a.Partition) != len(spec.Assignment) {
				spec.Assignment = nil
				setCreateErr(req.Version, &st, &broker.Error{Code: kerr.InvalidReplicaAssignment, Msg: "partitions in the assignment must be 0, 1, 2, ... in order"})
				break
			}
			spec.Assignment = append(spec.Assignment, a.Replicas)
		}
		if st.ErrorCode != 0 {
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if len(rt.Configs) > 0 {
			spec.Configs = map[string]string{}
			for _, c := range rt.Configs {
				if c.Value != nil {
					spec.Configs[c.Name] = *c.Value
				}
			}
		}
		if mq != nil && !req.ValidateOnly {
			// The topic's partitions count against the client's
			// controller mutation quota once it is valid: a topic refused
			// for another reason takes nothing, as in Kafka.
			v, err := b.CreateTopic(ctx, spec, true, 0)
			if err == nil {
				err = recordMutations(mq, int(v.Partitions))
			}
			if err != nil {
				setCreateErr(req.Version, &st, err)
				resp.Topics = append(resp.Topics, st)
				continue
			}
		}
		created, err := b.CreateTopic(ctx, spec, req.ValidateOnly, wait.left())
		if err != nil {
			setCreateErr(req.Version, &st, err)
		} else {
			st.TopicID = created.ID
			st.NumPartitions = created.Partitions
			st.ReplicationFactor = created.ReplicationFactor
			for _, e := range created.Configs {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.Value, e.ReadOnly, int8(e.Source), e.Sensitive
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func setCreateErr(version int16, st *kmsg.CreateTopicsResponseTopic, err error) {
	code, msg := broker.ErrorCode(err)
	st.ErrorCode = code
	if version >= 1 && msg != "" {
		st.ErrorMessage = &msg
	}
	st.NumPartitions, st.ReplicationFactor = -1, -1
}

// requestWait is a request's timeout_ms, which Kafka applies to the whole
// request, not to each of its topics: a request of many topics answers
// within it (the topics whose leaders are not there by then answer
// REQUEST_TIMED_OUT; they are created anyway).
type requestWait struct{ deadline time.Time }

func newRequestWait(timeoutMillis int32) requestWait {
	if timeoutMillis <= 0 {
		return requestWait{} // do not wait at all
	}
	return requestWait{deadline: time.Now().Add(time.Duration(timeoutMillis) * time.Millisecond)}
}

// left is how long the topic at hand may still wait (0: not at all).
func (w requestWait) left() time.Duration {
	if w.deadline.IsZero() {
		return 0
	}
	return max(time.Until(w.deadline), time.Millisecond)
}

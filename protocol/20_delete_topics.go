package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// DeleteTopics: v0-5
//
// Behaviour:
//   - Each topic is marked for deletion in the coordinator; the controller
//     deletes it and every broker drops its partitions. The response waits
//     up to timeout_ms (for the whole request) for the topic to be gone
//     (REQUEST_TIMED_OUT after; the deletion still completes).
//   - Controller mutation quota (KIP-599, quotas.go): each topic takes
//     its partitions from the client's controller_mutation_rate bucket;
//     from v5 a topic beyond an empty bucket gets
//     THROTTLING_QUOTA_EXCEEDED, before v5 it is deleted and the response
//     throttled.
//   - Errors: THROTTLING_QUOTA_EXCEEDED (v5), UNKNOWN_TOPIC_OR_PARTITION, TOPIC_DELETION_DISABLED
//     (delete.topic.enable=false), INVALID_TOPIC_EXCEPTION for internal
//     topics, POLICY_VIOLATION for every topic of a request naming more
//     than 10,000 (Kafka's limit on one request's metadata records).
//
// Version notes:
//   - v1: ThrottleMillis. v4: flexible. v5: ErrorMessage.
//   - v6 (topic ids) is not served.

func init() { register(20, 0, 5, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	// Deleting a topic is one metadata record: more than one request may
	// write are refused together, as Kafka refuses the batch.
	if len(req.TopicNames) > cluster.MaxRecordsPerRequest {
		code, msg := broker.ErrorCode(broker.ErrExcessiveBatch)
		resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, 0, len(req.TopicNames))
		for _, name := range req.TopicNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode = kmsg.StringPtr(name), code
			if req.Version >= 5 {
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	wait := newRequestWait(req.TimeoutMillis)
	mq := s.mutationQuota(r)
	if !s.cfg.Broker.DeleteTopicEnabled() {
		mq = nil // every topic is refused: nothing to count
	}
	defer endMutations(r, mq)
	r.Detach()
	for _, name := range req.TopicNames {
		st := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		st.Topic = &n
		if !s.allowedTopic(r, security.OpDescribe, name) || !s.allowedTopic(r, security.OpDelete, name) {
			// Kafka: Describe and Delete on the topic; the topic id is
			// not told to a principal that may not describe it.
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var err error
		if t, ok := s.cfg.Broker.Image().Topics[name]; ok {
			st.TopicID = t.ID
			if !t.Internal {
				err = recordMutations(mq, len(t.Partitions))
			}
		}
		if err == nil {
			err = s.cfg.Broker.DeleteTopic(ctx, name, wait.left())
		}
		if err != nil {
			code, msg := broker.ErrorCode(err)
			st.ErrorCode = code
			if req.Version >= 5 && msg != "" {
				st.ErrorMessage = &msg
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

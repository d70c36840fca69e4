package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
)

// DeleteTopics: v0-5
//
// Behaviour:
//   - Each topic is marked for deletion in the coordinator; the controller
//     deletes it and every broker drops its partitions. The response waits
//     up to timeout_ms for the topic to be gone (REQUEST_TIMED_OUT after; the
//     deletion still completes).
//   - Errors: UNKNOWN_TOPIC_OR_PARTITION, TOPIC_DELETION_DISABLED
//     (delete.topic.enable=false), INVALID_TOPIC_EXCEPTION for internal
//     topics.
//
// Version notes:
//   - v1: ThrottleMillis. v4: flexible. v5: ErrorMessage.
//   - v6 (topic ids) is not served.

func init() { register(20, 0, 5, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	r.Detach()
	for _, name := range req.TopicNames {
		st := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		st.Topic = &n
		if t, ok := s.cfg.Broker.Image().Topics[name]; ok {
			st.TopicID = t.ID
		}
		err := s.cfg.Broker.DeleteTopic(ctx, name, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
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

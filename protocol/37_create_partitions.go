package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
)

// CreatePartitions: v0-3
//
// Behaviour:
//   - Grows each topic to count partitions. The new partitions are placed by
//     the given assignment (one replica list per new partition) or by the
//     controller's round-robin assignment, and get leaders from the
//     controller; the response waits up to timeout_ms for them.
//     validate_only only validates.
//   - Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not more than
//     now, or an internal topic: the partition count of __consumer_offsets
//     decides where every group lives), INVALID_REPLICA_ASSIGNMENT,
//     INVALID_REPLICATION_FACTOR, INVALID_REQUEST (a topic listed twice).
//
// Version notes:
//   - v1: ThrottleMillis semantics. v2: flexible. v3: same as v2.

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	r.Detach()
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if count[rt.Topic] > 1 {
			err = &broker.Error{Code: kerr.InvalidRequest, Msg: "topic listed more than once: " + rt.Topic}
		} else {
			var assignment [][]int32
			for _, a := range rt.Assignment {
				assignment = append(assignment, a.Replicas)
			}
			err = s.cfg.Broker.CreatePartitions(ctx, rt.Topic, rt.Count, assignment, req.ValidateOnly, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
		}
		if err != nil {
			code, msg := broker.ErrorCode(err)
			st.ErrorCode, st.ErrorMessage = code, &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// CreatePartitions: v0-3
//
// Behaviour:
//   - Grows each topic to count partitions. The new partitions are placed by
//     the given assignment (one replica list per new partition) or by the
//     controller's round-robin assignment, and get leaders from the
//     controller; the response waits up to timeout_ms (for the whole
//     request) for them.
//     validate_only only validates.
//   - Controller mutation quota (KIP-599, quotas.go): the new partitions
//     of each valid change are taken from the client's
//     controller_mutation_rate bucket; from v3 a topic beyond an empty
//     bucket gets THROTTLING_QUOTA_EXCEEDED, before v3 it grows and the
//     response is throttled.
//   - Errors: THROTTLING_QUOTA_EXCEEDED (v3), UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not more than
//     now, or an internal topic: the partition count of __consumer_offsets
//     decides where every group lives), INVALID_REPLICA_ASSIGNMENT,
//     INVALID_REPLICATION_FACTOR, INVALID_REQUEST (a topic listed twice),
//     POLICY_VIOLATION for every topic when they would add more than
//     10,000 partitions in all (Kafka's limit on one request's metadata
//     records), validate_only or not.
//
// Version notes:
//   - v1: ThrottleMillis semantics. v2: flexible. v3: same as v2.

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	// More new partitions in all than one request may make: every topic is
	// refused, as Kafka refuses the batch (counted before anything is
	// allocated for them).
	img := s.cfg.Broker.Image()
	var records int64
	for _, t := range req.Topics {
		if ti, ok := img.Topics[t.Topic]; ok {
			records += max(int64(t.Count)-int64(len(ti.Partitions)), 0)
		}
	}
	if records > cluster.MaxRecordsPerRequest {
		resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, 0, len(req.Topics))
		code, msg := broker.ErrorCode(broker.ErrExcessiveBatch)
		for _, rt := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, code, &msg
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
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if !s.allowedTopic(r, security.OpAlter, rt.Topic) {
			err = errTopicAuthorization
		} else if count[rt.Topic] > 1 {
			err = &broker.Error{Code: kerr.InvalidRequest, Msg: "topic listed more than once: " + rt.Topic}
		} else {
			var assignment [][]int32
			for _, a := range rt.Assignment {
				assignment = append(assignment, a.Replicas)
			}
			if mq != nil && !req.ValidateOnly {
				// The new partitions count against the client's
				// controller mutation quota once the change is valid.
				before := 0
				if t, ok := s.cfg.Broker.Image().Topics[rt.Topic]; ok {
					before = len(t.Partitions)
				}
				err = s.cfg.Broker.CreatePartitions(ctx, rt.Topic, rt.Count, assignment, true, 0)
				if err == nil {
					err = recordMutations(mq, max(int(rt.Count)-before, 0))
				}
			}
			if err == nil {
				err = s.cfg.Broker.CreatePartitions(ctx, rt.Topic, rt.Count, assignment, req.ValidateOnly, wait.left())
			}
		}
		if err != nil {
			code, msg := broker.ErrorCode(err)
			st.ErrorCode, st.ErrorMessage = code, &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

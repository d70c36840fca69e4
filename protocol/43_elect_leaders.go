package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// ElectLeaders: v0-2
//
// Behaviour:
//   - Served by the controller (clients send it there; others answer
//     NOT_CONTROLLER). Election type 0 (preferred) moves each partition's
//     leadership to its first replica when that replica is live and in the
//     ISR; type 1 (unclean) gives a leader to partitions that have none,
//     from the ISR if a member is live, else any live replica.
//   - A null topic list means every partition; the response then lists only
//     the partitions that got a new leader, as Kafka's does.
//   - Partition errors: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
//     INVALID_REQUEST (an unknown election type).
//
// Version notes:
//   - v1: election type, top-level error code. v2: flexible.

func init() { register(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	fail := func(code int16) (kmsg.Response, error) {
		if req.Version >= 1 {
			resp.ErrorCode = code
			return resp, nil
		}
		// v0 has no top-level error: put it on every partition.
		for _, rt := range req.Topics {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	if !s.allowedCluster(r, security.OpAlter) {
		return fail(kerr.ClusterAuthorizationFailed.Code)
	}
	if s.cfg.Controller == nil || s.cfg.Controller.Epoch() == 0 {
		return fail(kerr.NotController.Code)
	}
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		return fail(kerr.InvalidRequest.Code)
	}
	var parts []cluster.TopicPartitionID
	if req.Topics != nil {
		parts = []cluster.TopicPartitionID{}
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				parts = append(parts, cluster.TopicPartitionID{Topic: rt.Topic, Partition: p})
			}
		}
	}
	r.Detach()
	results, err := s.cfg.Controller.ElectLeaders(ctx, req.Version >= 1 && req.ElectionType == 1, parts)
	if err != nil {
		code, _ := broker.ErrorCode(err)
		if code == kerr.UnknownServerError.Code {
			s.log.Warn("elect leaders", "err", err)
		}
		return fail(code)
	}
	byTopic := map[string]int{}
	add := func(tp cluster.TopicPartitionID, err error) {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = tp.Topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = tp.Partition
		if err != nil {
			code, msg := broker.ErrorCode(err)
			rp.ErrorCode, rp.ErrorMessage = code, &msg
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	if parts != nil {
		for _, tp := range parts {
			add(tp, results[tp])
		}
	} else {
		for tp, err := range results {
			add(tp, err)
		}
	}
	return resp, nil
}

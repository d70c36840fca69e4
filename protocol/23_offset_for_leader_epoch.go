package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// OffsetForLeaderEpoch: v0-4
//
// Behaviour (as leader, KIP-101/279):
//   - For each partition, the largest leader epoch at or below the requested
//     one that the log knows, and the offset where it ends (the start of the
//     next epoch, or the log end offset for the current epoch). Clients use
//     it to detect truncation after a leader change; followers to truncate.
//   - Errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//     FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v2+ current leader epoch).
//
// Version notes:
//   - v1: LeaderEpoch in the response. v2: current leader epoch, throttle.
//   - v3: ReplicaID. v4: flexible.

func init() { register(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Kafka: ClusterAction on the cluster (a follower), else Describe on
	// each topic.
	clusterAction := s.permittedCluster(r, security.OpClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		describable := clusterAction || s.allowedTopic(r, security.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if !describable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			current := rp.CurrentLeaderEpoch
			if req.Version < 2 {
				current = -1
			}
			p, err := s.cfg.Broker.Partition(rt.Topic, rp.Partition)
			if err == nil {
				sp.LeaderEpoch, sp.EndOffset, err = p.EndOffsetForEpoch(rp.LeaderEpoch, current)
			}
			if err != nil {
				sp.ErrorCode, _ = broker.ErrorCode(err)
				sp.LeaderEpoch, sp.EndOffset = -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

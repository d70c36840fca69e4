package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// DeleteRecords: v0-2
//
// Behaviour:
//   - Moves each partition's log start offset up to the given offset (-1 =
//     the high watermark); whole segments below it are removed and fetches
//     below it answer OFFSET_OUT_OF_RANGE. The answer is the new low
//     watermark.
//   - Errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//     OFFSET_OUT_OF_RANGE (beyond the high watermark),
//     INVALID_TOPIC_EXCEPTION (an internal topic: Kafka refuses it even
//     without ACLs; the group coordinator's state lives there).
//
// Version notes:
//   - v2: flexible.

func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		deletable := s.allowedTopic(r, security.OpDelete, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !deletable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := s.cfg.Broker.Partition(rt.Topic, rp.Partition)
			if err == nil {
				sp.LowWatermark, err = p.DeleteRecords(rp.Offset)
			}
			if err != nil {
				sp.ErrorCode, _ = broker.ErrorCode(err)
				sp.LowWatermark = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

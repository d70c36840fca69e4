package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/security"
)

// ListOffsets: v0-7
//
// Behaviour (as leader of each partition):
//   - timestamp -2: the log start offset (earliest).
//   - timestamp -1: the high watermark (latest); for read_committed the last
//     stable offset, which is the same here (no transactions).
//   - timestamp -3 (v7+): the offset and timestamp of the record with the
//     largest timestamp (KIP-734).
//   - timestamp >= 0: the first offset whose timestamp is at or after it
//     (offset and timestamp -1 when there is none below the high watermark).
//   - Errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//     FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v4+), UNSUPPORTED_VERSION
//     for -3 below v7.
//
// Version notes:
//   - v0: an offsets array (old_style_offsets) instead of one offset.
//   - v1: one offset and its timestamp. v2: isolation level, throttle.
//   - v4: current leader epoch fencing; leader epoch of the answer.
//   - v6: flexible. v7: max timestamp (-3).

func init() { register(2, 0, 7, handleListOffsets) }

func handleListOffsets(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	b := s.cfg.Broker
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		describable := s.allowedTopic(r, security.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if !describable {
				sp.ErrorCode, sp.Offset, sp.Timestamp, sp.LeaderEpoch = kerr.TopicAuthorizationFailed.Code, -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			offset, ts, epoch, err := listOffset(b, req.Version, rt.Topic, rp)
			if err != nil {
				sp.ErrorCode, _ = broker.ErrorCode(err)
			} else if req.Version == 0 {
				if offset >= 0 && rp.MaxNumOffsets != 0 {
					sp.OldStyleOffsets = []int64{offset}
				} else {
					sp.OldStyleOffsets = []int64{}
				}
			} else {
				sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, epoch
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func listOffset(b *broker.Broker, version int16, topic string, rp kmsg.ListOffsetsRequestTopicPartition) (offset, ts int64, epoch int32, err error) {
	if rp.Timestamp == -3 && version < 7 {
		return 0, 0, 0, &broker.Error{Code: kerr.UnsupportedVersion, Msg: "max timestamp needs ListOffsets v7"}
	}
	p, err := b.Partition(topic, rp.Partition)
	if err != nil {
		return 0, 0, 0, err
	}
	current := rp.CurrentLeaderEpoch
	if version < 4 {
		current = -1
	}
	offset, ts, epoch, err = p.ListOffset(rp.Timestamp, current)
	if version < 4 {
		epoch = -1
	}
	return offset, ts, epoch, err
}

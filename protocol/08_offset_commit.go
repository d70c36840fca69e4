package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// OffsetCommit: v0-8
//
// Behaviour:
//   - Commits are stored as records in the group's __consumer_offsets
//     partition and answered once stored (acks=all); an OffsetFetch sent
//     after on the same connection sees them.
//   - A simple consumer (generation -1, no member id) commits to an Empty or
//     unknown group; a group member must name its member id and current
//     generation: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
//     REBALANCE_IN_PROGRESS (CompletingRebalance) otherwise.
//   - UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
//     OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes.
//
// Version notes:
//   - v0: no generation or member (always a simple commit).
//   - v1: generation, member id, per-partition commit timestamp (-1 = now).
//   - v2-4: retention_time_ms (-1 = offsets.retention.minutes; otherwise the
//     offset expires at commit time + retention, stored as value v1).
//   - v5: retention removed. v6: committed leader epoch. v7: group.instance.id.
//   - v8: flexible.

func init() { register(8, 0, 8, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	if s.groupDenied(r, security.OpRead, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	denied := s.authorizeOffsetCommitTopics(r, req)
	resp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetCommitResponse, error) {
		return g.OffsetCommit(ctx, req)
	})
	if oc, ok := resp.(*kmsg.OffsetCommitResponse); ok && denied != nil {
		oc.Topics = append(oc.Topics, denied...)
	}
	return resp, err
}

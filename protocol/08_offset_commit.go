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
//
// Commits read together share one append: the handler starts the commit
// and postpones its answer (Request.postpone) when the coordinator can
// (OffsetCommitStarter); the reader handles the client's next buffered
// OffsetCommits alike, then leads their appends, written together with
// what other connections' commits queued meanwhile, and answers each once
// stored. Any other request, or waiting for the client, settles them
// first, so an OffsetFetch after an OffsetCommit still sees it.

func init() { register(8, 0, 8, handleOffsetCommit) }

// OffsetCommitStarter is implemented by a GroupCoordinator that can start
// an OffsetCommit and write its append later, together with others
// (*group.Coordinator): lead (nil when there is nothing to lead) writes
// the appends the commit left unwritten and must be called soon, and does
// not wait for other requests; answer then waits for the response as
// OffsetCommit returns it. Without it, OffsetCommit is called.
type OffsetCommitStarter interface {
	StartOffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (lead func(), answer func() (*kmsg.OffsetCommitResponse, error), err error)
}

func handleOffsetCommit(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	if s.groupDenied(r, security.OpRead, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	denied := s.authorizeOffsetCommitTopics(r, req)
	withDenied := func(resp kmsg.Response, err error) (kmsg.Response, error) {
		if oc, ok := resp.(*kmsg.OffsetCommitResponse); ok && denied != nil {
			oc.Topics = append(oc.Topics, denied...)
		}
		return resp, err
	}
	if starter, ok := s.cfg.Groups.(OffsetCommitStarter); ok && r.c != nil {
		lead, answer, err := starter.StartOffsetCommit(ctx, req)
		if err == nil {
			r.postpone(lead, func() (kmsg.Response, error) {
				return withDenied(groupCall(ctx, s, req, func(GroupCoordinator) (*kmsg.OffsetCommitResponse, error) {
					return answer()
				}))
			})
			return nil, nil
		}
		return withDenied(groupCall(ctx, s, req, func(GroupCoordinator) (*kmsg.OffsetCommitResponse, error) {
			return nil, err
		}))
	}
	return withDenied(groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetCommitResponse, error) {
		return g.OffsetCommit(ctx, req)
	}))
}

package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// OffsetDelete: v0
//
// Behaviour:
//   - Deletes committed offsets (tombstones): any of an Empty group; of a
//     consumer group with members only for topics no member subscribes to
//     (GROUP_SUBSCRIBED_TO_TOPIC otherwise); NON_EMPTY_GROUP for a non-consumer
//     group with members; GROUP_ID_NOT_FOUND for an unknown group.

func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	// Kafka: Delete on the group (GROUP_AUTHORIZATION_FAILED), Read on
	// each topic (TOPIC_AUTHORIZATION_FAILED).
	if s.groupDenied(r, security.OpDelete, req.Group) {
		return groupErrorResponse(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	denied := s.authorizeOffsetDeleteTopics(r, req)
	resp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetDeleteResponse, error) {
		return g.OffsetDelete(ctx, req)
	})
	if od, ok := resp.(*kmsg.OffsetDeleteResponse); ok && denied != nil {
		od.Topics = append(od.Topics, denied...)
	}
	return resp, err
}

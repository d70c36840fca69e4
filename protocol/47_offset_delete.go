package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
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
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetDeleteResponse, error) {
		return g.OffsetDelete(ctx, req)
	})
}

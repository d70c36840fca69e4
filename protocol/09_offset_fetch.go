package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-8
//
// Behaviour:
//   - Returns the committed offset, leader epoch and metadata of each asked
//     partition, -1 (and "") where nothing is committed; a group the
//     coordinator does not know has nothing committed (no error).
//   - NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker does not
//     (yet) coordinate the group.
//
// Version notes:
//   - v0-1: topics must be listed; no top-level error code, so a coordinator
//     error is on every partition.
//   - v2: null topics = every committed partition; top-level error code.
//   - v3: throttle. v5: committed leader epoch. v6: flexible.
//   - v7: require_stable (no transactions in Sluice: offsets are always stable).
//   - v8: several groups in one request, each with its own error code.

func init() { register(9, 0, 8, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetFetchResponse, error) {
		return g.OffsetFetch(ctx, req)
	})
}

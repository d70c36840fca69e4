package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
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
//   - v8: several groups in one request, each with its own error code; a
//     group named again gets INVALID_REQUEST for its repeats (each group
//     is answered once per request).

func init() { register(9, 0, 8, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	az := s.authorizeOffsetFetch(r, req)
	if resp, denied := az.deniedWhole(req); denied {
		return resp, nil
	}
	resp, err := offsetFetch(ctx, s, req)
	if of, ok := resp.(*kmsg.OffsetFetchResponse); ok {
		az.finish(of)
	}
	return resp, err
}

func offsetFetch(ctx context.Context, s *Server, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	dup := repeats(len(req.Groups), func(i int) string { return req.Groups[i].Group })
	if dup == nil {
		return groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetFetchResponse, error) {
			return g.OffsetFetch(ctx, req)
		})
	}
	// Each group answered once; its repeats answer INVALID_REQUEST.
	all := req.Groups
	unique := make([]kmsg.OffsetFetchRequestGroup, 0, len(all))
	for i, g := range all {
		if !dup[i] {
			unique = append(unique, g)
		}
	}
	req.Groups = unique
	kresp, err := groupCall(ctx, s, req, func(g GroupCoordinator) (*kmsg.OffsetFetchResponse, error) {
		return g.OffsetFetch(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	answered := resp.Groups
	resp.Groups = make([]kmsg.OffsetFetchResponseGroup, 0, len(all))
	next := 0
	for i, g := range all {
		if !dup[i] && next < len(answered) {
			resp.Groups = append(resp.Groups, answered[next])
			next++
			continue
		}
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, kerr.InvalidRequest.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

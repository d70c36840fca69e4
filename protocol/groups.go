package protocol

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupCoordinator is what the consumer-group handlers (08 OffsetCommit,
// 09 OffsetFetch, 10 FindCoordinator, 11 JoinGroup, 12 Heartbeat,
// 13 LeaveGroup, 14 SyncGroup, 15 DescribeGroups, 16 ListGroups,
// 42 DeleteGroups, 47 OffsetDelete) call. The server holds it in
// Config.Groups; it is nil when no group coordinator is wired, and the
// group APIs then answer COORDINATOR_NOT_AVAILABLE.
//
// *group.Coordinator implements it. Each method takes the decoded request
// (at its version) and returns the response built with ResponseKind, so at
// the same version, with Kafka's error codes in it. An error means no answer
// could be made (the connection closed, the coordinator shut down).
// JoinGroup and SyncGroup wait for the rebalance; OffsetCommit, DeleteGroups
// and OffsetDelete for their records to be stored. Request byte slices are
// not kept after a method returns.
type GroupCoordinator interface {
	// FindCoordinator answers with the address on listener (the listener
	// the client came in on) of the broker coordinating each key.
	FindCoordinator(ctx context.Context, listener string, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error)
	// JoinGroup: clientID from the request header, clientHost as Kafka
	// shows it ("/127.0.0.1").
	JoinGroup(ctx context.Context, clientID, clientHost string, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error)
	SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error)
	Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error)
	LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error)
	OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error)
	OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error)
	OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error)
	DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error)
	ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error)
	DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error)
}

// SetGroups sets the group coordinator of a bound server before it serves:
// the coordinator needs the broker, which the appliance builds after
// binding.
func (b *Bound) SetGroups(g GroupCoordinator) { b.s.cfg.Groups = g }

// The group handlers do not Detach: like Kafka, which reads no further
// request from a connection until it answered the current one, a
// connection's next request (say an OffsetFetch after an OffsetCommit)
// sees the effect of the one before.

// clientHost formats a remote address the way Kafka shows a member's host
// in DescribeGroups: "/" and the IP.
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}

// groupCall runs a GroupCoordinator method. Without a coordinator, or when
// it shut down while the connection is still up, the client gets
// COORDINATOR_NOT_AVAILABLE (it looks the coordinator up again) rather
// than a closed connection.
func groupCall[Req kmsg.Request, Resp kmsg.Response](ctx context.Context, s *Server, req Req,
	fn func(GroupCoordinator) (Resp, error),
) (kmsg.Response, error) {
	if s.cfg.Groups == nil {
		return groupErrorResponse(req, kerr.CoordinatorNotAvailable.Code), nil
	}
	resp, err := fn(s.cfg.Groups)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // the connection is closing: nobody to answer
		}
		s.log.Warn("group coordinator", "api", kmsg.NameForKey(req.Key()), "err", err)
		return groupErrorResponse(req, kerr.CoordinatorNotAvailable.Code), nil
	}
	return resp, nil
}

// groupErrorResponse answers req with code everywhere the response has an
// error code.
func groupErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
		for _, k := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, code
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, r.MemberID
		return resp
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = code
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			resp.Groups = append(resp.Groups, rg)
		}
		if r.Version < 2 { // no top-level error code: on every partition
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DeleteGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	return req.ResponseKind()
}

// repeats reports, for each name, whether it was named before it in names
// (nil when none is): DescribeGroups and OffsetFetch describe a group once
// per request, so an answer stays as large as the groups' state, not as
// the request's repetitions make it.
func repeats(n int, name func(int) string) []bool {
	var out []bool
	seen := make(map[string]struct{}, n)
	for i := range n {
		if _, dup := seen[name(i)]; dup {
			if out == nil {
				out = make([]bool, n)
			}
			out[i] = true
			continue
		}
		seen[name(i)] = struct{}{}
	}
	return out
}

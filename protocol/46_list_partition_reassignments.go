package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// ListPartitionReassignments: v0
//
// Behaviour (KIP-455):
//   - The ongoing reassignments: for each partition being reassigned, its
//     replicas (target plus original), the replicas being added and those
//     being removed. A null topic list means every topic; partitions that
//     are not being reassigned (or do not exist) are left out, as in Kafka.
//
// Version notes:
//   - v0: flexible.

func init() { register(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.allowedCluster(r, security.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	img := s.cfg.Broker.Image()
	type want struct {
		all   bool
		parts map[int32]struct{}
	}
	wanted := map[string]want{}
	if req.Topics == nil {
		for name := range img.Topics {
			wanted[name] = want{all: true}
		}
	} else {
		for _, rt := range req.Topics {
			w := wanted[rt.Topic]
			if w.parts == nil {
				w.parts = make(map[int32]struct{}, len(rt.Partitions))
			}
			for _, p := range rt.Partitions {
				w.parts[p] = struct{}{}
			}
			wanted[rt.Topic] = w
		}
	}
	names := make([]string, 0, len(wanted))
	for n := range wanted {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		t, ok := img.Topics[name]
		if !ok {
			continue
		}
		w := wanted[name]
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = name
		for _, p := range t.Partitions {
			if len(p.Adding) == 0 && len(p.Removing) == 0 {
				continue
			}
			if _, ok := w.parts[p.Partition]; !w.all && !ok {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = p.Partition
			sp.Replicas = slices.Clone(p.Replicas)
			sp.AddingReplicas = append([]int32{}, p.Adding...)
			sp.RemovingReplicas = append([]int32{}, p.Removing...)
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return resp, nil
}

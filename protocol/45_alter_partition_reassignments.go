package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// AlterPartitionReassignments: v0-1
//
// Behaviour (KIP-455):
//   - For each partition, a target replica list starts a reassignment: the
//     assignment becomes the target plus the current replicas, with the
//     replicas to add and remove recorded (/brokers/topics/<t> as Kafka
//     writes it). The new replicas follow the leader and catch up; once
//     every target replica is in the ISR the controller moves leadership
//     into the target if needed, drops the removed replicas and ends the
//     reassignment. A null replica list cancels an ongoing reassignment
//     (back to the original replicas). The response comes once the
//     reassignment is recorded, not when it completes
//     (ListPartitionReassignments shows progress).
//   - Any broker records it; clients send it to the controller.
//   - Partition errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT
//     (an unknown or repeated broker, an empty list),
//     NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing),
//     INVALID_REPLICATION_FACTOR (v1 with allow_replication_factor_change
//     false and a target of another size). More than 10,000 partitions in
//     one request: POLICY_VIOLATION (top level), Kafka's limit on one
//     request's metadata records.
//
// Version notes:
//   - v0: flexible. v1: allow_replication_factor_change (KIP-860).

func init() { register(45, 0, 1, handleAlterPartitionReassignments) }

func handleAlterPartitionReassignments(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	img := s.cfg.Broker.Image()
	live := func(id int32) bool { _, ok := img.Broker(id); return ok }
	ctl := s.cfg.Controller
	if !s.allowedCluster(r, security.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if ctl == nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	// A reassignment is a metadata record per partition: a request of
	// more than one request may write is refused as a whole, as Kafka
	// refuses the batch.
	partitions := 0
	for _, rt := range req.Topics {
		partitions += len(rt.Partitions)
	}
	if partitions > cluster.MaxRecordsPerRequest {
		code, msg := broker.ErrorCode(broker.ErrExcessiveBatch)
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	r.Detach()
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		results := map[int32]error{}
		targets := map[int32][]int32{}
		ti, ok := img.Topics[rt.Topic]
		for _, rp := range rt.Partitions {
			switch {
			case !ok || ti.Deleting || rp.Partition < 0 || int(rp.Partition) >= len(ti.Partitions):
				results[rp.Partition] = cluster.ErrUnknownPartition
			case rp.Replicas != nil && len(rp.Replicas) == 0:
				results[rp.Partition] = errEmptyReplicas
			case req.Version >= 1 && !req.AllowReplicationFactorChange && rp.Replicas != nil &&
				len(rp.Replicas) != len(originalReplicas(ti.Partitions[rp.Partition])):
				results[rp.Partition] = errRFChange
			default:
				targets[rp.Partition] = rp.Replicas
			}
		}
		if len(targets) > 0 {
			rs, err := ctl.StartReassignments(ctx, rt.Topic, targets, live)
			for p := range targets {
				switch {
				case err != nil:
					results[p] = err
				default:
					results[p] = rs[p]
				}
			}
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			if err := results[rp.Partition]; err != nil {
				code, msg := broker.ErrorCode(err)
				sp.ErrorCode, sp.ErrorMessage = code, &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

var (
	errRFChange      = &broker.Error{Code: kerr.InvalidReplicationFactor, Msg: "the replication factor may not change (allow_replication_factor_change is false)"}
	errEmptyReplicas = &broker.Error{Code: kerr.InvalidReplicaAssignment, Msg: "an empty replica list"}
)

// originalReplicas is a partition's replica set before any ongoing
// reassignment.
func originalReplicas(p broker.PartitionImage) []int32 {
	out := make([]int32, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		if !slices.Contains(p.Adding, r) {
			out = append(out, r)
		}
	}
	return out
}

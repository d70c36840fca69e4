package protocol

import (
	"context"

	"github.com/sluice-io/sluice/cluster"
)

// Controller is this broker's controller role as the controller-only APIs
// use it: 07 ControlledShutdown, 43 ElectLeaders and 45
// AlterPartitionReassignments (46 ListPartitionReassignments reads the
// broker's metadata image). The server holds it in Config.Controller; nil
// answers them NOT_CONTROLLER. *cluster.Controller implements it (the
// appliance wires it with Bound.SetController); protocol owns the interface
// so that it depends on these four calls, not on the controller's package
// internals. Errors are the cluster package's markers, answered through
// broker.ErrorCode.
type Controller interface {
	// Epoch is the controller epoch this broker holds, 0 when it is not the
	// active controller.
	Epoch() int32
	// ControlledShutdown moves leadership away from brokerID and returns
	// the partitions it still leads.
	ControlledShutdown(ctx context.Context, brokerID int32) ([]cluster.TopicPartitionID, error)
	// ElectLeaders runs preferred (or, unclean, any-replica) elections on
	// parts (nil: every partition) and returns each partition's outcome.
	ElectLeaders(ctx context.Context, unclean bool, parts []cluster.TopicPartitionID) (map[cluster.TopicPartitionID]error, error)
	// StartReassignments records reassignments of topic's partitions to
	// targets (a nil target cancels); known says which broker ids exist.
	StartReassignments(ctx context.Context, topic string, targets map[int32][]int32, known func(int32) bool) (map[int32]error, error)
}

// SetController sets the controller the controller APIs call, before the
// server serves.
func (b *Bound) SetController(c Controller) { b.s.cfg.Controller = c }

package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
)

// The broker's side of a controlled shutdown (Kafka's
// controlled.shutdown.enable): before a broker of a cluster stops, it asks
// the active controller to move leadership of the partitions it leads to
// other in-sync replicas, so clients and followers go over while it still
// serves. The controller's side is cluster.Controller.ControlledShutdown.

// ShutdownController is the controller's side of a controlled shutdown,
// asked directly when this broker is the active controller
// (*cluster.Controller).
type ShutdownController interface {
	ControlledShutdown(ctx context.Context, brokerID int32) ([]cluster.TopicPartitionID, error)
}

// ControlledShutdownConfig configures ControlledShutdown.
type ControlledShutdownConfig struct {
	// MaxRetries is controlled.shutdown.max.retries: attempts after the
	// first.
	MaxRetries int
	// RetryBackoff is controlled.shutdown.retry.backoff.ms.
	RetryBackoff time.Duration
	// Controller is this broker's controller, asked in-process when this
	// broker is the active controller; another broker's is asked with a
	// ControlledShutdown request over the inter-broker listener.
	Controller ShutdownController
}

// ControlledShutdown stops following, then asks the controller (this
// broker's own, or another broker's over the inter-broker listener) to move
// leadership away, retrying up to MaxRetries times, then stops replication.
// A broker that cannot reach the controller shuts down anyway: its
// partitions then fail over when its coordinator session ends.
func (b *Broker) ControlledShutdown(cfg ControlledShutdownConfig) {
	log := b.cfg.Logger.With("component", "controlled-shutdown")
	retries := cfg.MaxRetries
	backoff := cfg.RetryBackoff
	deadline := time.Now().Add(time.Duration(retries+1) * (backoff + 30*time.Second))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer b.StopReplication()
	// Stop following first, as Kafka's controller stops a shutting-down
	// broker's replicas (StopReplica) before it takes the broker out of
	// their ISRs: a follower still fetching while the controller shrinks
	// the ISRs is caught up, so its leaders add it straight back, and
	// acks=all producers then wait for a broker that is about to go (until
	// replica.lag.time.max.ms). Nothing on this broker needs its followed
	// replicas any more; it catches up when it starts again.
	b.fetchers.close()
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			time.Sleep(backoff)
		}
		if err := b.Sync(ctx); err != nil {
			log.Warn("metadata refresh failed", "err", err)
		}
		remaining, err := b.askControlledShutdown(ctx, cfg.Controller)
		if err != nil {
			log.Warn("controlled shutdown attempt failed", "attempt", attempt+1, "err", err)
			continue
		}
		if len(remaining) == 0 {
			log.Info("controlled shutdown done: this broker leads no replicated partition")
			// Let clients and followers see the new leaders.
			_ = b.Sync(ctx)
			return
		}
		log.Warn("controlled shutdown: partitions still led here", "attempt", attempt+1, "count", len(remaining), "first", remaining[0])
	}
	log.Warn("controlled shutdown incomplete; shutting down anyway")
}

// askControlledShutdown sends one ControlledShutdown to the active
// controller and returns the partitions this broker still leads.
func (b *Broker) askControlledShutdown(ctx context.Context, local ShutdownController) ([]cluster.TopicPartitionID, error) {
	ctrl := b.Image().Controller
	if ctrl < 0 {
		return nil, errors.New("no controller")
	}
	if ctrl == b.cfg.BrokerID {
		return local.ControlledShutdown(ctx, b.cfg.BrokerID)
	}
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version = 3
	req.BrokerID = b.cfg.BrokerID
	req.BrokerEpoch = -1
	kresp, err := b.RequestBroker(ctx, ctrl, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ControlledShutdownResponse)
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("controller %d: %w", ctrl, kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []cluster.TopicPartitionID
	for _, p := range resp.PartitionsRemaining {
		out = append(out, cluster.TopicPartitionID{Topic: p.Topic, Partition: p.Partition})
	}
	return out, nil
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	Coordinator Coordinator
	BrokerID    int32
	Logger      *slog.Logger
	// UncleanLeaderElection (unclean.leader.election.enable) lets a live
	// replica outside the ISR become leader when no ISR member is live.
	UncleanLeaderElection bool
	// RetryInterval is how long the controller waits before retrying a
	// failed pass (a lost compare-and-set, a store error). Default 1s.
	RetryInterval time.Duration
}

// Controller is the controller role, written against any Coordinator: each
// broker runs one; the one that wins Campaign acts. On every change it
// brings the partition states in line with the topics and the live brokers:
// it gives new partitions their first leader and ISR, moves leadership off
// brokers that went away, and completes topic deletions. On a single node it
// trivially elects its own broker everywhere.
type Controller struct {
	cfg ControllerConfig
	log *slog.Logger
}

// NewController returns a controller; Run starts it.
func NewController(cfg ControllerConfig) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	return &Controller{cfg: cfg, log: cfg.Logger.With("component", "controller")}
}

// Run campaigns for the controller role and, while it holds it, reconciles
// on every change, until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	changes := c.cfg.Coordinator.Watch(ctx)
	var retry <-chan time.Time
	for {
		info, err := c.cfg.Coordinator.Campaign(ctx, c.cfg.BrokerID)
		if err == nil && info.ID == c.cfg.BrokerID {
			err = c.Reconcile(ctx, info.Epoch)
		}
		retry = nil
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.log.Warn("controller pass failed; retrying", "err", err, "in", c.cfg.RetryInterval)
			retry = time.After(c.cfg.RetryInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-changes:
			if !ok {
				return nil
			}
		case <-retry:
		}
	}
}

// Reconcile is one controller pass at controller epoch epoch. It is
// idempotent: running it again with nothing changed writes nothing.
func (c *Controller) Reconcile(ctx context.Context, epoch int32) error {
	co := c.cfg.Coordinator
	brokers, err := co.Brokers(ctx)
	if err != nil {
		return err
	}
	live := make(map[int32]bool, len(brokers))
	for _, b := range brokers {
		live[b.ID] = true
	}
	isLive := func(id int32) bool { return live[id] }

	deletions, err := co.PendingDeletions(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range deletions {
		if err := co.DeleteTopic(ctx, name); err != nil && !errors.Is(err, ErrNoTopic) {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", name, err))
			continue
		}
		c.log.Info("topic deleted", "topic", name)
	}

	names, err := co.Topics(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if slices.Contains(deletions, name) {
			continue
		}
		t, err := co.Topic(ctx, name)
		if errors.Is(err, ErrNoTopic) {
			continue
		}
		if err != nil {
			return err
		}
		for p, replicas := range t.Replicas {
			if err := c.reconcilePartition(ctx, epoch, name, int32(p), replicas, isLive); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) reconcilePartition(ctx context.Context, epoch int32, topic string, p int32, replicas []int32, live func(int32) bool) error {
	co := c.cfg.Coordinator
	st, err := co.PartitionState(ctx, topic, p)
	if errors.Is(err, ErrNoState) {
		st = InitialState(replicas, live)
		st.ControllerEpoch = epoch
		if _, err := co.CreatePartitionState(ctx, topic, p, st); err != nil && !errors.Is(err, ErrStateExists) {
			return fmt.Errorf("%s-%d: create state: %w", topic, p, err)
		}
		c.log.Debug("partition online", "topic", topic, "partition", p, "leader", st.Leader, "isr", st.ISR)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s-%d: %w", topic, p, err)
	}
	next, changed := ElectLeader(st, replicas, live, c.cfg.UncleanLeaderElection)
	if !changed {
		return nil
	}
	next.ControllerEpoch = epoch
	if _, err := co.SetPartitionState(ctx, topic, p, next); err != nil {
		return fmt.Errorf("%s-%d: elect leader: %w", topic, p, err)
	}
	c.log.Info("partition leader changed", "topic", topic, "partition", p,
		"leader", next.Leader, "leader_epoch", next.LeaderEpoch, "isr", next.ISR, "previous_leader", st.Leader)
	return nil
}

// InitialState is a new partition's first state: the first live replica in
// assignment order leads, every live replica is in the ISR, epoch 0. With no
// live replica the partition starts offline (leader -1, ISR = assignment).
func InitialState(replicas []int32, live func(int32) bool) PartitionState {
	st := PartitionState{Leader: -1}
	for _, r := range replicas {
		if live(r) {
			if st.Leader < 0 {
				st.Leader = r
			}
			st.ISR = append(st.ISR, r)
		}
	}
	if st.Leader < 0 {
		st.ISR = slices.Clone(replicas)
	}
	return st
}

// ElectLeader decides whether a partition needs a new leader: when its
// leader is gone (or it has none), the first replica in assignment order that
// is live and in the ISR leads; failing that, with unclean election allowed,
// the first live replica (the ISR becomes just it); failing that, the
// partition goes offline (leader -1, the ISR kept so a returning member can
// lead again). The epoch is bumped on every leader change. It returns the
// new state and whether it differs from st (Version is carried over for the
// compare-and-set).
func ElectLeader(st PartitionState, replicas []int32, live func(int32) bool, unclean bool) (PartitionState, bool) {
	if st.Leader >= 0 && live(st.Leader) {
		return st, false
	}
	next := st.Clone()
	next.Leader = -1
	for _, r := range replicas {
		if live(r) && slices.Contains(st.ISR, r) {
			next.Leader = r
			break
		}
	}
	if next.Leader >= 0 {
		next.ISR = slices.DeleteFunc(next.ISR, func(b int32) bool { return !live(b) })
	} else if unclean {
		for _, r := range replicas {
			if live(r) {
				next.Leader = r
				next.ISR = []int32{r}
				break
			}
		}
	}
	if next.Leader == st.Leader {
		return st, false // still offline
	}
	next.LeaderEpoch = st.LeaderEpoch + 1
	return next, true
}

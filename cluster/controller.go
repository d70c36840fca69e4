package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Errors of ElectLeaders, per partition (Kafka's error codes of the same
// names).
var (
	ErrElectionNotNeeded           = errors.New("cluster: election not needed")
	ErrPreferredLeaderNotAvailable = errors.New("cluster: preferred leader not available")
	ErrEligibleLeadersNotAvailable = errors.New("cluster: eligible leaders not available")
	ErrUnknownPartition            = errors.New("cluster: unknown topic or partition")
	ErrBrokerNotAvailable          = errors.New("cluster: broker not available")
)

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	Coordinator Coordinator
	BrokerID    int32
	Logger      *slog.Logger
	// UncleanLeaderElection (unclean.leader.election.enable) lets a live
	// replica outside the ISR become leader when no ISR member is live. A
	// topic's own unclean.leader.election.enable overrides it.
	UncleanLeaderElection bool
	// RetryInterval is how long the controller waits before retrying a
	// failed pass (a lost compare-and-set, a store error). Default 1s.
	RetryInterval time.Duration
	// AutoLeaderRebalance (auto.leader.rebalance.enable): every
	// LeaderImbalanceCheckInterval (leader.imbalance.check.interval.seconds,
	// default 300s) the controller moves leadership back to the preferred
	// replica (the first of the assignment) of every partition whose
	// preferred replica is live and in the ISR, on each broker whose share
	// of preferred partitions led elsewhere exceeds
	// LeaderImbalancePerBrokerPercentage (default 10).
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int
	// Clock is Run's time: the leader balance check's ticker and the delay
	// before a failed pass is retried. Nil is real time; tests pass a
	// clockwork.FakeClock and advance it.
	Clock clockwork.Clock
}

// Controller is the controller role, written against any Coordinator: each
// broker runs one; the one that wins Campaign acts. On every change it
// brings the partition states in line with the topics and the live brokers:
//
//   - new partitions get their first leader and ISR;
//   - a partition whose leader went away (or is shutting down, or was
//     reassigned away) gets a new leader: the first replica in assignment
//     order that is live and in the ISR; with none, the partition goes
//     offline (leader -1) unless unclean election is enabled;
//   - replicas that went away (or are shutting down) leave the ISR at once,
//     so acks=all producers do not wait for replica.lag.time.max.ms;
//   - reassignments complete once every target replica is in the ISR;
//   - topic deletions complete.
//
// Its writes are marked WithControllerEpoch, so a coordinator that fences
// (ZooKeeper) refuses them once another broker has become controller. On a
// single node it trivially elects its own broker everywhere.
type Controller struct {
	cfg ControllerConfig
	log *slog.Logger

	passMu sync.Mutex // one pass at a time: Run's, ControlledShutdown's, ElectLeaders'

	mu           sync.Mutex
	epoch        int32           // the epoch this broker controls at; 0 when it is not the controller
	shuttingDown map[int32]int64 // broker -> registration timestamp of the incarnation that asked
	kick         chan struct{}
}

// NewController returns a controller; Run starts it.
func NewController(cfg ControllerConfig) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if cfg.LeaderImbalancePerBrokerPercentage <= 0 {
		cfg.LeaderImbalancePerBrokerPercentage = 10
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &Controller{
		cfg: cfg, log: cfg.Logger.With("component", "controller"),
		shuttingDown: map[int32]int64{},
		kick:         make(chan struct{}, 1),
	}
}

// Epoch returns the controller epoch this broker holds, 0 when it is not
// the controller.
func (c *Controller) Epoch() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

func (c *Controller) setEpoch(e int32) {
	c.mu.Lock()
	if c.epoch != e && e > 0 {
		c.log.Info("acting as controller", "broker", c.cfg.BrokerID, "epoch", e)
	}
	c.epoch = e
	c.mu.Unlock()
}

// Run campaigns for the controller role and, while it holds it, reconciles
// on every change (and periodically checks leader balance), until ctx is
// done.
func (c *Controller) Run(ctx context.Context) error {
	co := c.cfg.Coordinator
	changes := co.Watch(ctx)
	var rebalance <-chan time.Time
	if c.cfg.AutoLeaderRebalance {
		t := c.cfg.Clock.NewTicker(c.cfg.LeaderImbalanceCheckInterval)
		defer t.Stop()
		rebalance = t.Chan()
	}
	var retry <-chan time.Time
	balance := false
	for {
		err := c.campaignAndReconcile(ctx, balance)
		balance = false
		retry = nil
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.log.Warn("controller pass failed; retrying", "err", err, "in", c.cfg.RetryInterval)
			retry = c.cfg.Clock.After(c.cfg.RetryInterval)
		}
		select {
		case <-ctx.Done():
			c.setEpoch(0)
			return nil
		case _, ok := <-changes:
			if !ok {
				c.setEpoch(0)
				return nil
			}
		case <-c.kick:
		case <-rebalance:
			balance = true
		case <-retry:
		}
	}
}

// campaignAndReconcile takes the role when nobody holds it and runs a pass
// when this broker is the controller.
func (c *Controller) campaignAndReconcile(ctx context.Context, balance bool) error {
	co := c.cfg.Coordinator
	// Only campaign when the role looks free or ours: Campaign costs
	// store round trips and this runs on every change.
	if cur, err := co.Controller(ctx); err == nil && cur.ID >= 0 && cur.ID != c.cfg.BrokerID {
		c.setEpoch(0)
		return nil
	}
	info, err := co.Campaign(ctx, c.cfg.BrokerID)
	if err != nil {
		return err
	}
	if info.ID != c.cfg.BrokerID {
		c.setEpoch(0)
		return nil
	}
	c.setEpoch(info.Epoch)
	c.passMu.Lock()
	defer c.passMu.Unlock()
	err = c.reconcileRetrying(ctx, info.Epoch)
	if err == nil && balance {
		err = c.rebalance(ctx, info.Epoch)
	}
	if errors.Is(err, ErrNotController) {
		c.setEpoch(0)
	}
	return err
}

// reconcileRetrying runs Reconcile again at once when it lost a
// compare-and-set to a leader's ISR change (common under load).
func (c *Controller) reconcileRetrying(ctx context.Context, epoch int32) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.Reconcile(ctx, epoch); err == nil || !errors.Is(err, ErrBadVersion) {
			return err
		}
	}
	return err
}

// view reads the registered brokers and applies the controlled shutdowns
// in progress (forgetting those of brokers that went away or came back).
func (c *Controller) view(ctx context.Context) (View, error) {
	brokers, err := c.cfg.Coordinator.Brokers(ctx)
	if err != nil {
		return View{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, stale := NewView(brokers, c.shuttingDown)
	for _, id := range stale {
		delete(c.shuttingDown, id)
	}
	return v, nil
}

// Reconcile is one controller pass at controller epoch epoch. It is
// idempotent: running it again with nothing changed writes nothing.
func (c *Controller) Reconcile(ctx context.Context, epoch int32) error {
	co := c.cfg.Coordinator
	wctx := WithControllerEpoch(ctx, epoch)
	v, err := c.view(ctx)
	if err != nil {
		return err
	}

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
	if err := c.adoptLegacyReassignments(ctx, deletions); err != nil {
		errs = append(errs, err)
	}

	topics, err := c.readTopics(ctx, deletions)
	if err != nil {
		return err
	}
	pass := PlanPass(topics, v, epoch)
	for _, u := range pass.Unclean {
		c.log.Warn("unclean leader election: a replica outside the ISR leads; records may be lost",
			"topic", u.Topic, "partition", u.Partition, "leader", u.Leader, "isr", u.ISR)
	}
	writes, before, complete := pass.Writes, pass.Before, pass.Complete
	failed := map[string]map[int32]bool{}
	_, werrs := WriteStates(wctx, co, writes)
	for i, err := range werrs {
		w := writes[i]
		if err != nil {
			if errors.Is(err, ErrStateExists) {
				continue // created by another pass meanwhile
			}
			errs = append(errs, fmt.Errorf("%s-%d: %w", w.Topic, w.Partition, err))
			if failed[w.Topic] == nil {
				failed[w.Topic] = map[int32]bool{}
			}
			failed[w.Topic][w.Partition] = true
			continue
		}
		c.logChange(w, before[i], len(writes))
	}
	if len(writes) > 20 {
		c.log.Info("partition states written", "count", len(writes)-len(failedList(failed)), "failed", len(failedList(failed)), "epoch", epoch)
	}
	// Reassignments whose final state is written: the assignment drops the
	// removed replicas and the reassignment ends.
	for name, parts := range complete {
		if err := c.completeReassignments(ctx, name, parts, failed[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// uncleanDefault is unclean.leader.election.enable for topics that do not
// set it: the controller's dynamic broker config, else the cluster-wide
// dynamic default, else its static setting (Kafka's precedence).
func (c *Controller) uncleanDefault(ctx context.Context) bool {
	if s, ok := c.cfg.Coordinator.(BrokerConfigStore); ok {
		for _, entity := range []string{strconv.Itoa(int(c.cfg.BrokerID)), DefaultBrokerEntity} {
			cfg, err := s.BrokerConfig(ctx, entity)
			if err != nil {
				break
			}
			switch strings.ToLower(strings.TrimSpace(cfg["unclean.leader.election.enable"])) {
			case "true":
				return true
			case "false":
				return false
			}
		}
	}
	return c.cfg.UncleanLeaderElection
}

// readTopics reads every topic but those in skip (being deleted) with its
// partition states and whether unclean election applies to it, for a pass.
func (c *Controller) readTopics(ctx context.Context, skip []string) ([]TopicSnapshot, error) {
	co := c.cfg.Coordinator
	names, err := co.Topics(ctx)
	if err != nil {
		return nil, err
	}
	unclean := c.uncleanDefault(ctx)
	var out []TopicSnapshot
	for _, name := range names {
		if slices.Contains(skip, name) {
			continue
		}
		t, err := co.Topic(ctx, name)
		if errors.Is(err, ErrNoTopic) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ts := TopicSnapshot{Topic: t, States: make(map[int32]PartitionState, len(t.Replicas)), Unclean: unclean}
		if cfg, err := co.TopicConfig(ctx, name); err == nil {
			if v, ok := cfg["unclean.leader.election.enable"]; ok {
				ts.Unclean = strings.EqualFold(strings.TrimSpace(v), "true")
			}
		}
		for p := range t.Replicas {
			st, err := co.PartitionState(ctx, name, int32(p))
			if errors.Is(err, ErrNoState) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s-%d: %w", name, p, err)
			}
			ts.States[int32(p)] = st
		}
		out = append(out, ts)
	}
	return out, nil
}

// readStates reads every topic with the partition states it can read,
// skipping what it cannot (for the checks that are retried anyway).
func (c *Controller) readStates(ctx context.Context) ([]TopicSnapshot, error) {
	co := c.cfg.Coordinator
	names, err := co.Topics(ctx)
	if err != nil {
		return nil, err
	}
	var out []TopicSnapshot
	for _, name := range names {
		t, err := co.Topic(ctx, name)
		if err != nil {
			continue
		}
		ts := TopicSnapshot{Topic: t, States: make(map[int32]PartitionState, len(t.Replicas))}
		for p := range t.Replicas {
			if st, err := co.PartitionState(ctx, name, int32(p)); err == nil {
				ts.States[int32(p)] = st
			}
		}
		out = append(out, ts)
	}
	return out, nil
}

func failedList(m map[string]map[int32]bool) []string {
	var out []string
	for t, ps := range m {
		for p := range ps {
			out = append(out, fmt.Sprintf("%s-%d", t, p))
		}
	}
	return out
}

func (c *Controller) logChange(w StateWrite, old PartitionState, n int) {
	lvl := slog.LevelInfo
	if n > 20 {
		lvl = slog.LevelDebug
	}
	switch {
	case w.Create:
		c.log.Log(context.Background(), slog.LevelDebug, "partition online", "topic", w.Topic, "partition", w.Partition, "leader", w.State.Leader, "isr", w.State.ISR)
	case w.State.Leader != old.Leader && w.State.Leader < 0:
		c.log.Warn("partition offline: no live in-sync replica", "topic", w.Topic, "partition", w.Partition,
			"previous_leader", old.Leader, "isr", w.State.ISR)
	case w.State.Leader != old.Leader:
		c.log.Log(context.Background(), lvl, "partition leader changed", "topic", w.Topic, "partition", w.Partition,
			"leader", w.State.Leader, "leader_epoch", w.State.LeaderEpoch, "isr", w.State.ISR, "previous_leader", old.Leader)
	default:
		c.log.Log(context.Background(), lvl, "partition ISR changed", "topic", w.Topic, "partition", w.Partition,
			"leader", w.State.Leader, "leader_epoch", w.State.LeaderEpoch, "isr", w.State.ISR, "previous_isr", old.ISR)
	}
}

// completeReassignments ends the reassignments of parts (except those whose
// state write failed): the assignment becomes the target.
func (c *Controller) completeReassignments(ctx context.Context, name string, parts []int32, failed map[int32]bool) error {
	co := c.cfg.Coordinator
	t, err := co.Topic(ctx, name)
	if err != nil {
		return err
	}
	done := CompleteReassignments(&t, parts, failed)
	if len(done) == 0 {
		return nil
	}
	for _, p := range done {
		c.log.Info("reassignment completed", "topic", name, "partition", p, "replicas", t.Replicas[p])
	}
	if _, err := co.SetTopicAssignment(ctx, t); err != nil {
		return fmt.Errorf("complete reassignment of %s: %w", name, err)
	}
	return nil
}

// adoptLegacyReassignments moves /admin/reassign_partitions requests (when
// the coordinator has them) into the topics and clears them.
func (c *Controller) adoptLegacyReassignments(ctx context.Context, deleting []string) error {
	lr, ok := c.cfg.Coordinator.(LegacyReassigner)
	if !ok {
		return nil
	}
	rs, err := lr.Reassignments(ctx)
	if err != nil || len(rs) == 0 {
		return err
	}
	byTopic := map[string]map[int32][]int32{}
	for _, r := range rs {
		if byTopic[r.Topic] == nil {
			byTopic[r.Topic] = map[int32][]int32{}
		}
		byTopic[r.Topic][r.Partition] = r.Replicas
	}
	v, err := c.view(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for name, targets := range byTopic {
		if slices.Contains(deleting, name) {
			continue
		}
		_, err := c.StartReassignments(ctx, name, targets, v.IsLive)
		if err != nil {
			c.log.Error("reassignment request from /admin/reassign_partitions refused", "topic", name, "err", err)
		}
	}
	if err := lr.SetReassignments(ctx, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// StartReassignments begins reassigning partitions of topic to the target
// replica lists (nil target: cancel that partition's reassignment), as
// AlterPartitionReassignments does: the assignment becomes target plus the
// original replicas, with the difference recorded as adding and removing
// replicas; the controller completes it once the targets are in the ISR.
// known says which broker ids may be named. It returns an error per
// partition (nil: accepted) and a store error.
func (c *Controller) StartReassignments(ctx context.Context, topic string, targets map[int32][]int32, known func(int32) bool) (map[int32]error, error) {
	co := c.cfg.Coordinator
	for attempt := 0; ; attempt++ {
		t, err := co.Topic(ctx, topic)
		if err != nil {
			return nil, storeErr(err)
		}
		results, changed := ApplyReassignments(&t, targets, known)
		if !changed {
			return results, nil
		}
		if _, err := co.SetTopicAssignment(ctx, t); err != nil {
			if errors.Is(err, ErrBadVersion) && attempt < 5 {
				continue
			}
			return nil, storeErr(err)
		}
		for p, err := range results {
			if err == nil {
				if len(targets[p]) == 0 {
					c.log.Info("reassignment cancelled", "topic", topic, "partition", p, "replicas", t.Replicas[p])
				} else {
					c.log.Info("reassignment started", "topic", topic, "partition", p, "target", targets[p],
						"adding", t.Adding[p], "removing", t.Removing[p])
				}
			}
		}
		c.Kick()
		return results, nil
	}
}

// ApplyReassignments changes t for the requested targets (see
// StartReassignments) and reports each partition's result and whether t
// changed.
func ApplyReassignments(t *Topic, targets map[int32][]int32, known func(int32) bool) (map[int32]error, bool) {
	results := make(map[int32]error, len(targets))
	changed := false
	for p, target := range targets {
		if p < 0 || int(p) >= len(t.Replicas) {
			results[p] = fmt.Errorf("%w: %s-%d", ErrUnknownPartition, t.Name, p)
			continue
		}
		if len(target) == 0 {
			// Cancel: back to the original replicas.
			if !t.Reassigning(p) {
				results[p] = ErrNoReassignment
				continue
			}
			t.Replicas[p] = t.Original(p)
			delete(t.Adding, p)
			delete(t.Removing, p)
			results[p] = nil
			changed = true
			continue
		}
		if err := ValidateReplicas(p, target, known); err != nil {
			results[p] = fmt.Errorf("%w: %v", ErrInvalidReplicaAssignment, err)
			continue
		}
		original := t.Replicas[p]
		if t.Reassigning(p) {
			original = t.Original(p)
		}
		var adding, removing []int32
		for _, r := range target {
			if !slices.Contains(original, r) {
				adding = append(adding, r)
			}
		}
		for _, r := range original {
			if !slices.Contains(target, r) {
				removing = append(removing, r)
			}
		}
		replicas := slices.Clone(target)
		replicas = append(replicas, removing...)
		if t.Adding == nil {
			t.Adding = map[int32][]int32{}
		}
		if t.Removing == nil {
			t.Removing = map[int32][]int32{}
		}
		if len(adding) == 0 && len(removing) == 0 {
			// Same set (maybe another order): a plain reorder.
			t.Replicas[p] = replicas
			delete(t.Adding, p)
			delete(t.Removing, p)
		} else {
			t.Replicas[p] = replicas
			t.Adding[p] = adding
			t.Removing[p] = removing
			if len(adding) == 0 {
				delete(t.Adding, p)
			}
			if len(removing) == 0 {
				delete(t.Removing, p)
			}
		}
		results[p] = nil
		changed = true
	}
	return results, changed
}

// Errors of reassignment requests.
var (
	ErrNoReassignment           = errors.New("cluster: no reassignment in progress")
	ErrInvalidReplicaAssignment = errors.New("cluster: invalid replica assignment")
)

// storeErr marks the store being out of reach (ErrUnavailable) as
// ErrNotController too: a controller cut off from its store cannot act, and
// Kafka clients answered NOT_CONTROLLER look the controller up again and
// retry, where UNKNOWN_SERVER_ERROR would end their request.
func storeErr(err error) error {
	if errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNotController) {
		return fmt.Errorf("%w: %w", ErrNotController, err)
	}
	return err
}

// Kick asks Run for a pass now.
func (c *Controller) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// ControlledShutdown handles a broker's request to shut down cleanly (Kafka's
// ControlledShutdown): leadership of the partitions it leads moves to other
// in-sync replicas, and it leaves the ISR of the others. It returns the
// partitions it still leads (no other replica could take over) — the broker
// retries, then shuts down anyway. ErrNotController when this broker is not
// the controller.
func (c *Controller) ControlledShutdown(ctx context.Context, brokerID int32) ([]TopicPartitionID, error) {
	epoch := c.Epoch()
	if epoch == 0 {
		return nil, ErrNotController
	}
	co := c.cfg.Coordinator
	brokers, err := co.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	idx := slices.IndexFunc(brokers, func(b Broker) bool { return b.ID == brokerID })
	if idx < 0 {
		return nil, fmt.Errorf("%w: broker %d is not registered", ErrBrokerNotAvailable, brokerID)
	}
	c.mu.Lock()
	c.shuttingDown[brokerID] = brokers[idx].Timestamp
	c.mu.Unlock()
	c.log.Info("controlled shutdown requested", "broker", brokerID)
	c.passMu.Lock()
	err = c.reconcileRetrying(ctx, epoch)
	c.passMu.Unlock()
	if err != nil {
		return nil, storeErr(err)
	}
	// What it still leads, among partitions with another replica.
	topics, err := c.readStates(ctx)
	if err != nil {
		return nil, err
	}
	return StillLeads(topics, brokerID), nil
}

// TopicPartitionID names a partition.
type TopicPartitionID struct {
	Topic     string
	Partition int32
}

// ElectLeaders runs elections on demand (Kafka's ElectLeaders): preferred
// (leadership to each partition's first replica, when it is live and in the
// ISR) or, with unclean, a leader for partitions that have none (an ISR
// member, else any live replica). A nil partition list means every
// partition. The result holds each partition's outcome: nil (elected),
// ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrEligibleLeadersNotAvailable or ErrUnknownPartition.
func (c *Controller) ElectLeaders(ctx context.Context, unclean bool, parts []TopicPartitionID) (map[TopicPartitionID]error, error) {
	epoch := c.Epoch()
	if epoch == 0 {
		return nil, ErrNotController
	}
	c.passMu.Lock()
	defer c.passMu.Unlock()
	co := c.cfg.Coordinator
	v, err := c.view(ctx)
	if err != nil {
		return nil, storeErr(err)
	}
	all := parts == nil
	if all {
		names, err := co.Topics(ctx)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if t, err := co.Topic(ctx, name); err == nil {
				for p := range t.Replicas {
					parts = append(parts, TopicPartitionID{name, int32(p)})
				}
			}
		}
	}
	results := make(map[TopicPartitionID]error, len(parts))
	// A lost compare-and-set (a leader changed the ISR meanwhile) is decided
	// again on the fresh state.
	for attempt := 0; attempt < 3 && len(parts) > 0; attempt++ {
		var retry []TopicPartitionID
		for tp, err := range c.electOnce(ctx, epoch, v, unclean, parts) {
			results[tp] = err
			if errors.Is(err, ErrBadVersion) {
				retry = append(retry, tp)
			}
		}
		parts = retry
	}
	if all {
		// Kafka answers a request for all partitions with the elected ones only.
		for tp, err := range results {
			if err != nil {
				delete(results, tp)
			}
		}
	}
	return results, nil
}

func (c *Controller) electOnce(ctx context.Context, epoch int32, v View, unclean bool, parts []TopicPartitionID) map[TopicPartitionID]error {
	co := c.cfg.Coordinator
	results := make(map[TopicPartitionID]error, len(parts))
	var writes []StateWrite
	var keys []TopicPartitionID
	topics := map[string]Topic{}
	for _, tp := range parts {
		t, ok := topics[tp.Topic]
		if !ok {
			var err error
			if t, err = co.Topic(ctx, tp.Topic); err != nil {
				results[tp] = ErrUnknownPartition
				continue
			}
			topics[tp.Topic] = t
		}
		st, err := co.PartitionState(ctx, tp.Topic, tp.Partition)
		if tp.Partition < 0 || int(tp.Partition) >= len(t.Replicas) || err != nil {
			results[tp] = ErrUnknownPartition
			continue
		}
		next, err := ElectOnRequest(st, t.Replicas[tp.Partition], v, unclean, epoch)
		if err != nil {
			results[tp] = err
			continue
		}
		writes = append(writes, StateWrite{Topic: tp.Topic, Partition: tp.Partition, State: next})
		keys = append(keys, tp)
	}
	_, errs := WriteStates(WithControllerEpoch(ctx, epoch), co, writes)
	for i, err := range errs {
		results[keys[i]] = err
		if err == nil {
			c.log.Info("leader elected on request", "topic", keys[i].Topic, "partition", keys[i].Partition,
				"leader", writes[i].State.Leader, "leader_epoch", writes[i].State.LeaderEpoch, "unclean", unclean)
		}
	}
	return results
}

// rebalance is the auto.leader.rebalance.enable check: on each broker whose
// share of preferred partitions led by another broker exceeds the
// threshold, leadership goes back to the preferred replica where it is live
// and in the ISR. passMu should be held.
func (c *Controller) rebalance(ctx context.Context, epoch int32) error {
	co := c.cfg.Coordinator
	v, err := c.view(ctx)
	if err != nil {
		return err
	}
	topics, err := c.readStates(ctx)
	if err != nil {
		return err
	}
	writes := PlanRebalance(topics, v, c.cfg.LeaderImbalancePerBrokerPercentage, epoch)
	if len(writes) == 0 {
		return nil
	}
	_, errs := WriteStates(WithControllerEpoch(ctx, epoch), co, writes)
	moved := 0
	for _, err := range errs {
		if err == nil {
			moved++
		}
	}
	c.log.Info("preferred leader election (auto.leader.rebalance.enable)", "moved", moved, "candidates", len(writes))
	return errors.Join(errs...)
}

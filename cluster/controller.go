package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
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
		t := time.NewTicker(c.cfg.LeaderImbalanceCheckInterval)
		defer t.Stop()
		rebalance = t.C
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
			retry = time.After(c.cfg.RetryInterval)
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

// view is what a pass knows about the brokers.
type view struct {
	live         map[int32]Broker
	shuttingDown map[int32]bool
}

func (v view) isLive(id int32) bool   { _, ok := v.live[id]; return ok }
func (v view) eligible(id int32) bool { return v.isLive(id) && !v.shuttingDown[id] }

func (c *Controller) view(ctx context.Context) (view, error) {
	brokers, err := c.cfg.Coordinator.Brokers(ctx)
	if err != nil {
		return view{}, err
	}
	v := view{live: make(map[int32]Broker, len(brokers)), shuttingDown: map[int32]bool{}}
	for _, b := range brokers {
		v.live[b.ID] = b
	}
	c.mu.Lock()
	for id, ts := range c.shuttingDown {
		if b, ok := v.live[id]; !ok || b.Timestamp != ts {
			delete(c.shuttingDown, id) // gone, or a new incarnation
			continue
		}
		v.shuttingDown[id] = true
	}
	c.mu.Unlock()
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

	names, err := co.Topics(ctx)
	if err != nil {
		return err
	}
	var writes []StateWrite
	var before []PartitionState
	complete := map[string][]int32{} // topic -> partitions whose reassignment completes with these writes
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
		unclean := c.cfg.UncleanLeaderElection
		if cfg, err := co.TopicConfig(ctx, name); err == nil {
			if v, ok := cfg["unclean.leader.election.enable"]; ok {
				unclean = strings.EqualFold(strings.TrimSpace(v), "true")
			}
		}
		for p := range t.Replicas {
			pid := int32(p)
			st, err := co.PartitionState(ctx, name, pid)
			if errors.Is(err, ErrNoState) {
				first := InitialState(t.Replicas[p], v.eligible)
				first.ControllerEpoch = epoch
				writes = append(writes, StateWrite{Topic: name, Partition: pid, State: first, Create: true})
				before = append(before, PartitionState{Leader: -2})
				continue
			}
			if err != nil {
				return fmt.Errorf("%s-%d: %w", name, p, err)
			}
			next, changed, done := c.decide(t, pid, st, v, unclean)
			if done {
				complete[name] = append(complete[name], pid)
			}
			if changed {
				next.ControllerEpoch = epoch
				writes = append(writes, StateWrite{Topic: name, Partition: pid, State: next})
				before = append(before, st)
			}
		}
	}
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

// decide returns the state partition p of t should have. done reports
// that p's reassignment completes with that state (or needs no write).
func (c *Controller) decide(t Topic, p int32, st PartitionState, v view, unclean bool) (next PartitionState, changed, done bool) {
	replicas := t.Replicas[p]
	next = st.Clone()
	inISR := func(r int32) bool { return slices.Contains(next.ISR, r) }

	// Leadership.
	leaderOK := st.Leader >= 0 && v.isLive(st.Leader) && slices.Contains(replicas, st.Leader)
	if leaderOK && v.shuttingDown[st.Leader] {
		// Controlled shutdown: move it if another ISR member can lead.
		for _, r := range replicas {
			if r != st.Leader && v.eligible(r) && inISR(r) {
				leaderOK = false
				break
			}
		}
	}
	if !leaderOK {
		next.Leader = -1
		for _, r := range replicas {
			if v.eligible(r) && inISR(r) {
				next.Leader = r
				break
			}
		}
		if next.Leader < 0 && unclean {
			for _, r := range replicas {
				if v.eligible(r) {
					next.Leader = r
					next.ISR = []int32{r}
					c.log.Warn("unclean leader election: a replica outside the ISR leads; records may be lost",
						"topic", t.Name, "partition", p, "leader", r, "isr", st.ISR)
					break
				}
			}
		}
	}

	// The ISR keeps the leader and the live replicas that are not shutting
	// down (an offline partition keeps its ISR, so a returning member can
	// lead again).
	if next.Leader >= 0 {
		isr := make([]int32, 0, len(next.ISR))
		for _, r := range next.ISR {
			if r == next.Leader || (v.eligible(r) && slices.Contains(replicas, r)) {
				isr = append(isr, r)
			}
		}
		if !slices.Contains(isr, next.Leader) {
			isr = append([]int32{next.Leader}, isr...)
		}
		next.ISR = isr
	}

	// A reassignment completes once every target replica is in the ISR:
	// the leader must be a target replica, and the removed replicas leave.
	if t.Reassigning(p) && next.Leader >= 0 {
		target := t.Target(p)
		all := len(target) > 0
		for _, r := range target {
			if !slices.Contains(next.ISR, r) || !v.isLive(r) {
				all = false
			}
		}
		if all {
			if !slices.Contains(target, next.Leader) {
				for _, r := range target {
					if v.eligible(r) && slices.Contains(next.ISR, r) {
						next.Leader = r
						break
					}
				}
			}
			if slices.Contains(target, next.Leader) {
				next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return !slices.Contains(target, r) })
				done = true
				if len(t.Removing[p]) > 0 {
					// Fence the removed replicas with a new epoch.
					next.LeaderEpoch = max(next.LeaderEpoch, st.LeaderEpoch+1)
				}
			}
		}
	}

	if next.Leader != st.Leader {
		next.LeaderEpoch = max(next.LeaderEpoch, st.LeaderEpoch+1)
	}
	changed = next.Leader != st.Leader || next.LeaderEpoch != st.LeaderEpoch || !slices.Equal(next.ISR, st.ISR)
	if !changed {
		return st, false, done
	}
	return next, true, done
}

// completeReassignments ends the reassignments of parts (except those whose
// state write failed): the assignment becomes the target.
func (c *Controller) completeReassignments(ctx context.Context, name string, parts []int32, failed map[int32]bool) error {
	co := c.cfg.Coordinator
	t, err := co.Topic(ctx, name)
	if err != nil {
		return err
	}
	changed := false
	for _, p := range parts {
		if failed[p] || !t.Reassigning(p) {
			continue
		}
		target := t.Target(p)
		t.Replicas[p] = target
		delete(t.Adding, p)
		delete(t.Removing, p)
		changed = true
		c.log.Info("reassignment completed", "topic", name, "partition", p, "replicas", target)
	}
	if !changed {
		return nil
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
		_, err := c.StartReassignments(ctx, name, targets, func(id int32) bool { return v.isLive(id) })
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
		if err := ValidateAssignment([][]int32{target}, known); err != nil {
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
	var remaining []TopicPartitionID
	names, err := co.Topics(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		t, err := co.Topic(ctx, name)
		if err != nil {
			continue
		}
		for p, replicas := range t.Replicas {
			if len(replicas) < 2 {
				continue
			}
			st, err := co.PartitionState(ctx, name, int32(p))
			if err == nil && st.Leader == brokerID {
				remaining = append(remaining, TopicPartitionID{name, int32(p)})
			}
		}
	}
	return remaining, nil
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

func (c *Controller) electOnce(ctx context.Context, epoch int32, v view, unclean bool, parts []TopicPartitionID) map[TopicPartitionID]error {
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
		replicas := t.Replicas[tp.Partition]
		next := st.Clone()
		if unclean {
			if st.Leader >= 0 && v.isLive(st.Leader) {
				results[tp] = ErrElectionNotNeeded
				continue
			}
			next.Leader = -1
			for _, r := range replicas {
				if v.eligible(r) && slices.Contains(st.ISR, r) {
					next.Leader = r
					break
				}
			}
			if next.Leader < 0 {
				for _, r := range replicas {
					if v.eligible(r) {
						next.Leader, next.ISR = r, []int32{r}
						break
					}
				}
			}
			if next.Leader < 0 {
				results[tp] = ErrEligibleLeadersNotAvailable
				continue
			}
		} else {
			pref := replicas[0]
			if st.Leader == pref {
				results[tp] = ErrElectionNotNeeded
				continue
			}
			if !v.eligible(pref) || !slices.Contains(st.ISR, pref) {
				results[tp] = ErrPreferredLeaderNotAvailable
				continue
			}
			next.Leader = pref
		}
		next.LeaderEpoch = st.LeaderEpoch + 1
		next.ControllerEpoch = epoch
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
	names, err := co.Topics(ctx)
	if err != nil {
		return err
	}
	type cand struct {
		tp TopicPartitionID
		st PartitionState
	}
	preferred := map[int32]int{}
	imbalanced := map[int32][]cand{}
	for _, name := range names {
		t, err := co.Topic(ctx, name)
		if err != nil {
			continue
		}
		for p, replicas := range t.Replicas {
			if len(replicas) == 0 || t.Reassigning(int32(p)) {
				continue
			}
			pref := replicas[0]
			preferred[pref]++
			st, err := co.PartitionState(ctx, name, int32(p))
			if err != nil || st.Leader == pref {
				continue
			}
			imbalanced[pref] = append(imbalanced[pref], cand{TopicPartitionID{name, int32(p)}, st})
		}
	}
	var writes []StateWrite
	for b, cands := range imbalanced {
		ratio := float64(len(cands)) * 100 / float64(preferred[b])
		if ratio <= float64(c.cfg.LeaderImbalancePerBrokerPercentage) || !v.eligible(b) {
			continue
		}
		for _, cd := range cands {
			if !slices.Contains(cd.st.ISR, b) {
				continue
			}
			next := cd.st.Clone()
			next.Leader, next.LeaderEpoch, next.ControllerEpoch = b, cd.st.LeaderEpoch+1, epoch
			writes = append(writes, StateWrite{Topic: cd.tp.Topic, Partition: cd.tp.Partition, State: next})
		}
	}
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

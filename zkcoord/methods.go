package zkcoord

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func sortedKeys[V any](m map[string]V) []string {
	ks := slices.Collect(maps.Keys(m))
	sort.Strings(ks)
	return ks
}

// ClusterID implements cluster.Coordinator: /cluster/id, created by the
// first broker that asks.
func (c *Coordinator) ClusterID(ctx context.Context) (string, error) {
	if err := c.check(ctx); err != nil {
		return "", err
	}
	c.mu.RLock()
	id := c.cache.clusterID
	c.mu.RUnlock()
	if id != "" {
		return id, nil
	}
	if err := c.writable(ctx); err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		id, err := c.loadClusterID()
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			u := cluster.NewUUID()
			_, err = c.conn.Create(c.path(clusterIDPath), encodeClusterID(base64.RawURLEncoding.EncodeToString(u[:])), 0, c.acl)
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				continue
			}
		}
		if err != nil {
			return "", fmt.Errorf("cluster id: %w", zkErr(err))
		}
		c.mu.Lock()
		c.cache.clusterID = id
		c.mu.Unlock()
		return id, nil
	}
}

// RegisterBroker implements cluster.Coordinator: the ephemeral
// /brokers/ids/<id>. A registration left by this broker's previous process
// (killed before its session ended) blocks the id until ZooKeeper expires
// that session, so RegisterBroker waits up to the session timeout for it to
// go before answering ErrBrokerExists.
func (c *Coordinator) RegisterBroker(ctx context.Context, b cluster.Broker) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	if b.Timestamp == 0 {
		b.Timestamp = time.Now().UnixMilli()
	}
	b.Endpoints = slices.Clone(b.Endpoints)
	c.mu.RLock()
	_, dup := c.registered[b.ID]
	c.mu.RUnlock()
	if dup {
		return fmt.Errorf("%w: %d (registered by this coordinator)", cluster.ErrBrokerExists, b.ID)
	}
	deadline := time.Now().Add(c.cfg.SessionTimeout + time.Second)
	for {
		err := c.createBrokerZNode(b)
		if err == nil {
			break
		}
		if !errors.Is(err, cluster.ErrBrokerExists) || time.Now().After(deadline) {
			return err
		}
		c.log.Info("broker id still registered, probably by this broker's previous session; waiting for it to expire", "broker", b.ID)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	c.mu.Lock()
	c.registered[b.ID] = b
	c.mu.Unlock()
	_, err := c.loadBrokers()
	if err != nil {
		c.log.Warn("registered, but could not read the broker list back", "err", err)
	}
	c.notify(cluster.ChangeBrokers)
	return nil
}

// createBrokerZNode creates /brokers/ids/<id> in the current session;
// ErrBrokerExists when another session holds it.
func (c *Coordinator) createBrokerZNode(b cluster.Broker) error {
	p := c.path(brokerPath(b.ID))
	_, err := c.conn.Create(p, encodeBroker(b), zk.FlagEphemeral, c.acl)
	if errors.Is(err, zk.ErrNodeExists) {
		_, st, gerr := c.conn.Get(p)
		if gerr == nil && st.EphemeralOwner == c.conn.SessionID() {
			return nil // ours: created by a request whose answer was lost
		}
		return fmt.Errorf("%w: %d (%s)", cluster.ErrBrokerExists, b.ID, brokerPath(b.ID))
	}
	if err != nil {
		return fmt.Errorf("register broker %d: %w", b.ID, zkErr(err))
	}
	return nil
}

// Brokers implements cluster.Coordinator.
func (c *Coordinator) Brokers(ctx context.Context) ([]cluster.Broker, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]cluster.Broker, 0, len(c.cache.brokers))
	for _, b := range c.cache.brokers {
		b.Endpoints = slices.Clone(b.Endpoints)
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b cluster.Broker) int { return int(a.ID - b.ID) })
	return out, nil
}

// NextBrokerID implements cluster.Coordinator as Kafka does: write
// /brokers/seqid and use its new znode version plus reserved.broker.max.id.
func (c *Coordinator) NextBrokerID(ctx context.Context) (int32, error) {
	if err := c.writable(ctx); err != nil {
		return 0, err
	}
	if err := c.ensurePath(brokerSeqIDPath); err != nil {
		return 0, err
	}
	st, err := c.conn.Set(c.path(brokerSeqIDPath), nil, -1)
	if err != nil {
		return 0, fmt.Errorf("broker id sequence: %w", zkErr(err))
	}
	return cluster.ReservedBrokerMaxID + st.Version, nil
}

// Campaign implements cluster.Coordinator: create the ephemeral /controller
// and increment /controller_epoch in one transaction.
func (c *Coordinator) Campaign(ctx context.Context, brokerID int32) (cluster.ControllerInfo, error) {
	if err := c.writable(ctx); err != nil {
		return cluster.ControllerInfo{}, err
	}
	c.mu.RLock()
	_, reg := c.registered[brokerID]
	c.mu.RUnlock()
	if !reg {
		return cluster.ControllerInfo{}, fmt.Errorf("cluster: broker %d is not registered by this coordinator", brokerID)
	}
	for attempt := 0; attempt < 5; attempt++ {
		if err := ctx.Err(); err != nil {
			return cluster.ControllerInfo{}, err
		}
		b, cst, err := c.conn.Get(c.path(controllerPath))
		if err == nil {
			id, derr := decodeController(b)
			if derr != nil {
				return cluster.ControllerInfo{}, derr
			}
			eb, est, eerr := c.conn.Get(c.path(controllerEpochPath))
			if eerr != nil {
				return cluster.ControllerInfo{}, fmt.Errorf("campaign: read %s: %w", controllerEpochPath, zkErr(eerr))
			}
			epoch, eerr := decodeEpoch(eb)
			if eerr != nil {
				return cluster.ControllerInfo{}, eerr
			}
			if id == brokerID && cst.EphemeralOwner == c.conn.SessionID() {
				// This session holds /controller, but c.won does not say so:
				// an earlier Campaign's transaction went through and its
				// answer was lost with the connection. /controller_epoch was
				// bumped in that transaction, and nobody can bump it while
				// our /controller exists, so it is our epoch: take the role
				// up again rather than leave the cluster with a controller
				// that cannot write.
				return c.takeControl(brokerID, epoch, est.Version, cst.EphemeralOwner)
			}
			return cluster.ControllerInfo{ID: id, Epoch: epoch}, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return cluster.ControllerInfo{}, fmt.Errorf("campaign: %w", zkErr(err))
		}
		// No controller: take the role and bump the epoch atomically.
		eb, est, err := c.conn.Get(c.path(controllerEpochPath))
		epoch := int32(0)
		epochVersion := int32(-1)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			if _, err := c.conn.Create(c.path(controllerEpochPath), []byte("0"), 0, c.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return cluster.ControllerInfo{}, fmt.Errorf("campaign: %w", zkErr(err))
			}
			continue
		case err != nil:
			return cluster.ControllerInfo{}, fmt.Errorf("campaign: %w", zkErr(err))
		default:
			if epoch, err = decodeEpoch(eb); err != nil {
				return cluster.ControllerInfo{}, err
			}
			epochVersion = est.Version
		}
		sid := c.conn.SessionID()
		res, err := c.conn.Multi(
			&zk.CreateRequest{Path: c.path(controllerPath), Data: encodeController(brokerID, time.Now().UnixMilli()), Acl: c.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: c.path(controllerEpochPath), Data: []byte(strconv.Itoa(int(epoch + 1))), Version: epochVersion},
		)
		if err != nil {
			if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) {
				continue // another broker won meanwhile; read who
			}
			return cluster.ControllerInfo{}, fmt.Errorf("campaign: %w", zkErr(err))
		}
		zkVersion := epochVersion + 1
		if len(res) == 2 && res[1].Stat != nil {
			zkVersion = res[1].Stat.Version
		}
		return c.takeControl(brokerID, epoch+1, zkVersion, sid)
	}
	return cluster.ControllerInfo{}, errors.New("campaign: the controller kept changing; try again")
}

// takeControl records the controllership of session sid at epoch (stored in
// /controller_epoch at zkVersion) and catches up with every notification
// before the controller acts on the cache.
func (c *Coordinator) takeControl(brokerID, epoch, zkVersion int32, sid int64) (cluster.ControllerInfo, error) {
	w := &controllership{epoch: epoch, session: sid, zkVersion: zkVersion}
	// Under controllerMu, so that a reload of /controller begun before the
	// election finishes first and cannot mistake its older read for a loss
	// of the role.
	c.controllerMu.Lock()
	c.mu.Lock()
	prev := c.won
	c.won = w
	c.mu.Unlock()
	c.controllerMu.Unlock()
	if prev != nil && prev.epoch == epoch && prev.session == sid {
		// Still ours, as known (the sitting controller's Campaign on each
		// pass): nothing to catch up with, and nothing to announce — a
		// ChangeController here would start the controller's next pass,
		// whose Campaign would announce it again, without end.
		return cluster.ControllerInfo{ID: brokerID, Epoch: epoch}, nil
	}
	c.log.Info("elected controller", "broker", brokerID, "epoch", epoch)
	if _, err := c.loadController(); err != nil {
		return cluster.ControllerInfo{}, err
	}
	ch, err := c.processStateLog()
	c.notify(ch | cluster.ChangeController)
	if err != nil {
		return cluster.ControllerInfo{}, err
	}
	return cluster.ControllerInfo{ID: brokerID, Epoch: epoch}, nil
}

func (c *Coordinator) readEpoch() (int32, error) {
	b, _, err := c.conn.Get(c.path(controllerEpochPath))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", controllerEpochPath, zkErr(err))
	}
	return decodeEpoch(b)
}

// Controller implements cluster.Coordinator.
func (c *Coordinator) Controller(ctx context.Context) (cluster.ControllerInfo, error) {
	if err := c.check(ctx); err != nil {
		return cluster.ControllerInfo{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cache.controller, nil
}

// CreateTopic implements cluster.Coordinator: /config/topics/<t> and
// /brokers/topics/<t> in one transaction, config first as Kafka writes
// them.
func (c *Coordinator) CreateTopic(ctx context.Context, t cluster.Topic, configs map[string]string) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	if err := cluster.ValidateTopicName(t.Name); err != nil {
		return err
	}
	ok, _, err := c.conn.Exists(c.path(topicPath(t.Name)))
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t.Name, zkErr(err))
	}
	if ok {
		return fmt.Errorf("%w: %s", cluster.ErrTopicExists, t.Name)
	}
	// A config left behind by an interrupted deletion is overwritten.
	cfgExists, _, err := c.conn.Exists(c.path(topicConfigPath(t.Name)))
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t.Name, zkErr(err))
	}
	var cfgOp any = &zk.CreateRequest{Path: c.path(topicConfigPath(t.Name)), Data: encodeConfig(configs), Acl: c.acl}
	if cfgExists {
		cfgOp = &zk.SetDataRequest{Path: c.path(topicConfigPath(t.Name)), Data: encodeConfig(configs), Version: -1}
	}
	_, err = c.conn.Multi(cfgOp,
		&zk.CreateRequest{Path: c.path(topicPath(t.Name)), Data: encodeTopic(t), Acl: c.acl})
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("%w: %s", cluster.ErrTopicExists, t.Name)
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t.Name, zkErr(err))
	}
	ch, err := c.reloadTopic(t.Name)
	c.notify(ch | cluster.ChangeTopics | cluster.ChangeConfigs)
	if err != nil {
		c.log.Warn("topic created, but could not read it back", "topic", t.Name, "err", err)
	}
	return nil
}

// Topics implements cluster.Coordinator.
func (c *Coordinator) Topics(ctx context.Context) ([]string, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topicNames(), nil
}

// Topic implements cluster.Coordinator (with the ongoing reassignment: the
// znode's adding_replicas and removing_replicas).
func (c *Coordinator) Topic(ctx context.Context, name string) (cluster.Topic, error) {
	if err := c.check(ctx); err != nil {
		return cluster.Topic{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.cache.topics[name]
	if !ok {
		return cluster.Topic{}, fmt.Errorf("%w: %s", cluster.ErrNoTopic, name)
	}
	return e.assign.Clone(), nil
}

// SetTopicAssignment implements cluster.Coordinator: the topic znode —
// assignment and ongoing reassignment — is replaced when t.Version matches,
// and every broker is told through a state change notification.
func (c *Coordinator) SetTopicAssignment(ctx context.Context, t cluster.Topic) (int32, error) {
	if err := c.writable(ctx); err != nil {
		return 0, err
	}
	if t.ID == (cluster.TopicID{}) {
		if id, ok := c.cachedTopicID(t.Name); ok {
			t.ID = id
		}
	}
	res, err := c.conn.Multi(
		&zk.SetDataRequest{Path: c.path(topicPath(t.Name)), Data: encodeTopic(t), Version: t.Version},
		&zk.CreateRequest{Path: c.path(stateChangesPath + "/" + stateChangePrefix), Data: encodeStateChange(stateChangeZNode{Topics: []string{t.Name}}), Acl: c.acl, Flags: zk.FlagSequence},
	)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, fmt.Errorf("%w: %s", cluster.ErrNoTopic, t.Name)
	case errors.Is(err, zk.ErrBadVersion):
		c.reloadTopic(t.Name)
		return 0, fmt.Errorf("%w: topic %s not at version %d", cluster.ErrBadVersion, t.Name, t.Version)
	case err != nil:
		return 0, fmt.Errorf("set assignment of %s: %w", t.Name, zkErr(err))
	}
	v := t.Version + 1
	if len(res) > 0 && res[0].Stat != nil {
		v = res[0].Stat.Version
	}
	c.mu.Lock()
	if e, ok := c.cache.topics[t.Name]; ok && e.assign.ID == t.ID && v > e.assign.Version {
		e.assign = t.Clone()
		e.assign.Version = v
	}
	c.mu.Unlock()
	c.notify(cluster.ChangeTopics)
	return v, nil
}

// MarkTopicForDeletion implements cluster.Coordinator: /admin/delete_topics/<t>.
func (c *Coordinator) MarkTopicForDeletion(ctx context.Context, name string) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	ok, _, err := c.conn.Exists(c.path(topicPath(name)))
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", name, zkErr(err))
	}
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrNoTopic, name)
	}
	if _, err := c.conn.Create(c.path(deleteTopicPath(name)), nil, 0, c.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("delete topic %s: %w", name, zkErr(err))
	}
	ch, err := c.loadDeletions()
	c.notify(ch | cluster.ChangeDeletions)
	if err != nil {
		c.log.Warn("topic marked for deletion, but could not read the marks back", "topic", name, "err", err)
	}
	return nil
}

// PendingDeletions implements cluster.Coordinator.
func (c *Coordinator) PendingDeletions(ctx context.Context) ([]string, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sortedKeys(c.cache.deletions), nil
}

// maxMultiOps bounds the operations in one ZooKeeper transaction (the
// request must stay under jute.maxbuffer, 1 MiB by default).
const maxMultiOps = 500

// DeleteTopic implements cluster.Coordinator: the partition states and
// partition znodes, then /brokers/topics/<t>, /config/topics/<t> and the
// deletion mark (in one transaction when the topic is small enough). The
// mark goes last, so an interrupted deletion is finished by the next
// controller.
func (c *Coordinator) DeleteTopic(ctx context.Context, name string) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := c.deleteTopic(name)
		if errors.Is(err, zk.ErrNotEmpty) && attempt < 3 {
			continue // a partition appeared meanwhile
		}
		c.deletionsMu.Lock()
		c.topicsMu.Lock()
		c.mu.Lock()
		var changes cluster.Change
		if err == nil || errors.Is(err, cluster.ErrNoTopic) {
			if _, ok := c.cache.topics[name]; ok {
				delete(c.cache.topics, name)
				changes |= cluster.ChangeTopics | cluster.ChangePartitions | cluster.ChangeConfigs
			}
			if c.cache.deletions[name] {
				delete(c.cache.deletions, name)
				changes |= cluster.ChangeDeletions
			}
		}
		c.mu.Unlock()
		c.topicsMu.Unlock()
		c.deletionsMu.Unlock()
		c.notify(changes)
		if err != nil && !errors.Is(err, cluster.ErrNoTopic) {
			return fmt.Errorf("delete topic %s: %w", name, zkErr(err))
		}
		return err
	}
}

func (c *Coordinator) deleteTopic(name string) error {
	topicExists, _, err := c.conn.Exists(c.path(topicPath(name)))
	if err != nil {
		return err
	}
	parts, _, err := c.conn.Children(c.path(partitionsPath(name)))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	partitionsExist := err == nil
	var ops []any
	for _, ps := range parts {
		pp := c.path(partitionsPath(name) + "/" + ps)
		kids, _, err := c.conn.Children(pp)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			ops = append(ops, &zk.DeleteRequest{Path: pp + "/" + k, Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: pp, Version: -1})
	}
	// Large topics: delete the partitions in chunks first.
	for len(ops) > maxMultiOps {
		n := maxMultiOps
		// Keep a partition's state and znode in one chunk (state first).
		for n > 0 {
			if d, ok := ops[n-1].(*zk.DeleteRequest); ok && !isStatePath(d.Path) {
				break
			}
			n--
		}
		if _, err := c.conn.Multi(ops[:n]...); err != nil {
			return err
		}
		ops = ops[n:]
	}
	if partitionsExist {
		ops = append(ops, &zk.DeleteRequest{Path: c.path(partitionsPath(name)), Version: -1})
	}
	if topicExists {
		ops = append(ops, &zk.DeleteRequest{Path: c.path(topicPath(name)), Version: -1})
	}
	for _, p := range []string{topicConfigPath(name), deleteTopicPath(name)} {
		ok, _, err := c.conn.Exists(c.path(p))
		if err != nil {
			return err
		}
		if ok {
			ops = append(ops, &zk.DeleteRequest{Path: c.path(p), Version: -1})
		}
	}
	if len(ops) > 0 {
		if _, err := c.conn.Multi(ops...); err != nil {
			return err
		}
	}
	if !topicExists {
		return fmt.Errorf("%w: %s", cluster.ErrNoTopic, name)
	}
	return nil
}

func isStatePath(p string) bool { return len(p) > 6 && p[len(p)-6:] == "/state" }

// PartitionState implements cluster.Coordinator.
func (c *Coordinator) PartitionState(ctx context.Context, topic string, partition int32) (cluster.PartitionState, error) {
	if err := c.check(ctx); err != nil {
		return cluster.PartitionState{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.cache.topics[topic]; ok {
		if st, ok := e.states[partition]; ok {
			return st.Clone(), nil
		}
	}
	return cluster.PartitionState{}, fmt.Errorf("%w: %s-%d", cluster.ErrNoState, topic, partition)
}

// PartitionStates returns every cached partition state of a topic, by
// partition (ErrNoTopic if the topic is unknown).
func (c *Coordinator) PartitionStates(ctx context.Context, topic string) (map[int32]cluster.PartitionState, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.cache.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", cluster.ErrNoTopic, topic)
	}
	out := make(map[int32]cluster.PartitionState, len(e.states))
	for p, st := range e.states {
		out[p] = st.Clone()
	}
	return out, nil
}

// CreatePartitionState implements cluster.Coordinator.
func (c *Coordinator) CreatePartitionState(ctx context.Context, topic string, partition int32, s cluster.PartitionState) (int32, error) {
	vs, errs := c.WritePartitionStates(ctx, []cluster.StateWrite{{Topic: topic, Partition: partition, State: s, Create: true}})
	return vs[0], errs[0]
}

// SetPartitionState implements cluster.Coordinator.
func (c *Coordinator) SetPartitionState(ctx context.Context, topic string, partition int32, s cluster.PartitionState) (int32, error) {
	vs, errs := c.WritePartitionStates(ctx, []cluster.StateWrite{{Topic: topic, Partition: partition, State: s}})
	return vs[0], errs[0]
}

// TopicConfig implements cluster.Coordinator.
func (c *Coordinator) TopicConfig(ctx context.Context, topic string) (map[string]string, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.cache.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", cluster.ErrNoTopic, topic)
	}
	return maps.Clone(e.configs), nil
}

// ReadTopicConfig implements cluster.Coordinator as Kafka's
// AdminZkClient.fetchEntityConfig does for DescribeConfigs, and not from
// the cache: a sync first (a ZooKeeper server may lag its leader; the
// reads after a sync in the same session see every write committed before
// it), then /brokers/topics/<t> and /config/topics/<t>. The version is
// the config znode's, -1 when it does not exist. With no session it fails
// at once (ErrUnavailable): the caller may fall back to the cache.
func (c *Coordinator) ReadTopicConfig(ctx context.Context, topic string) (map[string]string, int32, error) {
	if err := c.check(ctx); err != nil {
		return nil, 0, err
	}
	if c.conn.State() != zk.StateHasSession {
		return nil, 0, fmt.Errorf("%w: read config of %s: no zookeeper session", ErrUnavailable, topic)
	}
	if _, err := c.conn.Sync(c.path(topicConfigPath(topic))); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, 0, fmt.Errorf("read config of %s: sync: %w", topic, zkErr(err))
	}
	res := c.getMany([]string{topicPath(topic), topicConfigPath(topic)})
	tr, cr := res[0], res[1]
	if errors.Is(tr.err, zk.ErrNoNode) {
		return nil, 0, fmt.Errorf("%w: %s", cluster.ErrNoTopic, topic)
	}
	if tr.err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", topicPath(topic), zkErr(tr.err))
	}
	if errors.Is(cr.err, zk.ErrNoNode) {
		return map[string]string{}, -1, nil
	}
	if cr.err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", topicConfigPath(topic), zkErr(cr.err))
	}
	cfg, err := decodeConfig(cr.data)
	if err != nil {
		// As the cache does (readTopics): none, and a write replaces it.
		c.log.Error("unreadable topic config; using none", "topic", topic, "err", err)
		cfg = map[string]string{}
	}
	return cfg, cr.stat.Version, nil
}

// SetTopicConfig implements cluster.Coordinator as Kafka's AdminZkClient
// does: write /config/topics/<t>, then announce it with a sequential
// /config/changes/config_change_ (one transaction here).
func (c *Coordinator) SetTopicConfig(ctx context.Context, topic string, configs map[string]string) error {
	return c.setTopicConfig(ctx, topic, configs, nil)
}

// SetTopicConfigIf implements cluster.Coordinator: SetTopicConfig with the
// config znode's version checked (-1: the znode must not exist yet).
func (c *Coordinator) SetTopicConfigIf(ctx context.Context, topic string, configs map[string]string, version int32) error {
	return c.setTopicConfig(ctx, topic, configs, &version)
}

func (c *Coordinator) setTopicConfig(ctx context.Context, topic string, configs map[string]string, version *int32) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	ok, _, err := c.conn.Exists(c.path(topicPath(topic)))
	if err != nil {
		return fmt.Errorf("set config of %s: %w", topic, zkErr(err))
	}
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrNoTopic, topic)
	}
	p := c.path(topicConfigPath(topic))
	change := &zk.CreateRequest{Path: c.path(configChangesPath + "/" + configChangePrefix), Data: encodeConfigChange(topic), Acl: c.acl, Flags: zk.FlagSequence}
	create := &zk.CreateRequest{Path: p, Data: encodeConfig(configs), Acl: c.acl}
	var res []zk.MultiResponse
	switch {
	case version == nil:
		res, err = c.conn.Multi(&zk.SetDataRequest{Path: p, Data: encodeConfig(configs), Version: -1}, change)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = c.conn.Multi(create, change)
			res = nil
		}
	case *version < 0:
		_, err = c.conn.Multi(create, change)
		if errors.Is(err, zk.ErrNodeExists) {
			err = fmt.Errorf("%w: config of %s written meanwhile", cluster.ErrBadVersion, topic)
		}
	default:
		res, err = c.conn.Multi(&zk.SetDataRequest{Path: p, Data: encodeConfig(configs), Version: *version}, change)
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			err = fmt.Errorf("%w: config of %s changed since version %d", cluster.ErrBadVersion, topic, *version)
		}
	}
	if err != nil {
		return fmt.Errorf("set config of %s: %w", topic, zkErr(err))
	}
	// Read-your-writes: the cache takes what was written, at its version
	// (or, after a create, which answers no version, what is there now).
	cfg := maps.Clone(configs)
	if cfg == nil {
		cfg = map[string]string{}
	}
	var stat *zk.Stat
	if len(res) > 0 {
		stat = res[0].Stat
	}
	if stat == nil {
		var data []byte
		if data, stat, err = c.conn.Get(p); err == nil {
			cfg, err = decodeConfig(data)
		}
	}
	if err == nil && stat != nil {
		c.mu.Lock()
		c.applyConfig(topic, cfg, stat)
		c.mu.Unlock()
	}
	c.notify(cluster.ChangeConfigs)
	return nil
}

// AllocateProducerIDs implements cluster.Coordinator: a compare-and-set loop
// on /latest_producer_id_block, as Kafka's ProducerIdManager does.
func (c *Coordinator) AllocateProducerIDs(ctx context.Context, brokerID int32, size int64) (cluster.ProducerIDBlock, error) {
	if size <= 0 {
		return cluster.ProducerIDBlock{}, fmt.Errorf("cluster: producer id block size %d", size)
	}
	for {
		if err := c.writable(ctx); err != nil {
			return cluster.ProducerIDBlock{}, err
		}
		b, st, err := c.conn.Get(c.path(producerIDBlockPath))
		if errors.Is(err, zk.ErrNoNode) {
			blk := cluster.ProducerIDBlock{Start: 0, End: size - 1}
			_, err := c.conn.Create(c.path(producerIDBlockPath), encodeProducerIDBlock(brokerID, blk), 0, c.acl)
			if err == nil {
				return blk, nil
			}
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			return cluster.ProducerIDBlock{}, fmt.Errorf("allocate producer ids: %w", zkErr(err))
		}
		if err != nil {
			return cluster.ProducerIDBlock{}, fmt.Errorf("allocate producer ids: %w", zkErr(err))
		}
		start := int64(0)
		if len(b) > 0 {
			cur, err := decodeProducerIDBlock(b)
			if err != nil {
				return cluster.ProducerIDBlock{}, err
			}
			start = cur.End + 1
		}
		blk := cluster.ProducerIDBlock{Start: start, End: start + size - 1}
		_, err = c.conn.Set(c.path(producerIDBlockPath), encodeProducerIDBlock(brokerID, blk), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return cluster.ProducerIDBlock{}, fmt.Errorf("allocate producer ids: %w", zkErr(err))
		}
		return blk, nil
	}
}

// Reassignments implements cluster.LegacyReassigner: the pending
// /admin/reassign_partitions requests.
func (c *Coordinator) Reassignments(ctx context.Context) ([]cluster.Reassignment, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]cluster.Reassignment, len(c.cache.reassign))
	for i, r := range c.cache.reassign {
		out[i] = cluster.Reassignment{Topic: r.Topic, Partition: r.Partition, Replicas: slices.Clone(r.Replicas)}
	}
	return out, nil
}

// SetReassignments implements cluster.LegacyReassigner: it writes
// /admin/reassign_partitions (deleting it when rs is empty), as
// kafka-reassign-partitions.sh --zookeeper did.
func (c *Coordinator) SetReassignments(ctx context.Context, rs []cluster.Reassignment) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	p := c.path(reassignPath)
	var err error
	if len(rs) == 0 {
		err = c.conn.Delete(p, -1)
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
	} else {
		_, err = c.conn.Set(p, encodeReassignments(rs), -1)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = c.conn.Create(p, encodeReassignments(rs), 0, c.acl)
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", reassignPath, zkErr(err))
	}
	ch, err := c.loadReassignments()
	c.notify(ch)
	return err
}

package zkcoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-io/sluice/cluster"
)

// cache is the metadata as last read from ZooKeeper. Coordinator.mu guards it.
type cache struct {
	clusterID string
	brokers   map[int32]cluster.Broker
	// brokerCzxids are the registrations' creation zxids: a new one means
	// the broker registered again (a new session).
	brokerCzxids map[int32]int64
	controller   cluster.ControllerInfo
	topics       map[string]*topicEntry
	deletions    map[string]bool
	reassign     []cluster.Reassignment
	stateSeq     int64 // last /state_change_notification entry applied (-1: none)
	configSeq    int64 // last /config/changes entry applied (-1: none)
	// brokerConfigs are the dynamic broker configs by entity (an id or
	// <default>), /config/brokers/<entity>.
	brokerConfigs map[string]brokerConfigEntry
}

func newCache() cache {
	return cache{
		brokers:    map[int32]cluster.Broker{},
		controller: cluster.ControllerInfo{ID: -1},
		topics:     map[string]*topicEntry{},
		deletions:  map[string]bool{},
		stateSeq:   -1,
		configSeq:  -1,
	}
}

// topicEntry is one topic: its znode (assignment), config and partition
// states, each with the ZooKeeper version it was read at.
type topicEntry struct {
	assign cluster.Topic // Version is the znode version
	czxid  int64         // creation zxid of /brokers/topics/<t>: tells incarnations apart

	configs     map[string]string
	cfgCzxid    int64
	cfgVersion  int32
	cfgObserved bool // configs came from the znode (not just defaulted)

	states map[int32]cluster.PartitionState // Version is the state znode's version
}

// newer reports whether (czxid, version) is a later write than the cached
// (oldCzxid, oldVersion) of the same znode path.
func newer(czxid int64, version int32, oldCzxid int64, oldVersion int32) bool {
	if czxid != oldCzxid {
		return czxid > oldCzxid
	}
	return version > oldVersion
}

// ---- parallel reads ----

type getResult struct {
	data []byte
	stat *zk.Stat
	err  error
}

// getMany reads paths (Kafka paths, without the chroot) with bounded
// concurrency; the client pipelines the requests on its one connection.
func (c *Coordinator) getMany(paths []string) []getResult {
	out := make([]getResult, len(paths))
	parallel(len(paths), func(i int) {
		out[i].data, out[i].stat, out[i].err = c.conn.Get(c.path(paths[i]))
	})
	return out
}

// parallel runs fn(0..n-1) on up to 64 goroutines and waits for them.
func parallel(n int, fn func(i int)) {
	var g errgroup.Group
	g.SetLimit(64)
	for i := range n {
		g.Go(func() error { fn(i); return nil })
	}
	g.Wait()
}

// ---- loaders (each returns the kinds of change it made) ----

// loadAll reads everything, as at start and in a new session. The positions
// in the notification logs are taken first, so every change after them is
// either in what is read next or in a later notification.
func (c *Coordinator) loadAll() (cluster.Change, error) {
	c.stateLogMu.Lock()
	defer c.stateLogMu.Unlock()
	c.configLogMu.Lock()
	defer c.configLogMu.Unlock()
	stateSeq, err := c.logPosition(stateChangesPath, stateChangePrefix)
	if err != nil {
		return 0, err
	}
	configSeq, err := c.logPosition(configChangesPath, configChangePrefix)
	if err != nil {
		return 0, err
	}
	var changes cluster.Change
	for _, fn := range []func() (cluster.Change, error){c.loadController, c.loadBrokers, c.loadDeletions, c.loadReassignments, c.loadBrokerConfigs, c.loadUsers, c.loadQuotas} {
		ch, err := fn()
		changes |= ch
		if err != nil {
			return changes, err
		}
	}
	ch, err := c.loadAllTopics()
	changes |= ch
	if err != nil {
		return changes, err
	}
	c.mu.Lock()
	c.cache.stateSeq, c.cache.configSeq = stateSeq, configSeq
	c.mu.Unlock()
	return changes, nil
}

// logPosition lists a notification node (arming its child watch) and
// returns its highest sequence number (-1 when empty).
func (c *Coordinator) logPosition(path, prefix string) (int64, error) {
	names, _, _, err := c.conn.ChildrenW(c.path(path))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", path, zkErr(err))
	}
	last := int64(-1)
	for _, n := range names {
		if s, ok := sequenceOf(n, prefix); ok && s > last {
			last = s
		}
	}
	return last, nil
}

func (c *Coordinator) loadClusterID() (string, error) {
	b, _, err := c.conn.Get(c.path(clusterIDPath))
	if err != nil {
		return "", err
	}
	return decodeClusterID(b)
}

// loadController reads /controller (arming an exists watch, so creation and
// deletion are both seen) and /controller_epoch.
func (c *Coordinator) loadController() (cluster.Change, error) {
	c.controllerMu.Lock()
	defer c.controllerMu.Unlock()
	info := cluster.ControllerInfo{ID: -1}
	ok, _, _, err := c.conn.ExistsW(c.path(controllerPath))
	if err != nil {
		return 0, fmt.Errorf("watch %s: %w", controllerPath, zkErr(err))
	}
	if ok {
		b, _, err := c.conn.Get(c.path(controllerPath))
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return 0, fmt.Errorf("read %s: %w", controllerPath, zkErr(err))
		default:
			if info.ID, err = decodeController(b); err != nil {
				return 0, err
			}
		}
	}
	b, _, err := c.conn.Get(c.path(controllerEpochPath))
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", controllerEpochPath, zkErr(err))
	default:
		if info.Epoch, err = decodeEpoch(b); err != nil {
			return 0, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache.controller == info {
		return 0, nil
	}
	// A newer epoch, or our epoch without our /controller (deleted by an
	// operator, or our session ended), means the role is gone. (An older
	// epoch is a read that started before Campaign won.)
	if _, mine := c.registered[info.ID]; c.won != nil && (info.Epoch > c.won.epoch || info.Epoch == c.won.epoch && !mine) {
		c.log.Warn("lost the controller role", "epoch", c.won.epoch, "controller", info.ID, "new_epoch", info.Epoch)
		c.won = nil
	}
	c.cache.controller = info
	return cluster.ChangeController, nil
}

// loadBrokers lists /brokers/ids (arming the child watch) and reads every
// registration: a broker whose session ended and that registered again
// (a bounce, however quick) has a new creation zxid and counts as a change.
func (c *Coordinator) loadBrokers() (cluster.Change, error) {
	c.brokersMu.Lock()
	defer c.brokersMu.Unlock()
	names, _, _, err := c.conn.ChildrenW(c.path(brokerIDsPath))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", brokerIDsPath, zkErr(err))
	}
	var ids []int32
	var paths []string
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			c.log.Warn("ignoring a child of /brokers/ids that is not a broker id", "name", n)
			continue
		}
		ids = append(ids, int32(id))
		paths = append(paths, brokerPath(int32(id)))
	}
	next := make(map[int32]cluster.Broker, len(ids))
	czxids := make(map[int32]int64, len(ids))
	for i, r := range c.getMany(paths) {
		if errors.Is(r.err, zk.ErrNoNode) {
			continue // gone already
		}
		if r.err != nil {
			return 0, fmt.Errorf("read %s: %w", paths[i], zkErr(r.err))
		}
		b, err := decodeBroker(ids[i], r.data)
		if err != nil {
			c.log.Error("unreadable broker registration; ignoring the broker", "path", paths[i], "err", err)
			continue
		}
		next[b.ID] = b
		czxids[b.ID] = r.stat.Czxid
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if maps.Equal(czxids, c.cache.brokerCzxids) {
		return 0, nil
	}
	c.cache.brokers, c.cache.brokerCzxids = next, czxids
	return cluster.ChangeBrokers, nil
}

// loadDeletions lists /admin/delete_topics. A mark that disappeared means a
// deletion completed: the topic is read again, which drops it (or picks up
// a new topic of the same name).
func (c *Coordinator) loadDeletions() (cluster.Change, error) {
	c.deletionsMu.Lock()
	defer c.deletionsMu.Unlock()
	names, _, _, err := c.conn.ChildrenW(c.path(deleteTopicsPath))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", deleteTopicsPath, zkErr(err))
	}
	next := make(map[string]bool, len(names))
	for _, n := range names {
		next[n] = true
	}
	c.mu.Lock()
	var done []string
	for n := range c.cache.deletions {
		if !next[n] {
			done = append(done, n)
		}
	}
	changed := !maps.Equal(next, c.cache.deletions)
	c.cache.deletions = next
	c.mu.Unlock()
	var changes cluster.Change
	if changed {
		changes |= cluster.ChangeDeletions
	}
	for _, t := range done {
		ch, err := c.reloadTopic(t)
		changes |= ch
		if err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// loadReassignments reads /admin/reassign_partitions (arming an exists
// watch).
func (c *Coordinator) loadReassignments() (cluster.Change, error) {
	ok, _, _, err := c.conn.ExistsW(c.path(reassignPath))
	if err != nil {
		return 0, fmt.Errorf("watch %s: %w", reassignPath, zkErr(err))
	}
	var rs []cluster.Reassignment
	if ok {
		b, _, err := c.conn.Get(c.path(reassignPath))
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return 0, fmt.Errorf("read %s: %w", reassignPath, zkErr(err))
		default:
			if rs, err = decodeReassignments(b); err != nil {
				c.log.Error("unreadable reassignment request; ignoring it", "err", err)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.EqualFunc(rs, c.cache.reassign, func(a, b cluster.Reassignment) bool {
		return a.Topic == b.Topic && a.Partition == b.Partition && slices.Equal(a.Replicas, b.Replicas)
	}) {
		return 0, nil
	}
	c.cache.reassign = rs
	return cluster.ChangeTopics, nil
}

// loadTopics lists /brokers/topics (arming the child watch), drops topics
// that are gone and reads the new ones.
func (c *Coordinator) loadTopics() (cluster.Change, error) {
	c.topicsMu.Lock()
	defer c.topicsMu.Unlock()
	names, _, _, err := c.conn.ChildrenW(c.path(topicsPath))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", topicsPath, zkErr(err))
	}
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	var changes cluster.Change
	c.mu.Lock()
	for n := range c.cache.topics {
		if !present[n] {
			delete(c.cache.topics, n)
			changes |= cluster.ChangeTopics | cluster.ChangePartitions | cluster.ChangeConfigs
		}
	}
	var fresh []string
	for _, n := range names {
		if _, ok := c.cache.topics[n]; !ok {
			fresh = append(fresh, n)
		}
	}
	c.mu.Unlock()
	ch, err := c.readTopics(fresh)
	return changes | ch, err
}

// loadAllTopics reads every topic afresh (start, new session).
func (c *Coordinator) loadAllTopics() (cluster.Change, error) {
	c.topicsMu.Lock()
	defer c.topicsMu.Unlock()
	names, _, _, err := c.conn.ChildrenW(c.path(topicsPath))
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", topicsPath, zkErr(err))
	}
	c.mu.Lock()
	for n := range c.cache.topics {
		if !slices.Contains(names, n) {
			delete(c.cache.topics, n)
		}
	}
	c.mu.Unlock()
	ch, err := c.readTopics(names)
	return ch | cluster.ChangeTopics | cluster.ChangePartitions | cluster.ChangeConfigs, err
}

// reloadTopic reads one topic again (topicsMu is taken here).
func (c *Coordinator) reloadTopic(name string) (cluster.Change, error) {
	c.topicsMu.Lock()
	defer c.topicsMu.Unlock()
	return c.readTopics([]string{name})
}

// readTopics reads topics completely — znode, config, every partition
// state — and puts them in the cache; a topic found missing is dropped.
// topicsMu should be held.
func (c *Coordinator) readTopics(names []string) (cluster.Change, error) {
	if len(names) == 0 {
		return 0, nil
	}
	// Topic and config znodes first.
	paths := make([]string, 0, 2*len(names))
	for _, n := range names {
		paths = append(paths, topicPath(n), topicConfigPath(n))
	}
	res := c.getMany(paths)
	entries := make(map[string]*topicEntry, len(names))
	var gone []string
	for i, n := range names {
		tr, cr := res[2*i], res[2*i+1]
		if errors.Is(tr.err, zk.ErrNoNode) {
			gone = append(gone, n)
			continue
		}
		if tr.err != nil {
			return 0, fmt.Errorf("read %s: %w", topicPath(n), zkErr(tr.err))
		}
		a, err := decodeTopic(n, tr.data)
		if err != nil {
			c.log.Error("unreadable topic znode; ignoring the topic", "topic", n, "err", err)
			continue
		}
		a.Version = tr.stat.Version
		e := &topicEntry{assign: a, czxid: tr.stat.Czxid, configs: map[string]string{}, states: map[int32]cluster.PartitionState{}}
		switch {
		case errors.Is(cr.err, zk.ErrNoNode):
		case cr.err != nil:
			return 0, fmt.Errorf("read %s: %w", topicConfigPath(n), zkErr(cr.err))
		default:
			cfg, err := decodeConfig(cr.data)
			if err != nil {
				c.log.Error("unreadable topic config; using none", "topic", n, "err", err)
			} else {
				e.configs = cfg
			}
			e.cfgCzxid, e.cfgVersion, e.cfgObserved = cr.stat.Czxid, cr.stat.Version, true
		}
		entries[n] = e
	}
	// Then every partition state of every topic read.
	type key struct {
		topic string
		p     int32
	}
	var keys []key
	var spaths []string
	tnames := slices.Sorted(maps.Keys(entries))
	lists := make([][]string, len(tnames))
	lerrs := make([]error, len(tnames))
	parallel(len(tnames), func(i int) {
		lists[i], _, lerrs[i] = c.conn.Children(c.path(partitionsPath(tnames[i])))
	})
	for ti, n := range tnames {
		if errors.Is(lerrs[ti], zk.ErrNoNode) {
			continue
		}
		if err := lerrs[ti]; err != nil {
			return 0, fmt.Errorf("list %s: %w", partitionsPath(n), zkErr(err))
		}
		for _, ps := range lists[ti] {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil || p < 0 {
				continue
			}
			keys = append(keys, key{n, int32(p)})
			spaths = append(spaths, statePath(n, int32(p)))
		}
	}
	for i, r := range c.getMany(spaths) {
		if errors.Is(r.err, zk.ErrNoNode) {
			continue
		}
		if r.err != nil {
			return 0, fmt.Errorf("read %s: %w", spaths[i], zkErr(r.err))
		}
		e := entries[keys[i].topic]
		if r.stat.Czxid < e.czxid {
			continue // a leftover of an older incarnation (cannot normally exist)
		}
		st, err := decodeState(r.data, r.stat.Version)
		if err != nil {
			c.log.Error("unreadable partition state; treating the partition as having none", "path", spaths[i], "err", err)
			continue
		}
		e.states[keys[i].p] = st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var changes cluster.Change
	for _, n := range gone {
		if _, ok := c.cache.topics[n]; ok {
			delete(c.cache.topics, n)
			changes |= cluster.ChangeTopics | cluster.ChangePartitions | cluster.ChangeConfigs
		}
	}
	for n, e := range entries {
		changes |= c.mergeTopic(n, e)
	}
	return changes, nil
}

// mergeTopic puts a freshly read topic into the cache, keeping anything the
// cache holds that is newer. Lock should be held.
func (c *Coordinator) mergeTopic(name string, e *topicEntry) cluster.Change {
	old, ok := c.cache.topics[name]
	if !ok || e.czxid > old.czxid {
		c.cache.topics[name] = e
		return cluster.ChangeTopics | cluster.ChangePartitions | cluster.ChangeConfigs
	}
	if e.czxid < old.czxid {
		return 0 // read an older incarnation
	}
	var changes cluster.Change
	if e.assign.Version > old.assign.Version {
		old.assign = e.assign
		changes |= cluster.ChangeTopics
	}
	if e.cfgObserved && (!old.cfgObserved || newer(e.cfgCzxid, e.cfgVersion, old.cfgCzxid, old.cfgVersion)) {
		if !maps.Equal(old.configs, e.configs) {
			changes |= cluster.ChangeConfigs
		}
		old.configs, old.cfgCzxid, old.cfgVersion, old.cfgObserved = e.configs, e.cfgCzxid, e.cfgVersion, true
	}
	for p, st := range e.states {
		if cur, ok := old.states[p]; !ok || st.Version > cur.Version {
			old.states[p] = st
			changes |= cluster.ChangePartitions
		}
	}
	return changes
}

// applyState puts one partition state into the cache when it is newer than
// the cached one and belongs to the cached incarnation of the topic (id).
// It reports whether the topic is unknown or of another incarnation, so the
// caller can read it. Lock should be held.
func (c *Coordinator) applyState(topic string, id cluster.TopicID, p int32, st cluster.PartitionState) (changed, unknown bool) {
	e, ok := c.cache.topics[topic]
	if !ok || e.assign.ID != id {
		return false, true
	}
	if cur, ok := e.states[p]; ok && cur.Version >= st.Version {
		return false, false
	}
	e.states[p] = st
	return true, false
}

// topicNames returns the cached topic names, sorted. Lock should be held.
func (c *Coordinator) topicNames() []string {
	names := slices.Collect(maps.Keys(c.cache.topics))
	sort.Strings(names)
	return names
}

package zkcoord

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
)

// logEntry is one child of a notification node.
type logEntry struct {
	name string
	seq  int64
}

// listLog lists a notification node (arming its child watch), sorted by
// sequence.
func (c *Coordinator) listLog(path, prefix string) ([]logEntry, error) {
	names, _, _, err := c.conn.ChildrenW(c.path(path))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, zkErr(err))
	}
	out := make([]logEntry, 0, len(names))
	for _, n := range names {
		if s, ok := sequenceOf(n, prefix); ok {
			out = append(out, logEntry{n, s})
		}
	}
	slices.SortFunc(out, func(a, b logEntry) int { return int(a.seq - b.seq) })
	return out, nil
}

// newEntries returns the entries after last, and whether entries after last
// may have been purged before this broker read them: nothing at or below
// last is left while there are newer ones.
func newEntries(all []logEntry, last int64) (fresh []logEntry, gap bool) {
	i, _ := slices.BinarySearchFunc(all, last+1, func(e logEntry, s int64) int { return int(e.seq - s) })
	fresh = all[i:]
	gap = last >= 0 && i == 0 && len(fresh) > 0
	return fresh, gap
}

// processStateLog applies the partition state changes notified since the
// last one applied.
func (c *Coordinator) processStateLog() (cluster.Change, error) {
	c.stateLogMu.Lock()
	defer c.stateLogMu.Unlock()
	all, err := c.listLog(stateChangesPath, stateChangePrefix)
	if err != nil {
		return 0, err
	}
	c.mu.RLock()
	last := c.cache.stateSeq
	c.mu.RUnlock()
	fresh, gap := newEntries(all, last)
	if len(fresh) == 0 {
		return 0, nil
	}
	if gap {
		// Entries this broker never saw may have been purged: read every
		// partition state again.
		c.log.Warn("state change notifications were purged before this broker read them; reloading every topic",
			"last_applied", last, "oldest_left", fresh[0].seq)
		ch, err := c.loadAllTopics()
		if err != nil {
			return ch, err
		}
		c.mu.Lock()
		c.cache.stateSeq = fresh[len(fresh)-1].seq
		c.mu.Unlock()
		return ch, nil
	}
	paths := make([]string, len(fresh))
	for i, e := range fresh {
		paths[i] = stateChangesPath + "/" + e.name
	}
	res := c.getMany(paths)
	var changes cluster.Change
	reread := map[string]bool{}
	applied := last
	for i, r := range res {
		if errors.Is(r.err, zk.ErrNoNode) {
			applied = fresh[i].seq
			continue // purged: older than the retention, so applied long ago
		}
		if r.err != nil {
			// Apply what came before; the rest is read next time.
			c.setStateSeq(applied)
			return changes, fmt.Errorf("read %s: %w", paths[i], zkErr(r.err))
		}
		z, err := decodeStateChange(r.data)
		if err != nil {
			c.log.Error("unreadable state change notification; skipping it", "path", paths[i], "err", err)
			applied = fresh[i].seq
			continue
		}
		for _, t := range z.Topics {
			reread[t] = true
		}
		c.mu.Lock()
		for _, e := range z.Partitions {
			id, err := cluster.ParseUUID(e.TopicID)
			if err != nil {
				reread[e.Topic] = true
				continue
			}
			changed, unknown := c.applyState(e.Topic, id, e.Partition, e.State.state(e.ZkVersion))
			if changed {
				changes |= cluster.ChangePartitions
			}
			if unknown {
				reread[e.Topic] = true
			}
		}
		c.mu.Unlock()
		applied = fresh[i].seq
	}
	c.setStateSeq(applied)
	for _, t := range sortedKeys(reread) {
		ch, err := c.reloadTopic(t)
		changes |= ch
		if err != nil {
			return changes, err
		}
	}
	return changes, nil
}

func (c *Coordinator) setStateSeq(seq int64) {
	c.mu.Lock()
	if seq > c.cache.stateSeq {
		c.cache.stateSeq = seq
	}
	c.mu.Unlock()
}

// processConfigLog applies /config/changes entries since the last one:
// each "topics/<t>" entity re-reads that topic's config, each
// "brokers/<entity>" that entity's dynamic broker configs, each "users/<u>"
// that user's SCRAM credentials (credentials.go) and quotas, each
// "users/<u>/clients/<c>" or "clients/<c>" that entity's client quotas
// (quotas.go).
func (c *Coordinator) processConfigLog() (cluster.Change, error) {
	c.configLogMu.Lock()
	defer c.configLogMu.Unlock()
	all, err := c.listLog(configChangesPath, configChangePrefix)
	if err != nil {
		return 0, err
	}
	c.mu.RLock()
	last := c.cache.configSeq
	c.mu.RUnlock()
	fresh, gap := newEntries(all, last)
	if len(fresh) == 0 {
		return 0, nil
	}
	var topics, brokerEntities, users, quotaPaths []string
	var gapQuotas cluster.Change
	if gap {
		c.mu.RLock()
		topics = c.topicNames()
		c.mu.RUnlock()
		if _, err := c.loadUsers(); err != nil {
			return 0, err
		}
		var err error
		if gapQuotas, err = c.loadQuotas(); err != nil {
			return gapQuotas, err
		}
	} else {
		paths := make([]string, len(fresh))
		for i, e := range fresh {
			paths[i] = configChangesPath + "/" + e.name
		}
		seen := map[string]bool{}
		for i, r := range c.getMany(paths) {
			if errors.Is(r.err, zk.ErrNoNode) {
				continue
			}
			if r.err != nil {
				return 0, fmt.Errorf("read %s: %w", paths[i], zkErr(r.err))
			}
			var z configChangeZNode
			if err := jsonUnmarshal(r.data, &z); err != nil {
				c.log.Error("unreadable config change notification; skipping it", "path", paths[i], "err", err)
				continue
			}
			if t, ok := strings.CutPrefix(z.EntityPath, "topics/"); ok && !seen[t] {
				seen[t] = true
				topics = append(topics, t)
			}
			if e, ok := strings.CutPrefix(z.EntityPath, "brokers/"); ok && !seen["\x00"+e] {
				seen["\x00"+e] = true
				brokerEntities = append(brokerEntities, e)
			}
			if seen[z.EntityPath] {
				continue
			}
			seen[z.EntityPath] = true
			if u, ok := strings.CutPrefix(z.EntityPath, "users/"); ok && !strings.Contains(u, "/") {
				users = append(users, u)
			}
			if strings.HasPrefix(z.EntityPath, "users/") || strings.HasPrefix(z.EntityPath, "clients/") {
				quotaPaths = append(quotaPaths, z.EntityPath)
			}
		}
	}
	if err := c.reloadUsers(users); err != nil {
		return 0, err
	}
	qch, err := c.reloadQuotas(quotaPaths)
	if err != nil {
		return qch, err
	}
	changes, err := c.reloadConfigs(topics)
	changes |= qch | gapQuotas
	if err != nil {
		return changes, err
	}
	var ch cluster.Change
	if gap {
		ch, err = c.loadBrokerConfigs()
	} else if len(brokerEntities) > 0 {
		ch, err = c.reloadBrokerConfigs(brokerEntities)
	}
	changes |= ch
	if err != nil {
		return changes, err
	}
	c.mu.Lock()
	c.cache.configSeq = fresh[len(fresh)-1].seq
	c.mu.Unlock()
	return changes, nil
}

// reloadConfigs reads /config/topics/<t> for each topic and keeps the newer.
func (c *Coordinator) reloadConfigs(topics []string) (cluster.Change, error) {
	paths := make([]string, len(topics))
	for i, t := range topics {
		paths[i] = topicConfigPath(t)
	}
	res := c.getMany(paths)
	var changes cluster.Change
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range res {
		if errors.Is(r.err, zk.ErrNoNode) {
			continue
		}
		if r.err != nil {
			return changes, fmt.Errorf("read %s: %w", paths[i], zkErr(r.err))
		}
		cfg, err := decodeConfig(r.data)
		if err != nil {
			c.log.Error("unreadable topic config; keeping the previous one", "topic", topics[i], "err", err)
			continue
		}
		changes |= c.applyConfig(topics[i], cfg, r.stat)
	}
	return changes, nil
}

// applyConfig puts a config read at stat into the cache when newer. Lock
// should be held.
func (c *Coordinator) applyConfig(topic string, cfg map[string]string, stat *zk.Stat) cluster.Change {
	e, ok := c.cache.topics[topic]
	if !ok || stat.Czxid < e.czxid {
		return 0 // unknown topic (it is read whole when it appears) or older incarnation
	}
	if e.cfgObserved && !newer(stat.Czxid, stat.Version, e.cfgCzxid, e.cfgVersion) {
		return 0
	}
	e.configs, e.cfgCzxid, e.cfgVersion, e.cfgObserved = cfg, stat.Czxid, stat.Version, true
	return cluster.ChangeConfigs
}

// purgeChanges deletes notifications older than the retention, as Kafka's
// change listeners purge /config/changes. Only the controller does it (one
// deleter is enough), and the newest entry always stays so that every
// broker can tell a purge from a gap.
func (c *Coordinator) purgeChanges() {
	c.mu.RLock()
	ctrl := c.won != nil
	c.mu.RUnlock()
	if !ctrl {
		return
	}
	cutoff := time.Now().Add(-c.cfg.ChangeRetention).UnixMilli()
	for _, l := range []struct{ path, prefix string }{{stateChangesPath, stateChangePrefix}, {configChangesPath, configChangePrefix}} {
		names, _, err := c.conn.Children(c.path(l.path))
		if err != nil {
			return
		}
		var all []logEntry
		for _, n := range names {
			if s, ok := sequenceOf(n, l.prefix); ok {
				all = append(all, logEntry{n, s})
			}
		}
		slices.SortFunc(all, func(a, b logEntry) int { return int(a.seq - b.seq) })
		purged := 0
		for _, e := range all[:max(len(all)-1, 0)] {
			p := c.path(l.path + "/" + e.name)
			ok, st, err := c.conn.Exists(p)
			if err != nil {
				return
			}
			if !ok {
				continue
			}
			if st.Ctime >= cutoff {
				break
			}
			if err := c.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return
			}
			purged++
		}
		if purged > 0 {
			c.log.Debug("purged old change notifications", "path", l.path, "count", purged)
		}
	}
}

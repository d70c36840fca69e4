package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
)

// Dynamic broker configs, as Kafka keeps them in ZooKeeper mode:
//
//	/config/brokers/<id>          {"version":1,"config":{...}}   one broker's overrides
//	/config/brokers/<default>     {"version":1,"config":{...}}   the cluster-wide default
//
// each change announced by /config/changes/config_change_<seq> with
// {"version":2,"entity_path":"brokers/<entity>"}, so kafka-configs.sh
// --zookeeper and Sluice read and write the same nodes.

const configBrokersPath = "/config/brokers"

func brokerConfigPath(entity string) string { return configBrokersPath + "/" + entity }

// brokerConfigEntry is one entity's configs with the znode version read.
type brokerConfigEntry struct {
	configs map[string]string
	czxid   int64
	version int32
}

var _ cluster.BrokerConfigStore = (*Coordinator)(nil)

// BrokerConfig implements cluster.BrokerConfigStore from the cache.
func (c *Coordinator) BrokerConfig(ctx context.Context, entity string) (map[string]string, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := maps.Clone(c.cache.brokerConfigs[entity].configs)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// SetBrokerConfig implements cluster.BrokerConfigStore as Kafka's
// AdminZkClient.changeBrokerConfig does: write /config/brokers/<entity>,
// then announce it with a sequential /config/changes/config_change_ (one
// transaction here).
func (c *Coordinator) SetBrokerConfig(ctx context.Context, entity string, configs map[string]string) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	if entity == "" || strings.ContainsAny(entity, "/") {
		return fmt.Errorf("zkcoord: bad broker config entity %q", entity)
	}
	p := brokerConfigPath(entity)
	change := &zk.CreateRequest{Path: c.path(configChangesPath + "/" + configChangePrefix), Data: encodeEntityChange("brokers/" + entity), Acl: c.acl, Flags: zk.FlagSequence}
	_, err := c.conn.Multi(&zk.SetDataRequest{Path: c.path(p), Data: encodeConfig(configs), Version: -1}, change)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = c.conn.Multi(&zk.CreateRequest{Path: c.path(p), Data: encodeConfig(configs), Acl: c.acl}, change)
	}
	if err != nil {
		return fmt.Errorf("set broker config %s: %w", entity, zkErr(err))
	}
	// Read back so the cache holds what was written before answering.
	if _, err := c.reloadBrokerConfigs([]string{entity}); err != nil {
		return err
	}
	c.notify(cluster.ChangeBrokerConfigs)
	return nil
}

// loadBrokerConfigs reads every /config/brokers/<entity>.
func (c *Coordinator) loadBrokerConfigs() (cluster.Change, error) {
	names, _, err := c.conn.Children(c.path(configBrokersPath))
	if errors.Is(err, zk.ErrNoNode) {
		names = nil
	} else if err != nil {
		return 0, fmt.Errorf("list %s: %w", configBrokersPath, zkErr(err))
	}
	c.mu.RLock()
	for e := range c.cache.brokerConfigs {
		names = append(names, e) // cached but maybe deleted: read to learn so
	}
	c.mu.RUnlock()
	return c.reloadBrokerConfigs(names)
}

// reloadBrokerConfigs reads the entities' znodes into the cache (a missing
// znode: no configs).
func (c *Coordinator) reloadBrokerConfigs(entities []string) (cluster.Change, error) {
	paths := make([]string, len(entities))
	for i, e := range entities {
		paths[i] = brokerConfigPath(e)
	}
	res := c.getMany(paths)
	var changes cluster.Change
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache.brokerConfigs == nil {
		c.cache.brokerConfigs = map[string]brokerConfigEntry{}
	}
	for i, r := range res {
		e := entities[i]
		old, had := c.cache.brokerConfigs[e]
		if errors.Is(r.err, zk.ErrNoNode) {
			if had {
				delete(c.cache.brokerConfigs, e)
				changes |= cluster.ChangeBrokerConfigs
			}
			continue
		}
		if r.err != nil {
			return changes, fmt.Errorf("read %s: %w", paths[i], zkErr(r.err))
		}
		cfg, err := decodeConfig(r.data)
		if err != nil {
			c.log.Error("unreadable dynamic broker config; keeping the previous one", "entity", e, "err", err)
			continue
		}
		if had && !newer(r.stat.Czxid, r.stat.Version, old.czxid, old.version) {
			continue
		}
		c.cache.brokerConfigs[e] = brokerConfigEntry{configs: cfg, czxid: r.stat.Czxid, version: r.stat.Version}
		if !maps.Equal(cfg, old.configs) {
			changes |= cluster.ChangeBrokerConfigs
		}
	}
	return changes, nil
}

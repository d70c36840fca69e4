package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
)

// Client quotas in Kafka's znodes (see cluster/quotas.go):
// /config/users/<u>, /config/users/<u>/clients/<c>, /config/clients/<c>,
// each change announced in /config/changes. Every broker keeps every
// entity's quotas in memory (loaded with the rest of the metadata, the
// entity re-read on a notification naming it, all of them again after a
// gap in the notifications or in a new session), so enforcement never
// waits on ZooKeeper.

const configClientsPath = "/config/clients"

// quotaCache is the client quotas cache.
type quotaCache struct {
	mu       sync.RWMutex
	load     sync.Mutex // one loader at a time
	entities map[cluster.QuotaEntity]map[string]float64
}

var _ cluster.ClientQuotaStore = (*Coordinator)(nil)

// ClientQuotas implements cluster.ClientQuotaStore from the cache.
func (c *Coordinator) ClientQuotas(ctx context.Context) (map[cluster.QuotaEntity]map[string]float64, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.quotas.mu.RLock()
	defer c.quotas.mu.RUnlock()
	out := make(map[cluster.QuotaEntity]map[string]float64, len(c.quotas.entities))
	for e, q := range c.quotas.entities {
		out[e] = maps.Clone(q)
	}
	return out, nil
}

// AlterClientQuotas implements cluster.ClientQuotaStore as Kafka's
// AdminZkClient.changeConfigs does: a read-modify-write of the entity's
// znode (compare-and-set on its version, retried; a user's SCRAM
// credentials in the same map are kept), created with its parents when
// absent, together with a change notification, in one transaction.
func (c *Coordinator) AlterClientQuotas(ctx context.Context, e cluster.QuotaEntity, ops []cluster.QuotaOp) error {
	if err := cluster.ValidateQuotaEntity(e); err != nil {
		return err
	}
	if err := cluster.ValidateQuotaOps(e, ops); err != nil {
		return err
	}
	if err := c.writable(ctx); err != nil {
		return err
	}
	rel := "/config/" + e.Path()
	p := c.path(rel)
	if e.User != "" && e.ClientID != "" {
		// /config/users/<u> and /config/users/<u>/clients must exist
		// (Kafka creates them empty); an existing one is left alone.
		user := rel[:strings.Index(rel, "/clients/")]
		for _, parent := range []string{user, user + "/clients"} {
			_, err := c.conn.Create(c.path(parent), encodeConfig(nil), 0, c.acl)
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("create %s: %w", parent, zkErr(err))
			}
		}
	}
	for attempt := 0; attempt < 10; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, stat, err := c.conn.Get(p)
		exists := err == nil
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("read %s: %w", rel, zkErr(err))
		}
		cfg := map[string]string{}
		if exists {
			if cfg, err = decodeConfig(data); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		cluster.ApplyQuotaOps(cfg, ops)
		change := &zk.CreateRequest{Path: c.path(configChangesPath + "/" + configChangePrefix), Data: encodeEntityChange(e.Path()), Acl: c.acl, Flags: zk.FlagSequence}
		if exists {
			_, err = c.conn.Multi(&zk.SetDataRequest{Path: p, Data: encodeConfig(cfg), Version: stat.Version}, change)
		} else {
			_, err = c.conn.Multi(&zk.CreateRequest{Path: p, Data: encodeConfig(cfg), Acl: c.acl}, change)
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) {
			continue // raced with another writer: read again
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", rel, zkErr(err))
		}
		if e.ClientID == "" {
			c.setUser(e.User, cfg) // the same znode holds its credentials
		}
		if c.setQuota(e, cluster.QuotaValues(cfg)) {
			c.notify(cluster.ChangeClientQuotas)
		}
		return nil
	}
	return fmt.Errorf("write %s: too many concurrent changes", rel)
}

// setQuota puts an entity's quotas into the cache (nil: none) and says
// whether they changed.
func (c *Coordinator) setQuota(e cluster.QuotaEntity, q map[string]float64) bool {
	c.quotas.mu.Lock()
	defer c.quotas.mu.Unlock()
	old, had := c.quotas.entities[e]
	if len(q) == 0 {
		delete(c.quotas.entities, e)
		return had
	}
	if c.quotas.entities == nil {
		c.quotas.entities = map[cluster.QuotaEntity]map[string]float64{}
	}
	c.quotas.entities[e] = q
	return !had || !maps.Equal(old, q)
}

// loadQuotas reads every quota entity (at start, after a gap in the
// notifications and in a new session).
func (c *Coordinator) loadQuotas() (cluster.Change, error) {
	c.quotas.load.Lock()
	defer c.quotas.load.Unlock()
	children := func(p string) ([]string, error) {
		names, _, err := c.conn.Children(c.path(p))
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p, zkErr(err))
		}
		return names, nil
	}
	var paths []string // entity paths below /config
	users, err := children(configUsersPath)
	if err != nil {
		return 0, err
	}
	for _, u := range users {
		paths = append(paths, "users/"+u)
		clients, err := children(configUsersPath + "/" + u + "/clients")
		if err != nil {
			return 0, err
		}
		for _, cl := range clients {
			paths = append(paths, "users/"+u+"/clients/"+cl)
		}
	}
	clients, err := children(configClientsPath)
	if err != nil {
		return 0, err
	}
	for _, cl := range clients {
		paths = append(paths, "clients/"+cl)
	}
	all, err := c.readQuotas(paths)
	if err != nil {
		return 0, err
	}
	c.quotas.mu.Lock()
	changed := !maps.EqualFunc(all, c.quotas.entities, func(a, b map[string]float64) bool { return maps.Equal(a, b) })
	c.quotas.entities = all
	c.quotas.mu.Unlock()
	if changed {
		return cluster.ChangeClientQuotas, nil
	}
	return 0, nil
}

// reloadQuotas reads the entities a notification named (entity paths
// below /config).
func (c *Coordinator) reloadQuotas(paths []string) (cluster.Change, error) {
	if len(paths) == 0 {
		return 0, nil
	}
	c.quotas.load.Lock()
	defer c.quotas.load.Unlock()
	got, err := c.readQuotas(paths)
	if err != nil {
		return 0, err
	}
	var changes cluster.Change
	for _, p := range paths {
		e, err := cluster.ParseQuotaPath(p)
		if err != nil {
			continue
		}
		if c.setQuota(e, got[e]) {
			changes |= cluster.ChangeClientQuotas
		}
	}
	return changes, nil
}

// readQuotas reads the quota keys of the entities at paths (below
// /config); a missing node, or one without quota keys, is left out.
func (c *Coordinator) readQuotas(paths []string) (map[cluster.QuotaEntity]map[string]float64, error) {
	full := make([]string, len(paths))
	for i, p := range paths {
		full[i] = "/config/" + p
	}
	out := map[cluster.QuotaEntity]map[string]float64{}
	for i, r := range c.getMany(full) {
		if errors.Is(r.err, zk.ErrNoNode) {
			continue
		}
		if r.err != nil {
			return nil, fmt.Errorf("read %s: %w", full[i], zkErr(r.err))
		}
		e, err := cluster.ParseQuotaPath(paths[i])
		if err != nil {
			c.log.Error("quota znode with a bad name; ignoring it", "path", full[i], "err", err)
			continue
		}
		cfg, err := decodeConfig(r.data)
		if err != nil {
			c.log.Error("unreadable client quota config; ignoring it", "path", full[i], "err", err)
			continue
		}
		if q := cluster.QuotaValues(cfg); q != nil {
			out[e] = q
		}
	}
	return out, nil
}

package zkcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// SCRAM credentials in Kafka's znodes (see cluster/credentials.go):
// /config/users/<sanitized name> and a /config/changes notification per
// change. Every broker keeps all users' credentials in memory (loaded with
// the rest of the metadata, re-read on a notification naming the user, all
// of them again after a gap in the notifications or a new session), so an
// authentication never waits on ZooKeeper.

const configUsersPath = "/config/users"

// userCache is the credentials cache: user -> mechanism -> credential.
type userCache struct {
	mu    sync.RWMutex
	load  sync.Mutex // one loader at a time
	users map[string]map[string]security.ScramCredential
}

func userConfigPath(user string) string {
	return configUsersPath + "/" + security.SanitizeUser(user)
}

func encodeUserChange(user string) []byte {
	b, _ := json.Marshal(configChangeZNode{Version: 2, EntityPath: "users/" + security.SanitizeUser(user)})
	return b
}

// ScramCredential implements cluster.Credentials.
func (c *Coordinator) ScramCredential(user, mechanism string) (security.ScramCredential, bool) {
	c.creds.mu.RLock()
	defer c.creds.mu.RUnlock()
	cred, ok := c.creds.users[user][mechanism]
	return cred, ok
}

// UserScramCredentials implements cluster.Credentials, from the cache.
func (c *Coordinator) UserScramCredentials(ctx context.Context, users []string) (map[string][]security.ScramCredential, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.creds.mu.RLock()
	defer c.creds.mu.RUnlock()
	if users == nil {
		for u := range c.creds.users {
			users = append(users, u)
		}
		sort.Strings(users)
	}
	out := map[string][]security.ScramCredential{}
	for _, u := range users {
		m := c.creds.users[u]
		if len(m) == 0 {
			continue
		}
		creds := make([]security.ScramCredential, 0, len(m))
		for _, cr := range m {
			creds = append(creds, cr)
		}
		sort.Slice(creds, func(i, j int) bool { return creds[i].Mechanism < creds[j].Mechanism })
		out[u] = creds
	}
	return out, nil
}

// AlterScramCredentials implements cluster.Credentials: per user a
// read-modify-write of its znode (compare-and-set on its version, retried)
// together with a change notification, in one ZooKeeper transaction.
func (c *Coordinator) AlterScramCredentials(ctx context.Context, changes []cluster.ScramChange) []error {
	errs := make([]error, len(changes))
	if err := c.writable(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	users, byUser := cluster.GroupScramChanges(changes)
	for _, u := range users {
		idx := byUser[u]
		chs := make([]cluster.ScramChange, len(idx))
		for j, i := range idx {
			chs[j] = changes[i]
		}
		uerrs, err := c.alterUser(ctx, u, chs)
		for j, i := range idx {
			if err != nil {
				errs[i] = err
			} else {
				errs[i] = uerrs[j]
			}
		}
	}
	return errs
}

func (c *Coordinator) alterUser(ctx context.Context, user string, chs []cluster.ScramChange) ([]error, error) {
	p := c.path(userConfigPath(user))
	for attempt := 0; attempt < 10; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, stat, err := c.conn.Get(p)
		exists := err == nil
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("read %s: %w", userConfigPath(user), zkErr(err))
		}
		cfg := map[string]string{}
		if exists {
			if cfg, err = decodeConfig(data); err != nil {
				return nil, fmt.Errorf("%s: %w", userConfigPath(user), err)
			}
		}
		uerrs, applied := cluster.ApplyScramChanges(cfg, chs)
		if !applied {
			return uerrs, nil
		}
		change := &zk.CreateRequest{Path: c.path(configChangesPath + "/" + configChangePrefix), Data: encodeUserChange(user), Acl: c.acl, Flags: zk.FlagSequence}
		if exists {
			_, err = c.conn.Multi(&zk.SetDataRequest{Path: p, Data: encodeConfig(cfg), Version: stat.Version}, change)
		} else {
			_, err = c.conn.Multi(&zk.CreateRequest{Path: p, Data: encodeConfig(cfg), Acl: c.acl}, change)
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) {
			continue // raced with another writer: read again
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", userConfigPath(user), zkErr(err))
		}
		c.setUser(user, cfg)
		return uerrs, nil
	}
	return nil, fmt.Errorf("write %s: too many concurrent changes", userConfigPath(user))
}

// setUser puts a user's config into the cache.
func (c *Coordinator) setUser(user string, cfg map[string]string) {
	creds, bad := cluster.ParseScramConfig(cfg)
	for mech, err := range bad {
		c.log.Error("unreadable SCRAM credential; ignoring it", "user", user, "mechanism", mech, "err", err)
	}
	c.creds.mu.Lock()
	defer c.creds.mu.Unlock()
	if c.creds.users == nil {
		c.creds.users = map[string]map[string]security.ScramCredential{}
	}
	if len(creds) == 0 {
		delete(c.creds.users, user)
		return
	}
	m := make(map[string]security.ScramCredential, len(creds))
	for _, cr := range creds {
		m[cr.Mechanism] = cr
	}
	c.creds.users[user] = m
}

// loadUsers reads every user's credentials (at start, after a gap in the
// notifications and in a new session).
func (c *Coordinator) loadUsers() (cluster.Change, error) {
	c.creds.load.Lock()
	defer c.creds.load.Unlock()
	names, _, err := c.conn.Children(c.path(configUsersPath))
	if errors.Is(err, zk.ErrNoNode) {
		names, err = nil, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", configUsersPath, zkErr(err))
	}
	users, err := c.readUsers(names)
	if err != nil {
		return 0, err
	}
	c.creds.mu.Lock()
	c.creds.users = map[string]map[string]security.ScramCredential{}
	c.creds.mu.Unlock()
	for u, cfg := range users {
		c.setUser(u, cfg)
	}
	return 0, nil
}

// reloadUsers reads the users a notification named (sanitized names).
func (c *Coordinator) reloadUsers(sanitized []string) error {
	if len(sanitized) == 0 {
		return nil
	}
	c.creds.load.Lock()
	defer c.creds.load.Unlock()
	users, err := c.readUsers(sanitized)
	if err != nil {
		return err
	}
	for _, s := range sanitized {
		u, err := security.DesanitizeUser(s)
		if err != nil {
			continue
		}
		c.setUser(u, users[u]) // nil when the node is gone: the user is removed
	}
	return nil
}

// readUsers reads /config/users/<s> for each sanitized name; a missing node
// is left out.
func (c *Coordinator) readUsers(sanitized []string) (map[string]map[string]string, error) {
	paths := make([]string, len(sanitized))
	for i, s := range sanitized {
		paths[i] = configUsersPath + "/" + s
	}
	out := map[string]map[string]string{}
	for i, r := range c.getMany(paths) {
		if errors.Is(r.err, zk.ErrNoNode) {
			continue
		}
		if r.err != nil {
			return nil, fmt.Errorf("read %s: %w", paths[i], zkErr(r.err))
		}
		u, err := security.DesanitizeUser(sanitized[i])
		if err != nil {
			c.log.Error("user znode with a bad name; ignoring it", "path", paths[i], "err", err)
			continue
		}
		cfg, err := decodeConfig(r.data)
		if err != nil {
			c.log.Error("unreadable user config; ignoring it", "path", paths[i], "err", err)
			continue
		}
		out[u] = maps.Clone(cfg)
	}
	return out, nil
}

package zkcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// ACLs in Kafka's layout (kafka.zk.ZkAclStore, ZkAclChangeStore), so that
// kafka-acls.sh --authorizer-properties zookeeper.connect=... and a Kafka
// broker's AclAuthorizer read and write the same nodes:
//
//	/kafka-acl/<Type>/<name>                        literal patterns: {"version":1,"acls":[...]}
//	/kafka-acl-extended/prefixed/<Type>/<name>      prefixed patterns, same format
//	/kafka-acl-changes/acl_changes_<seq>            "TOPIC:orders" (a literal pattern changed)
//	/kafka-acl-extended-changes/acl_changes_<seq>   {"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}
//
// A write replaces one pattern's node with a version check and adds its
// change notification in the same transaction. Every broker that uses the
// ACLs keeps them all in memory: loaded whole the first time they are
// asked for (which creates the directories, as AclAuthorizer does when it
// is configured, and nothing before), then kept current by a child watch
// on each change log, re-reading the nodes the new notifications name. A
// new session, or notifications purged before this broker read them,
// reload everything. Notifications older than Config.ChangeRetention are
// purged by the controller, as /config/changes are.

const (
	aclChangesPath         = "/kafka-acl-changes"
	extendedACLChangesPath = "/kafka-acl-extended-changes"
	extendedACLPath        = "/kafka-acl-extended"
	aclChangePrefix        = "acl_changes_"
)

// aclLogs are the two change logs: [0] literal, [1] prefixed.
var aclLogs = [2]string{aclChangesPath, extendedACLChangesPath}

// aclState is the coordinator's ACL cache.
type aclState struct {
	mu    sync.Mutex               // held across a read from ZooKeeper and the cache update
	ready bool                     // loaded, and followed by followACLs
	nodes map[string]cachedACLNode // ACL node path -> its entries
	seq   [2]int64                 // the last notification applied, per log
}

type cachedACLNode struct {
	entries []security.Entry
	czxid   int64
	version int32
}

// encodeACLChange is the notification of a change of r.
func encodeACLChange(r security.Resource) []byte {
	if r.Pattern == security.PatternLiteral {
		return []byte(r.Type.Upper() + ":" + r.Name)
	}
	b, _ := json.Marshal(struct {
		Version      int    `json:"version"`
		ResourceType string `json:"resourceType"`
		Name         string `json:"name"`
		PatternType  string `json:"patternType"`
	}{1, r.Type.Upper(), r.Name, r.Pattern.Upper()})
	return b
}

// decodeACLChange reads a notification of log i (0 literal, 1 extended).
func decodeACLChange(i int, b []byte) (security.Resource, error) {
	if i == 0 {
		typ, name, ok := strings.Cut(string(b), ":")
		if !ok {
			return security.Resource{}, fmt.Errorf("ACL change %q: want ResourceType:ResourceName", b)
		}
		t, err := security.ParseResourceType(typ)
		if err != nil {
			return security.Resource{}, fmt.Errorf("ACL change %q: %w", b, err)
		}
		return security.Resource{Type: t, Name: name, Pattern: security.PatternLiteral}, nil
	}
	var z struct {
		Version      int    `json:"version"`
		ResourceType string `json:"resourceType"`
		Name         string `json:"name"`
		PatternType  string `json:"patternType"`
	}
	if err := json.Unmarshal(b, &z); err != nil {
		return security.Resource{}, fmt.Errorf("ACL change: %w", err)
	}
	if z.Version != 1 {
		return security.Resource{}, fmt.Errorf("ACL change: version %d", z.Version)
	}
	t, err := security.ParseResourceType(z.ResourceType)
	if err != nil {
		return security.Resource{}, fmt.Errorf("ACL change: %w", err)
	}
	p, err := security.ParsePatternType(z.PatternType)
	if err != nil {
		return security.Resource{}, fmt.Errorf("ACL change: %w", err)
	}
	return security.Resource{Type: t, Name: z.Name, Pattern: p}, nil
}

// aclPaths are the directories AclAuthorizer creates (createAclPaths).
func aclPaths() []string {
	out := []string{security.LiteralACLRoot, aclChangesPath, extendedACLPath, security.PrefixedACLRoot, extendedACLChangesPath}
	for _, root := range []string{security.LiteralACLRoot, security.PrefixedACLRoot} {
		for _, t := range security.StoredResourceTypes {
			out = append(out, root+"/"+t.String())
		}
	}
	return out
}

// ACLs implements cluster.ACLStore.
func (c *Coordinator) ACLs(ctx context.Context) ([]security.ACL, error) {
	if err := c.ensureACLs(ctx); err != nil {
		return nil, err
	}
	c.acls.mu.Lock()
	defer c.acls.mu.Unlock()
	var out []security.ACL
	for path, n := range c.acls.nodes {
		r, err := security.ParseACLPath(path)
		if err != nil {
			continue
		}
		for _, e := range n.entries {
			out = append(out, security.ACL{Resource: r, Entry: e})
		}
	}
	security.SortACLs(out)
	return out, nil
}

// WatchACLs implements cluster.ACLStore.
func (c *Coordinator) WatchACLs(ctx context.Context) <-chan struct{} {
	ch := c.Watch(ctx)
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for change := range ch {
			if change&cluster.ChangeACLs != 0 {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// UpdateACLs implements cluster.ACLStore: a compare-and-set of the
// pattern's node (create, set or delete) with its change notification, in
// one transaction.
func (c *Coordinator) UpdateACLs(ctx context.Context, r security.Resource, update func([]security.Entry) []security.Entry) (bool, error) {
	probe := security.ACL{Resource: r, Entry: security.Entry{Principal: "User:x", Host: "*", Operation: security.OpRead, Permission: security.Allow}}
	if err := probe.Validate(); err != nil {
		return false, err
	}
	if err := c.ensureACLs(ctx); err != nil {
		return false, err
	}
	if err := c.writable(ctx); err != nil {
		return false, err
	}
	path := security.ACLPath(r)
	logPath := aclLogs[0]
	if r.Pattern == security.PatternPrefixed {
		logPath = aclLogs[1]
	}
	read := func() ([]security.Entry, int32, bool, error) {
		data, stat, err := c.conn.Get(c.path(path))
		if errors.Is(err, zk.ErrNoNode) {
			return nil, 0, false, nil
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("read %s: %w", path, zkErr(err))
		}
		entries, err := security.DecodeEntries(data)
		if err != nil {
			return nil, 0, false, fmt.Errorf("%s: %w", path, err)
		}
		return entries, stat.Version, true, nil
	}
	write := func(entries []security.Entry, version int32, exists bool) error {
		var op any
		switch {
		case len(entries) == 0:
			op = &zk.DeleteRequest{Path: c.path(path), Version: version}
		case exists:
			op = &zk.SetDataRequest{Path: c.path(path), Data: security.EncodeEntries(entries), Version: version}
		default:
			op = &zk.CreateRequest{Path: c.path(path), Data: security.EncodeEntries(entries), Acl: c.aclFor(path)}
		}
		note := &zk.CreateRequest{Path: c.path(logPath + "/" + aclChangePrefix), Data: encodeACLChange(r), Acl: c.aclFor(logPath), Flags: zk.FlagSequence}
		_, err := c.conn.Multi(op, note)
		switch {
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
			return fmt.Errorf("%w: %s", cluster.ErrBadVersion, path)
		case err != nil:
			return fmt.Errorf("write %s: %w", path, zkErr(err))
		}
		return nil
	}
	changed, err := cluster.UpdateEntries(ctx, r, update, read, write)
	if err != nil || !changed {
		return changed, err
	}
	// Read our own write into the cache (the notification would bring it
	// too, a moment later).
	c.acls.mu.Lock()
	err = c.reloadACLNodes([]string{path})
	c.acls.mu.Unlock()
	c.notify(cluster.ChangeACLs)
	return true, err
}

// ensureACLs loads the ACLs and starts following them, the first time.
func (c *Coordinator) ensureACLs(ctx context.Context) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	c.acls.mu.Lock()
	defer c.acls.mu.Unlock()
	if c.acls.ready {
		return nil
	}
	if err := c.writable(ctx); err != nil {
		return err
	}
	for _, p := range aclPaths() {
		if err := c.ensurePath(p); err != nil {
			return err
		}
	}
	watches, err := c.loadACLs()
	if err != nil {
		return fmt.Errorf("zkcoord: load ACLs: %w", err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return cluster.ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	c.acls.ready = true
	go c.followACLs(watches)
	return nil
}

// loadACLs reads every ACL node into the cache. The positions in the
// change logs are taken first (arming their watches), so a change after
// them is either read here or notified later. c.acls.mu should be held.
func (c *Coordinator) loadACLs() ([2]<-chan zk.Event, error) {
	var watches [2]<-chan zk.Event
	var seqs [2]int64
	for i, p := range aclLogs {
		names, _, ch, err := c.conn.ChildrenW(c.path(p))
		if err != nil {
			return watches, fmt.Errorf("list %s: %w", p, zkErr(err))
		}
		seqs[i] = -1
		for _, n := range names {
			if s, ok := sequenceOf(n, aclChangePrefix); ok && s > seqs[i] {
				seqs[i] = s
			}
		}
		watches[i] = ch
	}
	var paths []string
	for _, root := range []string{security.LiteralACLRoot, security.PrefixedACLRoot} {
		types, _, err := c.conn.Children(c.path(root))
		if err != nil {
			return watches, fmt.Errorf("list %s: %w", root, zkErr(err))
		}
		for _, t := range types {
			if _, err := security.ParseResourceType(t); err != nil {
				continue // a type Sluice does not know: nothing to authorize with it
			}
			names, _, err := c.conn.Children(c.path(root + "/" + t))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return watches, fmt.Errorf("list %s/%s: %w", root, t, zkErr(err))
			}
			for _, n := range names {
				paths = append(paths, root+"/"+t+"/"+n)
			}
		}
	}
	c.acls.nodes = map[string]cachedACLNode{}
	if err := c.reloadACLNodes(paths); err != nil {
		return watches, err
	}
	c.acls.seq = seqs
	return watches, nil
}

// reloadACLNodes reads the ACL nodes at paths into the cache (a node gone
// leaves it). c.acls.mu should be held.
func (c *Coordinator) reloadACLNodes(paths []string) error {
	for i, r := range c.getMany(paths) {
		path := paths[i]
		if errors.Is(r.err, zk.ErrNoNode) {
			delete(c.acls.nodes, path)
			continue
		}
		if r.err != nil {
			return fmt.Errorf("read %s: %w", path, zkErr(r.err))
		}
		if _, err := security.ParseACLPath(path); err != nil {
			continue
		}
		entries, err := security.DecodeEntries(r.data)
		if err != nil {
			// As Kafka: an unreadable node is reported, and its resource
			// has no ACLs here until it is rewritten.
			c.log.Error("unreadable ACL node; ignoring it", "path", path, "err", err)
			delete(c.acls.nodes, path)
			continue
		}
		if old, ok := c.acls.nodes[path]; ok && newer(old.czxid, old.version, r.stat.Czxid, r.stat.Version) {
			continue // an older read than the one cached
		}
		c.acls.nodes[path] = cachedACLNode{entries: entries, czxid: r.stat.Czxid, version: r.stat.Version}
	}
	return nil
}

// followACLs keeps the cache current until Close.
func (c *Coordinator) followACLs(watches [2]<-chan zk.Event) {
	defer c.wg.Done()
	purge := time.NewTicker(purgeInterval(c.cfg.ChangeRetention))
	defer purge.Stop()
	var retry <-chan time.Time
	for {
		expired := false
		select {
		case <-c.done:
			return
		case ev, ok := <-watches[0]:
			expired = !ok || ev.Type == zk.EventNotWatching
		case ev, ok := <-watches[1]:
			expired = !ok || ev.Type == zk.EventNotWatching
		case <-retry:
			expired = watches[0] == nil
		case <-purge.C:
			c.purgeACLChanges()
			continue
		}
		retry = nil
		var err error
		if expired {
			// The session ended (the watches with it), or we are closing.
			if !c.awaitSession() {
				return
			}
			c.acls.mu.Lock()
			watches, err = c.loadACLs()
			c.acls.mu.Unlock()
			if err == nil {
				c.log.Info("ACLs reloaded in a new zookeeper session")
			}
		} else {
			watches, err = c.processACLChanges()
		}
		c.notify(cluster.ChangeACLs)
		if err != nil {
			c.log.Warn("following ACL changes failed; retrying", "err", err)
			watches = [2]<-chan zk.Event{}
			retry = time.After(time.Second)
		}
	}
}

// awaitSession waits for a ZooKeeper session (false when closing).
func (c *Coordinator) awaitSession() bool {
	for c.conn.State() != zk.StateHasSession {
		select {
		case <-c.done:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// processACLChanges applies the notifications after the last applied,
// re-arming both watches.
func (c *Coordinator) processACLChanges() ([2]<-chan zk.Event, error) {
	c.acls.mu.Lock()
	defer c.acls.mu.Unlock()
	var watches [2]<-chan zk.Event
	var reread []string
	var seqs [2]int64
	for i, p := range aclLogs {
		names, _, ch, err := c.conn.ChildrenW(c.path(p))
		if err != nil {
			return watches, fmt.Errorf("list %s: %w", p, zkErr(err))
		}
		watches[i] = ch
		var all []logEntry
		for _, n := range names {
			if s, ok := sequenceOf(n, aclChangePrefix); ok {
				all = append(all, logEntry{n, s})
			}
		}
		slices.SortFunc(all, func(a, b logEntry) int { return int(a.seq - b.seq) })
		fresh, gap := newEntries(all, c.acls.seq[i])
		seqs[i] = c.acls.seq[i]
		if len(fresh) == 0 {
			continue
		}
		if gap {
			c.log.Warn("ACL change notifications were purged before this broker read them; reloading every ACL", "log", p)
			return c.loadACLs()
		}
		paths := make([]string, len(fresh))
		for j, e := range fresh {
			paths[j] = p + "/" + e.name
		}
		for j, r := range c.getMany(paths) {
			if errors.Is(r.err, zk.ErrNoNode) {
				continue
			}
			if r.err != nil {
				return watches, fmt.Errorf("read %s: %w", paths[j], zkErr(r.err))
			}
			res, err := decodeACLChange(i, r.data)
			if err != nil {
				c.log.Error("unreadable ACL change notification; skipping it", "path", paths[j], "err", err)
				continue
			}
			if res.Name == "" || strings.Contains(res.Name, "/") || res.Type <= security.ResourceAny {
				continue
			}
			if path := security.ACLPath(res); !slices.Contains(reread, path) {
				reread = append(reread, path)
			}
		}
		seqs[i] = fresh[len(fresh)-1].seq
	}
	if err := c.reloadACLNodes(reread); err != nil {
		return watches, err
	}
	c.acls.seq = seqs
	return watches, nil
}

// purgeACLChanges deletes notifications older than the retention (the
// controller does it; the newest always stays, so brokers tell a purge
// from a gap).
func (c *Coordinator) purgeACLChanges() {
	c.mu.RLock()
	ctrl := c.won != nil
	c.mu.RUnlock()
	if !ctrl {
		return
	}
	cutoff := time.Now().Add(-c.cfg.ChangeRetention).UnixMilli()
	for _, p := range aclLogs {
		names, _, err := c.conn.Children(c.path(p))
		if err != nil {
			return
		}
		var all []logEntry
		for _, n := range names {
			if s, ok := sequenceOf(n, aclChangePrefix); ok {
				all = append(all, logEntry{n, s})
			}
		}
		slices.SortFunc(all, func(a, b logEntry) int { return int(a.seq - b.seq) })
		for _, e := range all[:max(len(all)-1, 0)] {
			full := c.path(p + "/" + e.name)
			ok, st, err := c.conn.Exists(full)
			if err != nil {
				return
			}
			if !ok {
				continue
			}
			if st.Ctime >= cutoff {
				break
			}
			if err := c.conn.Delete(full, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return
			}
		}
	}
}

package zkcoord

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// sensitivePaths hold secrets (SCRAM credentials, broker configs with
// passwords, delegation tokens; Sluice's shared keys): with
// zookeeper.set.acl their nodes are readable by the brokers' own identity
// only (Kafka's ZkData.SensitiveRootPaths).
var sensitivePaths = []string{"/config/users", "/config/brokers", "/delegation_token/tokens", ConsoleKeyPath, SchemaRegistryKeyPath}

// aclFor returns the ZooKeeper ACL of a node created at Kafka path p, as
// Kafka's ZkData.defaultAcls: open to all without zookeeper.set.acl;
// with it, every permission for the identity that created the node
// (ZooKeeper's CREATOR_ALL: whoever authenticated as the same digest user
// or client certificate, so every broker of the cluster must use the same
// one) and, except under the sensitive paths, read for everyone.
func (c *Coordinator) aclFor(p string) []zk.ACL {
	return defaultACL(c.cfg.SetACL, p)
}

func defaultACL(secure bool, p string) []zk.ACL {
	if !secure {
		return zk.WorldACL(zk.PermAll)
	}
	for _, s := range sensitivePaths {
		if p == s || strings.HasPrefix(p, s+"/") {
			return zk.AuthACL(zk.PermAll)
		}
	}
	return append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)
}

// checkIdentity refuses zookeeper.set.acl without an identity to own the
// znodes (Kafka refuses to start so too, KafkaZkClient's secure check):
// ZooKeeper would refuse every create with an "auth" ACL.
func (cfg *Config) checkIdentity() error {
	if !cfg.SetACL {
		return nil
	}
	if cfg.Digest != "" {
		if u, _, ok := strings.Cut(cfg.Digest, ":"); !ok || u == "" {
			return errors.New("zookeeper.set.acl: the digest credentials must be user:password")
		}
		return nil
	}
	if cfg.TLS != nil && (len(cfg.TLS.Certificates) > 0 || cfg.TLS.GetClientCertificate != nil) {
		return nil
	}
	return errors.New("zookeeper.set.acl=true needs an identity for the ZooKeeper client: " +
		"a TLS client certificate (zookeeper.ssl.client.enable with zookeeper.ssl.keystore.location) or digest credentials")
}

// authenticate adds the digest credentials to the session (the client
// sends them again after every reconnection).
func (c *Coordinator) authenticate() error {
	if c.cfg.Digest == "" {
		return nil
	}
	if err := c.conn.AddAuth("digest", []byte(c.cfg.Digest)); err != nil {
		return fmt.Errorf("zookeeper: digest authentication: %w", zkErr(err))
	}
	return nil
}

// noAuthHint explains a write ZooKeeper refused for lack of permission.
func noAuthHint(err error) error {
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("%w (the znode belongs to another ZooKeeper identity: with zookeeper.set.acl every broker "+
			"must authenticate as the same digest user or client certificate)", err)
	}
	return err
}

// kafkaRoots are the top-level znodes of Kafka and Sluice, secured by
// secureExisting when there is no chroot (with a chroot, all of it is).
var kafkaRoots = []string{"/admin", "/brokers", "/cluster", "/config", "/controller", "/controller_epoch",
	"/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification", "/delegation_token",
	"/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended", "/kafka-acl-extended-changes",
	stateChangesPath, ConsoleLeaderPath, "/schema_registry_leader", MetricsEndpointsPath, ConsoleKeyPath, SchemaRegistryKeyPath}

// secureExisting gives the znodes made before zookeeper.set.acl was
// turned on the ACLs they would have had (as Kafka's
// zookeeper-security-migration tool does, here at start-up): each root
// still open to everyone is secured, its subtree first and itself last,
// so an interrupted pass is redone at the next start.
func (c *Coordinator) secureExisting() error {
	if !c.cfg.SetACL {
		return nil
	}
	var roots []string
	if c.cs.Chroot != "" {
		names, _, err := c.conn.Children(c.cs.Chroot)
		if err != nil {
			return fmt.Errorf("zkcoord: list %s: %w", c.cs.Chroot, zkErr(err))
		}
		for _, n := range names {
			roots = append(roots, "/"+n)
		}
	} else {
		roots = kafkaRoots
	}
	secured := 0
	for _, r := range roots {
		acl, _, err := c.conn.GetACL(c.path(r))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("zkcoord: read the ACL of %s: %w", r, zkErr(err))
		}
		if !worldWritable(acl) {
			continue
		}
		n, err := c.secureTree(r)
		secured += n
		if err != nil {
			return fmt.Errorf("zkcoord: zookeeper.set.acl: securing %s: %w", r, noAuthHint(zkErr(err)))
		}
	}
	if c.cs.Chroot != "" {
		if acl, _, err := c.conn.GetACL(c.cs.Chroot); err == nil && worldWritable(acl) {
			if _, err := c.conn.SetACL(c.cs.Chroot, c.acl, -1); err != nil {
				return fmt.Errorf("zkcoord: zookeeper.set.acl: securing %s: %w", c.cs.Chroot, noAuthHint(zkErr(err)))
			}
			secured++
		}
	}
	if secured > 0 {
		c.log.Info("zookeeper.set.acl: secured znodes created without ACLs", "znodes", secured)
	}
	return nil
}

// secureTree sets the default ACL on p's subtree, children first.
func (c *Coordinator) secureTree(p string) (int, error) {
	children, _, err := c.conn.Children(c.path(p))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ch := range children {
		k, err := c.secureTree(p + "/" + ch)
		n += k
		if err != nil {
			return n, err
		}
	}
	if _, err := c.conn.SetACL(c.path(p), c.aclFor(p), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return n, err
	}
	return n + 1, nil
}

// worldWritable reports whether an ACL lets anyone change the node.
func worldWritable(acl []zk.ACL) bool {
	for _, a := range acl {
		if a.Scheme == "world" && a.ID == "anyone" && a.Perms&^zk.PermRead != 0 {
			return true
		}
	}
	return false
}

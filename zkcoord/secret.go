package zkcoord

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// ConsoleKeyPath is the znode (under the chroot) holding the cluster key
// that seals the console's notifier secrets in its replicated state.
const ConsoleKeyPath = "/sluice_console_key"

// SchemaRegistryKeyPath is the znode (under the chroot) holding the key the
// registries of a cluster share to sign the writes one forwards on its own
// behalf (the console's deletes; schemareg.Config.PeerKey).
const SchemaRegistryKeyPath = "/sluice_schema_registry_key"

// SharedSecret returns the random secret of size bytes kept in the znode at
// path (under the chroot), creating it on first use: the first process to
// ask creates it, every other one (a race included) reads that one. The
// keys Sluice keeps (ConsoleKeyPath, SchemaRegistryKeyPath) are sensitive
// paths: with zookeeper.set.acl only the brokers' identity reads them;
// without it whoever can read ZooKeeper can, so ZooKeeper must then be
// reachable only from the brokers (see DESIGN.md, "The console in a
// cluster").
func (c *Coordinator) SharedSecret(ctx context.Context, path string, size int) ([]byte, error) {
	if err := validateChroot(path); err != nil || path == "/" {
		return nil, fmt.Errorf("zkcoord: secret path %q: want an absolute znode path", path)
	}
	if err := c.writable(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		b, _, err := c.conn.Get(c.path(path))
		if err == nil {
			if len(b) != size {
				return nil, fmt.Errorf("zkcoord: %s holds %d bytes, want %d", path, len(b), size)
			}
			return b, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("zkcoord: read %s: %w", path, zkErr(err))
		}
		secret := make([]byte, size)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		_, err = c.conn.Create(c.path(path), secret, 0, c.acl)
		if err == nil {
			c.log.Info("shared secret created", "path", path)
			return secret, nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return nil, fmt.Errorf("zkcoord: create %s: %w", path, zkErr(err))
		}
	}
	return nil, fmt.Errorf("zkcoord: %s kept changing", path)
}

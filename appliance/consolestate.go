package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/consolestate"
	"github.com/sluice-io/sluice/zkcoord"
)

// The console's replicated state (see DESIGN.md, "The console in a
// cluster"): the cluster key that seals notifier secrets, the console write
// lock, the replica of __sluice_console and the lag history of
// __sluice_console_lag. In a cluster the key and the lock live in
// ZooKeeper; on a single node the key is console.data.dir/alerting.key and
// the lock an flock on console.data.dir/console.lock.

// consoleWriteLockPath is the ephemeral znode (under the chroot) held by
// the console that is writing a change of the replicated state.
const consoleWriteLockPath = "/console_write_lock"

// consoleKey returns the cluster key and where it is kept.
func consoleKey(ctx context.Context, a *App) ([]byte, string, error) {
	if zc, ok := a.Coordinator().(*zkcoord.Coordinator); ok {
		kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		key, err := zc.SharedSecret(kctx, zkcoord.ConsoleKeyPath, 32)
		if err != nil {
			return nil, "", fmt.Errorf("console key: %w", err)
		}
		return key, "zookeeper " + zkcoord.ConsoleKeyPath, nil
	}
	path := filepath.Join(a.Config().ConsoleDataDir, "alerting.key")
	key, err := alerting.LoadOrCreateKey(path)
	return key, "file " + path, err
}

// consoleLock returns the console write lock and where it is kept.
func consoleLock(a *App) (consoledb.Lock, string, error) {
	if zc, ok := a.Coordinator().(*zkcoord.Coordinator); ok {
		host, _ := os.Hostname()
		data, err := json.Marshal(map[string]any{"version": 1, "brokerid": a.BrokerID(), "host": host})
		if err != nil {
			return nil, "", err
		}
		return &zkWriteLock{zc: zc, data: data}, "zookeeper " + consoleWriteLockPath, nil
	}
	path := filepath.Join(a.Config().ConsoleDataDir, "console.lock")
	return consolestate.NewFileLock(path), "flock " + path, nil
}

// zkWriteLock is the console write lock of a cluster: the ephemeral znode
// consoleWriteLockPath, held from its creation until the change is applied
// and given up at once (a killed holder's node goes with its session).
type zkWriteLock struct {
	zc   *zkcoord.Coordinator
	data []byte
}

// Lock implements consoledb.Lock.
func (l *zkWriteLock) Lock(ctx context.Context) (func(), error) {
	ld, err := l.zc.Lead(consoleWriteLockPath, l.data)
	if err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for !ld.IsLeader() {
		select {
		case <-ctx.Done():
			ld.Close()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Millisecond)
	}
	return func() { ld.Close() }, nil
}

// consoleTopicRF is the replication factor wanted for the console topics.
func consoleTopicRF(cfg *Config) int {
	return int(cfg.ConsoleTopicReplicationFactor)
}

// waitForBrokers is how long a cluster's console waits for enough brokers
// before creating its topics with fewer replicas.
func waitForBrokers(cfg *Config) time.Duration {
	if cfg.ZookeeperConnect == "" {
		return 0
	}
	return 30 * time.Second
}

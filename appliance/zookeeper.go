package appliance

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/zkcoord"
)

// openZooKeeper opens the coordinator of cluster mode: zookeeper.connect
// set means the metadata lives in ZooKeeper (package zkcoord, Kafka's znode
// layout), shared by every broker of the cluster.
func openZooKeeper(ctx context.Context, cfg *Config, logger *slog.Logger) (cluster.Coordinator, error) {
	return zkcoord.Open(ctx, zkcoord.Config{
		Connect:           cfg.ZookeeperConnect,
		SessionTimeout:    time.Duration(cfg.ZookeeperSessionTimeoutMs) * time.Millisecond,
		ConnectionTimeout: time.Duration(cfg.ZookeeperConnectionTimeoutMs) * time.Millisecond,
		Logger:            logger,
	})
}

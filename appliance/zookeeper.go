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
	zcfg := zkcoord.Config{
		Connect:           cfg.ZookeeperConnect,
		SessionTimeout:    time.Duration(cfg.ZookeeperSessionTimeoutMs) * time.Millisecond,
		ConnectionTimeout: time.Duration(cfg.ZookeeperConnectionTimeoutMs) * time.Millisecond,
		Logger:            logger,
		SetACL:            cfg.ZookeeperSetACL,
	}
	if cfg.ZookeeperSSLClientEnable {
		tlsCfg, err := zkcoord.TLSOptions{
			KeystoreLocation:       cfg.ZookeeperSSLKeystoreLocation,
			KeystoreType:           cfg.ZookeeperSSLKeystoreType,
			TruststoreLocation:     cfg.ZookeeperSSLTruststoreLocation,
			TruststoreType:         cfg.ZookeeperSSLTruststoreType,
			Protocol:               cfg.ZookeeperSSLProtocol,
			EnabledProtocols:       cfg.ZookeeperSSLEnabledProtocols,
			CipherSuites:           cfg.ZookeeperSSLCipherSuites,
			EndpointIdentification: cfg.ZookeeperSSLEndpointIdentificationAlgorithm,
		}.TLSConfig()
		if err != nil {
			return nil, err
		}
		zcfg.TLS = tlsCfg
	}
	c, err := zkcoord.Open(ctx, zcfg)
	if err != nil {
		// Not the typed nil in the interface: Close would call it.
		return nil, err
	}
	return c, nil
}

// Package appliance wires one Sluice process together and runs its
// lifecycle. App.Start reads top to bottom: the metadata coordinator (a
// file in the data directory, or ZooKeeper when zookeeper.connect is set),
// the broker's identity, storage (recovering the logs), the protocol
// listener (bound first so the advertised ports are known), the broker, the
// group coordinator, the controller, serving, and last the console with its
// alerting, comparisons and metrics endpoint. App.Close stops them in
// reverse order; Run does both around SIGTERM/SIGINT.
package appliance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/kclient"
	"github.com/sluice-io/sluice/internal/loglevels"
	"github.com/sluice-io/sluice/internal/sdnotify"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/security"
	"github.com/sluice-io/sluice/storage"
	"github.com/sluice-io/sluice/txn"
)

// App is one running Sluice process.
type App struct {
	cfg     *Config
	logger  *slog.Logger
	metrics *metrics.Registry // this process's metrics: broker, protocol, console

	coord      cluster.Coordinator
	logs       *storage.Manager
	brk        *broker.Broker
	server     *protocol.Server
	controller *cluster.Controller
	brokerID   int32
	clusterID  string
	// client is the security of this process's own clients
	// (console.kafka.*), read at Start.
	client *kclient.Settings
	authz  *security.Authorizer // nil without authorizer.class.name (authorizer.go)

	groups      protocol.GroupCoordinator // package group's coordinator (groups.go)
	groupsClose io.Closer
	txns        *txn.ForBroker

	ctlCancel context.CancelFunc
	ctlDone   chan struct{}
	// quotaCancel and quotaDone stop the client quota follower (quotas.go).
	quotaCancel context.CancelFunc
	quotaDone   chan struct{}

	// console is the console component (console.go): nil when neither
	// console.listen nor metrics.listen is set, or until it started.
	console       *consoleComponent
	consoleCancel context.CancelFunc

	// registry is the schema registry component (schemaregistry.go): nil
	// when schema.registry.listen is empty. schemaReg is its running
	// registry once started, read by the console's comparisons through
	// SchemaSource (schemaRegMu).
	registry    *schemaRegistryComponent
	schemaRegMu sync.Mutex
	schemaReg   *schemareg.Registry

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg and returns an App; Start brings it up.
func New(cfg *Config, logger *slog.Logger) (*App, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &App{cfg: cfg, logger: logger, brokerID: -1, metrics: metrics.New()}, nil
}

// Metrics is the appliance's own metrics registry: the broker's traffic and
// state, the protocol's requests and connections, and the console's and
// alerting's metrics all go to it, and /metrics serves it. Each App has its
// own, so several appliances in one process (tests) keep separate counters.
func (a *App) Metrics() *metrics.Registry { return a.metrics }

// Config is the appliance's configuration.
func (a *App) Config() *Config { return a.cfg }

// Logger is the process logger.
func (a *App) Logger() *slog.Logger { return a.logger }

// Broker is the broker (after Start).
func (a *App) Broker() *broker.Broker { return a.brk }

// Groups is the consumer-group coordinator (after Start): package group's
// *group.ForBroker.
func (a *App) Groups() protocol.GroupCoordinator { return a.groups }

// Transactions is the transaction coordinator (after Start).
func (a *App) Transactions() *txn.ForBroker { return a.txns }

// Coordinator is the metadata coordinator (after Start).
func (a *App) Coordinator() cluster.Coordinator { return a.coord }

// Storage is the log manager (after Start).
func (a *App) Storage() *storage.Manager { return a.logs }

// BrokerID is this broker's id (after Start; resolved from broker.id or
// meta.properties).
func (a *App) BrokerID() int32 { return a.brokerID }

// ClusterID is the cluster id (after Start).
func (a *App) ClusterID() string { return a.clusterID }

// BootstrapAddrs returns host:port addresses an in-process client (the
// console, comparisons, the schema registry) can dial: each bound listener
// of the security protocol of the console's client settings
// (console.kafka.security.protocol, PLAINTEXT by default), with 127.0.0.1
// for a wildcard bind.
func (a *App) BootstrapAddrs() []string {
	if a.server == nil {
		return nil
	}
	var out []string
	for _, l := range a.cfg.Listeners {
		if p, _ := a.cfg.ListenerProtocol(l.Name); a.client != nil && p != a.client.Protocol {
			continue
		}
		addr, ok := a.server.Addrs()[l.Name].(*net.TCPAddr)
		if !ok {
			continue
		}
		host := addr.IP.String()
		if addr.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(addr.Port)))
	}
	return out
}

// ClientOpts are the franz-go options of this process's own clients (the
// console's pages, lag sampler and alert sources, comparisons, the schema
// registry) from the console.kafka.<property> keys: TLS and SASL.
func (a *App) ClientOpts() []kgo.Opt {
	if a.client == nil {
		return nil
	}
	return a.client.Opts()
}

// clientSettings reads console.kafka.* and, when the console or the
// schema registry will use a client, checks that a listener serves its
// security protocol.
func clientSettings(cfg *config.Config) (*kclient.Settings, error) {
	s, err := kclient.Parse(cfg.ConsoleKafka)
	if err != nil {
		return nil, fmt.Errorf("config: console.kafka.*: %w", err)
	}
	if cfg.ConsoleListen == "" && cfg.SchemaRegistryListen == "" {
		return s, nil
	}
	for _, l := range cfg.Listeners {
		if p, _ := cfg.ListenerProtocol(l.Name); p == s.Protocol {
			return s, nil
		}
	}
	return nil, fmt.Errorf("config: console.kafka.security.protocol=%s: no listener of that protocol for the console's own client (set console.kafka.security.protocol and its sasl.*/ssl.* settings to match a listener)", s.Protocol)
}

// Start brings the appliance up, in this order: coordinator, broker
// identity, storage (recovering the logs), the protocol listener (bound
// first so the advertised ports are known), the broker, the group
// coordinator, the controller, serving, then the console. On error
// everything started is closed again.
func (a *App) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	cfg := a.cfg
	for _, w := range cfg.Warnings() {
		a.logger.Warn(w)
	}
	for _, d := range cfg.LogDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("log.dirs: %w", err)
		}
	}

	if cfg.ZookeeperConnect == "" {
		st, err := cluster.OpenStandalone(cfg.LogDirs[0])
		if err != nil {
			return err
		}
		a.coord = st
		a.logger.Info("single node: metadata kept in the data directory", "file", st.Path())
	} else if a.coord, err = openZooKeeper(ctx, cfg, a.logger); err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}

	if a.clusterID, err = a.coord.ClusterID(ctx); err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	if a.brokerID, err = resolveIdentity(cfg, a.clusterID, func() (int32, error) { return a.coord.NextBrokerID(ctx) }); err != nil {
		return err
	}

	if a.authz, err = openAuthorizer(ctx, cfg, a.coord, a.logger, a.metrics.AuthorizationDenials(a.brokerID)); err != nil {
		return err
	}

	defaults := cfg.TopicDefaults()
	coord := a.coord
	a.logs, err = storage.OpenManager(storage.ManagerConfig{
		Dirs:                   cfg.LogDirs,
		Logger:                 a.logger.With("component", "storage"),
		RetentionCheckInterval: cfg.LogRetentionCheckInterval,
		CleanerEnabled:         cfg.LogCleanerEnable,
		DefaultConfig: func(topic string) storage.LogConfig {
			overrides, err := coord.TopicConfig(ctx, topic)
			if err != nil {
				overrides = nil
			}
			return broker.TopicLogConfig(defaults, overrides)
		},
		MaxDecompressedBatchBytes: cfg.MessageDecompressedMaxBytes,
		ProducerIDExpiration:      cfg.ProducerIDExpiration,
		RecoveryThreadsPerDir:     int(cfg.NumRecoveryThreadsPerDataDir),
		// `systemctl status` shows the start-up load's progress (the unit
		// is Type=notify: READY=1 follows once the broker listens).
		LoadProgress: func(p storage.LoadProgress) { sdnotify.Status(p.String()) },
	})
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}

	listeners, err := protocolListeners(&cfg.Config, a.logger)
	if err != nil {
		return err
	}
	if a.client, err = clientSettings(&cfg.Config); err != nil {
		return err
	}
	ibAuth, err := interBrokerAuth(&cfg.Config)
	if err != nil {
		return err
	}
	// The broker registers its endpoints, which need the bound ports: bind
	// the listeners first, serve once the broker is up.
	srvCfg := protocol.Config{
		Listeners:        listeners,
		Logger:           a.logger,
		MaxRequestBytes:  cfg.SocketRequestMaxBytes,
		LogDirs:          cfg.LogDirs,
		Metrics:          a.metrics,
		Credentials:      a.coord,
		AuthFailureDelay: time.Duration(cfg.ConnectionFailedAuthenticationDelayMs) * time.Millisecond,
	}
	if srvCfg.AuthFailureDelay == 0 {
		srvCfg.AuthFailureDelay = -1 // connection.failed.authentication.delay.ms=0: no delay
	}
	if err := connectionLimits(ctx, cfg, &srvCfg); err != nil {
		return err
	}
	if err := a.startQuotas(ctx, &srvCfg); err != nil {
		return fmt.Errorf("client quotas: %w", err)
	}
	bound, err := protocol.Bind(srvCfg)
	if err != nil {
		return err
	}
	ports := map[string]int{}
	for name, addr := range bound.Addrs() {
		if t, ok := addr.(*net.TCPAddr); ok {
			ports[name] = t.Port
		}
	}
	var endpoints []cluster.Endpoint
	for _, l := range cfg.AdvertisedEndpoints(ports) {
		proto, _ := cfg.ListenerProtocol(l.Name)
		endpoints = append(endpoints, cluster.Endpoint{Listener: l.Name, SecurityProtocol: proto, Host: l.Host, Port: int32(l.Port)})
	}

	a.brk, err = broker.New(broker.Config{
		BrokerID:                      a.brokerID,
		Rack:                          cfg.BrokerRack,
		Endpoints:                     endpoints,
		Logs:                          a.logs,
		Coordinator:                   a.coord,
		Logger:                        a.logger,
		NumPartitions:                 cfg.NumPartitions,
		DefaultReplicationFactor:      cfg.DefaultReplicationFactor,
		AutoCreateTopics:              cfg.AutoCreateTopics,
		DeleteTopicEnable:             cfg.DeleteTopicEnable,
		MaxRequestBytes:               cfg.SocketRequestMaxBytes,
		FetchMaxBytes:                 cfg.FetchMaxBytes,
		TopicDefaults:                 defaults,
		BrokerConfigs:                 broker.BrokerConfigEntries(&cfg.Config, a.brokerID),
		Static:                        &cfg.Config,
		Loggers:                       loggerLevels(a.logger),
		OffsetsTopicPartitions:        cfg.OffsetsTopicNumPartitions,
		OffsetsTopicReplicationFactor: cfg.OffsetsTopicReplicationFactor,
		OffsetsTopicSegmentBytes:      cfg.OffsetsTopicSegmentBytes,
		AdoptStrayLogs:                cfg.ZookeeperConnect == "",
		ReplicaLagTimeMax:             time.Duration(cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		ReplicaFetchWaitMax:           time.Duration(cfg.ReplicaFetchWaitMaxMs) * time.Millisecond,
		ReplicaFetchMinBytes:          cfg.ReplicaFetchMinBytes,
		ReplicaFetchMaxBytes:          cfg.ReplicaFetchMaxBytes,
		ReplicaFetchResponseMaxBytes:  cfg.ReplicaFetchResponseMaxBytes,
		ReplicaFetchBackoff:           time.Duration(cfg.ReplicaFetchBackoffMs) * time.Millisecond,
		NumReplicaFetchers:            int(cfg.NumReplicaFetchers),
		ReplicaSocketTimeout:          time.Duration(cfg.ReplicaSocketTimeoutMs) * time.Millisecond,
		InterBrokerListener:           cfg.InterBrokerListener(),
		InterBrokerAuth:               ibAuth,
		Metrics:                       a.metrics,
		Authorizer:                    a.authz,
		OnDynamic:                     dynamicConnectionLimits(cfg, bound, a.logger),
	})
	if err != nil {
		bound.Close()
		return err
	}
	if err := a.brk.Start(ctx); err != nil {
		bound.Close()
		return err
	}
	if a.groups, a.groupsClose, err = newGroupCoordinator(a, a.brk); err != nil {
		bound.Close()
		return fmt.Errorf("group coordinator: %w", err)
	}
	bound.SetGroups(a.groups)
	if a.txns, err = newTxnCoordinator(a, a.brk); err != nil {
		bound.Close()
		return fmt.Errorf("transaction coordinator: %w", err)
	}
	bound.SetTxn(a.txns)
	a.controller = cluster.NewController(cluster.ControllerConfig{
		Coordinator:                        a.coord,
		BrokerID:                           a.brokerID,
		Logger:                             a.logger,
		UncleanLeaderElection:              cfg.UncleanLeaderElectionEnable,
		AutoLeaderRebalance:                cfg.AutoLeaderRebalanceEnable,
		LeaderImbalanceCheckInterval:       time.Duration(cfg.LeaderImbalanceCheckIntervalSecs) * time.Second,
		LeaderImbalancePerBrokerPercentage: int(cfg.LeaderImbalancePerBrokerPercentage),
	})
	bound.SetController(a.controller)
	// One controller pass before serving, so partitions without a leader
	// yet (new, adopted, or led by a broker that went away) are led when
	// the first client arrives; afterwards the controller follows changes.
	if info, err := a.coord.Campaign(ctx, a.brokerID); err == nil && info.ID == a.brokerID {
		if err := a.controller.Reconcile(ctx, info.Epoch); err != nil {
			a.logger.Warn("first controller pass", "err", err)
		}
		if err := a.brk.Sync(ctx); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	ctlCtx, ctlCancel := context.WithCancel(context.Background())
	a.ctlCancel, a.ctlDone = ctlCancel, make(chan struct{})
	go func() {
		defer close(a.ctlDone)
		a.controller.Run(ctlCtx)
	}()

	if a.server, err = bound.Serve(a.brk); err != nil {
		return err
	}
	a.logger.Info("broker started", "broker_id", a.brokerID, "cluster_id", a.clusterID,
		"listeners", cfg.Listeners, "advertised", endpoints, "log_dirs", cfg.LogDirs)

	// The console: pages, alerting, comparisons and the metrics endpoint.
	// Its context ends at Close.
	if c := newConsole(a); c != nil {
		cctx, cancel := context.WithCancel(context.Background())
		a.consoleCancel = cancel
		if err := c.Start(cctx); err != nil {
			return fmt.Errorf("console: %w", err) // Start closed what it started
		}
		a.console = c
		a.logger.Info("component started", "component", "console")
	}
	// The schema registry, a Kafka client of this broker like the console.
	if r := newSchemaRegistry(a); r != nil {
		if err := r.Start(context.Background()); err != nil {
			return fmt.Errorf("schema registry: %w", err) // Start closed what it started
		}
		a.registry = r
		a.logger.Info("component started", "component", "schema-registry")
	}
	return nil
}

// ShutdownTimeout bounds how long Close waits for in-flight requests.
const ShutdownTimeout = 10 * time.Second

// Close shuts down in reverse order: the console, the listener (stop
// accepting, finish in-flight requests, after a controlled shutdown in
// cluster mode), the group coordinator, the controller, the broker, storage
// (flush, checkpoints, clean-shutdown marker) and the coordinator.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		var errs []error
		if a.registry != nil {
			if err := a.registry.Close(); err != nil {
				errs = append(errs, fmt.Errorf("schema registry: %w", err))
			}
		}
		if a.consoleCancel != nil {
			a.consoleCancel()
		}
		if a.console != nil {
			if err := a.console.Close(); err != nil {
				errs = append(errs, fmt.Errorf("console: %w", err))
			}
		}
		// Cluster mode: leadership moves to other brokers while this one
		// still serves, so clients and followers go over before it stops.
		if a.server != nil && a.cfg.ZookeeperConnect != "" && a.cfg.ControlledShutdownEnable {
			a.brk.ControlledShutdown(broker.ControlledShutdownConfig{
				MaxRetries:   int(a.cfg.ControlledShutdownMaxRetries),
				RetryBackoff: time.Duration(a.cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond,
				Controller:   a.controller,
			})
		}
		if a.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
			if err := a.server.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("protocol: %w", err))
			}
			cancel()
		}
		if a.txns != nil {
			if err := a.txns.Close(); err != nil {
				errs = append(errs, fmt.Errorf("transaction coordinator: %w", err))
			}
		}
		if a.groupsClose != nil {
			if err := a.groupsClose.Close(); err != nil {
				errs = append(errs, fmt.Errorf("group coordinator: %w", err))
			}
		}
		if a.ctlCancel != nil {
			a.ctlCancel()
			<-a.ctlDone
		}
		a.stopQuotas()
		if a.brk != nil {
			if err := a.brk.Close(); err != nil {
				errs = append(errs, fmt.Errorf("broker: %w", err))
			}
		}
		if a.logs != nil {
			if err := a.logs.Close(); err != nil {
				errs = append(errs, fmt.Errorf("storage: %w", err))
			}
		}
		if a.authz != nil {
			a.authz.Close()
		}
		if a.coord != nil {
			if err := a.coord.Close(); err != nil {
				errs = append(errs, fmt.Errorf("coordinator: %w", err))
			}
		}
		a.closeErr = errors.Join(errs...)
		a.logger.Info("stopped", "err", a.closeErr)
	})
	return a.closeErr
}

// Run starts the appliance, serves until ctx is done (SIGTERM/SIGINT), and
// shuts down.
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	a.logger.Info("shutting down")
	return a.Close()
}

// dynamicConnectionLimits applies max.connections and
// max.connections.per.ip set as dynamic broker configs to the listener (the
// config file's values when no dynamic config sets them).
func dynamicConnectionLimits(cfg *Config, bound *protocol.Bound, log *slog.Logger) func(config.Dynamic) {
	return func(d config.Dynamic) {
		total, perIP := int64(cfg.MaxConnections), int64(cfg.MaxConnectionsPerIP)
		if v, ok := d.Value("max.connections"); ok {
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				total = n
			}
		}
		if v, ok := d.Value("max.connections.per.ip"); ok {
			n, err := strconv.ParseInt(v, 10, 32)
			switch {
			case err != nil:
			case n == 0 && len(cfg.MaxConnectionsPerIPOverrides) == 0:
				// As at start: 0 admits only the overrides, and there are none.
				log.Warn("dynamic max.connections.per.ip=0 ignored: max.connections.per.ip.overrides is empty, so it would refuse every client")
			default:
				perIP = n
			}
		}
		bound.SetConnectionLimits(int(total), int(perIP))
	}
}

// connectionLimits sets the connection keys on the protocol config, with
// the host names of max.connections.per.ip.overrides resolved (every address
// of a name gets its limit, as Kafka resolves them at start-up).
func connectionLimits(ctx context.Context, cfg *Config, pc *protocol.Config) error {
	ms := func(v int64) time.Duration {
		if v < 0 {
			return -1
		}
		return time.Duration(v) * time.Millisecond
	}
	pc.ConnectionsMaxIdle = ms(cfg.ConnectionsMaxIdleMs)
	pc.RequestReadTimeout = ms(cfg.SocketRequestReadTimeoutMs)
	pc.MaxConnections = int(cfg.MaxConnections)
	pc.MaxConnectionsPerIP = int(cfg.MaxConnectionsPerIP)
	pc.QueuedMaxRequestBytes = cfg.QueuedMaxRequestBytes
	if pc.QueuedMaxRequestBytes <= 0 {
		pc.QueuedMaxRequestBytes = -1 // Kafka: 0 or less is unbounded
	}
	if len(cfg.MaxConnectionsPerIPOverrides) == 0 {
		return nil
	}
	pc.MaxConnectionsPerIPOverrides = map[string]int{}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for host, n := range cfg.MaxConnectionsPerIPOverrides {
		if ip, err := netip.ParseAddr(host); err == nil {
			pc.MaxConnectionsPerIPOverrides[ip.String()] = n
			continue
		}
		ips, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		if err != nil {
			return fmt.Errorf("config: max.connections.per.ip.overrides: %s: %w", host, err)
		}
		for _, ip := range ips {
			pc.MaxConnectionsPerIPOverrides[ip.Unmap().String()] = n
		}
	}
	return nil
}

// loggerLevels are the run-time log levels behind logger (BROKER_LOGGER
// configs) when it was built on loglevels (sluice serve does), else nil.
func loggerLevels(logger *slog.Logger) *loglevels.Levels {
	l, _ := loglevels.FromHandler(logger.Handler())
	return l
}

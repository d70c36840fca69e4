// Package appliance wires one Sluice process together — configuration,
// storage, the coordinator and controller, the broker and its protocol
// listener, then any extra components (console, metrics, alerting) — and
// runs its lifecycle: start in dependency order, shut down in reverse on
// SIGTERM/SIGINT.
package appliance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/storage"
)

// Component is a part of the appliance started after the broker serves and
// closed before it stops: the console, the metrics endpoint, alerting.
type Component interface {
	// Start starts the component; it must not block for long (run loops in
	// goroutines the component owns). ctx is cancelled at shutdown.
	Start(ctx context.Context) error
	// Close stops the component and waits for what it started.
	Close() error
}

// ComponentFactory builds a component for an appliance that is about to
// serve (its broker is registered and its listener bound). Returning a nil
// Component skips it (for example when its config key disables it).
type ComponentFactory func(a *App) (Component, error)

var (
	factoriesMu sync.Mutex
	factories   []namedFactory
)

type namedFactory struct {
	name string
	fn   ComponentFactory
}

// RegisterComponent adds a component every App builds at start, in
// registration order: the hook where the console, metrics and alerting are
// wired (call it from an init function in this package or from main).
func RegisterComponent(name string, fn ComponentFactory) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	factories = append(factories, namedFactory{name, fn})
}

// CoordinatorFactory opens the ZooKeeper coordinator when zookeeper.connect
// is set; package zkcoord registers it with RegisterZooKeeper.
type CoordinatorFactory func(ctx context.Context, cfg *Config, logger *slog.Logger) (cluster.Coordinator, error)

var zookeeperFactory CoordinatorFactory

// GroupFactory builds the consumer-group coordinator for a broker that has
// started but does not serve yet; the protocol server's group handlers call
// what it returns, and the closer is closed after the listener stops.
type GroupFactory func(a *App, b *broker.Broker) (protocol.GroupCoordinator, io.Closer, error)

var groupFactory GroupFactory

// RegisterGroupCoordinator installs the group coordinator factory
// (groups.go registers package group's).
func RegisterGroupCoordinator(fn GroupFactory) { groupFactory = fn }

// RegisterZooKeeper installs the coordinator used when zookeeper.connect is
// set.
func RegisterZooKeeper(fn CoordinatorFactory) { zookeeperFactory = fn }

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

	groups      protocol.GroupCoordinator // built by the GroupFactory (groups.go)
	groupsClose io.Closer

	ctlCancel context.CancelFunc
	ctlDone   chan struct{}

	compCtx    context.Context
	compCancel context.CancelFunc
	extra      []namedComponent

	closeOnce sync.Once
	closeErr  error
}

type namedComponent struct {
	name string
	c    Component
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

// Coordinator is the metadata coordinator (after Start).
func (a *App) Coordinator() cluster.Coordinator { return a.coord }

// Storage is the log manager (after Start).
func (a *App) Storage() *storage.Manager { return a.logs }

// BrokerID is this broker's id (after Start; resolved from broker.id or
// meta.properties).
func (a *App) BrokerID() int32 { return a.brokerID }

// ClusterID is the cluster id (after Start).
func (a *App) ClusterID() string { return a.clusterID }

// AddComponent adds a component to start after the broker serves (before
// Start, or from a ComponentFactory).
func (a *App) AddComponent(name string, c Component) {
	a.extra = append(a.extra, namedComponent{name, c})
}

// BootstrapAddrs returns host:port addresses an in-process client (the
// console) can dial: each bound listener, with 127.0.0.1 for a wildcard
// bind.
func (a *App) BootstrapAddrs() []string {
	if a.server == nil {
		return nil
	}
	var out []string
	for _, l := range a.cfg.Listeners {
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

// Start brings the appliance up: coordinator, broker identity, storage
// (recovering the logs), the protocol listener (bound first so the
// advertised ports are known), the broker, the group coordinator, the
// controller, then serving, then the extra components. On error everything started is closed again.
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
	} else {
		if zookeeperFactory == nil {
			return errors.New("zookeeper.connect is set but this build has no ZooKeeper coordinator")
		}
		if a.coord, err = zookeeperFactory(ctx, cfg, a.logger); err != nil {
			return fmt.Errorf("zookeeper: %w", err)
		}
	}

	if a.clusterID, err = a.coord.ClusterID(ctx); err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	if a.brokerID, err = resolveIdentity(cfg, a.clusterID, func() (int32, error) { return a.coord.NextBrokerID(ctx) }); err != nil {
		return err
	}

	defaults := topicDefaults(cfg)
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
	})
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}

	listeners := make([]protocol.Listener, 0, len(cfg.Listeners))
	for _, l := range cfg.Listeners {
		listeners = append(listeners, protocol.Listener{Name: l.Name, Addr: l.Addr()})
	}
	// The broker registers its endpoints, which need the bound ports: bind
	// the listeners first, serve once the broker is up.
	srvCfg := protocol.Config{
		Listeners:       listeners,
		Logger:          a.logger,
		MaxRequestBytes: cfg.SocketRequestMaxBytes,
		LogDirs:         cfg.LogDirs,
		Metrics:         a.metrics,
	}
	if err := connectionLimits(ctx, cfg, &srvCfg); err != nil {
		return err
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
		endpoints = append(endpoints, cluster.Endpoint{Listener: l.Name, SecurityProtocol: "PLAINTEXT", Host: l.Host, Port: int32(l.Port)})
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
		BrokerConfigs:                 brokerConfigEntries(cfg, a.brokerID),
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
		ReplicaSocketTimeout:          time.Duration(cfg.ReplicaSocketTimeoutMs) * time.Millisecond,
		InterBrokerListener:           cfg.InterBrokerListenerName,
		Metrics:                       a.metrics,
	})
	if err != nil {
		bound.Close()
		return err
	}
	if err := a.brk.Start(ctx); err != nil {
		bound.Close()
		return err
	}
	if groupFactory != nil {
		a.groups, a.groupsClose, err = groupFactory(a, a.brk)
		if err != nil {
			bound.Close()
			return fmt.Errorf("group coordinator: %w", err)
		}
		bound.SetGroups(a.groups)
	}
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

	a.compCtx, a.compCancel = context.WithCancel(context.Background())
	factoriesMu.Lock()
	fs := slices.Clone(factories)
	factoriesMu.Unlock()
	for _, f := range fs {
		c, err := f.fn(a)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if c != nil {
			a.extra = append(a.extra, namedComponent{f.name, c})
		}
	}
	for i, nc := range a.extra {
		if err := nc.c.Start(a.compCtx); err != nil {
			a.extra = a.extra[:i] // only close what started
			return fmt.Errorf("%s: %w", nc.name, err)
		}
		a.logger.Info("component started", "component", nc.name)
	}
	return nil
}

// ShutdownTimeout bounds how long Close waits for in-flight requests.
const ShutdownTimeout = 10 * time.Second

// Close shuts down in reverse order: extra components, the listener
// (stop accepting, finish in-flight requests), the group coordinator, the
// controller, the broker,
// storage (flush, checkpoints, clean-shutdown marker) and the coordinator.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		var errs []error
		if a.compCancel != nil {
			a.compCancel()
		}
		for i := len(a.extra) - 1; i >= 0; i-- {
			if err := a.extra[i].c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.extra[i].name, err))
			}
		}
		// Cluster mode: leadership moves to other brokers while this one
		// still serves, so clients and followers go over before it stops.
		if a.server != nil && a.cfg.ZookeeperConnect != "" && a.cfg.ControlledShutdownEnable {
			a.controlledShutdown()
		}
		if a.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
			if err := a.server.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("protocol: %w", err))
			}
			cancel()
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

// controlledShutdown asks the controller (itself, or another broker over the
// inter-broker listener) to move leadership away, retrying up to
// controlled.shutdown.max.retries times, then stops replication. A broker
// that cannot reach the controller shuts down anyway: its partitions then
// fail over when its ZooKeeper session ends.
func (a *App) controlledShutdown() {
	log := a.logger.With("component", "controlled-shutdown")
	retries := int(a.cfg.ControlledShutdownMaxRetries)
	backoff := time.Duration(a.cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond
	deadline := time.Now().Add(time.Duration(retries+1) * (backoff + 30*time.Second))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer a.brk.StopReplication()
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			time.Sleep(backoff)
		}
		if err := a.brk.Sync(ctx); err != nil {
			log.Warn("metadata refresh failed", "err", err)
		}
		remaining, err := a.askControlledShutdown(ctx)
		if err != nil {
			log.Warn("controlled shutdown attempt failed", "attempt", attempt+1, "err", err)
			continue
		}
		if len(remaining) == 0 {
			log.Info("controlled shutdown done: this broker leads no replicated partition")
			// Let clients and followers see the new leaders.
			_ = a.brk.Sync(ctx)
			return
		}
		log.Warn("controlled shutdown: partitions still led here", "attempt", attempt+1, "count", len(remaining), "first", remaining[0])
	}
	log.Warn("controlled shutdown incomplete; shutting down anyway")
}

func (a *App) askControlledShutdown(ctx context.Context) ([]cluster.TopicPartitionID, error) {
	ctrl := a.brk.Image().Controller
	if ctrl < 0 {
		return nil, errors.New("no controller")
	}
	if ctrl == a.brokerID {
		return a.controller.ControlledShutdown(ctx, a.brokerID)
	}
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version = 3
	req.BrokerID = a.brokerID
	req.BrokerEpoch = -1
	kresp, err := a.brk.RequestBroker(ctx, ctrl, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ControlledShutdownResponse)
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("controller %d: %w", ctrl, kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []cluster.TopicPartitionID
	for _, p := range resp.PartitionsRemaining {
		out = append(out, cluster.TopicPartitionID{Topic: p.Topic, Partition: p.Partition})
	}
	return out, nil
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

// topicDefaults maps each topic config to its broker key's value and
// whether that key was set explicitly.
func topicDefaults(cfg *Config) map[string]broker.TopicDefault {
	given := func(keys ...string) (string, bool) {
		for _, k := range keys {
			if _, ok := cfg.Given[k]; ok {
				return k, true
			}
		}
		return keys[0], false
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	out := map[string]broker.TopicDefault{}
	add := func(topicKey, value string, brokerKeys ...string) {
		k, static := given(brokerKeys...)
		out[topicKey] = broker.TopicDefault{BrokerKey: k, Value: value, Static: static}
	}
	add("cleanup.policy", cfg.LogCleanupPolicy, "log.cleanup.policy")
	add("compression.type", cfg.CompressionType, "compression.type")
	add("delete.retention.ms", i64(cfg.LogCleanerDeleteRetentionMs), "log.cleaner.delete.retention.ms")
	add("flush.messages", i64(cfg.LogFlushIntervalMessages), "log.flush.interval.messages")
	add("flush.ms", i64(cfg.LogFlushIntervalMs), "log.flush.interval.ms")
	add("index.interval.bytes", i64(int64(cfg.LogIndexIntervalBytes)), "log.index.interval.bytes")
	add("max.message.bytes", i64(int64(cfg.MessageMaxBytes)), "message.max.bytes")
	add("message.timestamp.type", cfg.LogMessageTimestampType, "log.message.timestamp.type")
	add("min.cleanable.dirty.ratio", strconv.FormatFloat(cfg.LogCleanerMinCleanableRatio, 'g', -1, 64), "log.cleaner.min.cleanable.ratio")
	add("min.compaction.lag.ms", i64(cfg.LogCleanerMinCompactionLagMs), "log.cleaner.min.compaction.lag.ms")
	add("min.insync.replicas", i64(int64(cfg.MinInsyncReplicas)), "min.insync.replicas")
	add("retention.bytes", i64(cfg.LogRetentionBytes), "log.retention.bytes")
	add("retention.ms", i64(cfg.LogRetentionMs), "log.retention.ms", "log.retention.minutes", "log.retention.hours")
	add("segment.bytes", i64(cfg.LogSegmentBytes), "log.segment.bytes")
	add("segment.index.bytes", i64(int64(cfg.LogIndexSizeMaxBytes)), "log.index.size.max.bytes")
	add("segment.ms", i64(cfg.LogRollMs), "log.roll.ms", "log.roll.hours")
	add("unclean.leader.election.enable", strconv.FormatBool(cfg.UncleanLeaderElectionEnable), "unclean.leader.election.enable")
	if cfg.LogFlushIntervalMs == math.MaxInt64 {
		d := out["flush.ms"]
		d.Value = i64(math.MaxInt64)
		out["flush.ms"] = d
	}
	return out
}

// brokerConfigEntries lists every broker key for DescribeConfigs(BROKER):
// the value given in the config file or an override (STATIC_BROKER_CONFIG)
// or the default (DEFAULT_CONFIG). All are read-only: they change by
// editing the file and restarting.
func brokerConfigEntries(cfg *Config, brokerID int32) []broker.ConfigEntry {
	var out []broker.ConfigEntry
	for _, k := range keys {
		e := broker.ConfigEntry{Name: k.name, ReadOnly: true, Type: broker.TypeString, Doc: k.doc, Source: broker.SourceDefault}
		v := k.def
		if g, ok := cfg.Given[k.name]; ok {
			v, e.Source = g, broker.SourceStaticBroker
			e.Synonyms = append(e.Synonyms, broker.ConfigSynonym{Name: k.name, Value: g, Source: broker.SourceStaticBroker})
		}
		e.Synonyms = append(e.Synonyms, broker.ConfigSynonym{Name: k.name, Value: k.def, Source: broker.SourceDefault})
		if k.name == "broker.id" {
			v = strconv.Itoa(int(brokerID))
		}
		vv := v
		e.Value = &vv
		out = append(out, e)
	}
	return out
}

package appliance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/consolestate"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/schemareg/serde"
	"github.com/sluice-io/sluice/web"
	alertpages "github.com/sluice-io/sluice/web/alerts"
	"github.com/sluice-io/sluice/web/comparisons"
	"github.com/sluice-io/sluice/web/kafkasec"
	movepages "github.com/sluice-io/sluice/web/moves"
	quotapages "github.com/sluice-io/sluice/web/quotas"
	schemapages "github.com/sluice-io/sluice/web/schemas"
	"github.com/sluice-io/sluice/zkcoord"
)

// The console component: the web console (console.listen) with the alert
// and comparison pages, the alerting engine and the migration comparisons
// behind them, the console's Kafka client (package kafkaview) and its
// background sampler (lag history and traffic rates, package lag/sampler),
// consumer-group lag exported to Prometheus, and the metrics endpoint (on
// metrics.listen, or on the console at metrics.path).
//
// Background work — alert evaluation, lag export, storing lag history,
// running comparisons — is done by one console of a cluster at a time, the one
// whose consoleLeader says so (see consoleleader.go); the pages work on
// every console. On a single node the console always leads.
//
// Start returns once the console listens (App.Start, and so sd_notify
// READY, wait for it). Close stops, in order: the background loops (the
// sampler among them), the console (in-flight requests finish), the Kafka
// client, the alerting engine's notification queues, the comparisons (each
// saves a checkpoint), the metrics endpoint, the leadership, and the
// database; it waits for each.

// consoleLeader decides whether this host's console does the cluster's
// background work: alert evaluation, exporting consumer-group lag, storing
// lag history and running migration comparisons. Exactly one console of a
// cluster should lead at a time (their SQLite databases are separate), so
// lag is exported once and a PagerDuty incident is opened once.
type consoleLeader interface {
	// IsLeader reports whether this console leads now. It is called every
	// evaluation and sampling round and on page views, so it must answer
	// from memory, without blocking (e.g. a flag kept by a ZooKeeper watch
	// on an ephemeral node).
	IsLeader() bool
	// Close gives leadership up (deletes the ephemeral node) and stops
	// whatever keeps it; the console calls it last, after its background
	// work stopped.
	Close() error
}

// alwaysLeader is the single node's leadership: it always leads.
type alwaysLeader struct{}

func (alwaysLeader) IsLeader() bool { return true }
func (alwaysLeader) Close() error   { return nil }

type consoleComponent struct {
	a   *App
	log *slog.Logger
	reg *metrics.Registry

	leader consoleLeader
	db     *consoledb.DB
	store  *consoledb.Console // the console's tables, on db
	kc     *kafkaview.Client  // the console's cluster client: pages, sampler, alert sources

	stateLog *consolestate.KafkaLog   // __sluice_console
	replica  *consoledb.Replica       // db kept current from stateLog; changes written through it
	lagLog   *consolestate.KafkaLog   // __sluice_console_lag
	lagHist  *consolestate.LagHistory // the sampler's store: published by the leader, applied by all
	running  func()                   // releases the lock that says the console runs on console.data.dir
	keyFrom  string                   // where the cluster key is kept, for the status page
	lockFrom string                   // where the write lock is kept

	sampler *sampler.Sampler
	alerts  *alerting.Service
	mgr     *migration.Manager
	srv     *web.Server
	msrv    *metrics.Server // standalone metrics listener (metrics.listen)
	// metricsAd keeps /metrics_endpoints/<id> in a cluster (nil on a
	// single node): where the evaluating console scrapes this host.
	metricsAd *zkcoord.Leadership

	migrationCollector prometheus.Collector // registered on reg; removed at Close

	lag        *lagExport
	localDisk  alerting.DiskSource // statfs of this broker's log.dirs
	healthOnce sync.Once
	health     alerting.HealthSource // KadmHealth over the console's client, built on first use

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newConsole returns the console component of an appliance whose broker
// serves, or nil when neither console.listen nor metrics.listen is set.
func newConsole(a *App) *consoleComponent {
	cfg := a.Config()
	if cfg.ConsoleListen == "" && cfg.MetricsListen == "" {
		return nil
	}
	return &consoleComponent{a: a, log: a.Logger(), reg: a.Metrics(),
		localDisk: alerting.LocalDisk(a.BrokerID(), cfg.LogDirs...)}
}

// Start builds and starts everything; it must not block for long (the
// loops run in goroutines it owns) and ctx ends at shutdown. On error it
// undoes what it started.
func (c *consoleComponent) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	cfg := c.a.Config()
	if cfg.ConsoleListen == "" {
		// No console: only the metrics endpoint (this broker's metrics),
		// advertised to the console that evaluates the alert rules.
		if err := c.startMetricsListener(); err != nil {
			return err
		}
		return c.advertiseMetrics()
	}
	bg, cancel := context.WithCancel(context.Background())
	c.cancel = cancel

	c.leader = alwaysLeader{}
	l, err := newConsoleLeader(c.a)
	if err != nil {
		return fmt.Errorf("console leadership: %w", err)
	}
	if l != nil {
		c.leader = l
	}

	if err := os.MkdirAll(cfg.ConsoleDataDir, 0o750); err != nil {
		return fmt.Errorf("console.data.dir: %w", err)
	}
	// Held while the console runs, so that `sluice console restore`
	// refuses to replace the database under it.
	if c.running, err = consoledb.HoldRunning(cfg.ConsoleDataDir); err != nil {
		return err
	}
	// The alerting engine and the comparisons need the database before
	// web.New opens its own handle on the same file (their page groups are
	// part of web.New's configuration); SQLite in WAL mode with a busy
	// timeout serialises the two, as it does with `sluice console user`.
	c.db, err = consoledb.Open(ctx, filepath.Join(cfg.ConsoleDataDir, consoledb.FileName))
	if err != nil {
		return err
	}
	if c.store, err = consoledb.NewConsole(ctx, c.db); err != nil {
		return err
	}
	key, keyFrom, err := consoleKey(ctx, c.a)
	if err != nil {
		return err
	}
	lock, lockFrom, err := consoleLock(c.a)
	if err != nil {
		return err
	}
	c.keyFrom, c.lockFrom = keyFrom, lockFrom

	// The console's view of the cluster: a Kafka client that connects
	// lazily, and the sampler that keeps recent lag and traffic for the
	// pages and stores lag history while this console leads.
	consoleLog := c.log.With("component", "console")
	if c.kc, err = kafkaview.New(c.a.BootstrapAddrs(), consoleLog, kafkaview.Options{Extra: c.a.ClientOpts()}); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	// Lag history: the leading console publishes its samples to the lag
	// history topic, every console applies that topic to its lag_samples
	// (so the sampler stores through lagHist on every console, and
	// lagHist publishes only while this one leads).
	c.lagLog = consolestate.NewKafkaLog(c.a.BootstrapAddrs(), withWait(consolestate.LagTopicSpec(consoleTopicRF(cfg), cfg.ConsoleLagHistoryRetention), cfg), consoleLog, c.a.ClientOpts()...)
	c.lagHist = consolestate.NewLagHistory(consolestate.LagHistoryConfig{Log: c.lagLog, Console: c.store, Host: c.a.BrokerID(),
		Leader: c.leader.IsLeader, Logger: consoleLog, Window: max(15*time.Minute, 5*cfg.ConsoleLagSampleInterval)})
	c.sampler = sampler.New(sampler.Config{
		Source:    c.kc,
		Store:     c.lagHist,
		Logger:    consoleLog,
		Interval:  cfg.ConsoleLagSampleInterval,
		Retention: cfg.ConsoleLagHistoryRetention,
		BytesOut:  c.bytesOutTotal,
	})

	store, err := migration.OpenStore(ctx, c.db)
	if err != nil {
		return fmt.Errorf("comparisons: %w", err)
	}
	c.mgr = migration.NewManager(store, migration.ManagerOptions{
		Brokers:    c.a.BootstrapAddrs(),
		ClientOpts: c.a.ClientOpts(),
		Logger:     c.log.With("component", "migration"),
		Schemas:    SchemaSource(c.a), // comparisons that decode read this host's schema registry
		Leader:     c.leader.IsLeader,
	})
	col := migration.NewCollector(c.mgr)
	if err := c.reg.Registerer().Register(col); err != nil {
		c.log.Warn("comparison metrics not exported", "err", err)
	} else {
		c.migrationCollector = col
	}

	c.lag = &lagExport{out: c.reg.Lag()}
	c.alerts, err = alerting.New(ctx, alerting.Config{
		DB:       c.db,
		Key:      key,
		KeyFile:  filepath.Join(cfg.ConsoleDataDir, "alerting.key"),
		Leader:   c.leader.IsLeader,
		Interval: cfg.AlertingEvaluationInterval,
		Sources: alerting.Sources{
			Lag:         alerting.LagFunc(c.lagSource),
			Health:      alerting.HealthFunc(c.healthSource),
			Disk:        alerting.DiskFunc(c.diskSource),
			Comparisons: alerting.ComparisonFunc(c.comparisonSource),

			BrokerMetrics: c.brokerMetricsSource(),
		},
		BaseURL: alertBaseURL(cfg),
		Cluster: c.a.ClusterID(),
		Logger:  c.log,
		Metrics: c.reg.Alerting(),

		AllowedTargets: cfg.AlertingAllowedTargets,
		Proxy:          cfg.AlertingProxy,
	})
	if err != nil {
		return err
	}

	// Every component has migrated: the replica joins the console topic
	// (importing this host's state, replaying the topic's, or catching
	// up; see consoledb.Replica) and from now on every change is written
	// through it. The pages wait for it to catch up, for a while.
	c.stateLog = consolestate.NewKafkaLog(c.a.BootstrapAddrs(), withWait(consolestate.StateTopicSpec(consoleTopicRF(cfg)), cfg), consoleLog, c.a.ClientOpts()...)
	c.replica, err = consoledb.StartReplica(ctx, c.db, consoledb.ReplicaConfig{
		Topic:  consolestate.StateTopic,
		Log:    c.stateLog,
		Lock:   lock,
		Host:   c.a.BrokerID(),
		Logger: c.log,
		// A change rides out a leadership move of the state topic (a
		// rolling restart) rather than being refused.
		WaitTimeout: consolestate.LeaderMoveTimeout,
	})
	if err != nil {
		return fmt.Errorf("console replica: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	if err := c.replica.WaitCaughtUp(wctx); err != nil {
		c.log.Warn("the console's state topic did not answer in time: the console starts with this host's copy and says so on every page",
			"topic", consolestate.StateTopic, "status", c.replica.Status().Err)
	}
	wcancel()

	wcfg := web.Config{
		DB:                c.db,
		ReplicaStatus:     c.replicaStatus,
		Listen:            cfg.ConsoleListen,
		DataDir:           cfg.ConsoleDataDir,
		TLSCert:           cfg.ConsoleTLSCert,
		TLSKey:            cfg.ConsoleTLSKey,
		BaseURL:           cfg.ConsoleBaseURL,
		Brokers:           c.a.BootstrapAddrs(),
		KafkaOptions:      c.a.ClientOpts(),
		Kafka:             c.kc,
		Samples:           c.sampler,
		Logger:            c.log,
		MetricsPath:       cfg.MetricsPath,
		LagSampleInterval: cfg.ConsoleLagSampleInterval,
		Leader:            c.leader.IsLeader,
		ObserveHTTP:       c.reg.Console().ObserveHTTP,
		Extra: []web.PageGroup{
			alertpages.PageGroup(c.alerts, alertpages.Options{Interval: cfg.AlertingEvaluationInterval, Evaluating: c.leader.IsLeader}),
			comparisons.PageGroup(c.mgr, comparisons.Options{}),
			kafkasec.PageGroup(),
			quotapages.PageGroup(quotapages.Options{Metrics: c.reg.Gatherer()}),
			movepages.PageGroup(movepages.Options{}),
		},
	}
	if cfg.SchemaRegistryListen != "" {
		wcfg.Extra = append(wcfg.Extra, schemapages.PageGroup(c.schemaRegistry, c.topicNames))
		dec := serde.NewDecoder(SchemaSource(c.a)) // the messages page decodes with this host's registry
		dec.MaxOutput = consoleMaxDecoded
		wcfg.Decoder = dec
		wcfg.SchemaSubjects = c.schemaSubjects
	}
	wcfg.TrustedProxies = cfg.ConsoleTrustedProxies
	wcfg.AuditRetention = time.Duration(cfg.ConsoleAuditRetentionDays) * 24 * time.Hour
	wcfg.AuditMaxRows = int(cfg.ConsoleAuditMaxRows)
	wcfg.DisableAccessAudit = !cfg.ConsoleAuditAccessEnable
	if cfg.MetricsListen == "" {
		wcfg.Metrics = c.reg.Handler()
	}
	if c.srv, err = web.New(wcfg); err != nil {
		return err
	}
	c.alerts.Start() // notification queues; evaluation is the loop below
	if err := c.startMetricsListener(); err != nil {
		return err
	}
	if err := c.srv.Start(ctx); err != nil {
		return err
	}
	if err := c.advertiseMetrics(); err != nil {
		return err
	}
	c.wg.Add(5)
	go func() { defer c.wg.Done(); c.lagHist.Run(bg) }()
	go func() { defer c.wg.Done(); c.sampler.Run(bg) }()
	go func() { defer c.wg.Done(); c.evaluate(bg, cfg.AlertingEvaluationInterval) }()
	go func() { defer c.wg.Done(); c.exportLag(bg, cfg.ConsoleLagSampleInterval) }()
	go func() { defer c.wg.Done(); c.runComparisons(bg) }()
	c.log.Info("console ready", "url", c.srv.URL(), "metrics", c.metricsWhere(), "alert_evaluation_interval", cfg.AlertingEvaluationInterval, "leader", c.leader.IsLeader())
	return nil
}

// consoleMaxDecoded bounds one record's decoded JSON on the messages page
// (the page shows 64 KiB of a value and Expand shows the rest).
const consoleMaxDecoded = 4 << 20

func (c *consoleComponent) startMetricsListener() error {
	cfg := c.a.Config()
	if cfg.MetricsListen == "" {
		return nil
	}
	s, err := metrics.Listen(metrics.ServerConfig{Listen: cfg.MetricsListen, Path: cfg.MetricsPath}, c.reg.Handler(), c.log)
	if err != nil {
		return err
	}
	c.msrv = s
	return nil
}

func (c *consoleComponent) metricsWhere() string {
	cfg := c.a.Config()
	if c.msrv != nil {
		return c.msrv.Addr().String() + cfg.MetricsPath
	}
	return "console " + cfg.MetricsPath
}

// Close stops everything Start started, in order, and waits.
func (c *consoleComponent) Close() error {
	var errs []error
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	if c.metricsAd != nil {
		if err := c.metricsAd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metrics endpoint znode: %w", err))
		}
	}
	if c.srv != nil {
		if err := c.srv.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.kc != nil {
		c.kc.Close()
	}
	if c.alerts != nil {
		if err := c.alerts.Close(); err != nil {
			errs = append(errs, fmt.Errorf("alerting: %w", err))
		}
	}
	if c.mgr != nil {
		if err := c.mgr.Close(); err != nil {
			errs = append(errs, fmt.Errorf("comparisons: %w", err))
		}
	}
	if c.replica != nil {
		if err := c.replica.Close(); err != nil {
			errs = append(errs, fmt.Errorf("console replica: %w", err))
		}
	}
	if c.stateLog != nil {
		c.stateLog.Close()
	}
	if c.lagLog != nil {
		c.lagLog.Close()
	}
	if c.migrationCollector != nil {
		c.reg.Registerer().Unregister(c.migrationCollector)
	}
	if c.lag != nil {
		c.lag.clear()
	}
	if c.msrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.msrv.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("metrics: %w", err))
		}
		cancel()
	}
	if c.leader != nil {
		if err := c.leader.Close(); err != nil {
			errs = append(errs, fmt.Errorf("console leadership: %w", err))
		}
	}
	if c.db != nil {
		if err := c.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("console database: %w", err))
		}
	}
	if c.running != nil {
		c.running()
	}
	return errors.Join(errs...)
}

// ---- background work (leader only) ----

// evaluate runs an alert evaluation round every interval while this
// console leads, and stands by while it does not (the Burrow windows and
// group statuses are the leading console's only).
func (c *consoleComponent) evaluate(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := c.alerts.EvaluateWhileLeading(ctx, c.leader.IsLeader()); err != nil && ctx.Err() == nil {
			c.log.Error("alert evaluation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// exportLag keeps sluice_consumergroup_lag_* fresh while this console
// leads, sampling at most once per interval (an evaluation round that read
// the lag for a lag rule counts), and withdraws it when leadership moves.
func (c *consoleComponent) exportLag(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if !c.leader.IsLeader() {
			c.lag.clear()
		} else if time.Since(c.lag.last()) >= every/2 {
			sctx, cancel := context.WithTimeout(ctx, every)
			if _, err := c.lagSource(sctx); err != nil && ctx.Err() == nil {
				c.log.Warn("lag export", "err", err)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runComparisons makes the comparisons run here while this console leads:
// every second it reconciles the runs with the stored comparisons (which
// any host's console may change), and stops them when leadership moves.
func (c *consoleComponent) runComparisons(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if c.leader.IsLeader() {
			if err := c.mgr.Reconcile(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("comparisons: reconcile", "err", err)
			}
		} else {
			c.mgr.StopAll()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// replicaStatus is what the console's status page shows: where this host
// stands in each console topic, and where the key and the lock are kept.
func (c *consoleComponent) replicaStatus() web.ConsoleStatus {
	st := web.ConsoleStatus{Topics: []consoledb.ReplicaStatus{c.replica.Status(), c.lagHist.Status()},
		Leader: c.leader.IsLeader(), Host: c.a.BrokerID(), KeyFrom: c.keyFrom, LockFrom: c.lockFrom,
		Tables: consoledb.ReplicatedTables()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st.Dirty = c.replica.Dirty(ctx)
	if l, ok := c.leader.(interface{ Holder() string }); ok {
		st.LeaderHolder = l.Holder()
	}
	return st
}

// withWait sets how long a console topic's creation waits for brokers.
func withWait(spec consolestate.TopicSpec, cfg *Config) consolestate.TopicSpec {
	spec.WaitForBrokers = waitForBrokers(cfg)
	return spec
}

// ---- sources of the alert rules ----

// lagSource reads every group's lag with package lag (over the console's
// Kafka client, which shares its timestamp cache with the pages), exports
// it, and hands it to the evaluator.
func (c *consoleComponent) lagSource(ctx context.Context) ([]alerting.GroupLag, error) {
	groups, err := c.kc.Lag(ctx)
	if err != nil {
		return nil, err
	}
	if c.leader.IsLeader() {
		c.lag.update(groups)
	}
	return alertingLag(groups), nil
}

func (c *consoleComponent) healthSource(ctx context.Context) (alerting.Health, error) {
	c.healthOnce.Do(func() {
		known := []int32{c.a.BrokerID()}
		if kb, err := c.store.KnownBrokers(ctx); err == nil {
			for _, b := range kb {
				known = append(known, b.ID)
			}
		}
		c.health = alerting.KadmHealth(c.kc.Admin(), known...)
	})
	return c.health.Health(ctx)
}

// diskSource is this broker's log dirs (statfs) and, in a cluster, the
// other brokers' as they report them in DescribeLogDirs (free and total
// bytes of each log dir's volume), so a disk rule on the leading console
// watches every broker.
func (c *consoleComponent) diskSource(ctx context.Context) ([]alerting.LogDir, error) {
	dirs, err := c.localDisk.LogDirs(ctx)
	if err != nil || c.a.Config().ZookeeperConnect == "" {
		return dirs, err
	}
	kc := c.kc
	snap, err := kc.Metadata(ctx, 10*time.Second)
	if err != nil {
		return nil, err
	}
	infos, err := kc.BrokerInfos(ctx, snap)
	if err != nil {
		return nil, err
	}
	for _, bi := range infos {
		if bi.ID == c.a.BrokerID() {
			continue
		}
		for _, d := range bi.LogDirs {
			if d.Err == "" && d.TotalBytes > 0 && d.FreeBytes >= 0 {
				dirs = append(dirs, alerting.LogDir{Broker: bi.ID, Path: d.Dir, FreeBytes: uint64(d.FreeBytes), TotalBytes: uint64(d.TotalBytes)})
			}
		}
	}
	return dirs, nil
}

func (c *consoleComponent) comparisonSource(context.Context) ([]alerting.Comparison, error) {
	sts := c.mgr.Statuses()
	out := make([]alerting.Comparison, 0, len(sts))
	for _, st := range sts {
		k := st.Snapshot.Counters
		cmp := alerting.Comparison{
			ID: st.ID, Name: st.Name, SourceTopic: st.Spec.Left, TargetTopic: st.Spec.Right,
			Compared: k.Compared(), Mismatched: k.Mismatched, MissingInTarget: k.MissingRight, MissingInSource: k.MissingLeft,
			Running: st.State == migration.StateRunning,
		}
		if st.State == migration.StateFinished {
			cmp.FinishedAt = st.UpdatedAt
		}
		out = append(out, cmp)
	}
	return out, nil
}

// bytesOutTotal sums sluice_broker_topic_bytes_out_total from the metrics
// registry (this process's broker), for the overview's bytes-out rate.
func (c *consoleComponent) bytesOutTotal() (int64, string, bool) {
	fams, err := c.reg.Gatherer().Gather()
	if err != nil && len(fams) == 0 {
		return 0, "", false
	}
	for _, f := range fams {
		if f.GetName() != "sluice_broker_topic_bytes_out_total" {
			continue
		}
		var sum float64
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		scope := "this broker's metrics"
		if c.a.Config().ZookeeperConnect != "" {
			scope = fmt.Sprintf("broker %d's metrics (this host only)", c.a.BrokerID())
		}
		return int64(sum), scope, true
	}
	return 0, "", false
}

func alertingLag(groups []lag.Group) []alerting.GroupLag {
	out := make([]alerting.GroupLag, 0, len(groups))
	for _, g := range groups {
		ag := alerting.GroupLag{Group: g.Group, State: g.State, Members: g.Members, Err: g.Err}
		for _, p := range g.Partitions {
			ag.Partitions = append(ag.Partitions, alerting.PartitionLag{
				Topic: p.Topic, Partition: p.Partition, Committed: p.Committed, LogEnd: p.LogEnd, Lag: p.Lag, LagTime: p.LagTime, Err: p.Err,
			})
		}
		out = append(out, ag)
	}
	return out
}

// lagExport feeds sluice_consumergroup_lag_* and remembers when.
type lagExport struct {
	out *metrics.Lag
	mu  sync.Mutex
	at  time.Time // Lock mu.
}

func (l *lagExport) update(groups []lag.Group) {
	now := time.Now()
	mg := make([]metrics.GroupLag, 0, len(groups))
	for _, g := range groups {
		m := metrics.GroupLag{Group: g.Group, Members: g.Members}
		for _, p := range g.Partitions {
			if p.Err != nil {
				continue
			}
			m.Partitions = append(m.Partitions, metrics.PartitionLag{Topic: p.Topic, Partition: p.Partition, Lag: p.Lag, LagTime: p.LagTime})
		}
		mg = append(mg, m)
	}
	l.out.Update(mg, now)
	l.mu.Lock()
	l.at = now
	l.mu.Unlock()
}

func (l *lagExport) last() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at
}

// clear withdraws the exported lag (another console leads now).
func (l *lagExport) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() {
		l.out.Update(nil, time.Time{})
		l.at = time.Time{}
	}
}

// alertBaseURL is the console URL that notifications link to:
// console.base.url, else one made from console.listen with the host name
// for a wildcard address.
func alertBaseURL(cfg *Config) string {
	if cfg.ConsoleBaseURL != "" {
		return strings.TrimRight(cfg.ConsoleBaseURL, "/")
	}
	host, port, err := net.SplitHostPort(cfg.ConsoleListen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host, _ = os.Hostname()
		if host == "" {
			host = "127.0.0.1"
		}
	}
	scheme := "http"
	if cfg.ConsoleTLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// schemaRegistry is this host's schema registry for the schema pages, nil
// until it runs.
func (c *consoleComponent) schemaRegistry() schemapages.Registry {
	if r := SchemaRegistry(c.a); r != nil {
		return r
	}
	return nil
}

// schemaSubjects lists this host's registry's subjects (the topic page).
func (c *consoleComponent) schemaSubjects() []string {
	r := SchemaRegistry(c.a)
	if r == nil {
		return nil
	}
	var out []string
	for _, s := range r.Subjects() {
		out = append(out, s.Subject)
	}
	return out
}

// topicNames lists the cluster's topics for the schema pages' topic links.
func (c *consoleComponent) topicNames(ctx context.Context) ([]string, error) {
	snap, err := c.kc.Metadata(ctx, 5*time.Second)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(snap.Topics))
	for i, t := range snap.Topics {
		names[i] = t.Name
	}
	return names, nil
}

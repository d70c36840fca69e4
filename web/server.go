// Package web is the console's HTTP layer: a Fiber v2 app whose pages are
// templ components (package templates), whose state lives in SQLite (package
// consoledb) and whose view of the cluster is a Kafka client (package
// kafkaview). It never reads storage files.
//
// One file per route (topics_list.go, topic_create.go, ...): each declares
// the narrow interface it consumes, so it can be tested with a fake and the
// Kafka adapter stays one type. Shared plumbing lives in auth.go (sessions,
// roles), csrf.go, audit.go, render.go (HTML/JSON/fragments), errors.go and
// extend.go (how other page groups plug in).
package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
	"github.com/sluice-io/sluice/templates"
)

// Config configures the console. Listen, DataDir and Brokers are required;
// everything else has a default.
type Config struct {
	// Listen is console.listen: host:port to serve on (default ":8080").
	Listen string
	// DataDir is console.data.dir; console.db lives there.
	DataDir string
	// TLSCert and TLSKey are console.tls.cert / console.tls.key: PEM files.
	// With both set the console serves HTTPS and marks cookies Secure.
	TLSCert, TLSKey string
	// BaseURL is the console's public URL (console.base.url), used in the
	// setup link printed at start. Default: derived from Listen.
	BaseURL string
	// Brokers are the bootstrap brokers of the cluster (host:port).
	Brokers []string
	// KafkaOptions are extra kgo options for the cluster connection (TLS,
	// SASL).
	KafkaOptions []kgo.Opt
	// Kafka, when set, is the console's cluster client, shared with its
	// owner (the appliance's console component, which also hands it to the
	// lag sampler and the alert sources) who closes it after Close. Nil:
	// New makes one from Brokers and KafkaOptions, and Close closes it.
	Kafka *kafkaview.Client
	// Samples, when set, is the background sampler the overview and topic
	// pages read recent lag and traffic rates from (package lag/sampler;
	// its owner runs it). Nil: the pages read lag when they are shown and
	// show no rates.
	Samples Samples
	// Logger receives the console's logs (default: discarded).
	Logger *slog.Logger
	// Metrics, when set, is served at MetricsPath without signing in.
	Metrics http.Handler
	// MetricsPath is where Metrics is served (default "/metrics").
	MetricsPath string
	// Extra are page groups added by other packages (alerts, comparisons):
	// their nav entries, routes and background work. See PageGroup.
	Extra []PageGroup

	// LagSampleInterval is how often the sampler stores every group's lag
	// for the history charts (console.lag.sample.interval.ms, default
	// 30s); the group page says so.
	LagSampleInterval time.Duration
	// SessionIdle ends a session after this long without a request
	// (default 12h); SessionMaxAge ends it regardless (default 7 days).
	SessionIdle, SessionMaxAge time.Duration
	// TrustedProxies are addresses and CIDR prefixes of reverse proxies
	// whose X-Forwarded-For is believed for the client address (audit,
	// sign-in backoff) (console.trusted.proxies). Empty: the TCP peer is
	// the client.
	TrustedProxies []string
	// AuditRetention is how long audit entries are kept
	// (console.audit.retention.days, default 365 days); AuditMaxRows caps
	// the audit log's size in rows (console.audit.max.rows, default
	// 1,000,000), the oldest going first. Both are applied hourly.
	AuditRetention time.Duration
	AuditMaxRows   int
	// DisableAccessAudit stops recording reads of records (browse, search,
	// export, live tail) as "access." audit entries
	// (console.audit.access.enable=false).
	DisableAccessAudit bool
	// Leader, when set, says whether this console does the background
	// work of the cluster (what page groups' Run does when they ask
	// IsLeader). Nil: always.
	Leader func() bool
	// ObserveHTTP, when set, is called once per request with the method,
	// the matched route pattern (bounded: "/topics/:name", never the raw
	// path), the status and the duration: the console's own HTTP metrics.
	ObserveHTTP func(method, route string, status int, d time.Duration)
	// DB, when set, is the console database, shared with its owner (the
	// appliance, whose replica writes every change through the cluster's
	// console topic), who closes it after Close. Nil: New opens
	// DataDir/console.db and Close closes it.
	DB *consoledb.DB
	// ReplicaStatus, when set, is where this console stands in its
	// replicated state: the admin page /console/status shows it, and every
	// page shows a banner while the state topic is unreachable.
	ReplicaStatus func() ConsoleStatus
	// Decoder, when set, decodes records in the Confluent wire format for
	// the messages page, its search, export and live tail (a
	// *serde.Decoder over this host's schema registry). Nil: records are
	// shown as they are.
	Decoder RecordDecoder
	// SchemaSubjects, when set, lists the schema registry's subjects, for
	// the topic page's TopicNameStrategy subjects (<topic>-key,
	// <topic>-value).
	SchemaSubjects func() []string
}

// ConsoleStatus is what /console/status shows.
type ConsoleStatus = templates.ConsoleStatusView

// Defaults of Config.
const (
	DefaultListen            = ":8080"
	DefaultMetricsPath       = "/metrics"
	DefaultLagSampleInterval = sampler.DefaultInterval
	DefaultSessionIdle       = 12 * time.Hour
	DefaultSessionMaxAge     = 7 * 24 * time.Hour
	DefaultAuditRetention    = 365 * 24 * time.Hour
	DefaultAuditMaxRows      = 1_000_000
)

// Samples is what the pages read of the background sampler
// (*sampler.Sampler): the lag of every group as last collected, and the
// cluster's traffic rates.
type Samples interface {
	LatestLag(maxAge time.Duration) ([]lag.Group, time.Time, bool)
	Traffic() sampler.Traffic
	TrafficHistory() []sampler.TrafficPoint
	PartitionRates(group string) []sampler.PartitionRate
}

// noSamples stands in when no sampler runs: no recent lag, no rates.
type noSamples struct{}

func (noSamples) LatestLag(time.Duration) ([]lag.Group, time.Time, bool) {
	return nil, time.Time{}, false
}
func (noSamples) Traffic() sampler.Traffic                      { return sampler.Traffic{BytesIn: -1, BytesOut: -1} }
func (noSamples) TrafficHistory() []sampler.TrafficPoint        { return nil }
func (noSamples) PartitionRates(string) []sampler.PartitionRate { return nil }

func (c *Config) ensureDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MetricsPath == "" {
		c.MetricsPath = DefaultMetricsPath
	}
	if c.LagSampleInterval <= 0 {
		c.LagSampleInterval = DefaultLagSampleInterval
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.SessionMaxAge <= 0 {
		c.SessionMaxAge = DefaultSessionMaxAge
	}
	if c.AuditRetention <= 0 {
		c.AuditRetention = DefaultAuditRetention
	}
	if c.AuditMaxRows <= 0 {
		c.AuditMaxRows = DefaultAuditMaxRows
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("console.data.dir is empty"))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no bootstrap brokers for the console"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("console.tls.cert and console.tls.key must be set together"))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("console.listen %q: %w", c.Listen, err))
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("console.base.url %q: want http(s)://host[:port]", c.BaseURL))
		}
	}
	if !strings.HasPrefix(c.MetricsPath, "/") {
		errs = append(errs, fmt.Errorf("metrics path %q must start with /", c.MetricsPath))
	}
	if _, err := parseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("console.trusted.proxies: %w", err))
	}
	return errors.Join(errs...)
}

// Server is the console. New builds it, Start serves, Close stops.
type Server struct {
	cfg   Config
	log   *slog.Logger
	app   *fiber.App
	db    *consoledb.DB
	store *consoledb.Console
	kc    *kafkaview.Client
	ownKC bool // New made kc, Close closes it
	ownDB bool // New opened db, Close closes it
	tls   *tls.Config

	csrfSecret []byte
	proxies    trustedProxies
	limiter    *limiter
	noise      *noiseGate // throttles the audit entries of cheap refusals
	scans      *userSlots // concurrent record scans and tails per user
	samples    Samples
	nav        []NavItem

	// ctx is cancelled by Close; streams and background loops watch it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	ln         net.Listener
	setupToken string // one-time first-admin token; "" once used or when an admin exists
	started    bool
	closed     bool
	serveErr   chan error
}

// New opens the console database, applies its migrations, creates the
// cluster client (which connects lazily) and builds the routes. It does not
// listen; Start does.
func New(cfg Config) (*Server, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "console")}
	s.proxies, _ = parseTrustedProxies(cfg.TrustedProxies) // validated above
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("console: load console.tls.cert/key: %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx, s.cancel = ctx, cancel
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	defer ocancel()
	var db *consoledb.DB
	var store *consoledb.Console
	var err error
	if cfg.DB != nil {
		db, s.ownDB = cfg.DB, false
		store, err = consoledb.NewConsole(octx, db)
	} else {
		db, store, err = consoledb.OpenConsole(octx, cfg.DataDir)
		s.ownDB = true
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("console: open %s: %w", filepath.Join(cfg.DataDir, consoledb.FileName), err)
	}
	s.db, s.store = db, store
	secret, err := store.SettingOrInit(octx, "csrf_secret", consoledb.NewToken)
	if err != nil {
		s.closeResources()
		return nil, fmt.Errorf("console: %w", err)
	}
	s.csrfSecret = []byte(secret)
	s.kc = cfg.Kafka
	if s.kc == nil {
		kc, err := kafkaview.New(cfg.Brokers, s.log, kafkaview.Options{Extra: cfg.KafkaOptions})
		if err != nil {
			s.closeResources()
			return nil, fmt.Errorf("console: %w", err)
		}
		s.kc, s.ownKC = kc, true
	}
	s.samples = cfg.Samples
	if s.samples == nil {
		s.samples = noSamples{}
	}
	s.limiter = newLimiter()
	s.noise = newNoiseGate()
	s.scans = newUserSlots()
	s.app = fiber.New(fiber.Config{
		AppName:               "sluice-console",
		DisableStartupMessage: true,
		ErrorHandler:          s.handleError,
		ReadTimeout:           30 * time.Second,
		IdleTimeout:           120 * time.Second,
		BodyLimit:             4 << 20,
		// X-Forwarded-For is read by clientAddr (clientip.go), which takes
		// the rightmost untrusted hop; Fiber's ProxyHeader would take the
		// leftmost, which the client writes. With proxies configured,
		// Fiber believes X-Forwarded-Host/-Proto (Hostname, Protocol) from
		// them only.
		EnableTrustedProxyCheck: len(cfg.TrustedProxies) > 0,
		TrustedProxies:          cfg.TrustedProxies,
	})
	if err := s.routes(); err != nil {
		s.closeResources()
		return nil, fmt.Errorf("console: %w", err)
	}
	return s, nil
}

// Start listens on Config.Listen and serves in the background; it returns
// once the socket is bound. It also starts the page groups' background
// work and the pruning of the audit log and sessions, and logs the setup
// link when no admin exists.
func (s *Server) Start(ctx context.Context) error {
	if err := s.listen(ctx); err != nil {
		return err
	}
	s.log.Info("console listening", "url", s.URL(), "tls", s.tls != nil, "brokers", strings.Join(s.cfg.Brokers, ","))
	s.announceSetup(ctx)
	return nil
}

func (s *Server) listen(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("console: Start after Close")
	}
	if s.started {
		return errors.New("console: started twice")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("console: listen on %s: %w", s.cfg.Listen, err)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	s.started = true
	s.serveErr = make(chan error, 1)
	go func() {
		err := s.app.Listener(ln)
		s.serveErr <- err
	}()
	for _, g := range s.cfg.Extra {
		if g.Run == nil {
			continue
		}
		s.wg.Add(1)
		go func(g PageGroup) {
			defer s.wg.Done()
			if err := g.Run(s.ctx, s); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Error("page group stopped", "group", g.Name, "err", err)
			}
		}(g)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.prune(s.ctx)
	}()
	return nil
}

// Addr is the address the console listens on (after Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// URL is the console's base URL: Config.BaseURL, or one made from the
// listening address.
func (s *Server) URL() string {
	if s.cfg.BaseURL != "" {
		return strings.TrimSuffix(s.cfg.BaseURL, "/")
	}
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	host := s.cfg.Listen
	if a := s.Addr(); a != nil {
		host = a.String()
	}
	h, p, err := net.SplitHostPort(host)
	if err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	return scheme + "://" + host
}

// Close stops serving: it ends live streams and background work, waits for
// in-flight requests (up to 10 s), then closes the cluster client (when New
// made it) and the database. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	started := s.started
	s.mu.Unlock()
	s.cancel()
	var errs []error
	if started {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.app.ShutdownWithContext(sctx); err != nil {
			errs = append(errs, fmt.Errorf("console: shutdown: %w", err))
		}
		cancel()
		// Shutdown only stops a Serve that already runs; closing the
		// listener also ends one that was about to start.
		s.ln.Close()
		if err := <-s.serveErr; err != nil && !errors.Is(err, net.ErrClosed) && !isClosedErr(err) {
			errs = append(errs, fmt.Errorf("console: serve: %w", err))
		}
	}
	s.wg.Wait()
	errs = append(errs, s.closeResources())
	return errors.Join(errs...)
}

func (s *Server) closeResources() error {
	s.cancel()
	if s.kc != nil && s.ownKC {
		s.kc.Close()
	}
	if s.db != nil && s.ownDB {
		return s.db.Close()
	}
	return nil
}

// App is the Fiber app, for tests (app.Test) and for mounting under another
// server.
func (s *Server) App() *fiber.App { return s.app }

// DB is the console database, shared with page groups (each applies its
// own migration component with DB().Migrate).
func (s *Server) DB() *consoledb.DB { return s.db }

// Store is the console's users, sessions, audit log and settings.
func (s *Server) Store() *consoledb.Console { return s.store }

// Kafka is the console's cluster client.
func (s *Server) Kafka() *kafkaview.Client { return s.kc }

// Logger is the console's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// IsLeader reports whether this console does the cluster's background work.
func (s *Server) IsLeader() bool {
	if s.cfg.Leader == nil {
		return true
	}
	return s.cfg.Leader()
}

// prune removes expired sessions (every console its own) and applies the
// audit log's retention (the leading console), at start and hourly.
func (s *Server) prune(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if _, err := s.store.PruneSessions(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("prune sessions", "err", err)
		}
		// The audit log is shared by a cluster's consoles: the one doing
		// the background work prunes it for all.
		if !s.IsLeader() {
		} else if n, err := s.store.PruneAudit(ctx, time.Now().Add(-s.cfg.AuditRetention), s.cfg.AuditMaxRows); err != nil && ctx.Err() == nil {
			s.log.Warn("prune audit log", "err", err)
		} else if n > 0 {
			s.log.Info("audit log pruned", "deleted", n, "retention", s.cfg.AuditRetention, "max_rows", s.cfg.AuditMaxRows)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func isClosedErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "use of closed network connection")
}

// Package alerting holds Sluice's alert rules, their evaluation and the
// notifiers that page people.
//
// Rules, notifiers, open alerts, their history and the delivery log live in
// the console's SQLite database (package consoledb, component "alerting").
// An evaluator, run by the one console that does background work, reads its
// inputs through small interfaces (LagSource, HealthSource, DiskSource,
// ComparisonSource, and MetricsSource for every host's broker metrics)
// every Interval, moves each rule+subject alert through pending, firing
// and resolved, damps flapping, and hands notifications to
// one delivery queue per notifier: PagerDuty Events API v2 (trigger and
// resolve with one dedup_key per rule and subject) or a webhook carrying
// Alertmanager's version 4 payload. Deliveries are retried with exponential
// backoff and jitter on 429, 5xx and network errors, never on other 4xx, and
// logged. Notifier secrets are stored encrypted (AES-256-GCM, key file 0600
// next to the database) and never returned or logged.
//
// The Service's methods are what the console pages call: rule CRUD with
// field-level validation errors, open alerts, history, notifiers (secrets
// write-only), SendTest, the delivery log, and Status.
package alerting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/metrics"
)

// Sources are the evaluator's inputs. A nil source leaves the rules that
// need it unevaluated (reported in Status).
type Sources struct {
	Lag         LagSource
	Health      HealthSource
	Disk        DiskSource
	Comparisons ComparisonSource
	// BrokerMetrics reads every host's broker metrics (ScrapeMetrics in a
	// cluster, GatherMetrics on a single node).
	BrokerMetrics MetricsSource
}

// Config configures a Service.
type Config struct {
	DB *consoledb.DB
	// KeyFile holds the key that encrypts notifier secrets; created (0600)
	// when missing. Conventionally <console data dir>/alerting.key.
	KeyFile string
	// Evaluate runs the evaluator loop after Start. Only the console that
	// does the cluster's background work sets it.
	Evaluate bool
	// Interval between evaluations (default 30s).
	Interval time.Duration
	Sources  Sources
	// BaseURL is the console's external URL, for links in notifications
	// (e.g. https://sluice.example.com). Empty: no links.
	BaseURL string
	// Source is PagerDuty's payload.source (default: the host name).
	Source string
	// Cluster, when set, names the cluster in labels and dedup keys, so two
	// clusters paging one PagerDuty service do not merge incidents.
	Cluster string
	// Client is PagerDuty's client name (default "Sluice").
	Client string
	// AllowedTargets are the receivers on loopback, link-local, private or
	// other internal addresses that notifications may reach
	// (alerting.allowed.targets): CIDR prefixes, addresses and host:port
	// pairs; see ParseTargets. Public addresses need no entry.
	AllowedTargets []string
	// Proxy is the HTTP proxy notifications go through (alerting.proxy;
	// empty: none, and the environment's HTTP(S)_PROXY is not used).
	Proxy string
	// HTTPClient sends notifications. Default: NewHTTPClient over
	// AllowedTargets (no redirects, internal addresses refused). A client
	// given here replaces those checks; tests only.
	HTTPClient *http.Client
	Retry      RetryPolicy
	// BurrowWindow is the number of commits kept per partition for
	// group_status rules (default 10, Burrow's default).
	BurrowWindow int
	// SourceTimeout bounds each source call in an evaluation (default: the
	// interval, at most 30s).
	SourceTimeout time.Duration
	// Keep is how many rows of history and of the delivery log are kept
	// (default 50000 each).
	Keep int
	// QueueSize is each notifier's queue length (default 1024).
	QueueSize int
	Logger    *slog.Logger
	Metrics   *metrics.Alerting // default metrics.Default().Alerting()
	// ExportLag, when set, receives every lag sample the evaluator reads, so
	// the process doing background work exports consumer-group lag once
	// (sluice_consumergroup_lag_*) without sampling it twice.
	ExportLag *metrics.Lag
	// Now is the clock (tests).
	Now func() time.Time
	// Leader, when set, says whether this console delivers the queued
	// notifications (the one doing the cluster's background work); nil:
	// always.
	Leader func() bool
	// Key, when set, is the cluster key that seals notifier secrets (32
	// bytes); KeyFile is then only read to reseal secrets sealed with a
	// host's own key by an older Sluice (and renamed
	// alerting.key.replaced). Nil: the key in KeyFile.
	Key []byte
}

func (c *Config) ensureDefaults() {
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.Source == "" {
		c.Source, _ = os.Hostname()
		if c.Source == "" {
			c.Source = "sluice"
		}
	}
	if c.Client == "" {
		c.Client = "Sluice"
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	c.Retry.ensureDefaults()
	if c.BurrowWindow <= 0 {
		c.BurrowWindow = 10
	}
	if c.SourceTimeout <= 0 {
		c.SourceTimeout = min(c.Interval, 30*time.Second)
	}
	if c.Keep <= 0 {
		c.Keep = 50000
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1024
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Default().Alerting()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Service is the alerting component. Its methods are safe for concurrent
// use.
type Service struct {
	cfg     Config
	db      *consoledb.DB
	sealer  *sealer
	log     *slog.Logger
	metrics *metrics.Alerting

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	qmu    sync.Mutex
	queues map[int64]chan job // per notifier. Lock qmu.
	queued map[int64]bool     // outbox rows queued and not yet gone from the outbox. Lock qmu.
	closed bool               // Lock qmu.
	kicks  chan struct{}      // wakes the dispatcher

	// evalMu serialises evaluation rounds with rule deletion.
	evalMu sync.Mutex
	eval   *evaluator // Lock evalMu.

	smu      sync.Mutex
	status   EvaluatorStatus        // Lock smu.
	groups   map[string]GroupHealth // Burrow status of every group at the last round; Lock smu.
	groupsAt time.Time              // Lock smu.

	started sync.Once
}

// New opens the alerting component: applies its migrations, loads (or
// creates) the secret key. It starts nothing; call Start.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("alerting: no database")
	}
	cfg.ensureDefaults()
	targets, err := ParseTargets(cfg.AllowedTargets)
	if err != nil {
		return nil, err
	}
	proxy, err := ParseProxy(cfg.Proxy)
	if err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = NewHTTPClient(targets, proxy)
	}
	if err := cfg.DB.Migrate(ctx, "alerting", migrations); err != nil {
		return nil, fmt.Errorf("alerting: %w", err)
	}
	// Deliveries cut short by a stop never finished: say so rather than
	// leave them pending forever.
	if _, err := cfg.DB.ExecContext(ctx, `UPDATE alert_deliveries SET status = ?, error = ?, finished_at = ? WHERE status = ?`,
		DeliveryFailed, "interrupted: Sluice stopped during delivery", ms(cfg.Now()), DeliveryPending); err != nil {
		return nil, fmt.Errorf("alerting: %w", err)
	}
	key := cfg.Key
	if key == nil {
		if key, err = loadOrCreateKey(cfg.KeyFile); err != nil {
			return nil, err
		}
	}
	sl, err := newSealer(key)
	if err != nil {
		return nil, err
	}
	if cfg.Key != nil && cfg.KeyFile != "" {
		if err := reseal(ctx, cfg.DB, cfg.KeyFile, sl, cfg.Logger); err != nil {
			return nil, err
		}
	}
	s := &Service{
		cfg:     cfg,
		db:      cfg.DB,
		sealer:  sl,
		log:     cfg.Logger.With("component", "alerting"),
		metrics: cfg.Metrics,
		queues:  map[int64]chan job{},
		queued:  map[int64]bool{},
		kicks:   make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.eval = newEvaluator(s)
	return s, nil
}

// Start runs the evaluator loop when Config.Evaluate is set. Notification
// queues run whether or not it is (the console may delete a rule, which
// resolves its alerts, or send a test event).
func (s *Service) Start() {
	s.started.Do(func() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.dispatch()
		}()
		if !s.cfg.Evaluate {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.loop()
		}()
	})
}

func (s *Service) loop() {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		// Rounds while this console leads (Leader; nil: always).
		if err := s.EvaluateWhileLeading(s.ctx, s.delivers()); err != nil && s.ctx.Err() == nil {
			s.log.Error("alert evaluation failed", "err", err)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops the evaluator and the notification queues and waits for them.
// Notifications still queued are dropped (they are in the delivery log as
// pending only if they had started).
func (s *Service) Close() error {
	s.qmu.Lock()
	s.closed = true
	s.qmu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Service) now() time.Time { return s.cfg.Now() }

// enqueue hands j to its notifier's queue, and reports false when the
// queue is full (the outbox row stays, for the dispatcher's next round).
func (s *Service) enqueue(j job) bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		return false
	}
	q := s.queues[j.notifierID]
	if q == nil {
		q = make(chan job, s.cfg.QueueSize)
		s.queues[j.notifierID] = q
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.worker(q)
		}()
	}
	select {
	case q <- j:
		if j.outboxID != 0 {
			s.queued[j.outboxID] = true
		}
		return true
	default:
		s.log.Warn("notifier queue full: notifications wait in the outbox", "notifier", j.notifierID, "queue", s.cfg.QueueSize)
		return false
	}
}

// worker delivers one notifier's notifications in order, so a resolve never
// overtakes its trigger.
func (s *Service) worker(q chan job) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case j := <-q:
			if !s.delivers() {
				continue // another console delivers now; the row stays in the outbox
			}
			n, secret, err := s.notifierWithSecret(s.ctx, j.notifierID)
			switch {
			case errors.Is(err, ErrNotFound):
				// deleted since
			case err != nil && n.ID == 0:
				s.log.Error("notification dropped", "notifier", j.notifierID, "err", err)
			case !n.Enabled || (j.action == actionResolve && n.Type == NotifierWebhook && !n.SendResolved) ||
				(j.action == actionAcknowledge && n.Type != NotifierPagerDuty):
				// not sent: disabled, or an event this notifier does not take
			default:
				s.send(s.ctx, n, secret, err, j)
			}
			if s.ctx.Err() != nil {
				return // stopped mid-delivery: the row stays for the next start or leader
			}
			if j.outboxID != 0 {
				s.outboxDone(j.outboxID)
			}
		}
	}
}

// SendTest sends a test event to a notifier now, whether or not it is
// enabled, and returns its delivery log entry. A PagerDuty test is resolved
// right after (same dedup_key), so it leaves no open incident; a webhook gets
// the resolve too when it has SendResolved.
func (s *Service) SendTest(ctx context.Context, notifierID int64) (Delivery, error) {
	n, secret, err := s.notifierWithSecret(ctx, notifierID)
	if err != nil && n.ID == 0 {
		return Delivery{}, err
	}
	now := s.now()
	labels := map[string]string{"alertname": "SluiceTestEvent", "severity": string(SeverityInfo), "notifier": n.Name}
	if s.cfg.Cluster != "" {
		labels["cluster"] = s.cfg.Cluster
	}
	j := job{
		notifierID: n.ID,
		action:     actionTrigger,
		test:       true,
		ruleName:   "Test event",
		kind:       "test",
		severity:   SeverityInfo,
		subject:    "notifier:" + n.Name,
		dedupKey:   fmt.Sprintf("sluice/test/%d/%d", n.ID, now.UnixMilli()),
		summary:    fmt.Sprintf("Test event from Sluice for notifier %q", n.Name),
		details:    map[string]any{"test": true, "sent_at": now.UTC().Format(time.RFC3339)},
		labels:     labels,
		startsAt:   now,
	}
	if s.cfg.BaseURL != "" {
		j.links = []Link{{Href: s.cfg.BaseURL + "/alerts/notifiers/" + fmt.Sprint(n.ID), Text: "Notifier in the Sluice console"}}
	}
	d := s.send(ctx, n, secret, err, j)
	if d.Status == DeliveryDelivered && (n.Type == NotifierPagerDuty || n.SendResolved) {
		j.action, j.endsAt = actionResolve, s.now()
		s.send(ctx, n, secret, nil, j)
	}
	return d, nil
}

// EvaluatorStatus is how the last evaluation went.
type EvaluatorStatus struct {
	Running        bool          `json:"running"` // this process evaluates (Config.Evaluate)
	LastRun        time.Time     `json:"last_run"`
	LastDuration   time.Duration `json:"-"`
	LastDurationMS int64         `json:"last_duration_ms"`
	// SourceErrors names each source that failed (or is not configured but
	// needed) in the last round, with the error.
	SourceErrors map[string]string `json:"source_errors"`
	Rules        int               `json:"rules"` // enabled rules evaluated
	Pending      int               `json:"pending"`
	Firing       int               `json:"firing"`
}

// Status reports the last evaluation round.
func (s *Service) Status() EvaluatorStatus {
	s.smu.Lock()
	defer s.smu.Unlock()
	st := s.status
	st.Running = s.cfg.Evaluate
	st.LastDurationMS = st.LastDuration.Milliseconds()
	st.SourceErrors = make(map[string]string, len(s.status.SourceErrors))
	for k, v := range s.status.SourceErrors {
		st.SourceErrors[k] = v
	}
	return st
}

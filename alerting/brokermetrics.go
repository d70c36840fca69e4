package alerting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Broker metrics: facts only a broker knows (failed logins, denials,
// throttled clients, open transactions, reassignment progress, schema
// compatibility checks) are Prometheus metrics, per host. The console that
// evaluates the rules reads every host's: in a cluster each host
// advertises where its metrics are served and the evaluator scrapes them
// all (ScrapeMetrics); on a single node it gathers its own registry in
// process (GatherMetrics). Only the families below are read.

// The metric families the broker-metrics kinds watch. Their names and
// labels are a contract with the packages that export them.
const (
	MetricAuthFailures      = "sluice_broker_authentication_failures_total"       // counter: broker, listener, mechanism
	MetricAuthzDenials      = "sluice_broker_authorization_denials_total"         // counter: broker, operation, resource_type
	MetricSchemaChecks      = "sluice_schema_registry_compatibility_checks_total" // counter: result=compatible|incompatible
	MetricThrottleSeconds   = "sluice_broker_client_throttle_seconds_total"       // counter: broker, quota_type, user, client_id
	MetricTxnOldestOpen     = "sluice_broker_transaction_oldest_open_seconds"     // gauge: broker
	MetricReassignRemaining = "sluice_broker_reassignment_bytes_remaining"        // gauge: broker
	// metricProcessStart tells a restarted host (its counters started
	// over) from one whose counters only grew.
	metricProcessStart = "process_start_time_seconds"
)

var watchedMetrics = []string{MetricAuthFailures, MetricAuthzDenials, MetricSchemaChecks, MetricThrottleSeconds,
	MetricTxnOldestOpen, MetricReassignRemaining, metricProcessStart}

// WatchedMetrics lists the metric families the broker metrics source reads.
func WatchedMetrics() []string { return append([]string(nil), watchedMetrics...) }

func watched(name string) bool {
	for _, w := range watchedMetrics {
		if w == name {
			return true
		}
	}
	return false
}

// MetricsSource reports the watched metrics of every host of the cluster.
type MetricsSource interface {
	BrokerMetrics(ctx context.Context) ([]HostMetrics, error)
}

// MetricsFunc adapts a function to MetricsSource.
type MetricsFunc func(ctx context.Context) ([]HostMetrics, error)

// BrokerMetrics calls f.
func (f MetricsFunc) BrokerMetrics(ctx context.Context) ([]HostMetrics, error) { return f(ctx) }

// HostMetrics is what one host's metrics said.
type HostMetrics struct {
	Broker int32
	// Addr is where they were read (a URL, or "in process").
	Addr string
	// Err says the host could not be read this round: rules leave the
	// alerts of its subjects as they are (never resolved by a failed read).
	Err error
	// Start is the host's process_start_time_seconds (0: unknown); when it
	// changes, the host restarted and its counters started over.
	Start   float64
	Samples []Sample
}

// Sample is one series of a watched family.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// samplesOf keeps the watched families' counter, gauge and untyped series.
func samplesOf(fams []*dto.MetricFamily) (samples []Sample, start float64) {
	for _, f := range fams {
		name := f.GetName()
		if !watched(name) {
			continue
		}
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			if name == metricProcessStart {
				start = v
				continue
			}
			labels := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			samples = append(samples, Sample{Name: name, Labels: labels, Value: v})
		}
	}
	return samples, start
}

// GatherMetrics is the MetricsSource of a single node: its own registry,
// read in process, as broker id broker.
func GatherMetrics(broker int32, g prometheus.Gatherer) MetricsSource {
	return MetricsFunc(func(ctx context.Context) ([]HostMetrics, error) {
		fams, err := g.Gather()
		if err != nil && len(fams) == 0 {
			return nil, fmt.Errorf("gather metrics: %w", err)
		}
		samples, start := samplesOf(fams)
		return []HostMetrics{{Broker: broker, Addr: "in process", Start: start, Samples: samples}}, nil
	})
}

// Endpoint is where one host serves its metrics, as it advertises it.
type Endpoint struct {
	Broker int32  `json:"broker_id"`
	URL    string `json:"metrics_url"`
}

// ScrapeConfig configures ScrapeMetrics.
type ScrapeConfig struct {
	// Endpoints lists the hosts that advertise their metrics now (in a
	// cluster, the ephemeral znodes under the chroot). An error fails the
	// whole source for the round.
	Endpoints func(ctx context.Context) ([]Endpoint, error)
	// Client makes the requests; default: no redirects, no proxy.
	Client *http.Client
	// Timeout bounds each host's scrape (default 5s).
	Timeout time.Duration
	// MaxBytes bounds each host's answer (default 8 MiB): a bigger one is a
	// source error for that host.
	MaxBytes int64
	// Forget is how long a host that stopped advertising (stopped, or cut
	// off from ZooKeeper) is still reported, as unreadable, so its alerts
	// stay as they are rather than resolve (default 1h).
	Forget time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// DefaultScrapeMaxBytes bounds one host's metrics answer.
const DefaultScrapeMaxBytes = 8 << 20

// ScrapeMetrics is the MetricsSource of a cluster: it reads the advertised
// endpoints and scrapes every host at once, asking for the watched
// families only (promhttp's name[] filter), each within Timeout and
// MaxBytes, and parses the Prometheus text format with expfmt. A host that
// cannot be read, that answers something that is not the text format, or
// that stopped advertising is reported with Err, not left out.
func ScrapeMetrics(cfg ScrapeConfig) MetricsSource {
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultScrapeMaxBytes
	}
	if cfg.Forget <= 0 {
		cfg.Forget = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &scraper{cfg: cfg, seen: map[int32]seenHost{}}
	return MetricsFunc(s.scrape)
}

type scraper struct {
	cfg  ScrapeConfig
	mu   sync.Mutex
	seen map[int32]seenHost // hosts that advertised, for Forget. Lock mu.
}

type seenHost struct {
	url string
	at  time.Time
}

func (s *scraper) scrape(ctx context.Context) ([]HostMetrics, error) {
	if s.cfg.Endpoints == nil {
		return nil, errors.New("no endpoint list")
	}
	eps, err := s.cfg.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoints: %w", err)
	}
	now := s.cfg.Now()
	out := make([]HostMetrics, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.one(ctx, ep)
		}()
	}
	wg.Wait()
	advertised := map[int32]bool{}
	s.mu.Lock()
	for _, ep := range eps {
		advertised[ep.Broker] = true
		s.seen[ep.Broker] = seenHost{url: ep.URL, at: now}
	}
	for id, h := range s.seen {
		switch {
		case advertised[id]:
		case now.Sub(h.at) > s.cfg.Forget:
			delete(s.seen, id)
		default:
			out = append(out, HostMetrics{Broker: id, Addr: h.url,
				Err: fmt.Errorf("broker %d no longer advertises its metrics (stopped, or cut off from ZooKeeper) since %s", id, h.at.UTC().Format(time.RFC3339))})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Broker < out[j].Broker })
	return out, nil
}

// one scrapes one host.
func (s *scraper) one(ctx context.Context, ep Endpoint) HostMetrics {
	h := HostMetrics{Broker: ep.Broker, Addr: ep.URL}
	fail := func(format string, args ...any) HostMetrics {
		h.Err = fmt.Errorf("broker %d metrics at %s: %s", ep.Broker, ep.URL, fmt.Sprintf(format, args...))
		return h
	}
	u, err := url.Parse(ep.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("not an http(s) URL")
	}
	q := u.Query()
	for _, n := range watchedMetrics {
		q.Add("name[]", n)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail("%v", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fail("no answer within %s", s.cfg.Timeout)
		}
		return fail("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return fail("HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBytes+1))
	if err != nil {
		return fail("reading the answer: %v", err)
	}
	if int64(len(body)) > s.cfg.MaxBytes {
		return fail("the answer is larger than %d bytes", s.cfg.MaxBytes)
	}
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain {
		return fail("the answer is %q, not the Prometheus text format", resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return fail("malformed metrics: %v", err)
	}
	list := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		list = append(list, f)
	}
	h.Samples, h.Start = samplesOf(list)
	return h
}

// brokerSubject is the subject of a per-broker kind.
func brokerSubject(id int32) string { return "broker:" + strconv.Itoa(int(id)) }

// Package metrics is Sluice's catalogue of Prometheus collectors
// (github.com/prometheus/client_golang) on a registry of its own, plus the Go
// runtime and process collectors.
//
// Every metric is named sluice_<area>_<what>_<unit>, counts in base units
// (bytes, seconds), counters end in _total, and labels are bounded: broker id,
// Kafka API name, Kafka error name, topic, partition, consumer group, console
// route, notifier type. Nothing is labelled by client id, member id or host.
//
// The broker and protocol code get a small API whose hot path does not
// allocate: per-API request observers resolved once (Broker.API), per-topic
// byte and message counters resolved once per partition (Broker.Topic), and
// collect-time callbacks (Broker.OnCollect) through which state-derived gauges
// such as partition counts and log sizes are read at scrape time instead of
// being pushed. Consumer-group lag is exported by whoever does the background
// work (Registry.Lag), the console records its HTTP requests
// (Registry.Console) and alerting its notification deliveries
// (Registry.Alerting).
//
// Handler serves the registry in the Prometheus text (or OpenMetrics)
// exposition format; the console mounts it, and Listen serves it on a
// standalone listener (config keys metrics.listen and metrics.path).
package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-io/sluice/internal/buildinfo"
)

// namespace prefixes every Sluice metric.
const namespace = "sluice"

// Registry is one set of Sluice collectors. A process normally uses Default;
// tests that run several brokers or consoles side by side may make their own
// with New so their counters stay apart.
type Registry struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	brokers  map[int32]*Broker // Lock mu.
	brokerMx *brokerMetrics    // created with the first Broker. Lock mu.
	lag      *Lag
	console  *Console
	alerting *Alerting
	schemas  *SchemaRegistry
	authn    *authnMetrics          // authentication counters (auth.go). Lock mu.
	throttle *prometheus.CounterVec // client throttle time (quota.go). Lock mu.
	txns     *txnCollector          // transaction coordinator metrics (txn.go). Lock mu.

	// authorization denials (auth.go). Lock mu.
	authz *prometheus.CounterVec

	// Replication throttles (replication.go). Lock mu.
	repl *replicationMetrics
}

// New returns a registry holding the Go runtime, process and build-info
// collectors. Broker, lag, console and alerting metrics are added when first
// asked for, so a process exports only the families it actually uses.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), brokers: map[int32]*Broker{}}
	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	bi := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "build_info",
		Help:      "Always 1; the labels carry the version, commit and Go version of the running binary.",
		ConstLabels: prometheus.Labels{
			"version":   buildinfo.Version,
			"commit":    buildinfo.CommitOrVCS(),
			"goversion": runtime.Version(),
		},
	})
	bi.Set(1)
	r.reg.MustRegister(bi)
	return r
}

var defaultRegistry = sync.OnceValue(New)

// Default is the process-wide registry.
func Default() *Registry { return defaultRegistry() }

// Handler serves the default registry (see Registry.Handler).
func Handler() http.Handler { return Default().Handler() }

// Handler serves the registry's metrics in the exposition format the scraper
// asks for (text by default, OpenMetrics on request, gzip when accepted). A
// collector that fails is reported in the response and the rest is still
// served. It also counts its own scrapes (promhttp_metric_handler_*).
func (r *Registry) Handler() http.Handler {
	h := promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		Registry:          r.reg,
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
	return promhttp.InstrumentMetricHandler(r.reg, h)
}

// Gatherer is the registry for in-process readers (tests, the console's own
// charts).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Registerer lets a package register a collector of its own on this registry.
// Prefer adding it to this package's catalogue so the names stay consistent.
func (r *Registry) Registerer() prometheus.Registerer { return r.reg }

func itoa32(v int32) string { return strconv.FormatInt(int64(v), 10) }

package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SchemaRegistry is the schema registry's metrics: its HTTP requests by
// endpoint (the route pattern) and status, its compatibility checks by
// result, and the schemas it holds (read at scrape time).
type SchemaRegistry struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	checks   *prometheus.CounterVec

	mu     sync.Mutex
	counts func() (versions, ids int) // Lock mu.
	descV  *prometheus.Desc
	descI  *prometheus.Desc
}

// SchemaRegistry returns the schema registry metrics, registering them on
// first use.
func (r *Registry) SchemaRegistry() *SchemaRegistry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.schemas == nil {
		s := &SchemaRegistry{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "schema_registry", Name: "http_requests_total",
				Help: "Schema registry HTTP requests answered, by method, endpoint (route pattern) and status code.",
			}, []string{"method", "endpoint", "code"}),
			duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: namespace, Subsystem: "schema_registry", Name: "http_request_duration_seconds",
				Help:    "Schema registry HTTP request durations, by method and endpoint.",
				Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
			}, []string{"method", "endpoint"}),
			checks: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "schema_registry", Name: "compatibility_checks_total",
				Help: "Compatibility checks made (registrations and explicit checks), by result (compatible, incompatible).",
			}, []string{"result"}),
			descV: prometheus.NewDesc(namespace+"_schema_registry_schema_versions",
				"Live (not deleted) schema versions over all subjects.", nil, nil),
			descI: prometheus.NewDesc(namespace+"_schema_registry_schema_ids",
				"Distinct schema ids in use by live versions.", nil, nil),
		}
		r.reg.MustRegister(s.requests, s.duration, s.checks, s)
		r.schemas = s
	}
	return r.schemas
}

// ObserveHTTP records one answered request; endpoint must be the route
// pattern ("GET /subjects/{subject}/versions"), never the raw path.
func (s *SchemaRegistry) ObserveHTTP(method, endpoint string, status int, d time.Duration) {
	if endpoint == "" {
		endpoint = "unmatched"
	}
	s.requests.WithLabelValues(method, endpoint, strconv.Itoa(status)).Inc()
	s.duration.WithLabelValues(method, endpoint).Observe(d.Seconds())
}

// CompatibilityChecked counts one compatibility check.
func (s *SchemaRegistry) CompatibilityChecked(compatible bool) {
	if compatible {
		s.checks.WithLabelValues("compatible").Inc()
	} else {
		s.checks.WithLabelValues("incompatible").Inc()
	}
}

// OnCollect sets the function read at scrape time for the schema counts.
func (s *SchemaRegistry) OnCollect(fn func() (versions, ids int)) {
	s.mu.Lock()
	s.counts = fn
	s.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (s *SchemaRegistry) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.descV
	ch <- s.descI
}

// Collect implements prometheus.Collector.
func (s *SchemaRegistry) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	fn := s.counts
	s.mu.Unlock()
	if fn == nil {
		return
	}
	v, i := fn()
	ch <- prometheus.MustNewConstMetric(s.descV, prometheus.GaugeValue, float64(v))
	ch <- prometheus.MustNewConstMetric(s.descI, prometheus.GaugeValue, float64(i))
}

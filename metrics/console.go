package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Console is the console's HTTP metrics.
type Console struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Console returns the console metrics, registering them on first use.
func (r *Registry) Console() *Console {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.console == nil {
		c := &Console{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "console", Name: "http_requests_total",
				Help: "Console HTTP requests answered, by method, route pattern and status code.",
			}, []string{"method", "route", "code"}),
			duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: namespace, Subsystem: "console", Name: "http_request_duration_seconds",
				Help:    "Console HTTP request durations, by method and route pattern.",
				Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
			}, []string{"method", "route"}),
		}
		r.reg.MustRegister(c.requests, c.duration)
		r.console = c
	}
	return r.console
}

// ObserveHTTP records one answered request. route must be the route pattern
// ("/groups/:group"), never the raw path, so the label set stays bounded; an
// empty route (no route matched) is recorded as "unmatched".
func (c *Console) ObserveHTTP(method, route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	c.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	c.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

// Alerting is the metrics of rule evaluation and notification delivery.
type Alerting struct {
	attempts      *prometheus.CounterVec
	notifications *prometheus.CounterVec
	alerts        *prometheus.GaugeVec
	evaluations   prometheus.Counter
	evalFailures  *prometheus.CounterVec
	evalDuration  prometheus.Histogram
}

// Alerting returns the alerting metrics, registering them on first use.
func (r *Registry) Alerting() *Alerting {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.alerting == nil {
		a := &Alerting{
			attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "alerting", Name: "notification_attempts_total",
				Help: "HTTP attempts to deliver a notification (retries included), by notifier type.",
			}, []string{"notifier_type"}),
			notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "alerting", Name: "notifications_total",
				Help: "Notifications finished, by notifier type and result (delivered or failed).",
			}, []string{"notifier_type", "result"}),
			alerts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: namespace, Subsystem: "alerting", Name: "alerts",
				Help: "Alerts now pending or firing.",
			}, []string{"state"}),
			evaluations: prometheus.NewCounter(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "alerting", Name: "evaluations_total",
				Help: "Rule evaluation rounds run.",
			}),
			evalFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: namespace, Subsystem: "alerting", Name: "source_errors_total",
				Help: "Evaluation rounds in which an input source (lag, health, disk, comparisons) failed.",
			}, []string{"source"}),
			evalDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Namespace: namespace, Subsystem: "alerting", Name: "evaluation_duration_seconds",
				Help:    "Time one evaluation round took, sources included.",
				Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			}),
		}
		for _, s := range []string{"pending", "firing"} {
			a.alerts.WithLabelValues(s)
		}
		r.reg.MustRegister(a.attempts, a.notifications, a.alerts, a.evaluations, a.evalFailures, a.evalDuration)
		r.alerting = a
	}
	return r.alerting
}

// NotificationAttempt counts one HTTP attempt of a notifier type.
func (a *Alerting) NotificationAttempt(notifierType string) {
	a.attempts.WithLabelValues(notifierType).Inc()
}

// NotificationDone counts a finished notification.
func (a *Alerting) NotificationDone(notifierType string, delivered bool) {
	result := "failed"
	if delivered {
		result = "delivered"
	}
	a.notifications.WithLabelValues(notifierType, result).Inc()
}

// SetAlerts sets the number of pending and firing alerts.
func (a *Alerting) SetAlerts(pending, firing int) {
	a.alerts.WithLabelValues("pending").Set(float64(pending))
	a.alerts.WithLabelValues("firing").Set(float64(firing))
}

// Evaluated records one evaluation round and the sources that failed in it.
func (a *Alerting) Evaluated(d time.Duration, failedSources ...string) {
	a.evaluations.Inc()
	a.evalDuration.Observe(d.Seconds())
	for _, s := range failedSources {
		a.evalFailures.WithLabelValues(s).Inc()
	}
}

package alerting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func sample(name string, v float64, kv ...string) Sample {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return Sample{Name: name, Labels: l, Value: v}
}

func rateOf(t *testing.T, hr hostRound, name string, kv ...string) (float64, bool) {
	t.Helper()
	want := labelsKey(sample(name, 0, kv...).Labels)
	for _, s := range hr.series {
		if s.Name == name && s.key.labels == want {
			return s.rate, s.hasRate
		}
	}
	t.Fatalf("broker %d has no series %s %v", hr.broker, name, kv)
	return 0, false
}

// TestMetricRates: counter rates from the change between two reads, with
// a first read that has no rate, a new series, a counter reset, a restarted
// host, a long gap, a failed read and a preview that changes nothing.
func TestMetricRates(t *testing.T) {
	mm := newMetricMemory()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fail := MetricAuthFailures
	host := func(start float64, s ...Sample) HostMetrics { return HostMetrics{Broker: 1, Start: start, Samples: s} }

	r := mm.derive([]HostMetrics{host(100, sample(fail, 50, "listener", "A"))}, t0, false)
	if !r[0].fresh {
		t.Fatal("a host read for the first time has rates")
	}
	if _, ok := rateOf(t, r[0], fail, "listener", "A"); ok {
		t.Error("a first read has a rate")
	}

	// A minute later: +30 on A (0.5/s); B is new since the last read: its
	// whole value (6) is the increase.
	r = mm.derive([]HostMetrics{host(100, sample(fail, 80, "listener", "A"), sample(fail, 6, "listener", "B"))}, t0.Add(time.Minute), false)
	if v, ok := rateOf(t, r[0], fail, "listener", "A"); !ok || v != 0.5 {
		t.Errorf("rate A = %v %v, want 0.5", v, ok)
	}
	if v, ok := rateOf(t, r[0], fail, "listener", "B"); !ok || v != 0.1 {
		t.Errorf("rate of a new series = %v %v, want 0.1", v, ok)
	}

	// A preview reads rates against the last round without moving it.
	p := mm.derive([]HostMetrics{host(100, sample(fail, 200, "listener", "A"), sample(fail, 6, "listener", "B"))}, t0.Add(90*time.Second), true)
	if v, _ := rateOf(t, p[0], fail, "listener", "A"); v != 4 {
		t.Errorf("preview rate %v, want 4", v)
	}

	// The counter went down: it started over, the increase is its value.
	r = mm.derive([]HostMetrics{host(100, sample(fail, 12, "listener", "A"), sample(fail, 6, "listener", "B"))}, t0.Add(2*time.Minute), false)
	if v, _ := rateOf(t, r[0], fail, "listener", "A"); v != 0.2 {
		t.Errorf("rate after a reset = %v, want 0.2 (12 in 60 s; the preview was not remembered)", v)
	}
	// The host restarted (new process start time) and its counters grew
	// past their old values: the whole value is the increase.
	r = mm.derive([]HostMetrics{host(200, sample(fail, 30, "listener", "A"), sample(fail, 9, "listener", "B"))}, t0.Add(3*time.Minute), false)
	if v, _ := rateOf(t, r[0], fail, "listener", "A"); v != 0.5 {
		t.Errorf("rate after a restart = %v, want 0.5", v)
	}
	if v, _ := rateOf(t, r[0], fail, "listener", "B"); v != 0.15 {
		t.Errorf("rate of B after a restart = %v, want 0.15", v)
	}

	// A failed read keeps the memory, so the next read's rate spans both.
	r = mm.derive([]HostMetrics{{Broker: 1, Err: errors.New("connection refused")}}, t0.Add(4*time.Minute), false)
	if r[0].err == nil || len(r[0].prevSeries) != 2 {
		t.Errorf("failed host round %+v", r[0])
	}
	r = mm.derive([]HostMetrics{host(200, sample(fail, 150, "listener", "A"), sample(fail, 9, "listener", "B"))}, t0.Add(5*time.Minute), false)
	if v, _ := rateOf(t, r[0], fail, "listener", "A"); v != 1 {
		t.Errorf("rate across a failed read = %v, want 1 (120 in 120 s)", v)
	}

	// After a gap longer than maxRateGap the host is read as new.
	r = mm.derive([]HostMetrics{host(200, sample(fail, 151, "listener", "A"))}, t0.Add(5*time.Minute+maxRateGap+time.Second), false)
	if !r[0].fresh {
		t.Error("a read after a long gap has rates")
	}

	// A host no longer reported is forgotten; it comes back fresh.
	mm.derive(nil, t0.Add(30*time.Minute), false)
	if len(mm.hosts) != 0 {
		t.Errorf("memory kept %d hosts", len(mm.hosts))
	}
}

// fakeMetrics is a scripted MetricsSource.
type fakeMetrics struct {
	mu    sync.Mutex
	hosts []HostMetrics
	err   error
}

func (f *fakeMetrics) BrokerMetrics(context.Context) ([]HostMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]HostMetrics(nil), f.hosts...), f.err
}

func (f *fakeMetrics) set(h ...HostMetrics) {
	f.mu.Lock()
	f.hosts = h
	f.mu.Unlock()
}

func firingSet(t *testing.T, env *testEnv) string {
	t.Helper()
	var out []string
	for k, a := range openAlerts(t, env) {
		if a.State == StateFiring {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// TestBrokerMetricKinds drives every kind on broker metrics through rounds
// a minute apart with a scripted source of two hosts: each fires on its
// condition, reports its value in words, keeps its alert while its host
// cannot be read, and resolves once its condition clears.
func TestBrokerMetricKinds(t *testing.T) {
	clk := newClock()
	src := &fakeMetrics{}
	env := newTestService(t, func(c *Config) {
		c.Now = clk.Now
		c.Sources.BrokerMetrics = src
		c.Interval = time.Minute
	})
	env.rule(t, Rule{Name: "logins", Kind: KindAuthFailures, Threshold: 10, Scope: Scope{Listener: "sasl_ssl"}})
	env.rule(t, Rule{Name: "denials", Kind: KindAuthzDenials, Threshold: 0})
	env.rule(t, Rule{Name: "throttled", Kind: KindClientThrottled, Threshold: 0.5})
	env.rule(t, Rule{Name: "txn", Kind: KindHangingTxn, Threshold: 600})
	moves := env.rule(t, Rule{Name: "moves", Kind: KindReassignStuck, Threshold: 120})
	env.rule(t, Rule{Name: "schemas", Kind: KindSchemaIncompatible, Threshold: 1})

	type state struct {
		authOK, authOther, denials, throttle1, throttle2, incompat1, incompat2 float64
		oldest, remaining                                                      float64
		down2                                                                  bool
	}
	hosts := func(s state) []HostMetrics {
		h1 := HostMetrics{Broker: 1, Addr: "http://b1/metrics", Start: 1, Samples: []Sample{
			sample(MetricAuthFailures, s.authOK, "broker", "1", "listener", "SASL_SSL", "mechanism", "SCRAM-SHA-512"),
			sample(MetricAuthFailures, s.authOther, "broker", "1", "listener", "PLAINTEXT", "mechanism", "PLAIN"),
			sample(MetricThrottleSeconds, s.throttle1, "broker", "1", "quota_type", "produce", "user", "alice", "client_id", "app"),
			sample(MetricTxnOldestOpen, s.oldest, "broker", "1"),
			sample(MetricSchemaChecks, s.incompat1, "result", "incompatible"),
			sample(MetricSchemaChecks, 100, "result", "compatible"),
		}}
		h2 := HostMetrics{Broker: 2, Addr: "http://b2/metrics", Start: 1, Samples: []Sample{
			sample(MetricAuthzDenials, s.denials, "broker", "2", "operation", "WRITE", "resource_type", "TOPIC"),
			sample(MetricThrottleSeconds, s.throttle2, "broker", "2", "quota_type", "fetch", "user", "alice", "client_id", "app"),
			sample(MetricReassignRemaining, s.remaining, "broker", "2"),
			sample(MetricSchemaChecks, s.incompat2, "result", "incompatible"),
		}}
		if s.down2 {
			h2 = HostMetrics{Broker: 2, Addr: "http://b2/metrics", Err: errors.New("connection refused")}
		}
		return []HostMetrics{h1, h2}
	}
	round := func(s state, want string) {
		t.Helper()
		src.set(hosts(s)...)
		env.evaluate(t)
		if got := firingSet(t, env); got != want {
			t.Errorf("round at %s: firing %q, want %q", clk.Now().Format("15:04"), got, want)
		}
		clk.Add(time.Minute)
	}
	// 12:00: first read. Gauges count at once: the oldest transaction is
	// open 11 minutes. Rates are not measured yet.
	s := state{oldest: 660, remaining: 5000}
	round(s, "txn broker:1")
	pv, err := env.svc.PreviewRule(context.Background(), Rule{Name: "p", Kind: KindAuthFailures, Threshold: 10})
	if err != nil || len(pv.Subjects) != 2 || pv.Subjects[0].Value != "0 per minute" || pv.Holding != 0 {
		t.Errorf("preview after one round: %+v %v", pv, err)
	}

	// 12:01: 30 failed logins on PLAINTEXT (out of the rule's scope) and
	// 5 on SASL_SSL; one denial; alice throttled 20 s of 60 on broker 1
	// and 40 of 60 on broker 2 (0.67 s/s); 3 incompatible schemas across
	// the hosts; the transaction ended; the reassignment has not moved.
	s = state{authOK: 5, authOther: 30, denials: 1, throttle1: 20, throttle2: 40, incompat1: 2, incompat2: 1, oldest: 0, remaining: 5000}
	round(s, "denials broker:2; schemas registry:schemas; throttled client:alice/app")
	al := openAlerts(t, env)
	if a := al["throttled client:alice/app"]; a.Value != "0.667 s/s" || !strings.Contains(a.Summary, "fetch quota on broker 2") {
		t.Errorf("throttle alert: value %q summary %q", a.Value, a.Summary)
	}
	if a := al["denials broker:2"]; a.Labels["broker"] != "2" || a.Value != "1 per minute" {
		t.Errorf("denial alert: %+v", a)
	}

	// 12:02: 30 SASL_SSL failures in a minute; no more denials, throttling
	// or schema failures; the reassignment is still at 5000 bytes, two
	// minutes after it was first seen.
	s = state{authOK: 35, authOther: 30, denials: 1, throttle1: 20, throttle2: 40, incompat1: 2, incompat2: 1, remaining: 5000}
	round(s, "logins broker:1; moves broker:2")
	if a := openAlerts(t, env)["moves broker:2"]; a.Value != "4.9 KiB left, unchanged for 2 min" {
		t.Errorf("reassignment alert value %q", a.Value)
	}

	// 12:03: broker 2 cannot be read: its reassignment alert stays firing
	// (a failed read resolves nothing); broker 1's logins stopped.
	s.down2 = true
	round(s, "moves broker:2")
	if st := env.svc.Status(); st.SourceErrors["broker_metrics (broker 2)"] == "" {
		t.Errorf("host failure not in the status: %v", st.SourceErrors)
	}

	// 12:04: broker 2 is back and its reassignment moved: resolved.
	s.down2, s.remaining = false, 4000
	round(s, "")
	if ev := historyEvents(t, env, moves.ID); strings.Join(ev, ",") != "broker:2 firing,broker:2 resolved" {
		t.Errorf("reassignment history %v", ev)
	}
}

// TestBrokerMetricRuleValidation: the new kinds' fields are checked.
func TestBrokerMetricRuleValidation(t *testing.T) {
	for _, tc := range []struct {
		r     Rule
		field string
	}{
		{Rule{Name: "a", Kind: KindAuthFailures, Threshold: -1}, "threshold"},
		{Rule{Name: "a", Kind: KindClientThrottled, Threshold: 0}, "threshold"},
		{Rule{Name: "a", Kind: KindHangingTxn, Threshold: 0}, "threshold"},
		{Rule{Name: "a", Kind: KindReassignStuck, Threshold: math.Inf(1)}, "threshold"},
		{Rule{Name: "a", Kind: KindAuthzDenials, Scope: Scope{Listener: "SASL_SSL"}}, "scope_listener"},
		{Rule{Name: "a", Kind: KindAuthFailures, Scope: Scope{Listener: "bad listener!"}}, "scope_listener"},
		{Rule{Name: "a", Kind: KindSchemaIncompatible, Scope: Scope{Topic: "t"}}, "scope_topic"},
	} {
		tc.r.Normalize()
		var ve *ValidationError
		if err := tc.r.Validate(); !errors.As(err, &ve) || ve.Fields[tc.field] == "" {
			t.Errorf("%+v: %v, want an error on %s", tc.r, err, tc.field)
		}
	}
	r := Rule{Name: "a", Kind: KindAuthFailures, Threshold: 0, Scope: Scope{Listener: " sasl_ssl "}}
	r.Normalize()
	if err := r.Validate(); err != nil || r.Scope.Listener != "SASL_SSL" {
		t.Errorf("listener scope: %q %v", r.Scope.Listener, err)
	}
}

// TestScrapeMetrics scrapes two hosts over HTTP on loopback: one a real
// client_golang registry behind promhttp (asked for the watched families
// only), one down. The down host is an error for its own subjects, and
// oversized, malformed or non-text answers are clear errors too.
func TestScrapeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	fails := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAuthFailures, Help: "h"}, []string{"broker", "listener", "mechanism"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_broker_unwatched_total", Help: "h"})
	reg.MustRegister(fails, other)
	fails.WithLabelValues("1", "SASL_SSL", "PLAIN").Add(7)
	other.Add(1)
	var paths []string
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.RawQuery)
		mu.Unlock()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}))
	defer up.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/metrics"
	down.Close() // nothing listens there any more

	var eps []Endpoint
	clk := newClock()
	src := ScrapeMetrics(ScrapeConfig{
		Endpoints: func(context.Context) ([]Endpoint, error) { return eps, nil },
		Timeout:   2 * time.Second,
		MaxBytes:  4096,
		Now:       clk.Now,
		Forget:    time.Hour,
	})
	eps = []Endpoint{{Broker: 1, URL: up.URL + "/metrics"}, {Broker: 2, URL: downURL}}
	hosts, err := src.BrokerMetrics(context.Background())
	if err != nil || len(hosts) != 2 {
		t.Fatalf("scrape: %+v %v", hosts, err)
	}
	if h := hosts[0]; h.Err != nil || len(h.Samples) != 1 || h.Samples[0].Value != 7 || h.Samples[0].Labels["listener"] != "SASL_SSL" {
		t.Errorf("host 1: %+v", h)
	}
	if h := hosts[1]; h.Err == nil || h.Broker != 2 || !strings.Contains(h.Err.Error(), "broker 2") {
		t.Errorf("the down host: %+v", h)
	}
	mu.Lock()
	if len(paths) != 1 || !strings.Contains(paths[0], "name%5B%5D="+MetricAuthFailures) {
		t.Errorf("scrape query %v does not ask for the watched families", paths)
	}
	mu.Unlock()

	// Through the evaluator, with two hosts up: both fire on a burst.
	reg2 := prometheus.NewRegistry()
	fails2 := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAuthFailures, Help: "h"}, []string{"broker", "listener", "mechanism"})
	reg2.MustRegister(fails2)
	fails2.WithLabelValues("5", "SASL_SSL", "PLAIN").Add(1)
	up2 := httptest.NewServer(promhttp.HandlerFor(reg2, promhttp.HandlerOpts{}))
	defer up2.Close()
	eps = []Endpoint{{Broker: 1, URL: up.URL + "/metrics"}, {Broker: 5, URL: up2.URL + "/metrics"}}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.BrokerMetrics = src; c.Interval = time.Minute })
	env.rule(t, Rule{Name: "logins", Kind: KindAuthFailures, Threshold: 0})
	env.evaluate(t) // first read: not measured
	clk.Add(time.Minute)
	fails.WithLabelValues("1", "SASL_SSL", "PLAIN").Add(3)
	fails2.WithLabelValues("5", "SASL_SSL", "PLAIN").Add(3)
	env.evaluate(t)
	if got := firingSet(t, env); got != "logins broker:1; logins broker:5" {
		t.Fatalf("firing %q", got)
	}
	// Host 5 goes down (still advertised) and host 1's failures stop:
	// host 1's alert resolves, host 5's stays, and the status says why.
	up2.Close()
	clk.Add(time.Minute)
	env.evaluate(t)
	if got := firingSet(t, env); got != "logins broker:5" {
		t.Errorf("after host 5 went down: firing %q, want host 5's alert kept and host 1's resolved", got)
	}
	if e := env.svc.Status().SourceErrors["broker_metrics (broker 5)"]; !strings.Contains(e, "broker 5 metrics at "+up2.URL) {
		t.Errorf("status: %q", e)
	}
	// Host 5 stops advertising too (its process stopped): still kept.
	eps = eps[:1]
	clk.Add(time.Minute)
	env.evaluate(t)
	if got := firingSet(t, env); got != "logins broker:5" {
		t.Errorf("a host that went away resolved its alert: firing %q", got)
	}
	if e := env.svc.Status().SourceErrors["broker_metrics (broker 5)"]; !strings.Contains(e, "no longer advertises") {
		t.Errorf("status: %q", e)
	}

	// Bad answers: each a clear error for that host.
	for _, tc := range []struct {
		name, ctype, body, want string
	}{
		{"oversized", "text/plain; version=0.0.4", "# " + strings.Repeat("x", 5000) + "\n", "larger than 4096 bytes"},
		{"malformed", "text/plain; version=0.0.4", MetricAuthFailures + "{broker=\"1\" 3\n", "malformed metrics"},
		{"not text", "text/html", "<html></html>", "not the Prometheus text format"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ctype)
			io.WriteString(w, tc.body)
		}))
		eps = []Endpoint{{Broker: 3, URL: srv.URL + "/metrics"}}
		hosts, err := src.BrokerMetrics(context.Background())
		srv.Close()
		var h3 *HostMetrics
		for i := range hosts {
			if hosts[i].Broker == 3 {
				h3 = &hosts[i]
			}
		}
		if err != nil || h3 == nil || h3.Err == nil || !strings.Contains(h3.Err.Error(), tc.want) {
			t.Errorf("%s: %+v %v, want an error saying %q", tc.name, h3, err, tc.want)
		}
	}
	// A URL that is not http(s) is refused without a request.
	eps = []Endpoint{{Broker: 4, URL: "file:///etc/passwd"}}
	hosts, _ = src.BrokerMetrics(context.Background())
	for _, h := range hosts {
		if h.Broker == 4 && (h.Err == nil || !strings.Contains(h.Err.Error(), "not an http(s) URL")) {
			t.Errorf("file URL: %+v", h)
		}
	}
	// The endpoint list failing fails the source.
	failing := ScrapeMetrics(ScrapeConfig{Endpoints: func(context.Context) ([]Endpoint, error) { return nil, fmt.Errorf("zookeeper away") }})
	if _, err := failing.BrokerMetrics(context.Background()); err == nil || !strings.Contains(err.Error(), "zookeeper away") {
		t.Errorf("endpoint list error: %v", err)
	}
}

// TestGatherMetrics: a single node reads its own registry in process.
func TestGatherMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricTxnOldestOpen, Help: "h"}, []string{"broker"})
	reg.MustRegister(g)
	g.WithLabelValues("0").Set(42)
	hosts, err := GatherMetrics(0, reg).BrokerMetrics(context.Background())
	if err != nil || len(hosts) != 1 || hosts[0].Broker != 0 || len(hosts[0].Samples) != 1 || hosts[0].Samples[0].Value != 42 {
		t.Fatalf("%+v %v", hosts, err)
	}
}

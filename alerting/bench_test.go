package alerting

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkEvaluate10kPartitions measures one evaluation round over 100
// groups × 100 partitions (10,000 group partitions) with a records rule, a
// time rule and a Burrow group_status rule, SQLite included. A tenth of the
// groups is over the thresholds, so alerts are stored and notified too.
func BenchmarkEvaluate10kPartitions(b *testing.B) {
	clk := newClock()
	src := &scriptedLag{}
	for g := 0; g < 100; g++ {
		gl := GroupLag{Group: fmt.Sprintf("group-%03d", g), State: "Stable", Members: 3}
		for p := 0; p < 100; p++ {
			lag := int64(p % 5)
			if g%10 == 0 {
				lag = 10000 + int64(p)
			}
			gl.Partitions = append(gl.Partitions, PartitionLag{Topic: fmt.Sprintf("topic-%d", p%10), Partition: int32(p), Committed: 1000, LogEnd: 1000 + lag, Lag: lag, LagTime: time.Duration(lag) * time.Millisecond})
		}
		src.groups = append(src.groups, gl)
	}
	env := newTestService(b, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src; c.Interval = time.Minute })
	hook := newReceiver(b, 200)
	n := env.webhook(b, hook, "")
	env.rule(b, Rule{Name: "records", Kind: KindLagRecords, Threshold: 50000, NotifierIDs: []int64{n.ID}})
	env.rule(b, Rule{Name: "seconds", Kind: KindLagSeconds, Threshold: 5, NotifierIDs: []int64{n.ID}})
	env.rule(b, Rule{Name: "burrow", Kind: KindGroupStatus, NotifierIDs: []int64{n.ID}})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Offsets move each round so the Burrow windows fill like a live cluster.
		for gi := range src.groups {
			for pi := range src.groups[gi].Partitions {
				src.groups[gi].Partitions[pi].Committed += 10
			}
		}
		clk.Add(time.Minute)
		if err := env.svc.EvaluateNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := env.svc.Status(); st.Firing == 0 {
		b.Fatalf("nothing fired: %+v", st)
	}
}

// BenchmarkBrokerMetrics3Hosts measures one evaluation round reading three
// hosts' metrics over HTTP on loopback, each with 1,000 throttled clients
// (the cardinality cap of the throttle family) × 2 quota types and 6
// authentication series, with a client_throttled and an auth_failures rule:
// scrape, parse, rates and SQLite included.
func BenchmarkBrokerMetrics3Hosts(b *testing.B) {
	var eps []Endpoint
	var throttles []*prometheus.CounterVec
	for h := 1; h <= 3; h++ {
		reg := prometheus.NewRegistry()
		th := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricThrottleSeconds, Help: "h"}, []string{"broker", "quota_type", "user", "client_id"})
		au := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAuthFailures, Help: "h"}, []string{"broker", "listener", "mechanism"})
		reg.MustRegister(th, au)
		for c := 0; c < 1000; c++ {
			for _, q := range []string{"produce", "fetch"} {
				th.WithLabelValues(fmt.Sprint(h), q, fmt.Sprintf("user-%d", c%50), fmt.Sprintf("client-%d", c)).Add(0)
			}
		}
		for _, l := range []string{"PLAINTEXT", "SASL_SSL", "SSL"} {
			for _, m := range []string{"PLAIN", "SCRAM-SHA-512"} {
				au.WithLabelValues(fmt.Sprint(h), l, m).Add(1)
			}
		}
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		b.Cleanup(srv.Close)
		eps = append(eps, Endpoint{Broker: int32(h), URL: srv.URL + "/metrics"})
		throttles = append(throttles, th)
	}
	clk := newClock()
	src := ScrapeMetrics(ScrapeConfig{Endpoints: func(context.Context) ([]Endpoint, error) { return eps, nil }, Now: clk.Now})
	env := newTestService(b, func(c *Config) { c.Now = clk.Now; c.Sources.BrokerMetrics = src; c.Interval = time.Minute })
	env.rule(b, Rule{Name: "throttled", Kind: KindClientThrottled, Threshold: 0.5})
	env.rule(b, Rule{Name: "logins", Kind: KindAuthFailures, Threshold: 100})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Ten clients are throttled 40 s a minute on host 1.
		for c := 0; c < 10; c++ {
			throttles[0].WithLabelValues("1", "produce", fmt.Sprintf("user-%d", c%50), fmt.Sprintf("client-%d", c)).Add(40)
		}
		clk.Add(time.Minute)
		if err := env.svc.EvaluateNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := env.svc.Status(); b.N > 1 && st.Firing != 10 {
		b.Fatalf("%d alerts firing, want 10: %+v", st.Firing, st)
	}
}

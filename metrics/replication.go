package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Replication throttles and reassignment progress (the broker's
// replicationquota.go):
//
//   - sluice_broker_replication_throttled_bytes_total{broker, side}: bytes
//     of throttled replicas replicated, as the leader served them
//     (side="leader") or the follower fetched them (side="follower"): the
//     bytes the throttle rates bound.
//   - sluice_broker_reassignment_bytes_remaining{broker}: bytes the
//     replicas a reassignment adds on this broker still have to copy, read
//     at scrape time; 0 when none is being added.
type replicationMetrics struct {
	throttled *prometheus.CounterVec
	remaining *remainingCollector
}

func (r *Registry) replicationFamilies() *replicationMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repl == nil {
		r.repl = &replicationMetrics{
			throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "broker",
				Name: "replication_throttled_bytes_total",
				Help: "Bytes of throttled replicas (leader/follower.replication.throttled.replicas) replicated, by side: leader (served to followers) or follower (fetched from leaders)."},
				[]string{"broker", "side"}),
			remaining: &remainingCollector{
				desc: prometheus.NewDesc(namespace+"_broker_reassignment_bytes_remaining",
					"Bytes the replicas being added to this broker by reassignments still have to copy from their leaders (an estimate: the offsets behind the leader's high watermark times the bytes per offset copied so far; a byte per offset before the first bytes, 1 before the first answer of the leader); 0 when none is added.",
					[]string{"broker"}, nil),
				fns: map[*remainingSource]struct{}{},
			},
		}
		r.reg.MustRegister(r.repl.throttled, r.repl.remaining)
	}
	return r.repl
}

// Replication is one broker's replication throttle counters.
type Replication struct {
	leader, follower prometheus.Counter
}

// Replication returns broker's throttle counters and registers remaining,
// called at each scrape for sluice_broker_reassignment_bytes_remaining
// (nil: none); remove unregisters it (call it from the broker's Close).
func (r *Registry) Replication(brokerID int32, remaining func() int64) (h *Replication, remove func()) {
	m := r.replicationFamilies()
	l := itoa32(brokerID)
	h = &Replication{leader: m.throttled.WithLabelValues(l, "leader"), follower: m.throttled.WithLabelValues(l, "follower")}
	if remaining == nil {
		return h, func() {}
	}
	src := &remainingSource{broker: l, fn: remaining}
	c := m.remaining
	c.mu.Lock()
	c.fns[src] = struct{}{}
	c.mu.Unlock()
	return h, func() {
		c.mu.Lock()
		delete(c.fns, src)
		c.mu.Unlock()
	}
}

// LeaderThrottled counts bytes of throttled replicas served to followers.
func (h *Replication) LeaderThrottled(n int) { h.leader.Add(float64(n)) }

// FollowerThrottled counts bytes of throttled replicas fetched.
func (h *Replication) FollowerThrottled(n int) { h.follower.Add(float64(n)) }

type remainingSource struct {
	broker string
	fn     func() int64
}

// remainingCollector reads each broker's bytes remaining at scrape time
// (two sources of one broker id, as in tests, add up).
type remainingCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	fns  map[*remainingSource]struct{}
}

func (c *remainingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *remainingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	srcs := make([]*remainingSource, 0, len(c.fns))
	for s := range c.fns {
		srcs = append(srcs, s)
	}
	c.mu.Unlock()
	sum := map[string]int64{}
	for _, s := range srcs {
		sum[s.broker] += s.fn()
	}
	for b, v := range sum {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), b)
	}
}

package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxThrottleSeries bounds the user and client id label pairs of
// sluice_broker_client_throttle_seconds_total on one broker: beyond it a
// new pair is counted as user="other", client_id="other", so clients that
// invent ids cannot grow the registry without bound.
const MaxThrottleSeries = 1000

// throttleFamily is the client throttle family of one registry.
func (r *Registry) throttleFamily() *prometheus.CounterVec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.throttle == nil {
		r.throttle = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "broker", Name: "client_throttle_seconds_total",
			Help: "Time clients were throttled for by their quotas (throttle_time_ms returned, connection muted), by quota type (produce, fetch, request, controller_mutation), user and client id; its rate is the share of time a client is throttled."},
			[]string{"broker", "quota_type", "user", "client_id"})
		r.reg.MustRegister(r.throttle)
	}
	return r.throttle
}

// ClientThrottle counts one broker's client throttle time.
type ClientThrottle struct {
	vec    *prometheus.CounterVec
	broker string

	mu     sync.Mutex
	series map[[3]string]prometheus.Counter
	pairs  map[[2]string]bool
}

// ClientThrottle returns the client throttle counter of a broker
// (sluice_broker_client_throttle_seconds_total).
func (r *Registry) ClientThrottle(brokerID int32) *ClientThrottle {
	return &ClientThrottle{vec: r.throttleFamily(), broker: itoa32(brokerID),
		series: map[[3]string]prometheus.Counter{}, pairs: map[[2]string]bool{}}
}

// Add counts a throttle of d for a client under a quota type.
func (t *ClientThrottle) Add(quotaType, user, clientID string, d time.Duration) {
	k := [3]string{quotaType, user, clientID}
	t.mu.Lock()
	c := t.series[k]
	if c == nil {
		pair := [2]string{user, clientID}
		if !t.pairs[pair] && len(t.pairs) >= MaxThrottleSeries {
			k = [3]string{quotaType, "other", "other"}
			c = t.series[k]
		} else {
			t.pairs[pair] = true
		}
		if c == nil {
			c = t.vec.WithLabelValues(t.broker, k[0], k[1], k[2])
			t.series[k] = c
		}
	}
	t.mu.Unlock()
	c.Add(d.Seconds())
}

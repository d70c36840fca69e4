package metrics

import "github.com/prometheus/client_golang/prometheus"

// authnMetrics are the authentication families of one registry.
type authnMetrics struct {
	ok, failed *prometheus.CounterVec
}

func (r *Registry) authnFamilies() *authnMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.authn == nil {
		counter := func(name, help string) *prometheus.CounterVec {
			return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "broker", Name: name, Help: help},
				[]string{"broker", "listener", "mechanism"})
		}
		r.authn = &authnMetrics{
			ok:     counter("authentication_successes_total", "Connections that authenticated, by listener and mechanism (SSL: a TLS handshake on an SSL or SASL_SSL listener; PLAIN, SCRAM-SHA-256, SCRAM-SHA-512: a SASL exchange, re-authentications included)."),
			failed: counter("authentication_failures_total", "Failed authentications, by listener and mechanism (SSL: a failed TLS handshake, such as a plaintext client or a refused certificate; a SASL mechanism: wrong or unknown credentials, a malformed exchange, a mechanism not enabled)."),
		}
		r.reg.MustRegister(r.authn.ok, r.authn.failed)
	}
	return r.authn
}

// Authentication is the authentication counters of one listener and
// mechanism on one broker; resolve it once and keep it.
type Authentication struct {
	ok, failed prometheus.Counter
}

// Authentication returns the counters of a broker's listener and
// mechanism (sluice_broker_authentication_successes_total and
// sluice_broker_authentication_failures_total).
func (r *Registry) Authentication(brokerID int32, listener, mechanism string) *Authentication {
	m := r.authnFamilies()
	b := itoa32(brokerID)
	return &Authentication{
		ok:     m.ok.WithLabelValues(b, listener, mechanism),
		failed: m.failed.WithLabelValues(b, listener, mechanism),
	}
}

// Succeeded counts a successful authentication.
func (a *Authentication) Succeeded() { a.ok.Inc() }

// Failed counts a failed authentication.
func (a *Authentication) Failed() { a.failed.Inc() }

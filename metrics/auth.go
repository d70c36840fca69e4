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

// AuthorizationDenials returns the resolver of a broker's authorization
// denial counters (sluice_broker_authorization_denials_total{broker,
// operation, resource_type}), for security.AuthorizerConfig.Denials: the
// authorizer resolves each pair once and keeps the counter.
func (r *Registry) AuthorizationDenials(brokerID int32) func(operation, resourceType string) prometheus.Counter {
	r.mu.Lock()
	if r.authz == nil {
		r.authz = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "broker", Name: "authorization_denials_total",
			Help: "Requests (or parts of requests: a topic of a produce, a group of a commit) the authorizer refused, by operation and resource type as Kafka names them (Read, Topic). Resources left out of a listing (an all-topics Metadata, ListGroups) are not denials."},
			[]string{"broker", "operation", "resource_type"})
		r.reg.MustRegister(r.authz)
	}
	vec := r.authz
	r.mu.Unlock()
	b := itoa32(brokerID)
	return func(operation, resourceType string) prometheus.Counter {
		return vec.WithLabelValues(b, operation, resourceType)
	}
}

package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestBuckets spans a cached metadata answer (sub-millisecond) to a
// long-polling fetch or an acks=all produce waiting on a slow follower.
var requestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// brokerMetrics are the broker families of one registry, shared by every
// Broker handle on it and told apart by the broker label.
type brokerMetrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	bytesIn     *prometheus.CounterVec
	bytesOut    *prometheus.CounterVec
	msgsIn      *prometheus.CounterVec
	msgsOut     *prometheus.CounterVec
	replIn      *prometheus.CounterVec
	replOut     *prometheus.CounterVec
	isrShrinks  *prometheus.CounterVec
	isrExpands  *prometheus.CounterVec
	conns       *prometheus.GaugeVec
	connsTotal  *prometheus.CounterVec
	connsRefuse *prometheus.CounterVec
	connsExpire *prometheus.CounterVec
	stateReader *stateCollector
}

func newBrokerMetrics(r *Registry) *brokerMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "broker", Name: name, Help: help}, labels)
	}
	m := &brokerMetrics{
		requests: counter("requests_total", "Kafka requests handled, by API.", "broker", "api"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "broker", Name: "request_duration_seconds",
			Help:    "Time from a request's arrival to its response being queued, by API (includes purgatory waits).",
			Buckets: requestBuckets,
		}, []string{"broker", "api"}),
		errors:     counter("request_errors_total", "Failed requests (or partitions of a request) by API and Kafka error name.", "broker", "api", "error"),
		bytesIn:    counter("topic_bytes_in_total", "Record-batch bytes appended by producers, by topic.", "broker", "topic"),
		bytesOut:   counter("topic_bytes_out_total", "Record-batch bytes sent to consumers, by topic (replication excluded).", "broker", "topic"),
		msgsIn:     counter("topic_messages_in_total", "Records appended by producers, by topic.", "broker", "topic"),
		msgsOut:    counter("topic_messages_out_total", "Records sent to consumers, by topic (replication excluded).", "broker", "topic"),
		replIn:     counter("replication_bytes_in_total", "Bytes this broker fetched from leaders as a follower.", "broker"),
		replOut:    counter("replication_bytes_out_total", "Bytes this broker served to follower replicas.", "broker"),
		isrShrinks: counter("isr_shrinks_total", "Times a partition led here dropped a replica from its ISR.", "broker"),
		isrExpands: counter("isr_expands_total", "Times a partition led here added a replica back to its ISR.", "broker"),
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "broker", Name: "connections",
			Help: "Client connections open now, by listener.",
		}, []string{"broker", "listener"}),
		connsTotal:  counter("connections_accepted_total", "Client connections accepted, by listener.", "broker", "listener"),
		connsRefuse: counter("connections_refused_total", "Client connections closed at accept, by listener and the limit reached (max.connections, max.connections.per.ip).", "broker", "listener", "limit"),
		connsExpire: counter("connections_expired_total", "Client connections closed by the broker, by listener and timeout (connections.max.idle.ms, socket.request.read.timeout.ms).", "broker", "listener", "timeout"),
		stateReader: newStateCollector(r),
	}
	r.reg.MustRegister(m.requests, m.latency, m.errors, m.bytesIn, m.bytesOut, m.msgsIn, m.msgsOut,
		m.replIn, m.replOut, m.isrShrinks, m.isrExpands, m.conns, m.connsTotal, m.connsRefuse, m.connsExpire, m.stateReader)
	return m
}

// Broker is the metrics handle of one broker. Resolve the objects it hands
// out (API, Topic, Listener) once, at start-up or partition creation, and keep
// them: their methods neither allocate nor lock.
type Broker struct {
	id    int32
	label string
	m     *brokerMetrics

	apis    [kmsg.MaxKey + 1]atomic.Pointer[API]
	unknown atomic.Pointer[API] // keys above kmsg.MaxKey or negative

	replIn, replOut        prometheus.Counter
	isrShrinks, isrExpands prometheus.Counter

	mu        sync.Mutex
	topics    map[string]*Topic    // Lock mu.
	listeners map[string]*Listener // Lock mu.
	callbacks map[int]func(*BrokerSnapshot)
	nextCB    int // Lock mu.
}

// Broker returns the handle for broker id, creating it (and the broker
// metric families) on first use. Asking twice for the same id returns the
// same handle.
func (r *Registry) Broker(id int32) *Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.brokers[id]; b != nil {
		return b
	}
	if r.brokerMx == nil {
		r.brokerMx = newBrokerMetrics(r)
	}
	m := r.brokerMx
	l := itoa32(id)
	b := &Broker{
		id: id, label: l, m: m,
		replIn:     m.replIn.WithLabelValues(l),
		replOut:    m.replOut.WithLabelValues(l),
		isrShrinks: m.isrShrinks.WithLabelValues(l),
		isrExpands: m.isrExpands.WithLabelValues(l),
		topics:     map[string]*Topic{},
		listeners:  map[string]*Listener{},
		callbacks:  map[int]func(*BrokerSnapshot){},
	}
	r.brokers[id] = b
	return b
}

// ID is the broker id the handle labels its series with.
func (b *Broker) ID() int32 { return b.id }

// errorSlots covers Kafka error codes -1 (UNKNOWN_SERVER_ERROR) up to 190;
// rarer codes fall back to a map.
const errorSlots = 192

// API is the request metrics of one Kafka API key on one broker.
type API struct {
	b        *Broker
	name     string
	requests prometheus.Counter
	latency  prometheus.Observer
	errs     [errorSlots]atomic.Pointer[counterRef]
	errsMore sync.Map // int16 -> prometheus.Counter, codes outside errs
}

type counterRef struct{ c prometheus.Counter }

// API returns the request metrics of an API key (kmsg.Produce.Int16(), ...).
// The first call for a key creates its series; later calls are an atomic
// load. Keys this build does not know share one "Unknown" entry.
func (b *Broker) API(key int16) *API {
	slot := &b.unknown
	if key >= 0 && int(key) < len(b.apis) {
		slot = &b.apis[key]
	}
	if a := slot.Load(); a != nil {
		return a
	}
	name := "Unknown"
	if slot != &b.unknown {
		name = kmsg.NameForKey(key)
	}
	a := &API{
		b:        b,
		name:     name,
		requests: b.m.requests.WithLabelValues(b.label, name),
		latency:  b.m.latency.WithLabelValues(b.label, name),
	}
	if !slot.CompareAndSwap(nil, a) {
		return slot.Load()
	}
	return a
}

// Name is the API's label value (kmsg.NameForKey).
func (a *API) Name() string { return a.name }

// Observe records one handled request: it counts it, observes its duration
// and, when errCode is not 0, counts it as failed under the Kafka error name.
// Pass the request's top-level error code, or the first partition error when
// the response has none at the top.
func (a *API) Observe(d time.Duration, errCode int16) {
	a.requests.Inc()
	a.latency.Observe(d.Seconds())
	if errCode != 0 {
		a.errorCounter(errCode).Inc()
	}
}

// Failed counts n failures with errCode without counting a request, for
// per-partition errors inside one request.
func (a *API) Failed(errCode int16, n int) {
	if errCode == 0 || n <= 0 {
		return
	}
	a.errorCounter(errCode).Add(float64(n))
}

func (a *API) errorCounter(code int16) prometheus.Counter {
	i := int(code) + 1
	if i >= 0 && i < errorSlots {
		if ref := a.errs[i].Load(); ref != nil {
			return ref.c
		}
		ref := &counterRef{c: a.b.m.errors.WithLabelValues(a.b.label, a.name, errorName(code))}
		if !a.errs[i].CompareAndSwap(nil, ref) {
			ref = a.errs[i].Load()
		}
		return ref.c
	}
	if c, ok := a.errsMore.Load(code); ok {
		return c.(prometheus.Counter)
	}
	c, _ := a.errsMore.LoadOrStore(code, a.b.m.errors.WithLabelValues(a.b.label, a.name, errorName(code)))
	return c.(prometheus.Counter)
}

// errorName is the label value of a Kafka error code: kerr's name, or the
// number for codes kerr does not know (so they are still told apart).
func errorName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && (e.Code == code) {
		return e.Message
	}
	return "CODE_" + itoa32(int32(code))
}

// Topic is the traffic counters of one topic on one broker. Resolve it when a
// partition of the topic is created or opened here, not per request.
type Topic struct {
	name                    string
	bytesIn, bytesOut       prometheus.Counter
	messagesIn, messagesOut prometheus.Counter
}

// Topic returns the counters of topic, creating its series on first use.
func (b *Broker) Topic(topic string) *Topic {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[topic]; t != nil {
		return t
	}
	t := &Topic{
		name:        topic,
		bytesIn:     b.m.bytesIn.WithLabelValues(b.label, topic),
		bytesOut:    b.m.bytesOut.WithLabelValues(b.label, topic),
		messagesIn:  b.m.msgsIn.WithLabelValues(b.label, topic),
		messagesOut: b.m.msgsOut.WithLabelValues(b.label, topic),
	}
	b.topics[topic] = t
	return t
}

// RemoveTopic drops the topic's series, for when its last partition on this
// broker is deleted. Handles resolved earlier keep counting into nothing.
func (b *Broker) RemoveTopic(topic string) {
	b.mu.Lock()
	delete(b.topics, topic)
	b.mu.Unlock()
	for _, v := range []*prometheus.CounterVec{b.m.bytesIn, b.m.bytesOut, b.m.msgsIn, b.m.msgsOut} {
		v.DeleteLabelValues(b.label, topic)
	}
}

// In counts a produced batch: its bytes on the wire and its record count.
func (t *Topic) In(bytes, records int) {
	t.bytesIn.Add(float64(bytes))
	t.messagesIn.Add(float64(records))
}

// Out counts batches sent to a consumer (not to a follower replica).
func (t *Topic) Out(bytes, records int) {
	t.bytesOut.Add(float64(bytes))
	t.messagesOut.Add(float64(records))
}

// ReplicationIn counts bytes fetched from a leader while following.
func (b *Broker) ReplicationIn(bytes int) { b.replIn.Add(float64(bytes)) }

// ReplicationOut counts bytes served to a follower replica.
func (b *Broker) ReplicationOut(bytes int) { b.replOut.Add(float64(bytes)) }

// ISRShrink counts one replica removed from a partition's ISR.
func (b *Broker) ISRShrink() { b.isrShrinks.Inc() }

// ISRExpand counts one replica added back to a partition's ISR.
func (b *Broker) ISRExpand() { b.isrExpands.Inc() }

// Listener is the connection metrics of one named listener (PLAINTEXT, ...).
type Listener struct {
	open             prometheus.Gauge
	accepted         prometheus.Counter
	refused, expired *prometheus.CounterVec
	broker, name     string
}

// Listener returns the connection metrics of a listener by name.
func (b *Broker) Listener(name string) *Listener {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.listeners[name]; l != nil {
		return l
	}
	l := &Listener{
		open:     b.m.conns.WithLabelValues(b.label, name),
		accepted: b.m.connsTotal.WithLabelValues(b.label, name),
		refused:  b.m.connsRefuse,
		expired:  b.m.connsExpire,
		broker:   b.label,
		name:     name,
	}
	b.listeners[name] = l
	return l
}

// Opened counts an accepted connection; call Closed when it ends.
func (l *Listener) Opened() {
	l.accepted.Inc()
	l.open.Inc()
}

// Closed counts a connection that ended.
func (l *Listener) Closed() { l.open.Dec() }

// Refused counts a connection closed at accept because limit (the config
// key) was reached.
func (l *Listener) Refused(limit string) { l.refused.WithLabelValues(l.broker, l.name, limit).Inc() }

// Expired counts a connection the broker closed after timeout (the config
// key).
func (l *Listener) Expired(timeout string) {
	l.expired.WithLabelValues(l.broker, l.name, timeout).Inc()
}

// OnCollect registers fn to be called at every scrape to report the state
// this broker holds (partitions, log sizes, controller, purgatory). fn runs on
// the scraping goroutine and must be quick and safe to call concurrently with
// the broker's own work; it must not keep s. remove unregisters it (call it
// from the broker's Close).
func (b *Broker) OnCollect(fn func(s *BrokerSnapshot)) (remove func()) {
	b.mu.Lock()
	id := b.nextCB
	b.nextCB++
	b.callbacks[id] = fn
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.callbacks, id)
		b.mu.Unlock()
	}
}

// Package quota enforces client quotas (KIP-13, KIP-55, KIP-124) as
// Kafka's ClientQuotaManager and ClientRequestQuotaManager do: a rate per
// quota id measured over quota.window.num samples of
// quota.window.size.seconds each, the most specific quota entity of the
// client's user and client id (Kafka's precedence, Resolve), and on a
// violation the time it takes the rate to fall back to the quota: the
// throttle time the broker returns in throttle_time_ms and mutes the
// connection's reads for (KIP-219). The quotas themselves are stored by
// the coordinator (cluster.ClientQuotaStore); package protocol records and
// applies the throttle.
//
// The controller mutation quota (KIP-599, controller_mutation_rate) is a
// token bucket per quota id instead (mutation.go): CreateTopics,
// CreatePartitions and DeleteTopics take a token per partition they
// create or delete, and topics beyond an empty bucket are refused with
// THROTTLING_QUOTA_EXCEEDED.
//
// The unthrottled path is one atomic load: with no quota of a kind
// configured, Enabled says so and nothing is recorded.
package quota

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/cluster"
)

// Kind is a quota type: Kafka's ClientQuotaType.
type Kind int8

const (
	Produce  Kind = iota // producer_byte_rate: request bytes per second
	Fetch                // consumer_byte_rate: response bytes per second
	Request              // request_percentage: handler time, percent of one thread
	Mutation             // controller_mutation_rate: partitions created or deleted per second (mutation.go)
	numKinds
)

// String is the kind as the throttle metric's quota_type label has it.
func (k Kind) String() string {
	switch k {
	case Produce:
		return "produce"
	case Fetch:
		return "fetch"
	case Mutation:
		return "controller_mutation"
	}
	return "request"
}

// Key is the kind's quota config key.
func (k Kind) Key() string {
	switch k {
	case Produce:
		return cluster.QuotaProducerByteRate
	case Fetch:
		return cluster.QuotaConsumerByteRate
	case Mutation:
		return cluster.QuotaControllerMutationRate
	}
	return cluster.QuotaRequestPercentage
}

// NanosToPercent turns handler time into request_percentage units: a
// rate of 100 is one thread busy all the time (Kafka's
// ClientRequestQuotaManager.nanosToPercentage).
func NanosToPercent(nanos int64) float64 { return float64(nanos) * 100 / 1e9 }

// Config configures a Manager.
type Config struct {
	// Windows is quota.window.num (11), WindowSize
	// quota.window.size.seconds (1 s): the rate is measured over the last
	// Windows samples of WindowSize each.
	Windows    int
	WindowSize time.Duration
	// MutationWindows and MutationWindowSize are
	// controller.quota.window.num (11) and
	// controller.quota.window.size.seconds (1 s): a controller mutation
	// bucket holds MutationWindows*MutationWindowSize worth of its quota.
	MutationWindows    int
	MutationWindowSize time.Duration
}

// Manager holds the quotas and the rates of every quota id. Safe for
// concurrent use.
type Manager struct {
	windows    int
	windowMs   int64
	expireMs   int64
	onThrottle func(Kind, string, string, time.Duration)

	table atomic.Pointer[table]

	mu        sync.Mutex
	sensors   map[sensorKey]*sensor
	lastSweep int64 // unix ms

	// The controller mutation buckets (mutation.go): burstSeconds is the
	// time a bucket holds, in quota seconds.
	burstSeconds float64
	bmu          sync.Mutex
	buckets      map[sensorKey]*bucket
	bucketSweep  int64 // unix ms
}

// table is one immutable version of the quotas, by kind.
type table struct {
	byKind [numKinds]map[cluster.QuotaEntity]float64
}

type sensorKey struct {
	kind           Kind
	user, clientID string
}

// New returns a Manager without quotas.
func New(cfg Config) *Manager {
	if cfg.Windows < 1 {
		cfg.Windows = 11
	}
	if cfg.WindowSize <= 0 {
		cfg.WindowSize = time.Second
	}
	if cfg.MutationWindows < 1 {
		cfg.MutationWindows = 11
	}
	if cfg.MutationWindowSize <= 0 {
		cfg.MutationWindowSize = time.Second
	}
	m := &Manager{
		windows: cfg.Windows, windowMs: cfg.WindowSize.Milliseconds(),
		sensors:      map[sensorKey]*sensor{},
		burstSeconds: float64(cfg.MutationWindows) * cfg.MutationWindowSize.Seconds(),
		buckets:      map[sensorKey]*bucket{},
	}
	m.windowMs = max(m.windowMs, 1)
	m.expireMs = int64(m.windows) * m.windowMs
	return m
}

// Set replaces the quotas (ClientQuotaStore.ClientQuotas). Rates measured
// so far are kept, as Kafka keeps its sensors across quota changes.
func (m *Manager) Set(quotas map[cluster.QuotaEntity]map[string]float64) {
	t := &table{}
	for e, q := range quotas {
		for k := range numKinds {
			if v, ok := q[k.Key()]; ok && v > 0 {
				if t.byKind[k] == nil {
					t.byKind[k] = map[cluster.QuotaEntity]float64{}
				}
				t.byKind[k][e] = v
			}
		}
	}
	m.table.Store(t)
}

// Enabled says whether any quota of kind k is configured: when not,
// Record need not be called.
func (m *Manager) Enabled(k Kind) bool {
	t := m.table.Load()
	return t != nil && t.byKind[k] != nil
}

// Active says whether any quota is configured.
func (m *Manager) Active() bool {
	t := m.table.Load()
	return t != nil && (t.byKind[Produce] != nil || t.byKind[Fetch] != nil || t.byKind[Request] != nil || t.byKind[Mutation] != nil)
}

// Resolve returns the quota of kind k that applies to a client, and the
// quota id its rate is measured under (the user and client id of Kafka's
// metric tags: one rate for every client id of a user whose quota is a
// user quota, one per client id for a client-id quota), in Kafka's order
// of precedence:
//
//  1. /config/users/<user>/clients/<client-id>
//  2. /config/users/<user>/clients/<default>
//  3. /config/users/<user>
//  4. /config/users/<default>/clients/<client-id>
//  5. /config/users/<default>/clients/<default>
//  6. /config/users/<default>
//  7. /config/clients/<client-id>
//  8. /config/clients/<default>
//
// ok is false when none applies.
func (m *Manager) Resolve(k Kind, user, clientID string) (limit float64, idUser, idClient string, ok bool) {
	t := m.table.Load()
	if t == nil {
		return 0, "", "", false
	}
	return resolve(t.byKind[k], user, clientID)
}

func resolve(q map[cluster.QuotaEntity]float64, user, clientID string) (float64, string, string, bool) {
	if q == nil {
		return 0, "", "", false
	}
	const d = cluster.DefaultQuotaName
	for _, c := range [...]struct {
		e            cluster.QuotaEntity
		user, client bool // the quota id's parts
	}{
		{cluster.QuotaEntity{User: user, ClientID: clientID}, true, true},
		{cluster.QuotaEntity{User: user, ClientID: d}, true, true},
		{cluster.QuotaEntity{User: user}, true, false},
		{cluster.QuotaEntity{User: d, ClientID: clientID}, true, true},
		{cluster.QuotaEntity{User: d, ClientID: d}, true, true},
		{cluster.QuotaEntity{User: d}, true, false},
		{cluster.QuotaEntity{ClientID: clientID}, false, true},
		{cluster.QuotaEntity{ClientID: d}, false, true},
	} {
		if c.e.User == "" && c.e.ClientID == "" {
			continue // an empty user or client id names no entity
		}
		if (c.user && c.e.User == "") || (c.e.ClientID == "" && c.client) {
			continue
		}
		if v, ok := q[c.e]; ok {
			var u, cl string
			if c.user {
				u = user
			}
			if c.client {
				cl = clientID
			}
			return v, u, cl, true
		}
	}
	return 0, "", "", false
}

// Record adds value (bytes; for Request, NanosToPercent of the handler's
// time) to the client's rate of kind k at now and returns how long the
// client must wait for the rate to fall back to its quota (0 when within
// it, or no quota applies). For Mutation it takes value tokens from the
// client's bucket as a permissive MutationQuota does.
func (m *Manager) Record(k Kind, user, clientID string, value float64, now time.Time) time.Duration {
	if k == Mutation {
		q := m.MutationQuota(user, clientID, false)
		q.Record(value, now)
		return q.Throttle(now)
	}
	limit, idUser, idClient, ok := m.Resolve(k, user, clientID)
	if !ok {
		return 0
	}
	nowMs := now.UnixMilli()
	s := m.sensor(sensorKey{k, idUser, idClient}, nowMs)
	s.mu.Lock()
	s.record(m, value, nowMs)
	rate, window := s.measure(m, nowMs)
	s.mu.Unlock()
	if rate <= limit {
		return 0
	}
	// QuotaUtils.throttleTime: the time for the rate over the window to
	// come back to the quota.
	ms := math.Round((rate - limit) / limit * float64(window))
	if k == Request {
		ms = min(ms, float64(m.windowMs)) // ClientRequestQuotaManager's bound
	}
	ms = min(ms, float64(math.MaxInt32))
	return time.Duration(ms) * time.Millisecond
}

// MaxValueInWindow is the most a client may take in one go without
// being throttled for sure: its quota over quota.window.num-1 windows
// (Kafka's getMaxValueInQuotaWindow, which bounds a consumer's fetch
// size); ok is false when no quota of kind k applies.
func (m *Manager) MaxValueInWindow(k Kind, user, clientID string) (v float64, ok bool) {
	limit, _, _, ok := m.Resolve(k, user, clientID)
	if !ok {
		return 0, false
	}
	return limit * float64(m.windows-1) * float64(m.windowMs) / 1000, true
}

// Unrecord takes value back out of the client's rate (a throttled fetch is
// answered empty, so its bytes do not count: Kafka's unrecordQuotaSensor).
func (m *Manager) Unrecord(k Kind, user, clientID string, value float64, now time.Time) {
	if k == Mutation {
		return // a bucket's tokens are not given back
	}
	_, idUser, idClient, ok := m.Resolve(k, user, clientID)
	if !ok {
		return
	}
	nowMs := now.UnixMilli()
	s := m.sensor(sensorKey{k, idUser, idClient}, nowMs)
	s.mu.Lock()
	s.record(m, -value, nowMs)
	s.mu.Unlock()
}

// Rate returns the client's measured rate of kind k (0 without a quota,
// and for Mutation, whose state is Tokens).
func (m *Manager) Rate(k Kind, user, clientID string, now time.Time) float64 {
	if k == Mutation {
		return 0
	}
	_, idUser, idClient, ok := m.Resolve(k, user, clientID)
	if !ok {
		return 0
	}
	m.mu.Lock()
	s := m.sensors[sensorKey{k, idUser, idClient}]
	m.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _ := s.measure(m, now.UnixMilli())
	return r
}

// sensor returns the quota id's sensor, creating it. Sensors idle for
// the whole measured window (their rate is zero: every sample would be
// purged) are dropped at most once per window size, so client ids that
// come and go do not accumulate.
func (m *Manager) sensor(key sensorKey, nowMs int64) *sensor {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sensors[key]
	if s != nil {
		return s
	}
	if nowMs-m.lastSweep >= m.windowMs {
		m.lastSweep = nowMs
		for k, old := range m.sensors {
			if nowMs-old.last.Load() >= m.expireMs {
				delete(m.sensors, k)
			}
		}
	}
	s = &sensor{samples: make([]sample, 0, m.windows+1)}
	s.last.Store(nowMs)
	m.sensors[key] = s
	return s
}

// Sensors is how many quota ids have a rate (tests: the sweep bounds it).
func (m *Manager) Sensors() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sensors)
}

// sensor is Kafka's Rate over a SampledStat: Windows samples (plus the
// one overlapping the start of the measured window) of WindowSize each.
type sensor struct {
	last    atomic.Int64 // unix ms of the last record (the sweep)
	mu      sync.Mutex
	samples []sample
	current int
}

type sample struct {
	start, lastEvent int64 // unix ms
	value            float64
}

// record adds value at now (SampledStat.record). Lock should be held.
func (s *sensor) record(m *Manager, value float64, now int64) {
	s.last.Store(now)
	if len(s.samples) == 0 {
		s.samples = append(s.samples, sample{start: now, lastEvent: now})
		s.current = 0
	}
	cur := &s.samples[s.current]
	if now-cur.start >= m.windowMs {
		s.current = (s.current + 1) % (m.windows + 1)
		if s.current >= len(s.samples) {
			s.samples = append(s.samples, sample{start: now, lastEvent: now})
		} else {
			s.samples[s.current] = sample{start: now, lastEvent: now}
		}
		cur = &s.samples[s.current]
	}
	cur.value += value
	cur.lastEvent = now
}

// measure returns the rate per second and the window it was measured
// over, in ms (Rate.measure, Rate.windowSize). Lock should be held.
func (s *sensor) measure(m *Manager, now int64) (rate float64, windowMs int64) {
	if len(s.samples) == 0 {
		s.samples = append(s.samples, sample{start: now, lastEvent: now})
	}
	total := 0.0
	oldest := int64(math.MaxInt64)
	for i := range s.samples {
		sm := &s.samples[i]
		if now-sm.lastEvent >= m.expireMs { // purgeObsoleteSamples
			*sm = sample{start: now, lastEvent: now}
		}
		total += sm.value
		oldest = min(oldest, sm.start)
	}
	elapsed := now - oldest
	if full, minFull := elapsed/m.windowMs, int64(m.windows-1); full < minFull {
		elapsed += (minFull - full) * m.windowMs
	}
	elapsed = max(elapsed, 1)
	return total / (float64(elapsed) / 1000), elapsed
}

// Load reads the quotas from store once.
func (m *Manager) Load(ctx context.Context, store cluster.ClientQuotaStore) error {
	q, err := store.ClientQuotas(ctx)
	if err != nil {
		return err
	}
	m.Set(q)
	return nil
}

// Follow keeps the quotas those of store until ctx ends or changes closes:
// it reads them again on every change that includes
// cluster.ChangeClientQuotas (changes: the coordinator's Watch). A read
// that fails is retried on the next change and after a second.
func (m *Manager) Follow(ctx context.Context, store cluster.ClientQuotaStore, changes <-chan cluster.Change, log *slog.Logger) {
	stale := false
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ch, ok := <-changes:
			if !ok {
				return
			}
			// ChangeAll: a new coordinator session re-read everything.
			if ch&cluster.ChangeClientQuotas == 0 && ch&cluster.ChangeAll != cluster.ChangeAll && !stale {
				continue
			}
		case <-retry.C:
		}
		if err := m.Load(ctx, store); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("reading client quotas; keeping the previous ones", "err", err)
			stale = true
			retry.Reset(time.Second)
			continue
		}
		stale = false
	}
}

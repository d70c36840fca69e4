package quota

import (
	"math"
	"sync"
	"time"
)

// The controller mutation quota (KIP-599) as Kafka's
// ControllerMutationQuotaManager enforces it: controller_mutation_rate is
// a rate of partitions created (CreateTopics, CreatePartitions) or deleted
// (DeleteTopics) per second, kept as a token bucket per quota id (the
// quota entity that applies, Resolve) that refills at the quota and holds
// at most controller.quota.window.num * controller.quota.window.size.seconds
// worth of it (Kafka's TokenBucket). A new bucket is full.
//
// A request takes one MutationQuota and calls Record for each topic with
// the topic's partitions, after the topic was validated and before it is
// changed. Recent request versions (StrictMutations) get a strict quota:
// a topic is refused while the bucket is below zero; the topic that takes
// it below zero is accepted (so one request of any size goes through a
// full bucket, leaving a debt that the refill pays back). Older versions cannot be told
// THROTTLING_QUOTA_EXCEEDED: their quota is permissive, every topic is
// accepted and the bucket goes into debt. Either way Throttle is how long
// the bucket takes to come back to zero, which the broker returns as
// throttle_time_ms and mutes the connection for.

// StrictMutations says whether a request of API key at version gets a
// strict controller mutation quota (Kafka's strictSinceVersion):
// CreateTopics (19) from v6, DeleteTopics (20) from v5, CreatePartitions
// (37) from v3. Other APIs that create topics on the side (Metadata's
// auto-creation) get a permissive one.
func StrictMutations(key, version int16) bool {
	switch key {
	case 19:
		return version >= 6
	case 20:
		return version >= 5
	case 37:
		return version >= 3
	}
	return false
}

// bucket is Kafka's TokenBucket. Lock mu.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	lastMs int64   // unix ms of the last refill
	limit  float64 // the quota at the last refill (the sweep's)
	burst  float64
}

// refill adds the tokens earned since the last refill at limit per
// second, up to burst. A clock that went back earns nothing.
func (b *bucket) refill(limit, burst float64, nowMs int64) {
	if nowMs > b.lastMs {
		b.tokens += limit * float64(nowMs-b.lastMs) / 1000
		b.lastMs = nowMs
	}
	b.tokens = min(b.tokens, burst)
	b.limit, b.burst = limit, burst
}

// fullAt says whether the bucket is full at nowMs (nothing to remember).
func (b *bucket) fullAt(nowMs int64) bool {
	return b.tokens+b.limit*float64(max(nowMs-b.lastMs, 0))/1000 >= b.burst
}

// MutationQuota is one request's controller mutation quota (Kafka's
// Strict- and PermissiveControllerMutationQuota). A nil *MutationQuota
// (no quota applies) admits everything and never throttles. Not for
// concurrent use: one request's handler owns it.
type MutationQuota struct {
	m              *Manager
	user, clientID string
	strict         bool

	throttleMs int64 // the last violation's throttle time
	recordedMs int64 // when it was computed
}

// MutationQuota returns the controller mutation quota of a request from
// user and clientID, strict or permissive (StrictMutations); nil when
// no controller_mutation_rate applies to the client.
func (m *Manager) MutationQuota(user, clientID string, strict bool) *MutationQuota {
	if m == nil || !m.Enabled(Mutation) {
		return nil
	}
	if _, _, _, ok := m.Resolve(Mutation, user, clientID); !ok {
		return nil
	}
	return &MutationQuota{m: m, user: user, clientID: clientID, strict: strict}
}

// Strict says whether the quota refuses topics over it.
func (q *MutationQuota) Strict() bool { return q != nil && q.strict }

// Record takes permits (partitions) from the client's bucket at now and
// says whether the change may go ahead: false only for a strict quota
// whose bucket is below zero (THROTTLING_QUOTA_EXCEEDED; nothing is
// taken). The quota is resolved again on each call, so a change of the
// quota during a request applies to its next topics.
func (q *MutationQuota) Record(permits float64, now time.Time) bool {
	if q == nil {
		return true
	}
	limit, idUser, idClient, ok := q.m.Resolve(Mutation, q.user, q.clientID)
	if !ok {
		return true // the quota was removed meanwhile
	}
	nowMs := now.UnixMilli()
	burst := limit * q.m.burstSeconds
	b := q.m.bucket(sensorKey{Mutation, idUser, idClient}, nowMs)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(limit, burst, nowMs)
	if q.strict && b.tokens < 0 { // Sensor.checkQuotas before recording
		q.violation(b.tokens, limit, nowMs)
		return false
	}
	b.tokens = min(burst, b.tokens-permits)
	if !q.strict && b.tokens < 0 { // Sensor.record with checkQuotas
		q.violation(b.tokens, limit, nowMs)
	}
	return true
}

// violation keeps the throttle time of a bucket at tokens: the time the
// refill takes to bring it back to zero (Kafka's
// ControllerMutationQuotaManager.throttleTimeMs).
func (q *MutationQuota) violation(tokens, limit float64, nowMs int64) {
	q.throttleMs = int64(min(math.Round(-tokens/limit*1000), math.MaxInt32))
	q.recordedMs = nowMs
}

// Throttle is the throttle time of the last violation less the time since
// (Kafka's AbstractControllerMutationQuota.throttleTime): 0 without one.
func (q *MutationQuota) Throttle(now time.Time) time.Duration {
	if q == nil || q.throttleMs <= 0 {
		return 0
	}
	ms := q.throttleMs - max(now.UnixMilli()-q.recordedMs, 0)
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// Tokens is what the client's bucket holds at now (negative: a debt), and
// false when no controller_mutation_rate applies to it.
func (m *Manager) Tokens(user, clientID string, now time.Time) (float64, bool) {
	limit, idUser, idClient, ok := m.Resolve(Mutation, user, clientID)
	if !ok {
		return 0, false
	}
	burst := limit * m.burstSeconds
	m.bmu.Lock()
	b := m.buckets[sensorKey{Mutation, idUser, idClient}]
	m.bmu.Unlock()
	if b == nil {
		return burst, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(limit, burst, now.UnixMilli())
	return b.tokens, true
}

// bucket returns the quota id's bucket, creating it full. Buckets that
// would be full by now (they hold nothing a new one would not) are
// dropped at most once a second, so client ids that come and go do not
// accumulate.
func (m *Manager) bucket(key sensorKey, nowMs int64) *bucket {
	m.bmu.Lock()
	defer m.bmu.Unlock()
	if b := m.buckets[key]; b != nil {
		return b
	}
	if nowMs-m.bucketSweep >= 1000 {
		m.bucketSweep = nowMs
		for k, old := range m.buckets {
			old.mu.Lock()
			full := nowMs-old.lastMs >= 1000 && old.fullAt(nowMs)
			old.mu.Unlock()
			if full {
				delete(m.buckets, k)
			}
		}
	}
	b := &bucket{tokens: math.Inf(1), lastMs: nowMs}
	m.buckets[key] = b
	return b
}

// Buckets is how many quota ids have a controller mutation bucket (tests:
// the sweep bounds it).
func (m *Manager) Buckets() int {
	m.bmu.Lock()
	defer m.bmu.Unlock()
	return len(m.buckets)
}

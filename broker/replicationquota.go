package broker

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/storage"
)

// Replication throttles (Kafka's KIP-73 ReplicationQuotaManager): two
// quotas per broker, the leader's (bytes served to followers) and the
// follower's (bytes fetched from leaders), bounded by the dynamic broker
// configs leader.replication.throttled.rate and
// follower.replication.throttled.rate. They apply to the replicas the
// topic configs leader.replication.throttled.replicas and
// follower.replication.throttled.replicas name on this broker (Image.
// throttled). As in Kafka:
//
//   - the follower leaves its throttled partitions out of a fetch while its
//     quota is exceeded, unless the partition has caught up with the
//     leader's high watermark, and records the bytes it appends for them;
//   - the leader answers a throttled partition with no records while its
//     quota is exceeded, unless the fetching follower is in the ISR, and
//     records the bytes it sends for throttled partitions;
//   - the rate is measured over replicationQuotaSamples windows of
//     replicationQuotaWindow (Kafka's replication.quota.window.num and
//     replication.quota.window.size.seconds defaults), so a move starts
//     with up to about ten seconds' worth of bytes before the throttle
//     bites, and then averages the rate.
//
// Partitions not named are never held back, and without a rate set the
// fetch paths pay one atomic load.

const (
	replicationQuotaSamples = 11
	replicationQuotaWindow  = time.Second
	// throttleRecheck is how long a fetcher whose every partition is held
	// back by its quota waits before it looks again.
	throttleRecheck = 100 * time.Millisecond
)

// windowRate is Kafka's Rate over a SampledStat: the sum of the samples of
// the last n windows divided by the time they cover, at least n-1 windows.
type windowRate struct {
	samples int
	window  time.Duration
	ring    []rateSample
	cur     int
}

type rateSample struct {
	start time.Time
	value float64
}

func (r *windowRate) current(now time.Time) *rateSample {
	if len(r.ring) == 0 {
		r.ring = append(r.ring, rateSample{start: now})
		r.cur = 0
	}
	return &r.ring[r.cur]
}

// record adds v at now, starting a new window when the current one is
// complete.
func (r *windowRate) record(now time.Time, v float64) {
	s := r.current(now)
	if now.Sub(s.start) >= r.window {
		r.cur = (r.cur + 1) % r.samples
		if r.cur >= len(r.ring) {
			r.ring = append(r.ring, rateSample{start: now})
		} else {
			r.ring[r.cur] = rateSample{start: now}
		}
		s = &r.ring[r.cur]
	}
	s.value += v
}

// rate is the rate per second at now.
func (r *windowRate) rate(now time.Time) float64 {
	expire := time.Duration(r.samples) * r.window
	for i := range r.ring {
		if now.Sub(r.ring[i].start) >= expire {
			r.ring[i] = rateSample{start: now}
		}
	}
	r.current(now)
	sum := 0.0
	oldest := r.ring[0].start
	for _, s := range r.ring {
		sum += s.value
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	if full := int(elapsed / r.window); full < r.samples-1 {
		elapsed += time.Duration(r.samples-1-full) * r.window
	}
	return sum / max(elapsed, r.window).Seconds()
}

// replicationQuota is one side's quota: its bound (bytes/s, 0: none) and
// the rate of the throttled bytes.
type replicationQuota struct {
	bound atomic.Int64
	count func(n int) // counts throttled bytes (metrics)

	mu   sync.Mutex
	rate windowRate
}

func newReplicationQuota(count func(int)) *replicationQuota {
	return &replicationQuota{count: count, rate: windowRate{samples: replicationQuotaSamples, window: replicationQuotaWindow}}
}

// active reports whether a rate is set.
func (q *replicationQuota) active() bool { return q.bound.Load() > 0 }

// setBound sets the rate in bytes/s (config.NoThrottle or <= 0: none).
func (q *replicationQuota) setBound(rate int64) {
	if rate <= 0 || rate == config.NoThrottle {
		rate = 0
	}
	q.bound.Store(rate)
}

// exceeded reports whether the throttled bytes' rate is above the bound.
func (q *replicationQuota) exceeded(now time.Time) bool {
	bound := q.bound.Load()
	if bound <= 0 {
		return false
	}
	q.mu.Lock()
	r := q.rate.rate(now)
	q.mu.Unlock()
	return r > float64(bound)
}

// record counts n bytes of throttled replicas replicated at now.
func (q *replicationQuota) record(now time.Time, n int) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	q.rate.record(now, float64(n))
	q.mu.Unlock()
	if q.count != nil {
		q.count(n)
	}
}

// throttleSide says which lists name a partition's replica on this broker.
type throttleSide uint8

const (
	leaderThrottled throttleSide = 1 << iota
	followerThrottled
)

// throttledOf reads the throttled-replica lists of the image's topics for
// broker: nil when none names it.
func throttledOf(topics map[string]*TopicImage, broker int32) map[storage.TopicPartition]throttleSide {
	var out map[storage.TopicPartition]throttleSide
	for _, t := range topics {
		for _, l := range []struct {
			key  string
			side throttleSide
		}{{config.LeaderThrottledReplicas, leaderThrottled}, {config.FollowerThrottledReplicas, followerThrottled}} {
			v := t.Configs[l.key]
			if v == "" {
				continue
			}
			r, err := config.ParseThrottledReplicas(v)
			if err != nil {
				continue // refused when set; an old store's bad value throttles nothing
			}
			parts, all := r.PartitionsOf(broker)
			if all {
				parts = parts[:0]
				for _, p := range t.Partitions {
					parts = append(parts, p.Partition)
				}
			}
			for _, p := range parts {
				if out == nil {
					out = map[storage.TopicPartition]throttleSide{}
				}
				out[storage.TopicPartition{Topic: t.Name, Partition: p}] |= l.side
			}
		}
	}
	return out
}

// isThrottled reports whether the lists name tp's replica on this broker
// on side.
func (im *Image) isThrottled(tp storage.TopicPartition, side throttleSide) bool {
	return im.throttled[tp]&side != 0
}

// throttleRate is the rate of a throttle key in force: this broker's
// dynamic config, the cluster default, the static config, none.
func (b *Broker) throttleRate(img *Image, name string) int64 {
	if n, ok := dynamicInt(img, name); ok {
		return n
	}
	if s := b.cfg.Static; s != nil {
		if name == config.LeaderThrottledRate && s.LeaderReplicationThrottledRate > 0 {
			return s.LeaderReplicationThrottledRate
		}
		if name == config.FollowerThrottledRate && s.FollowerReplicationThrottledRate > 0 {
			return s.FollowerReplicationThrottledRate
		}
	}
	return config.NoThrottle
}

// applyThrottles sets the quotas' bounds from a newly published image.
func (b *Broker) applyThrottles(img *Image) {
	lr, fr := b.throttleRate(img, config.LeaderThrottledRate), b.throttleRate(img, config.FollowerThrottledRate)
	old := [2]int64{b.leaderQuota.bound.Load(), b.followerQuota.bound.Load()}
	b.leaderQuota.setBound(lr)
	b.followerQuota.setBound(fr)
	if now := [2]int64{b.leaderQuota.bound.Load(), b.followerQuota.bound.Load()}; now != old {
		b.log.Info("replication throttles in force (0: none)", "leader_bytes_per_s", now[0], "follower_bytes_per_s", now[1])
	}
}

// newReplicationQuotas makes the broker's two quotas, counting into mx.
func newReplicationQuotas(mx *metrics.Replication) (leader, follower *replicationQuota) {
	return newReplicationQuota(mx.LeaderThrottled), newReplicationQuota(mx.FollowerThrottled)
}

// inISR reports whether replica is in the partition's ISR.
func (p *Partition) inISR(replica int32) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Contains(p.isr, replica)
}

// reassignmentBytesRemaining estimates the bytes the replicas being added
// to this broker still have to copy: for each, the offsets between its log
// end and the leader's high watermark (as the last fetch answered) times
// the bytes per offset of its log so far. A replica that has nothing yet
// counts a byte per offset behind, and one that has not heard from its
// leader yet a single byte: not done, so that a move stuck before its first
// fetch shows as bytes left without progress.
func (b *Broker) reassignmentBytesRemaining() int64 {
	img := b.Image()
	self := b.cfg.BrokerID
	var total float64
	for _, t := range img.Topics {
		for _, pi := range t.Partitions {
			if !slices.Contains(pi.Adding, self) {
				continue
			}
			p, err := b.Partition(t.Name, pi.Partition)
			if err != nil {
				continue
			}
			hw := p.leaderHW.Load()
			leo, start := p.log.LogEndOffset(), p.log.LogStartOffset()
			switch {
			case hw < 0:
				total++
			case hw <= leo:
			case leo <= start:
				total += float64(hw - leo)
			default:
				perOffset := float64(p.log.Size()) / float64(leo-start)
				total += float64(hw-leo) * perOffset
			}
		}
	}
	return int64(math.Round(total))
}

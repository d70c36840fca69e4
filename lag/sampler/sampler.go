// Package sampler is the console's background sampling of the cluster:
// every interval it collects the lag of every consumer group (kept in
// memory for the overview and the topic pages and, on the leading console,
// stored in SQLite for the history charts), and samples the cluster's end
// offsets and log sizes so the overview can show rates. It also records
// which brokers it sees, so that a broker that disappears from the metadata
// is shown as down.
//
// The appliance's console component builds one and runs it; the console's
// pages read it (LatestLag, Traffic) and never start it.
package sampler

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
)

// Source is what the sampler reads of the cluster (*kafkaview.Client).
type Source interface {
	Lag(ctx context.Context, groups ...string) ([]lag.Group, error)
	Totals(ctx context.Context) (endOffsets, bytes int64, err error)
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
}

// Store is where the sampler keeps lag history and the brokers it saw
// (*consoledb.Console).
type Store interface {
	InsertLagSamples(ctx context.Context, at time.Time, samples []consoledb.LagSample) error
	PruneLagSamples(ctx context.Context, before time.Time) (int64, error)
	SeeBrokers(ctx context.Context, brokers []consoledb.KnownBroker) error
}

// Defaults of Config.
const (
	DefaultInterval  = 30 * time.Second
	DefaultRetention = 7 * 24 * time.Hour
)

// Config configures a Sampler. Source and Store are required.
type Config struct {
	Source Source
	Store  Store
	Logger *slog.Logger // default: discarded
	// Interval is how often every group's lag is collected and stored
	// (console.lag.sample.interval.ms, default 30s).
	Interval time.Duration
	// Retention is how long lag samples are kept (default 7 days).
	Retention time.Duration
	// Leader says whether this console stores lag history (the leading
	// console of a cluster does); nil: always.
	Leader func() bool
	// BytesOut, when set, returns a cumulative count of bytes the brokers
	// sent to consumers (e.g. from the broker metrics) and a label of its
	// scope; Traffic shows its rate. ok=false when unknown.
	BytesOut func() (total int64, scope string, ok bool)
}

// Sampler samples the cluster in the background (Run) and keeps the
// latest results for the pages. It is safe for concurrent use.
type Sampler struct {
	src      Source
	store    Store
	log      *slog.Logger
	interval time.Duration
	keep     time.Duration
	leader   func() bool
	bytesOut func() (int64, string, bool)

	mu        sync.Mutex
	lastLag   []lag.Group    // Lock mu.
	lastLagAt time.Time      // Lock mu.
	obs       [2]observation // previous and latest traffic observation; Lock mu.
	// hist is a ring of the traffic observations of the last
	// HistoryWindow, oldest first from histStart; Lock mu.
	hist      []observation
	histStart int
	lastPrune time.Time // only Run's goroutine
	// recent keeps each group partition's last few (committed, end)
	// positions, for per-partition rates; Lock mu.
	recent map[partKey][]position
}

// HistoryWindow is how far back TrafficHistory and the per-partition
// positions reach.
const HistoryWindow = time.Hour

// recentPositions is how many lag collections of each partition are kept
// for its rates: enough for a rate over a few minutes at the default
// interval, little memory on big clusters (16 bytes each).
const recentPositions = 12

type partKey struct {
	group, topic string
	partition    int32
}

// position is a group's committed offset and the log end of one partition
// at one collection.
type position struct {
	at        time.Time
	committed int64
	end       int64
}

type observation struct {
	at        time.Time
	ends      int64
	bytes     int64
	out       int64
	outOK     bool
	outSource string
}

// New returns a sampler; Run starts sampling.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sampler{src: cfg.Source, store: cfg.Store, log: cfg.Logger, interval: cfg.Interval, keep: cfg.Retention,
		leader: cfg.Leader, bytesOut: cfg.BytesOut}
}

// Run samples until ctx ends. Two traffic observations a few seconds apart
// give rates soon after start; then one of each kind per interval.
func (s *Sampler) Run(ctx context.Context) {
	s.observe(ctx)
	s.sampleLag(ctx)
	first := time.NewTimer(5 * time.Second)
	defer first.Stop()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-first.C:
			s.observe(ctx)
		case <-t.C:
			s.observe(ctx)
			s.sampleLag(ctx)
		}
	}
}

func (s *Sampler) observe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	ends, bytes, err := s.src.Totals(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Debug("traffic sample", "err", err)
		}
		return
	}
	o := observation{at: time.Now(), ends: ends, bytes: bytes}
	if s.bytesOut != nil {
		o.out, o.outSource, o.outOK = s.bytesOut()
	}
	s.mu.Lock()
	s.obs[0], s.obs[1] = s.obs[1], o
	s.remember(o)
	s.mu.Unlock()
	if snap, err := s.src.Metadata(ctx, time.Second); err == nil {
		seen := make([]consoledb.KnownBroker, 0, len(snap.Brokers))
		for _, b := range snap.Brokers {
			seen = append(seen, consoledb.KnownBroker{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack})
		}
		if err := s.store.SeeBrokers(ctx, seen); err != nil {
			s.log.Warn("record brokers", "err", err)
		}
	}
}

func (s *Sampler) sampleLag(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	groups, err := s.src.Lag(ctx)
	if err != nil && ctx.Err() == nil {
		// One retry within the round: a failure is often one broker just
		// gone (a dial refused before the cluster knows it is down), and a
		// skipped round is a hole in every console's lag chart.
		select {
		case <-ctx.Done():
		case <-time.After(min(s.interval/10, 200*time.Millisecond)):
			s.log.Debug("lag sample, retrying", "err", err)
			groups, err = s.src.Lag(ctx)
		}
	}
	now := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("lag sample", "err", err)
		}
		return
	}
	s.mu.Lock()
	s.lastLag, s.lastLagAt = groups, now
	s.keepPositions(groups, now)
	s.mu.Unlock()
	if s.leader != nil && !s.leader() {
		return
	}
	if err := s.store.InsertLagSamples(ctx, now, samplesOf(groups)); err != nil {
		s.log.Warn("store lag samples", "err", err)
	}
	if now.Sub(s.lastPrune) > time.Hour {
		s.lastPrune = now
		if _, err := s.store.PruneLagSamples(ctx, now.Add(-s.keep)); err != nil {
			s.log.Warn("prune lag samples", "err", err)
		}
	}
}

// samplesOf sums each group's lag per topic and keeps the largest time lag.
func samplesOf(groups []lag.Group) []consoledb.LagSample {
	var out []consoledb.LagSample
	for _, g := range groups {
		if g.Err != nil && len(g.Partitions) == 0 {
			continue
		}
		idx := map[string]int{}
		for _, p := range g.Partitions {
			i, ok := idx[p.Topic]
			if !ok {
				i = len(out)
				idx[p.Topic] = i
				out = append(out, consoledb.LagSample{Group: g.Group, Topic: p.Topic})
			}
			out[i].Lag += p.Lag
			out[i].LagTime = max(out[i].LagTime, p.LagTime)
		}
	}
	return out
}

// LatestLag is the last collected lag of all groups, if fresher than
// maxAge.
func (s *Sampler) LatestLag(maxAge time.Duration) ([]lag.Group, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastLagAt.IsZero() || time.Since(s.lastLagAt) > maxAge {
		return nil, time.Time{}, false
	}
	return s.lastLag, s.lastLagAt, true
}

// Traffic is the cluster's throughput, estimated from successive samples.
type Traffic struct {
	Known          bool    // at least two samples were taken
	MessagesIn     float64 // records per second appended over all partitions
	BytesIn        float64 // bytes per second of log growth (-1 unknown)
	BytesOut       float64 // bytes per second sent to consumers (-1 unknown)
	BytesOutSource string  // where BytesOut comes from, e.g. "broker metrics"
	Over           time.Duration
}

// Traffic is the rate between the last two observations.
func (s *Sampler) Traffic() Traffic {
	s.mu.Lock()
	a, b := s.obs[0], s.obs[1]
	s.mu.Unlock()
	t := Traffic{BytesIn: -1, BytesOut: -1}
	if a.at.IsZero() || b.at.IsZero() {
		return t
	}
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return t
	}
	t.Known = true
	t.Over = b.at.Sub(a.at).Round(time.Second)
	t.MessagesIn = max(0, float64(b.ends-a.ends)/secs)
	if a.bytes >= 0 && b.bytes >= 0 {
		// Retention deleting segments shrinks the logs; never show a
		// negative rate.
		t.BytesIn = max(0, float64(b.bytes-a.bytes)/secs)
	}
	if a.outOK && b.outOK {
		t.BytesOut = max(0, float64(b.out-a.out)/secs)
		t.BytesOutSource = b.outSource
	}
	return t
}

// remember adds o to the traffic history ring, which holds HistoryWindow
// of observations at the sampling interval. Lock mu.
func (s *Sampler) remember(o observation) {
	capacity := int(HistoryWindow/s.interval) + 3
	capacity = min(max(capacity, 4), 1000)
	if len(s.hist) < capacity {
		s.hist = append(s.hist, o)
		return
	}
	s.hist[s.histStart] = o
	s.histStart = (s.histStart + 1) % len(s.hist)
}

// TrafficPoint is the cluster's throughput between two observations,
// stamped with the later one.
type TrafficPoint struct {
	At         time.Time
	MessagesIn float64 // records per second
	BytesIn    float64 // bytes per second of log growth; -1 unknown
}

// TrafficHistory is the throughput over the last HistoryWindow, oldest
// first, one point per sampling interval (empty until two observations).
func (s *Sampler) TrafficHistory() []TrafficPoint {
	s.mu.Lock()
	obs := make([]observation, 0, len(s.hist))
	obs = append(obs, s.hist[s.histStart:]...)
	obs = append(obs, s.hist[:s.histStart]...)
	s.mu.Unlock()
	cutoff := time.Now().Add(-HistoryWindow)
	var out []TrafficPoint
	for i := 1; i < len(obs); i++ {
		a, b := obs[i-1], obs[i]
		secs := b.at.Sub(a.at).Seconds()
		if secs <= 0 || b.at.Before(cutoff) {
			continue
		}
		p := TrafficPoint{At: b.at, MessagesIn: max(0, float64(b.ends-a.ends)/secs), BytesIn: -1}
		if a.bytes >= 0 && b.bytes >= 0 {
			p.BytesIn = max(0, float64(b.bytes-a.bytes)/secs)
		}
		out = append(out, p)
	}
	return out
}

// keepPositions records each group partition's position of this
// collection, and forgets the partitions that were not reported. Lock mu.
func (s *Sampler) keepPositions(groups []lag.Group, now time.Time) {
	if s.recent == nil {
		s.recent = map[partKey][]position{}
	}
	seen := make(map[partKey]bool, len(s.recent))
	for _, g := range groups {
		for _, p := range g.Partitions {
			if p.Err != nil || p.LogEnd < 0 {
				continue
			}
			k := partKey{g.Group, p.Topic, p.Partition}
			seen[k] = true
			ps := s.recent[k]
			if len(ps) == recentPositions {
				copy(ps, ps[1:])
				ps = ps[:recentPositions-1]
			}
			s.recent[k] = append(ps, position{at: now, committed: p.Committed, end: p.LogEnd})
		}
	}
	for k := range s.recent {
		if !seen[k] {
			delete(s.recent, k)
		}
	}
}

// PartitionRate is a group partition's movement over the positions the
// sampler kept (a few minutes at the default interval).
type PartitionRate struct {
	Topic     string
	Partition int32
	// Consumed is records committed per second, Produced records appended
	// per second, over Over. Known is false with fewer than two positions.
	Consumed, Produced float64
	Over               time.Duration
	Known              bool
	// Lags are the lags of the kept positions, oldest first (a sparkline).
	Lags []int64
}

// PartitionRates returns the rates of every partition of group the sampler
// has seen, sorted by topic and partition.
func (s *Sampler) PartitionRates(group string) []PartitionRate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PartitionRate
	for k, ps := range s.recent {
		if k.group != group {
			continue
		}
		r := PartitionRate{Topic: k.topic, Partition: k.partition}
		for _, p := range ps {
			if p.committed >= 0 {
				r.Lags = append(r.Lags, max(0, p.end-p.committed))
			}
		}
		if len(ps) >= 2 {
			a, b := ps[0], ps[len(ps)-1]
			if secs := b.at.Sub(a.at).Seconds(); secs > 0 {
				r.Known, r.Over = true, b.at.Sub(a.at)
				r.Produced = max(0, float64(b.end-a.end)/secs)
				if a.committed >= 0 && b.committed >= 0 {
					r.Consumed = float64(b.committed-a.committed) / secs
				}
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Drain says how a lag evolves at the measured rates.
type Drain int

// The ways a lag evolves.
const (
	DrainUnknown  Drain = iota // not measured yet
	DrainCaughtUp              // no lag
	DrainDraining              // consumed faster than produced: Duration estimates when it reaches 0
	DrainGrowing               // produced faster than consumed (or as fast): it will not reach 0 at these rates
	DrainStopped               // nothing consumed at all
)

// TimeToDrain estimates how long lag records take to be consumed at the
// rates of r: lag / (consumed - produced) while consumption is faster.
func (r PartitionRate) TimeToDrain(lag int64) (time.Duration, Drain) {
	switch {
	case lag <= 0:
		return 0, DrainCaughtUp
	case !r.Known:
		return 0, DrainUnknown
	case r.Consumed <= 0:
		return 0, DrainStopped
	case r.Consumed <= r.Produced:
		return 0, DrainGrowing
	}
	secs := float64(lag) / (r.Consumed - r.Produced)
	if secs > float64(365*24*3600) {
		return 0, DrainGrowing // a year away is not draining in any useful sense
	}
	return time.Duration(secs * float64(time.Second)), DrainDraining
}

// SumRates adds up partitions' rates (a group's, or a topic's within a
// group); it is known when every partition's is, over the shortest span.
func SumRates(rs []PartitionRate) PartitionRate {
	var out PartitionRate
	if len(rs) == 0 {
		return out
	}
	out.Known = true
	for _, r := range rs {
		if !r.Known {
			out.Known = false
			continue
		}
		out.Consumed += r.Consumed
		out.Produced += r.Produced
		if out.Over == 0 || r.Over < out.Over {
			out.Over = r.Over
		}
	}
	return out
}

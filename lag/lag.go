// Package lag computes consumer-group lag: per group, topic and partition the
// committed offset, the log start and end offsets, the lag in records and an
// estimate of the lag in time. It is one function shared by the console, the
// Prometheus metrics and the alert rules.
//
// It is a Kafka client (franz-go kgo/kadm), not a view into the broker's
// memory, so it works against any broker of a cluster and against kfake in
// tests. The lag in records is exactly what kadm's Lag computes (it is taken
// from kadm.Client.Lag); this package adds the time estimate, which needs the
// timestamps of two records per lagging partition:
//
//   - the record at the committed offset (the next record the group will
//     read; when the group has no commit, the record at the log start), and
//   - the last record, at LogEnd-1.
//
// LagTime is the difference of the two: how old, relative to the newest
// record, the oldest unread record is. A partition that is caught up has no
// unread record and a LagTime of 0.
//
// Timestamps are read with raw Fetch requests, batched: one request per
// broker per round (the committed positions and the end positions are two
// rounds, as a partition may appear only once in a Fetch), each bounded in
// size and sent with max wait 0 so it never parks. The timestamp of a record
// never changes, so lookups are cached per (topic, partition, offset); a
// group that is stuck costs one fetch for its end and none for its committed
// offsets on the next collection.
package lag

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/decompress"
)

// Partition is the lag of one group on one partition.
type Partition struct {
	Topic     string
	Partition int32
	Committed int64 // committed offset; -1 when the group has no commit for it
	LogStart  int64
	LogEnd    int64 // high watermark
	Lag       int64 // LogEnd - Committed (LogEnd - LogStart when no commit); never negative
	// LagTime estimates how far behind in time the group is: the timestamp
	// of the record at LogEnd-1 minus the timestamp of the record at
	// Committed (0 when caught up).
	LagTime                  time.Duration
	CommittedTimestamp       time.Time // timestamp of the record at the committed offset (zero if unknown)
	EndTimestamp             time.Time // timestamp of the last record (zero if unknown)
	MemberID, ClientID, Host string    // current owner when the group is consuming it

	// Err is set when the offsets of this partition could not be listed or
	// fetched (for example UNKNOWN_TOPIC_OR_PARTITION for a deleted topic
	// that still has commits). Lag is then 0 and kadm reports -1.
	Err error
}

// Group is the lag of one consumer group.
type Group struct {
	Group      string
	State      string // Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
	Protocol   string // range, roundrobin, sticky, cooperative-sticky, ...
	Members    int
	Partitions []Partition // sorted by topic, partition
	TotalLag   int64
	MaxLagTime time.Duration
	Err        error // per-group error (e.g. COORDINATOR_NOT_AVAILABLE)
}

// Collector computes lag with one kgo client. It is safe for concurrent use.
type Collector struct {
	cl   *kgo.Client
	adm  *kadm.Client
	dec  kgo.Decompressor
	opts options

	mu    sync.Mutex
	cache map[tsKey]int64 // (topic, partition, requested offset) -> timestamp ms

	kmu   sync.Mutex
	known map[string]struct{} // groups a collection of every group saw; Lock kmu
}

type tsKey struct {
	topic     string
	partition int32
	offset    int64
}

type options struct {
	maxCacheEntries   int
	partitionMaxBytes int32
	fetchMaxBytes     int32
	requestTimeout    time.Duration
}

// Option changes a Collector's limits; the defaults suit the console.
type Option func(*options)

// CacheEntries bounds the timestamp cache (default 100000 entries). When it
// is full it is cleared and refilled on the next collections.
func CacheEntries(n int) Option { return func(o *options) { o.maxCacheEntries = n } }

// FetchBytes bounds the timestamp fetches: bytes per partition and per
// request (defaults 256 KiB and 8 MiB). A partition whose first batch does
// not fit is fetched again on its own, where the broker returns at least one
// whole batch.
func FetchBytes(perPartition, perRequest int32) Option {
	return func(o *options) { o.partitionMaxBytes, o.fetchMaxBytes = perPartition, perRequest }
}

// RequestTimeout bounds each timestamp fetch (default 10s).
func RequestTimeout(d time.Duration) Option { return func(o *options) { o.requestTimeout = d } }

// NewCollector returns a Collector using cl. The caller owns cl and closes it
// after the Collector is no longer used.
func NewCollector(cl *kgo.Client, opts ...Option) *Collector {
	o := options{
		maxCacheEntries:   100000,
		partitionMaxBytes: 256 << 10,
		fetchMaxBytes:     8 << 20,
		requestTimeout:    10 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return &Collector{
		cl:    cl,
		adm:   kadm.NewClient(cl),
		dec:   decompress.Decompressor(), // bounded: a bomb in a topic must not expand in every sample
		opts:  o,
		cache: make(map[tsKey]int64),
		known: make(map[string]struct{}),
	}
}

// Collect returns the lag of the named groups, or of every group when none
// are named, sorted by name. Timestamps are read with one bounded fetch per
// broker and cached per (topic, partition, offset). An error is returned only
// when nothing could be computed; a failure limited to one group is in that
// Group's Err, one limited to a partition in that Partition's Err.
//
// A collection of every group lists the groups on every broker, and a
// group whose coordinator does not answer (a broker that died, before its
// groups moved to another coordinator) is not listed at all. So the
// Collector remembers the groups it has seen, describes by name those a
// listing misses, and returns each that still exists but cannot be read
// with its Err set, rather than leaving it out: the group did not go away,
// its lag is unknown for now. A group described as gone (deleted, Dead) is
// forgotten.
func (c *Collector) Collect(ctx context.Context, groups ...string) ([]Group, error) {
	lags, err := c.adm.Lag(ctx, groups...)
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	if len(groups) == 0 {
		c.probeMissing(ctx, lags)
	}
	out := make([]Group, 0, len(lags))
	for _, l := range lags.Sorted() {
		g := Group{
			Group:    l.Group,
			State:    l.State,
			Protocol: l.Protocol,
			Members:  len(l.Members),
			Err:      l.Error(),
		}
		for _, ml := range l.Lag.Sorted() {
			p := Partition{
				Topic:     ml.Topic,
				Partition: ml.Partition,
				Committed: ml.Commit.At,
				LogStart:  ml.Start.Offset,
				LogEnd:    ml.End.Offset,
				Lag:       ml.Lag,
				Err:       ml.Err,
			}
			if p.Committed < 0 {
				p.Committed = -1
			}
			if ml.Start.Err != nil {
				p.LogStart = -1
			}
			if ml.End.Err != nil {
				p.LogEnd = -1
			}
			if p.Lag < 0 || p.Err != nil {
				p.Lag = 0
			}
			if m := ml.Member; m != nil {
				p.MemberID, p.ClientID, p.Host = m.MemberID, m.ClientID, m.ClientHost
			}
			g.Partitions = append(g.Partitions, p)
		}
		out = append(out, g)
	}
	if err := c.fillTimes(ctx, out); err != nil {
		// Times are an estimate on top of the offsets: keep the offsets and
		// say why the times are missing on each group that needed them.
		for i := range out {
			if out[i].Err == nil && needsTimes(&out[i]) {
				out[i].Err = fmt.Errorf("lag: record timestamps: %w", err)
			}
		}
	}
	for i := range out {
		g := &out[i]
		for _, p := range g.Partitions {
			g.TotalLag += p.Lag
			if p.LagTime > g.MaxLagTime {
				g.MaxLagTime = p.LagTime
			}
		}
	}
	return out, nil
}

// probeMissing adds to lags, a listing of every group, the groups seen
// before that it misses and that still exist (see Collect), and remembers
// the groups listed.
func (c *Collector) probeMissing(ctx context.Context, lags kadm.DescribedGroupLags) {
	c.kmu.Lock()
	var missing []string
	for g := range c.known {
		if _, ok := lags[g]; !ok {
			missing = append(missing, g)
		}
	}
	c.kmu.Unlock()
	if len(missing) > 0 {
		probed, err := c.adm.Lag(ctx, missing...)
		for _, g := range missing {
			l, ok := probed[g]
			switch {
			case !ok && err != nil:
				lags[g] = kadm.DescribedGroupLag{Group: g,
					DescribeErr: fmt.Errorf("no broker lists the group and describing it failed (its coordinator may be down): %w", err)}
			case !ok, gone(l):
				c.kmu.Lock()
				delete(c.known, g)
				c.kmu.Unlock()
			default:
				// Its error, or its lag when its coordinator answers
				// by name (a listing that failed on one broker).
				lags[g] = l
			}
		}
	}
	c.kmu.Lock()
	for g, l := range lags {
		if gone(l) {
			delete(c.known, g)
		} else {
			c.known[g] = struct{}{}
		}
	}
	c.kmu.Unlock()
}

// gone reports whether a described group no longer exists.
func gone(l kadm.DescribedGroupLag) bool {
	if err := l.Error(); err != nil {
		return errors.Is(err, kerr.GroupIDNotFound)
	}
	return l.State == "Dead"
}

func needsTimes(g *Group) bool {
	for i := range g.Partitions {
		if g.Partitions[i].Lag > 0 {
			return true
		}
	}
	return false
}

// position is the offset of the oldest unread record: the commit, or the log
// start without one (or when the commit points below the log start, i.e. the
// records it pointed at were deleted).
func (p *Partition) position() int64 {
	if p.Committed < p.LogStart {
		return p.LogStart
	}
	return p.Committed
}

// fillTimes sets CommittedTimestamp, EndTimestamp and LagTime on every
// lagging partition of groups.
func (c *Collector) fillTimes(ctx context.Context, groups []Group) error {
	// Collect the distinct lookups; many groups may read the same topic.
	want := make(map[tsKey]struct{})
	for gi := range groups {
		for pi := range groups[gi].Partitions {
			p := &groups[gi].Partitions[pi]
			if p.Lag <= 0 || p.Err != nil || p.LogEnd <= 0 {
				continue
			}
			want[tsKey{p.Topic, p.Partition, p.position()}] = struct{}{}
			want[tsKey{p.Topic, p.Partition, p.LogEnd - 1}] = struct{}{}
		}
	}
	found := make(map[tsKey]int64, len(want))
	c.mu.Lock()
	for k := range want {
		if ts, ok := c.cache[k]; ok {
			found[k] = ts
			delete(want, k)
		}
	}
	c.mu.Unlock()

	var err error
	if len(want) > 0 {
		var fetched map[tsKey]int64
		fetched, err = c.fetchTimestamps(ctx, want)
		c.mu.Lock()
		if len(c.cache)+len(fetched) > c.opts.maxCacheEntries {
			clear(c.cache)
		}
		for k, ts := range fetched {
			found[k] = ts
			if len(c.cache) < c.opts.maxCacheEntries {
				c.cache[k] = ts
			}
		}
		c.mu.Unlock()
	}

	for gi := range groups {
		for pi := range groups[gi].Partitions {
			p := &groups[gi].Partitions[pi]
			if p.Lag <= 0 || p.Err != nil || p.LogEnd <= 0 {
				continue
			}
			cts, cok := found[tsKey{p.Topic, p.Partition, p.position()}]
			ets, eok := found[tsKey{p.Topic, p.Partition, p.LogEnd - 1}]
			if cok {
				p.CommittedTimestamp = time.UnixMilli(cts)
			}
			if eok {
				p.EndTimestamp = time.UnixMilli(ets)
			}
			if cok && eok && ets > cts {
				p.LagTime = time.Duration(ets-cts) * time.Millisecond
			}
		}
	}
	return err
}

// fetchTimestamps reads the timestamp of the record at (or, when that offset
// was compacted or deleted away, the first record after) each wanted offset.
func (c *Collector) fetchTimestamps(ctx context.Context, want map[tsKey]struct{}) (map[tsKey]int64, error) {
	topicSet := make(map[string]struct{})
	for k := range want {
		topicSet[k.topic] = struct{}{}
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	md, err := c.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}

	// Rounds: a partition appears at most once per round. Round r of a
	// partition holds its r-th wanted offset in ascending order.
	type lookup struct {
		key    tsKey
		leader int32
		id     [16]byte
	}
	perPartition := make(map[topicPartition][]int64)
	for k := range want {
		tp := topicPartition{Topic: k.topic, Partition: k.partition}
		perPartition[tp] = append(perPartition[tp], k.offset)
	}
	var rounds [][]lookup
	var errs []error
	for tp, offsets := range perPartition {
		td, ok := md.Topics[tp.Topic]
		if !ok || td.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tp.Topic, errOr(td.Err, kerr.UnknownTopicOrPartition)))
			continue
		}
		pd, ok := td.Partitions[tp.Partition]
		if !ok || pd.Err != nil || pd.Leader < 0 {
			errs = append(errs, fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, errOr(pd.Err, kerr.LeaderNotAvailable)))
			continue
		}
		sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
		for r, o := range offsets {
			for len(rounds) <= r {
				rounds = append(rounds, nil)
			}
			rounds[r] = append(rounds[r], lookup{tsKey{tp.Topic, tp.Partition, o}, pd.Leader, td.ID})
		}
	}

	found := make(map[tsKey]int64, len(want))
	var mu sync.Mutex
	var retry []lookup
	for _, round := range rounds {
		byBroker := make(map[int32][]lookup)
		for _, l := range round {
			byBroker[l.leader] = append(byBroker[l.leader], l)
		}
		var wg sync.WaitGroup
		for broker, ls := range byBroker {
			wg.Add(1)
			go func() {
				defer wg.Done()
				keys := make([]tsKey, len(ls))
				ids := make([][16]byte, len(ls))
				for i, l := range ls {
					keys[i], ids[i] = l.key, l.id
				}
				got, err := c.fetchFrom(ctx, broker, keys, ids, c.opts.partitionMaxBytes)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				for _, l := range ls {
					if ts, ok := got[l.key]; ok {
						found[l.key] = ts
					} else {
						retry = append(retry, l)
					}
				}
			}()
		}
		wg.Wait()
	}
	// A partition whose first batch did not fit in its share of a batched
	// request (or that the request's total size left out) is fetched alone,
	// where a broker returns at least one whole batch.
	for _, l := range retry {
		got, err := c.fetchFrom(ctx, l.leader, []tsKey{l.key}, [][16]byte{l.id}, c.opts.fetchMaxBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ts, ok := got[l.key]; ok {
			found[l.key] = ts
		}
	}
	return found, errors.Join(errs...)
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// fetchFrom sends one Fetch to broker for keys and returns the timestamp of
// the first record at or after each key's offset that the response held.
func (c *Collector) fetchFrom(ctx context.Context, broker int32, keys []tsKey, ids [][16]byte, partitionMaxBytes int32) (map[tsKey]int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = c.opts.fetchMaxBytes
	req.IsolationLevel = 0
	req.SessionID = 0
	req.SessionEpoch = -1
	byTopic := make(map[string]int)
	for i, k := range keys {
		ti, ok := byTopic[k.topic]
		if !ok {
			ti = len(req.Topics)
			byTopic[k.topic] = ti
			t := kmsg.NewFetchRequestTopic()
			t.Topic = k.topic
			t.TopicID = ids[i]
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = k.partition
		p.FetchOffset = k.offset
		p.PartitionMaxBytes = partitionMaxBytes
		p.CurrentLeaderEpoch = -1
		p.LogStartOffset = -1
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, p)
	}
	// Topics are answered by name before Fetch v13 and by ID from v13.
	nameByID := make(map[[16]byte]string, len(req.Topics))
	for i := range req.Topics {
		nameByID[req.Topics[i].TopicID] = req.Topics[i].Topic
	}
	offsetOf := make(map[topicPartition]int64, len(keys))
	for _, k := range keys {
		offsetOf[topicPartition{Topic: k.topic, Partition: k.partition}] = k.offset
	}

	rctx, cancel := context.WithTimeout(ctx, c.opts.requestTimeout)
	defer cancel()
	resp, err := req.RequestWith(rctx, c.cl.Broker(int(broker)))
	if err != nil {
		return nil, fmt.Errorf("fetch from broker %d: %w", broker, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch from broker %d: %w", broker, err)
	}
	got := make(map[tsKey]int64, len(keys))
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		topic := rt.Topic
		if topic == "" {
			topic = nameByID[rt.TopicID]
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			off, ok := offsetOf[topicPartition{Topic: topic, Partition: rp.Partition}]
			if !ok || rp.ErrorCode != 0 {
				continue
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				KeepControlRecords: true,
				Offset:             off,
				Topic:              topic,
				Partition:          rp.Partition,
			}, rp, c.dec, nil)
			for _, r := range fp.Records {
				if r.Offset >= off {
					got[tsKey{topic, rp.Partition, off}] = r.Timestamp.UnixMilli()
					break
				}
			}
		}
	}
	return got, nil
}

type topicPartition struct {
	Topic     string
	Partition int32
}

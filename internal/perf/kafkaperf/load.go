package kafkaperf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
)

// LoadConfig configures a load run, the workload of a user sizing a
// cluster: Producers clients produce to Topics topics of Partitions
// partitions each at Throughput records/s in total for Duration, while
// Consumers clients in one consumer group read every record back.
type LoadConfig struct {
	ProduceConfig
	// Topics is how many topics to spread records over: Topic itself when
	// 1, else Topic-0 .. Topic-(Topics-1).
	Topics int
	// Consumers is the group's member count; 0 produces only.
	Consumers int
	// Group is the consumer group; empty means a fresh one per run
	// (sluice-perf-<time>), deleted at the end.
	Group string
	// Duration is how long to produce.
	Duration time.Duration
	// FetchMaxPartitionBytes is the most one fetch returns per partition;
	// 0 is the client default (1 MiB).
	FetchMaxPartitionBytes int32
	// IdleTimeout ends the wait for the last records when none arrives for
	// this long after producing finished; 0 means 10s.
	IdleTimeout time.Duration
}

// maxLoadTopics bounds --topics: every topic is created up front.
const maxLoadTopics = 100_000

// Validate checks c and fills in defaults; Load calls it too.
func (c *LoadConfig) Validate() error {
	if c.Duration <= 0 {
		return fmt.Errorf("duration must be positive, got %v", c.Duration)
	}
	if c.NumRecords <= 0 {
		c.NumRecords = math.MaxInt64 // bounded by the duration
	}
	if err := c.ProduceConfig.Validate(); err != nil {
		return err
	}
	if c.Topics <= 0 {
		c.Topics = 1
	}
	if c.Topics > maxLoadTopics {
		return fmt.Errorf("topics must be at most %d, got %d", maxLoadTopics, c.Topics)
	}
	if c.Consumers < 0 {
		return fmt.Errorf("consumers must not be negative, got %d", c.Consumers)
	}
	if c.Consumers > 0 && c.RecordSize < perf.SendTimeBytes {
		return fmt.Errorf("consumers measure end-to-end latency from a send time in the first %d bytes of each record: "+
			"give --record-size %d or more (or --consumers 0)", perf.SendTimeBytes, perf.SendTimeBytes)
	}
	if c.FetchMaxPartitionBytes < 0 {
		return fmt.Errorf("fetch max partition bytes must not be negative, got %d", c.FetchMaxPartitionBytes)
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Second
	}
	return nil
}

// topicNames returns the topics of the run.
func (c *LoadConfig) topicNames() []string {
	if c.Topics <= 1 {
		return []string{c.Topic}
	}
	out := make([]string, c.Topics)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", c.Topic, i)
	}
	return out
}

func (c *LoadConfig) echo(group string, partitions int) map[string]any {
	m := c.ProduceConfig.echo()
	delete(m, "num_records")
	m["topics"] = c.Topics
	m["consumers"] = c.Consumers
	m["group"] = group
	m["duration_s"] = c.Duration.Seconds()
	m["total_partitions"] = partitions
	rate := "unlimited"
	if c.Throughput > 0 {
		rate = fmt.Sprintf("%.0f records/s (%.2f MiB/s)", c.Throughput, c.Throughput*float64(c.RecordSize)/(1<<20))
	}
	topics := fmt.Sprintf("topic %s", c.Topic)
	if c.Topics > 1 {
		topics = fmt.Sprintf("%d topics %s-0..%d", c.Topics, c.Topic, c.Topics-1)
	}
	desc := fmt.Sprintf("%d producer(s), %d consumer(s)", c.Producers, c.Consumers)
	if c.Consumers > 0 {
		desc += " in group " + group
	}
	m["description"] = fmt.Sprintf("%s; %s, %d partitions in all, replication factor %d; %d B records, acks=%s, compression %s, rate %s, for %v",
		desc, topics, partitions, c.ReplicationFactor, c.RecordSize, c.Acks, c.Compression, rate, c.Duration)
	return m
}

// Load runs the load workload (see LoadConfig) and reports both sides:
// produce throughput and send-to-acknowledgement latency, and consume
// throughput and end-to-end latency. Consumers join their group before the
// first record is sent and start at the records of this run; a run whose
// consumers do not get every acknowledged record sets FirstError.
func Load(ctx context.Context, cfg LoadConfig) (*perf.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	topics := cfg.topicNames()
	counts, err := ensureTopics(ctx, &cfg.Common, topics, cfg.Partitions, cfg.ReplicationFactor)
	if err != nil {
		return nil, err
	}
	var partitions int
	for _, n := range counts {
		partitions += int(n)
	}
	payload, err := perf.NewPayload(cfg.Payload, cfg.RecordSize, 1)
	if err != nil {
		return nil, err
	}
	group := cfg.Group
	if group == "" && cfg.Consumers > 0 {
		group = fmt.Sprintf("sluice-perf-%d", time.Now().UnixNano())
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	prodMeter, consMeter := new(perf.Meter), new(perf.Meter)
	// Records sent before this instant are not this run's: a named group
	// may resume at older records, which are skipped.
	startNano := time.Now().UnixNano()
	var cons *loadConsumers
	if cfg.Consumers > 0 {
		cons, err = startConsumers(runCtx, &cfg, group, topics, partitions, startNano, consMeter)
		if err != nil {
			return nil, err
		}
		defer cons.close(ctx, cfg.Group == "")
	}

	prodRecs := make([]*perf.Recorder, cfg.Producers)
	for i := range prodRecs {
		prodRecs[i] = prodMeter.NewRecorder()
	}
	tracks := []perf.Track{cfg.track("produce", "latency", prodMeter)}
	if cons != nil {
		tracks = append(tracks, cfg.track("consume", "e2e", consMeter))
	}
	progress := perf.StartTracks(cfg.Progress, cfg.ProgressInterval, tracks)
	var prodFail perf.FirstError
	start := time.Now()
	runProducersTo(runCtx, &cfg.ProduceConfig, topics, start.Add(cfg.Duration), payload, cons != nil,
		start, prodRecs, prodMeter, &prodFail)
	prodElapsed := time.Since(start)

	var idleErr error
	if cons != nil {
		idleErr = cons.drain(runCtx, prodMeter.Records(), cfg.IdleTimeout)
	}
	progress.Stop()

	prod := &perf.Side{
		Records: prodMeter.Records(),
		Bytes:   prodMeter.Bytes(),
		Errors:  prodMeter.Errors(),
		Latency: perf.LatencyOf(mergeHists(prodRecs)),
		Samples: progress.Samples(0),
	}
	prod.SetElapsed(prodElapsed)
	res := &perf.Result{
		Mode:    "load",
		System:  "kafka",
		Records: prod.Records,
		Bytes:   prod.Bytes,
		Errors:  prod.Errors,
		Latency: prod.Latency,
		Produce: prod,
		Config:  cfg.echo(group, partitions),
	}
	res.SetElapsed(prodElapsed)
	if err := prodFail.Get(); err != nil {
		res.FirstError = "producing: " + err.Error()
	}
	if cons != nil {
		side := cons.side(start)
		side.Samples = progress.Samples(1)
		res.Consume = side
		if res.FirstError == "" && side.Records < prod.Records {
			cause := idleErr
			if cause == nil {
				cause = context.Cause(runCtx)
			}
			res.FirstError = fmt.Sprintf("consumers received %d of %d acknowledged records: %v", side.Records, prod.Records, cause)
			if err := cons.fail.Get(); err != nil {
				res.FirstError += " (first fetch error: " + err.Error() + ")"
			}
		}
	}
	return res, ctx.Err()
}

// loadConsumers is the consumer group of a load run: its clients, the
// goroutines polling them, and what they measured.
type loadConsumers struct {
	clients   []*kgo.Client
	recs      []*perf.Recorder
	meter     *perf.Meter
	brokers   []string
	group     string
	startNano int64
	seen      atomic.Int64 // this run's records received
	target    atomic.Int64 // records to receive; known once producing is done
	lastRecv  atomic.Int64 // Unix nanoseconds of the latest receipt
	skipped   atomic.Int64 // records of earlier runs
	fail      perf.FirstError
	wg        sync.WaitGroup
	done      context.CancelCauseFunc
}

// startConsumers starts cfg.Consumers group members on topics and returns
// once the group has assigned all partitions of the run to them (every
// member that can get one has one).
func startConsumers(ctx context.Context, cfg *LoadConfig, group string, topics []string, partitions int,
	startNano int64, meter *perf.Meter) (*loadConsumers, error) {
	lc := &loadConsumers{meter: meter, brokers: cfg.Brokers, group: group, startNano: startNano}
	lc.target.Store(math.MaxInt64)
	assigned := make([]atomic.Int64, cfg.Consumers)
	count := func(m map[string][]int32) int64 {
		var n int64
		for _, ps := range m {
			n += int64(len(ps))
		}
		return n
	}
	pollCtx, stopPolling := context.WithCancelCause(ctx)
	lc.done = stopPolling
	for i := range cfg.Consumers {
		opts := []kgo.Opt{
			kgo.SeedBrokers(cfg.Brokers...),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topics...),
			// A new group starts at the first record sent at or after
			// the run's start: nothing older, nothing of this run missed.
			kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(startNano / 1e6)),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				assigned[i].Add(count(m))
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				assigned[i].Add(-count(m))
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				assigned[i].Add(-count(m))
			}),
		}
		if cfg.FetchMaxPartitionBytes > 0 {
			opts = append(opts, kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			lc.close(ctx, false)
			return nil, fmt.Errorf("creating consumer: %w", err)
		}
		lc.clients = append(lc.clients, cl)
		lc.recs = append(lc.recs, meter.NewRecorder())
	}
	for i, cl := range lc.clients {
		lc.wg.Add(1)
		go lc.poll(pollCtx, cl, lc.recs[i])
	}

	// Wait for the group to settle: every partition assigned, and as many
	// members holding some as there can be.
	want := int64(partitions)
	wantMembers := min(cfg.Consumers, partitions)
	deadline := time.Now().Add(cfg.SetupTimeout)
	for {
		var total int64
		members := 0
		for i := range assigned {
			if n := assigned[i].Load(); n > 0 {
				total += n
				members++
			}
		}
		if total == want && members == wantMembers {
			return lc, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			lc.close(ctx, false)
			return nil, fmt.Errorf("consumer group %q: %d of %d partitions assigned to %d of %d members within %v",
				group, total, want, members, wantMembers, cfg.SetupTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poll is one member's loop: it records the end-to-end latency of every
// record of this run until ctx is done.
func (lc *loadConsumers) poll(ctx context.Context, cl *kgo.Client, rec *perf.Recorder) {
	defer lc.wg.Done()
	defer rec.Flush()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		// Every record of one poll arrived together: one clock read.
		now := time.Now()
		nowNano := now.UnixNano()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				lc.fail.Set(fmt.Errorf("fetching %s/%d: %w", t, p, err))
			}
		})
		var n, old int64
		fetches.EachRecord(func(r *kgo.Record) {
			sent, ok := perf.SendTime(r.Value)
			if !ok || sent < lc.startNano {
				old++
				return
			}
			rec.Record(len(r.Key)+len(r.Value), time.Duration(nowNano-sent), now)
			n++
		})
		if old > 0 {
			lc.skipped.Add(old)
		}
		if n == 0 {
			continue
		}
		rec.Flush()
		lc.lastRecv.Store(nowNano)
		if lc.seen.Add(n) >= lc.target.Load() {
			lc.done(nil)
		}
	}
}

// drain tells the consumers how many records to expect and waits until
// they have them all, went idle for idle, or ctx ended. It returns the
// idle error when that is why it stopped.
func (lc *loadConsumers) drain(ctx context.Context, target int64, idle time.Duration) error {
	lc.target.Store(target)
	// The pollers compare after every poll; they may have seen everything
	// before the target was known and be parked in a fetch.
	if lc.seen.Load() >= target {
		lc.done(nil)
	}
	idleCtx, idleCancel := context.WithCancelCause(ctx)
	defer idleCancel(nil)
	stopIdle := func(err error) {
		idleCancel(err)
		lc.done(err)
	}
	waitIdle := watchIdle(idleCtx, stopIdle, lc.meter, idle, nil)
	lc.wg.Wait() // the pollers return once lc.done or ctx ends
	idleCancel(nil)
	return waitIdle()
}

// side summarises what the consumers received since start, when the
// producers started.
func (lc *loadConsumers) side(start time.Time) *perf.Side {
	s := &perf.Side{Records: lc.meter.Records(), Bytes: lc.meter.Bytes(), Latency: perf.LatencyOf(mergeHists(lc.recs))}
	if last := lc.lastRecv.Load(); last > start.UnixNano() {
		s.SetElapsed(time.Duration(last - start.UnixNano()))
	}
	return s
}

// close stops the pollers, leaves the group and, with deleteGroup, deletes
// the run's group (its committed offsets are of no use to anyone).
func (lc *loadConsumers) close(ctx context.Context, deleteGroup bool) {
	lc.done(context.Canceled)
	lc.wg.Wait()
	for _, cl := range lc.clients {
		cl.Close()
	}
	if !deleteGroup || len(lc.clients) == 0 {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteGroup(dctx, lc.group)
}

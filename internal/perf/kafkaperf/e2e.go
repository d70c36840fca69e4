package kafkaperf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
)

// EndToEnd produces cfg.NumRecords records at cfg.Throughput records per
// second while a consumer in the same process reads them back, and reports
// the latency from each record's send (a wall-clock time stamped in the
// first eight bytes of its value) to its receipt, as well as the producer's
// send-to-acknowledgement latency. The consumer starts at the partitions'
// current end offsets, so a topic that already holds data works too.
func EndToEnd(ctx context.Context, cfg E2EConfig) (*perf.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RecordSize < perf.SendTimeBytes {
		return nil, fmt.Errorf("end-to-end records need at least %d bytes to carry their send time, got %d",
			perf.SendTimeBytes, cfg.RecordSize)
	}
	if cfg.Throughput <= 0 {
		return nil, errors.New("end-to-end latency is measured at a fixed rate: give a positive throughput")
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if _, err := ensureTopic(ctx, &cfg.Common, cfg.Partitions, cfg.ReplicationFactor); err != nil {
		return nil, err
	}
	ends, err := endOffsets(ctx, &cfg.Common)
	if err != nil {
		return nil, err
	}
	assign := make(map[int32]kgo.Offset, len(ends))
	for p, o := range ends {
		assign[p] = kgo.NewOffset().At(o)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: assign}))
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	defer consumer.Close()
	// Connect before the clock starts, so the first records do not carry
	// the connection set-up in their latency.
	pingCtx, pingCancel := context.WithTimeout(ctx, cfg.SetupTimeout)
	err = consumer.Ping(pingCtx)
	pingCancel()
	if err != nil {
		return nil, fmt.Errorf("reaching brokers: %w", err)
	}
	payload, err := perf.NewPayload(cfg.Payload, cfg.RecordSize, 1)
	if err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	consMeter, prodMeter := new(perf.Meter), new(perf.Meter)
	consRec := consMeter.NewRecorder()
	prodRecs := make([]*perf.Recorder, cfg.Producers)
	for i := range prodRecs {
		prodRecs[i] = prodMeter.NewRecorder()
	}
	var (
		target    atomic.Int64 // records the consumer must see; known once producing is done
		lastRecv  atomic.Int64 // nanoseconds after start of the latest receipt
		fetchFail perf.FirstError
		prodFail  perf.FirstError
		consDone  sync.WaitGroup
	)
	target.Store(math.MaxInt64)
	start := time.Now()

	consDone.Add(1)
	go func() {
		defer consDone.Done()
		defer consRec.Flush()
		var seen int64
		for runCtx.Err() == nil {
			fetches := consumer.PollFetches(runCtx)
			// Every record of one poll arrived together: one clock read.
			now := time.Now()
			nowNano := now.UnixNano()
			fetches.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
					fetchFail.Set(fmt.Errorf("fetching %s/%d: %w", t, p, err))
				}
			})
			got := false
			fetches.EachRecord(func(r *kgo.Record) {
				sent, ok := perf.SendTime(r.Value)
				if !ok {
					return
				}
				consRec.Record(len(r.Key)+len(r.Value), time.Duration(nowNano-sent), now)
				seen++
				got = true
			})
			if got {
				consRec.Flush()
				lastRecv.Store(int64(now.Sub(start)))
			}
			if seen >= target.Load() {
				cancel(nil)
			}
		}
	}()

	progress := cfg.progress("e2e", consMeter)
	runProducers(runCtx, &cfg.ProduceConfig, payload, true, start, prodRecs, prodMeter, &prodFail)
	target.Store(prodMeter.Records())
	// The consumer compares what it has seen with the target after every
	// poll; it may have seen everything before the target was known and be
	// parked in a fetch. Both sides publish before they read, so at least
	// one of the two checks sees the other's write.
	if consMeter.Records() >= target.Load() {
		cancel(nil)
	}
	waitIdle := watchIdle(runCtx, cancel, consMeter, cfg.IdleTimeout, nil)
	consDone.Wait() // returns once runCtx is done: all seen, idle, or cancelled
	idleErr := waitIdle()
	progress.Stop()

	res := &perf.Result{
		Mode:           "e2e",
		System:         "kafka",
		Records:        consMeter.Records(),
		Bytes:          consMeter.Bytes(),
		Errors:         prodMeter.Errors(),
		Latency:        perf.LatencyOf(consRec.Hist),
		ProduceLatency: perf.LatencyOf(mergeHists(prodRecs)),
		Samples:        progress.Samples(0),
		Config:         cfg.echo(),
	}
	res.SetElapsed(time.Duration(lastRecv.Load()))
	switch acked := prodMeter.Records(); {
	case prodFail.Get() != nil:
		res.FirstError = "producing: " + prodFail.Get().Error()
	case res.Records < acked:
		cause := idleErr
		if cause == nil {
			cause = context.Cause(runCtx)
		}
		res.FirstError = fmt.Sprintf("received %d of %d acknowledged records: %v", res.Records, acked, cause)
		if err := fetchFail.Get(); err != nil {
			res.FirstError += " (first fetch error: " + err.Error() + ")"
		}
	}
	return res, ctx.Err()
}

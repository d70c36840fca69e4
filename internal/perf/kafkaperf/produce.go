package kafkaperf

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
)

// Produce writes cfg.NumRecords records of cfg.RecordSize random bytes to
// the topic (creating it when missing) from cfg.Producers clients, and
// reports throughput and the send-to-acknowledgement latency of every
// record. Records that fail are counted in Result.Errors; the error
// returned is for a run that could not start or was cancelled.
func Produce(ctx context.Context, cfg ProduceConfig) (*perf.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := ensureTopic(ctx, &cfg.Common, cfg.Partitions, cfg.ReplicationFactor); err != nil {
		return nil, err
	}
	payload, err := perf.NewPayload(cfg.Payload, cfg.RecordSize, 1)
	if err != nil {
		return nil, err
	}
	meter := new(perf.Meter)
	recs := make([]*perf.Recorder, cfg.Producers)
	for i := range recs {
		recs[i] = meter.NewRecorder()
	}
	var fail perf.FirstError

	progress := cfg.progress("produce", meter)
	start := time.Now()
	runProducers(ctx, &cfg, payload, false, start, recs, meter, &fail)
	elapsed := time.Since(start)
	progress.Stop()

	res := &perf.Result{
		Mode:    "produce",
		System:  "kafka",
		Records: meter.Records(),
		Bytes:   meter.Bytes(),
		Errors:  meter.Errors(),
		Latency: perf.LatencyOf(mergeHists(recs)),
		Samples: progress.Samples(0),
		Config:  cfg.echo(),
	}
	res.SetElapsed(elapsed)
	if err := fail.Get(); err != nil {
		res.FirstError = err.Error()
	}
	return res, ctx.Err()
}

// runProducers splits cfg.NumRecords over cfg.Producers clients, each
// paced to its share of cfg.Throughput from start, and returns when every
// record has been acknowledged or has failed. With stamp, each record gets
// its own copy of the payload with the send time in its first bytes (for
// e2e); otherwise values alias the shared payload pool and nothing is
// copied.
func runProducers(ctx context.Context, cfg *ProduceConfig, payload *perf.Payload, stamp bool,
	start time.Time, recs []*perf.Recorder, meter *perf.Meter, fail *perf.FirstError) {
	runProducersTo(ctx, cfg, nil, time.Time{}, payload, stamp, start, recs, meter, fail)
}

// runProducersTo is runProducers writing record n to topics[n % len] (the
// default topic when topics is empty) and, when until is not zero, sending
// no record after until.
func runProducersTo(ctx context.Context, cfg *ProduceConfig, topics []string, until time.Time,
	payload *perf.Payload, stamp bool, start time.Time, recs []*perf.Recorder, meter *perf.Meter, fail *perf.FirstError) {
	var wg sync.WaitGroup
	per := cfg.NumRecords / int64(cfg.Producers)
	extra := cfg.NumRecords % int64(cfg.Producers)
	first := int64(0)
	for i := range cfg.Producers {
		n := per
		if int64(i) < extra {
			n++
		}
		wg.Add(1)
		go func(first, n int64, rec *perf.Recorder) {
			defer wg.Done()
			if err := produceN(ctx, cfg, topics, until, payload, stamp, start, first, n, rec, meter); err != nil {
				fail.Set(err)
			}
		}(first, n, recs[i])
		first += n
	}
	wg.Wait()
}

// produceN runs one producer client for records [first, first+n), or
// until until when that is not zero.
func produceN(ctx context.Context, cfg *ProduceConfig, topics []string, until time.Time, payload *perf.Payload,
	stamp bool, start time.Time, first, n int64, rec *perf.Recorder, meter *perf.Meter) error {
	cl, err := kgo.NewClient(cfg.producerOpts()...)
	if err != nil {
		return fmt.Errorf("creating producer: %w", err)
	}
	defer cl.Close()

	// Records are recycled once their promise has run (the client does not
	// touch a record after that), so a steady run allocates none of its
	// own per record. Stamped records own their value buffer.
	size := payload.Size()
	pool := sync.Pool{New: func() any {
		r := new(kgo.Record)
		if stamp {
			r.Value = make([]byte, 0, size)
		}
		return r
	}}
	var fail perf.FirstError
	promise := func(r *kgo.Record, err error) {
		now := time.Now()
		if err != nil {
			meter.AddError()
			fail.Set(err)
		} else {
			rec.Record(len(r.Key)+len(r.Value), now.Sub(r.Timestamp), now)
		}
		pool.Put(r)
	}

	// The pacer waits on sendCtx, which ends at until; records are
	// produced with ctx, so the ones already sent are not failed then.
	sendCtx := ctx
	if !until.IsZero() {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	pacer := perf.NewPacer(cfg.Throughput/float64(cfg.Producers), start)
	for i := range n {
		if err := pacer.Wait(sendCtx, i); err != nil {
			break
		}
		r := pool.Get().(*kgo.Record)
		v := payload.At(first + i)
		if stamp {
			buf := append(r.Value[:0], v...)
			*r = kgo.Record{Value: buf}
		} else {
			*r = kgo.Record{Value: v}
		}
		if len(topics) > 0 {
			r.Topic = topics[(first+i)%int64(len(topics))]
		}
		r.Timestamp = time.Now()
		if !until.IsZero() && !r.Timestamp.Before(until) {
			pool.Put(r)
			break
		}
		if stamp && len(r.Value) >= perf.SendTimeBytes {
			perf.PutSendTime(r.Value, r.Timestamp.UnixNano())
		}
		cl.Produce(ctx, r, promise)
	}
	flushErr := cl.Flush(ctx)
	rec.Flush()
	if err := fail.Get(); err != nil {
		return err
	}
	if flushErr != nil {
		return fmt.Errorf("flushing producer: %w", flushErr)
	}
	return nil
}

func mergeHists(recs []*perf.Recorder) *perf.Histogram {
	h := perf.NewHistogram()
	for _, r := range recs {
		h.Merge(r.Hist)
	}
	return h
}

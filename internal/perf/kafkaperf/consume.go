package kafkaperf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
)

// Consume reads cfg.NumRecords records from the start of the topic as fast
// as the brokers serve them and reports the throughput. Without a group,
// the topic's partitions are dealt round-robin to cfg.Consumers clients
// (at most one client per partition). A run that ends before NumRecords
// (idle timeout, cancellation) reports what it read and sets FirstError.
func Consume(ctx context.Context, cfg ConsumeConfig) (*perf.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	parts, err := topicPartitions(ctx, &cfg.Common)
	if err != nil {
		return nil, err
	}
	consumers := cfg.Consumers
	if cfg.Group == "" && int32(consumers) > parts {
		cfg.note("%d consumers asked for a topic of %d partitions: using %d", consumers, parts, parts)
		consumers = int(parts)
	}

	clients := make([]*kgo.Client, consumers)
	for i := range clients {
		opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}
		if cfg.FetchMaxPartitionBytes > 0 {
			opts = append(opts, kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes))
		}
		if cfg.Group != "" {
			opts = append(opts, kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		} else {
			assign := make(map[int32]kgo.Offset)
			for p := int32(i); p < parts; p += int32(consumers) {
				assign[p] = kgo.NewOffset().AtStart()
			}
			opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: assign}))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("creating consumer: %w", err)
		}
		clients[i] = cl
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	meter := new(perf.Meter)
	var (
		total  atomic.Int64
		doneAt atomic.Int64 // nanoseconds after start when NumRecords was reached
		fail   perf.FirstError
		wg     sync.WaitGroup
	)
	progress := cfg.progress("consume", meter)
	start := time.Now()
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				fetches := cl.PollFetches(runCtx)
				fetches.EachError(func(t string, p int32, err error) {
					if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
						fail.Set(fmt.Errorf("fetching %s/%d: %w", t, p, err))
					}
				})
				var n, b int64
				fetches.EachRecord(func(r *kgo.Record) {
					n++
					b += int64(len(r.Key) + len(r.Value))
				})
				if n == 0 {
					continue
				}
				meter.Add(n, b)
				if total.Add(n) >= cfg.NumRecords {
					doneAt.CompareAndSwap(0, int64(time.Since(start)))
					cancel(nil)
				}
			}
		}()
	}
	waitIdle := watchIdle(runCtx, cancel, meter, cfg.IdleTimeout, nil)
	wg.Wait() // the consumers return only once runCtx is done
	idleErr := waitIdle()
	progress.Stop()

	elapsed := time.Duration(doneAt.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	res := &perf.Result{
		Mode:    "consume",
		System:  "kafka",
		Records: meter.Records(),
		Bytes:   meter.Bytes(),
		Samples: progress.Samples(0),
		Config: map[string]any{
			"brokers":     fmt.Sprint(cfg.Brokers),
			"topic":       cfg.Topic,
			"num_records": cfg.NumRecords,
			"consumers":   consumers,
			"group":       cfg.Group,
			"partitions":  parts,
		},
	}
	res.SetElapsed(elapsed)
	if res.Records < cfg.NumRecords {
		cause := context.Cause(runCtx)
		if idleErr != nil {
			cause = idleErr
		}
		if err := fail.Get(); err != nil {
			cause = fmt.Errorf("%w (first fetch error: %v)", cause, err)
		}
		res.FirstError = fmt.Sprintf("read %d of %d records: %v", res.Records, cfg.NumRecords, cause)
	} else if err := fail.Get(); err != nil {
		res.FirstError = err.Error()
	}
	return res, ctx.Err()
}

// errIdle ends a consume that stopped receiving records.
var errIdle = errors.New("no records arrived within the idle timeout")

// watchIdle cancels ctx with errIdle when meter counts no new record for
// idle, starting the clock only once armed() is true (nil: at once). The
// returned wait blocks until the watcher has stopped, which it does once
// ctx is done, and reports errIdle's cause when the watcher fired.
func watchIdle(ctx context.Context, cancel context.CancelCauseFunc, meter *perf.Meter,
	idle time.Duration, armed func() bool) (wait func() error) {
	var fired atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		last := meter.Records()
		lastChange := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if cur := meter.Records(); cur != last || (armed != nil && !armed()) {
					last, lastChange = cur, now
					continue
				}
				if now.Sub(lastChange) >= idle {
					fired.Store(true)
					cancel(fmt.Errorf("%w (%v)", errIdle, idle))
					return
				}
			}
		}
	}()
	return func() error {
		<-done
		if fired.Load() {
			return context.Cause(ctx)
		}
		return nil
	}
}

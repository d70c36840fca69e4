// Command rabbitperf is the RabbitMQ counterpart of `sluice perf`: the same
// workloads (produce, consume, e2e), the same payloads, the same histogram
// and the same JSON result, so the benchmark harness can put a RabbitMQ
// figure next to a Kafka-protocol one.
//
// How Kafka's knobs map onto RabbitMQ:
//
//   - a partition is a queue of its own (<queue>_0 .. <queue>_N-1), of
//     --queue-type stream (an append-only log, read without removing) or
//     quorum (a replicated FIFO queue, Raft-backed, read destructively);
//     records go round-robin over them.
//
//   - messages are published over AMQP 0-9-1 (github.com/rabbitmq/amqp091-go)
//     to the default exchange, persistent, with publisher confirms, at most
//     --max-pending unconfirmed per publisher. A confirm comes once the
//     message is stored: for a quorum queue once the Raft log has fsynced
//     it, for a stream once written to its segment file (not fsynced). On
//     one node acks=1 and acks=all are the same, so --acks is accepted and
//     echoed but changes nothing.
//
//   - consume reads every queue from its start with manual acknowledgement
//     (acknowledging --prefetch/4 at a time) and a --prefetch window, which
//     a stream queue needs; a stream consumer starts at offset "first" (e2e:
//     "next"), a quorum queue is drained.
//
//   - AMQP 0-9-1 has no compression: --compression must be none.
//
// RabbitMQ's stream protocol (rabbitmq-stream-go-client) is not used: with
// Debian's RabbitMQ 3.10 its v1.8 client read a stream at ~600 messages/s
// (AMQP 0-9-1 reads the same stream at ~38,000/s) and stalled ~430 ms on
// some publishes, so its figures would measure the mismatch.
//
//	rabbitperf produce --url amqp://guest:guest@127.0.0.1:5672/ --queue-type quorum --queue bench --num-records 100000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sluice-io/sluice/internal/perf"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type config struct {
	perf.Load
	url, queue, queueType string
	prefetch              int
	confirmTimeout        time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	return perf.Tool{
		Name: "rabbitperf", System: "rabbitmq", Version: clientVersions,
		NoCompression: "AMQP 0-9-1 sends message bodies as they are",
		Flags: func(fs *flag.FlagSet, mode string) *perf.Load {
			fs.StringVar(&c.url, "url", "amqp://guest:guest@127.0.0.1:5672/", "AMQP 0-9-1 URL")
			fs.StringVar(&c.queue, "queue", "bench", "queue name prefix (queues <queue>_0..N-1)")
			fs.StringVar(&c.queueType, "queue-type", "stream", "stream or quorum")
			fs.IntVar(&c.prefetch, "prefetch", 2000, "AMQP consumer prefetch (unacknowledged deliveries per queue)")
			fs.DurationVar(&c.confirmTimeout, "confirm-timeout", 60*time.Second, "after publishing, give up on confirms outstanding this long")
			c.Load.Flags(fs, mode, perf.LoadNames{Partition: "queues", Body: "message body",
				Acks:    "1 and all are the same (a confirm means stored)",
				Pending: "unconfirmed messages", NoCompression: "AMQP 0-9-1 sends message bodies as they are"})
			return &c.Load
		},
		Validate: c.validate,
		Produce:  func(ctx context.Context, progress io.Writer) (*perf.Result, error) { return produce(ctx, &c, progress) },
		Consume:  func(ctx context.Context, progress io.Writer) (*perf.Result, error) { return consume(ctx, &c, progress) },
		EndToEnd: func(ctx context.Context, progress io.Writer) (*perf.Result, error) {
			return endToEnd(ctx, &c, progress)
		},
	}.Main(ctx, args, stdout, stderr)
}

// validate checks the flags of RabbitMQ's own, after the shared ones.
func (c *config) validate(string) error {
	if c.queueType != "stream" && c.queueType != "quorum" {
		return fmt.Errorf("--queue-type must be stream or quorum, got %q", c.queueType)
	}
	if c.prefetch < 1 || c.prefetch > 65535 {
		return errors.New("--prefetch must be 1 to 65535")
	}
	if c.confirmTimeout <= 0 {
		return errors.New("--confirm-timeout must be positive")
	}
	return nil
}

func (c *config) queueName(i int) string { return fmt.Sprintf("%s_%d", c.queue, i) }

func (c *config) echo() map[string]any {
	m := map[string]any{
		"url": redact(c.url), "queue": c.queue, "queue_type": c.queueType, "protocol": "amqp 0-9-1",
		"num_records": c.NumRecords, "record_size": c.RecordSize, "throughput": c.Throughput, "acks": c.Acks,
		"compression": c.Compression, "partitions": c.Partitions, "producers": c.Producers,
		"consumers": c.Consumers, "max_pending": c.MaxPending, "prefetch": c.prefetch, "payload": c.Payload,
	}
	return m
}

// dial opens an AMQP 0-9-1 connection.
func dial(c *config) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(c.url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second), Properties: amqp.Table{"connection_name": "rabbitperf"}})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", redact(c.url), err)
	}
	return conn, nil
}

// redact drops the password from a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}

// ensureQueues declares the durable queues of the run (AMQP 0-9-1; a
// queue that exists with the same type is left as it is).
func ensureQueues(c *config) error {
	conn, err := dial(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	for i := range c.Partitions {
		if _, err := ch.QueueDeclare(c.queueName(i), true, false, false, false,
			amqp.Table{"x-queue-type": c.queueType}); err != nil {
			return fmt.Errorf("declaring %s queue %s: %w", c.queueType, c.queueName(i), err)
		}
	}
	return nil
}

// window bounds the unconfirmed messages of a publisher.
type window struct {
	slots chan struct{}
}

func newWindow(n int) *window { return &window{slots: make(chan struct{}, n)} }

func (w *window) acquire(ctx context.Context) error {
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *window) release() { <-w.slots }

// wait blocks until every slot is free, ctx ends or timeout passes.
func (w *window) wait(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	for range cap(w.slots) {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("confirms still outstanding after %v", timeout)
		}
	}
	for range cap(w.slots) {
		<-w.slots
	}
	return nil
}

// amqpSender is one publisher connection: send blocks while --max-pending
// messages are unconfirmed, and confirms record their send-to-confirm
// latency in rec. Confirms
// arrive in delivery-tag order; the send time of tag t is in
// sent[(t-1) % maxPending], free again once t is confirmed.
type amqpSender struct {
	c      *config
	conn   *amqp.Connection
	ch     *amqp.Channel
	win    *window
	sent   []atomic.Int64
	size   int
	next   uint64
	rec    *perf.Recorder
	meter  *perf.Meter
	fail   *perf.FirstError
	done   chan struct{}
	closed atomic.Bool
}

func newAMQPSender(c *config, rec *perf.Recorder, meter *perf.Meter, fail *perf.FirstError) (*amqpSender, error) {
	conn, err := dial(c)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("opening a channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	s := &amqpSender{c: c, conn: conn, ch: ch, win: newWindow(c.MaxPending), sent: make([]atomic.Int64, c.MaxPending),
		size: c.RecordSize, rec: rec, meter: meter, fail: fail, done: make(chan struct{})}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, c.MaxPending+1))
	go s.confirmed(confirms)
	return s, nil
}

func (s *amqpSender) confirmed(confirms <-chan amqp.Confirmation) {
	defer close(s.done)
	n := uint64(len(s.sent))
	for cf := range confirms {
		now := time.Now()
		sent := s.sent[(cf.DeliveryTag-1)%n].Load()
		if cf.Ack {
			s.rec.Record(s.size, now.Sub(time.Unix(0, sent)), now)
		} else {
			s.meter.AddError()
			s.fail.Set(fmt.Errorf("message %d nacked by the broker", cf.DeliveryTag))
		}
		s.win.release()
	}
	s.rec.Flush()
}

func (s *amqpSender) send(ctx context.Context, queue int, body []byte, sent time.Time) error {
	if err := s.win.acquire(ctx); err != nil {
		return err
	}
	s.next++
	s.sent[(s.next-1)%uint64(len(s.sent))].Store(sent.UnixNano())
	// The body is written to the connection before Publish returns, so
	// the caller may reuse it.
	err := s.ch.Publish("", s.c.queueName(queue), false, false,
		amqp.Publishing{Body: body, DeliveryMode: amqp.Persistent})
	if err != nil {
		s.win.release()
		return fmt.Errorf("publishing to %s: %w", s.c.queueName(queue), err)
	}
	return nil
}

func (s *amqpSender) drain(ctx context.Context, timeout time.Duration) error {
	return s.win.wait(ctx, timeout)
}

func (s *amqpSender) close() {
	if s.closed.Swap(true) {
		return
	}
	s.ch.Close()
	s.conn.Close()
	<-s.done
}

// runPublishers splits c.NumRecords over c.Producers publishers, each
// paced to its share of the throughput, sending record n to queue n % N.
func runPublishers(ctx context.Context, c *config, payload *perf.Payload, stamp bool, start time.Time,
	meter *perf.Meter) (*perf.Histogram, error) {
	var wg sync.WaitGroup
	var fail perf.FirstError
	recs := make([]*perf.Recorder, c.Producers)
	per, extra := c.NumRecords/int64(c.Producers), c.NumRecords%int64(c.Producers)
	first := int64(0)
	for i := range recs {
		n := per
		if int64(i) < extra {
			n++
		}
		recs[i] = meter.NewRecorder()
		wg.Add(1)
		go func(first, n int64, rec *perf.Recorder) {
			defer wg.Done()
			if err := publish(ctx, c, payload, stamp, start, first, n, rec, meter, &fail); err != nil {
				fail.Set(err)
			}
		}(first, n, recs[i])
		first += n
	}
	wg.Wait()
	h := perf.NewHistogram()
	for _, r := range recs {
		h.Merge(r.Hist)
	}
	return h, fail.Get()
}

// publish is one publisher: records [first, first+n).
func publish(ctx context.Context, c *config, payload *perf.Payload, stamp bool, start time.Time,
	first, n int64, rec *perf.Recorder, meter *perf.Meter, fail *perf.FirstError) error {
	s, err := newAMQPSender(c, rec, meter, fail)
	if err != nil {
		return err
	}
	defer s.close()
	scratch := make([]byte, payload.Size())
	pacer := perf.NewPacer(c.Throughput/float64(c.Producers), start)
	for i := range n {
		if err := pacer.Wait(ctx, i); err != nil {
			break
		}
		idx := first + i
		body := payload.At(idx)
		now := time.Now()
		if stamp {
			copy(scratch, body)
			perf.PutSendTime(scratch, now.UnixNano())
			body = scratch
		}
		if err := s.send(ctx, int(idx%int64(c.Partitions)), body, now); err != nil {
			if ctx.Err() == nil {
				meter.AddError()
				fail.Set(err)
			}
			break
		}
	}
	return s.drain(ctx, c.confirmTimeout)
}

func produce(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	if err := ensureQueues(c); err != nil {
		return nil, err
	}
	payload, err := perf.NewPayload(c.Payload, c.RecordSize, 1)
	if err != nil {
		return nil, err
	}
	meter := new(perf.Meter)
	progress := perf.StartProgress(progressOut, meter, c.Progress, "produce")
	start := time.Now()
	hist, perr := runPublishers(ctx, c, payload, false, start, meter)
	elapsed := time.Since(start)
	progress.Stop()
	res := &perf.Result{Mode: "produce", Records: meter.Records(), Bytes: meter.Bytes(), Errors: meter.Errors(),
		Latency: perf.LatencyOf(hist), Samples: progress.Samples(0), Config: c.echo()}
	res.SetElapsed(elapsed)
	if perr != nil {
		res.FirstError = perr.Error()
	}
	return res, ctx.Err()
}

// subscription is the consumers of a run; stop closes them.
type subscription struct {
	stop func()
	fail perf.FirstError
}

// subscribe starts consumers over the queues, dealt among c.Consumers
// connections, calling onMsg (from several goroutines) for every message:
// from the start of each queue, or with fromNow only what is published
// from now on (a quorum queue holds nothing older in a fresh run).
func subscribe(ctx context.Context, c *config, fromNow bool, onMsg func(body []byte)) (*subscription, error) {
	n := min(c.Consumers, c.Partitions)
	sub := &subscription{}
	var conns []*amqp.Connection
	var wg sync.WaitGroup
	sub.stop = func() {
		for _, conn := range conns {
			conn.Close()
		}
		wg.Wait()
	}
	ackEvery := uint64(max(1, c.prefetch/4))
	for i := range n {
		conn, err := dial(c)
		if err != nil {
			sub.stop()
			return nil, err
		}
		conns = append(conns, conn)
		for q := i; q < c.Partitions; q += n {
			ch, err := conn.Channel()
			if err != nil {
				sub.stop()
				return nil, fmt.Errorf("opening a channel: %w", err)
			}
			if err := ch.Qos(c.prefetch, 0, false); err != nil {
				sub.stop()
				return nil, fmt.Errorf("setting prefetch: %w", err)
			}
			var args amqp.Table
			if c.queueType == "stream" {
				offset := "first"
				if fromNow {
					offset = "next"
				}
				args = amqp.Table{"x-stream-offset": offset}
			}
			deliveries, err := ch.ConsumeWithContext(ctx, c.queueName(q), "", false, false, false, false, args)
			if err != nil {
				sub.stop()
				return nil, fmt.Errorf("consuming %s: %w", c.queueName(q), err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var unacked uint64
				for d := range deliveries {
					onMsg(d.Body)
					if unacked++; unacked >= ackEvery {
						if err := d.Ack(true); err != nil {
							sub.fail.Set(fmt.Errorf("acknowledging on %s: %w", c.queueName(q), err))
						}
						unacked = 0
					}
				}
			}()
		}
	}
	return sub, nil
}

func consume(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	meter := new(perf.Meter)
	var total, doneAt atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	progress := perf.StartProgress(progressOut, meter, c.Progress, "consume")
	start := time.Now()
	sub, err := subscribe(ctx, c, false, func(body []byte) {
		meter.Add(1, int64(len(body)))
		if total.Add(1) >= c.NumRecords {
			doneAt.CompareAndSwap(0, int64(time.Since(start)))
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		progress.Stop()
		return nil, err
	}
	cause := perf.WaitIdle(ctx, done, meter, c.IdleTimeout)
	sub.stop()
	progress.Stop()
	elapsed := time.Duration(doneAt.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	res := &perf.Result{Mode: "consume", Records: meter.Records(), Bytes: meter.Bytes(),
		Samples: progress.Samples(0), Config: c.echo()}
	res.SetElapsed(elapsed)
	if res.Records < c.NumRecords {
		res.FirstError = fmt.Sprintf("read %d of %d records: %v", res.Records, c.NumRecords, cause)
	} else if err := sub.fail.Get(); err != nil {
		res.FirstError = err.Error()
	}
	return res, ctx.Err()
}

// waitDone waits for done, ctx, or idle without a new record; it returns
// why it stopped waiting when that was not done.
func endToEnd(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	if err := ensureQueues(c); err != nil {
		return nil, err
	}
	payload, err := perf.NewPayload(c.Payload, c.RecordSize, 1)
	if err != nil {
		return nil, err
	}
	consMeter, prodMeter := new(perf.Meter), new(perf.Meter)
	consRec := consMeter.NewRecorder()
	var (
		mu       sync.Mutex // consumers of several queues deliver at once
		seen     atomic.Int64
		target   atomic.Int64
		lastRecv atomic.Int64 // Unix nanoseconds of the latest receipt
		once     sync.Once
	)
	target.Store(1<<63 - 1)
	done := make(chan struct{})
	startNano := time.Now().UnixNano()
	sub, err := subscribe(ctx, c, true, func(body []byte) {
		now := time.Now()
		sent, ok := perf.SendTime(body)
		if !ok || sent < startNano {
			return // not this run's
		}
		mu.Lock()
		consRec.Record(len(body), time.Duration(now.UnixNano()-sent), now)
		mu.Unlock()
		lastRecv.Store(now.UnixNano())
		if seen.Add(1) >= target.Load() {
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		return nil, err
	}
	progress := perf.StartProgress(progressOut, consMeter, c.Progress, "e2e")
	start := time.Now()
	prodHist, perr := runPublishers(ctx, c, payload, true, start, prodMeter)
	target.Store(prodMeter.Records())
	if seen.Load() >= target.Load() {
		once.Do(func() { close(done) })
	}
	cause := perf.WaitIdle(ctx, done, consMeter, c.IdleTimeout)
	sub.stop()
	mu.Lock()
	consRec.Flush()
	mu.Unlock()
	progress.Stop()
	res := &perf.Result{Mode: "e2e", Records: seen.Load(), Bytes: consMeter.Bytes(), Errors: prodMeter.Errors(),
		Latency: perf.LatencyOf(consRec.Hist), ProduceLatency: perf.LatencyOf(prodHist), Samples: progress.Samples(0),
		Config: c.echo()}
	if last := lastRecv.Load(); last > start.UnixNano() {
		res.SetElapsed(time.Duration(last - start.UnixNano()))
	}
	switch {
	case perr != nil:
		res.FirstError = "publishing: " + perr.Error()
	case res.Records < prodMeter.Records():
		res.FirstError = fmt.Sprintf("received %d of %d confirmed messages: %v", res.Records, prodMeter.Records(), cause)
	}
	return res, ctx.Err()
}

// clientVersions names the client modules this binary was built with.
func clientVersions() string {
	v := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			v[m.Path] = m.Version
		}
	}
	get := func(p string) string {
		if s := v[p]; s != "" {
			return s
		}
		return "(unknown version)"
	}
	return "amqp091-go " + get("github.com/rabbitmq/amqp091-go")
}

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
	url, streamURL, queue, queueType, protocol      string
	acks, compression, payload, output              string
	numRecords                                      int64
	recordSize, partitions, producers, consumers    int
	maxPending, prefetch, subEntrySize              int
	throughput                                      float64
	progress, duration, idleTimeout, confirmTimeout time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: rabbitperf produce|consume|e2e|version [flags]")
		return 2
	}
	mode := args[0]
	if mode == "version" {
		fmt.Fprintln(stdout, clientVersions())
		return 0
	}
	var c config
	fs := flag.NewFlagSet("rabbitperf "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "amqp://guest:guest@127.0.0.1:5672/", "AMQP 0-9-1 URL")
	fs.StringVar(&c.queue, "queue", "bench", "queue name prefix (queues <queue>_0..N-1)")
	fs.StringVar(&c.queueType, "queue-type", "stream", "stream or quorum")
	fs.IntVar(&c.partitions, "partitions", 1, "queues to spread records over (the analogue of partitions)")
	defRecords := int64(1_000_000)
	if mode == "e2e" {
		defRecords = 0 // throughput x duration
	}
	fs.Int64Var(&c.numRecords, "num-records", defRecords, "records to produce or consume (e2e: throughput x duration unless given)")
	fs.IntVar(&c.recordSize, "record-size", 100, "bytes per message body")
	fs.StringVar(&c.output, "output", "text", "summary format: text or json")
	fs.DurationVar(&c.progress, "progress", time.Second, "progress line interval on stderr (0: none)")
	defThroughput, defDuration := -1.0, time.Duration(0)
	if mode == "e2e" {
		defThroughput, defDuration = 10_000, 10*time.Second
	}
	fs.Float64Var(&c.throughput, "throughput", defThroughput, "records/s cap across publishers (-1: none)")
	fs.DurationVar(&c.duration, "duration", defDuration, "e2e: how long to publish (num-records = throughput x duration)")
	fs.IntVar(&c.producers, "producers", 1, "publisher connections")
	fs.IntVar(&c.consumers, "consumers", 1, "consumer connections (queues are dealt among them)")
	fs.IntVar(&c.maxPending, "max-pending", 4000, "unconfirmed messages outstanding per publisher")
	fs.IntVar(&c.prefetch, "prefetch", 2000, "AMQP consumer prefetch (unacknowledged deliveries per queue)")
	fs.StringVar(&c.acks, "acks", "1", "accepted for symmetry with sluice perf: 1 and all are the same (a confirm means stored)")
	fs.StringVar(&c.compression, "compression", "none", "must be none: AMQP 0-9-1 sends message bodies as they are")
	fs.StringVar(&c.payload, "payload", perf.PayloadRandom, "payload bytes: random or text")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 10*time.Second, "give up after this long without a message")
	fs.DurationVar(&c.confirmTimeout, "confirm-timeout", 60*time.Second, "after publishing, give up on confirms outstanding this long")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rabbitperf %s: unexpected arguments %q\n", mode, fs.Args())
		return 2
	}
	if err := c.validate(mode); err != nil {
		fmt.Fprintf(stderr, "rabbitperf %s: %v\n", mode, err)
		return 2
	}
	var (
		res *perf.Result
		err error
	)
	switch mode {
	case "produce":
		res, err = produce(ctx, &c, stderr)
	case "consume":
		res, err = consume(ctx, &c, stderr)
	case "e2e":
		res, err = endToEnd(ctx, &c, stderr)
	}
	if res == nil {
		fmt.Fprintf(stderr, "rabbitperf %s: %v\n", mode, err)
		return 1
	}
	res.System = "rabbitmq"
	if c.output == "json" {
		_ = res.WriteJSON(stdout)
	} else {
		_ = res.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rabbitperf %s: %v\n", mode, err)
		return 1
	}
	if res.Errors > 0 || res.FirstError != "" {
		return 1
	}
	return 0
}

func (c *config) validate(mode string) error {
	switch mode {
	case "produce", "consume", "e2e":
	default:
		return fmt.Errorf("unknown mode %q (want produce, consume or e2e)", mode)
	}
	if c.queueType != "stream" && c.queueType != "quorum" {
		return fmt.Errorf("--queue-type must be stream or quorum, got %q", c.queueType)
	}
	if c.compression != "none" {
		return fmt.Errorf("--compression %q: AMQP 0-9-1 sends message bodies as they are", c.compression)
	}
	if c.acks != "1" && c.acks != "all" && c.acks != "-1" {
		return fmt.Errorf("--acks must be 1 or all, got %q", c.acks)
	}
	if c.payload != perf.PayloadRandom && c.payload != perf.PayloadText {
		return fmt.Errorf("--payload must be %s or %s, got %q", perf.PayloadRandom, perf.PayloadText, c.payload)
	}
	if c.partitions < 1 || c.partitions > 10_000 || c.producers < 1 || c.consumers < 1 {
		return errors.New("--partitions (up to 10000), --producers and --consumers must be at least 1")
	}
	if c.maxPending < 1 || c.maxPending > 1_000_000 || c.prefetch < 1 || c.prefetch > 65535 {
		return errors.New("--max-pending must be 1 to 1000000 and --prefetch 1 to 65535")
	}
	if c.recordSize < 0 || c.recordSize > 64<<20 {
		return fmt.Errorf("--record-size must be 0 to 64 MiB, got %d", c.recordSize)
	}
	if c.output != "text" && c.output != "json" {
		return fmt.Errorf("--output must be text or json, got %q", c.output)
	}
	if c.confirmTimeout <= 0 || c.idleTimeout <= 0 {
		return errors.New("--confirm-timeout and --idle-timeout must be positive")
	}
	if mode == "e2e" {
		if c.throughput <= 0 {
			return errors.New("e2e needs a positive --throughput")
		}
		if c.recordSize < perf.SendTimeBytes {
			return fmt.Errorf("e2e needs --record-size of at least %d", perf.SendTimeBytes)
		}
		if c.numRecords == 0 {
			c.numRecords = int64(c.throughput * c.duration.Seconds())
		}
	}
	if c.numRecords <= 0 {
		return fmt.Errorf("--num-records must be positive, got %d", c.numRecords)
	}
	if int64(c.producers) > c.numRecords {
		c.producers = int(c.numRecords)
	}
	return nil
}

func (c *config) queueName(i int) string { return fmt.Sprintf("%s_%d", c.queue, i) }

func (c *config) echo() map[string]any {
	m := map[string]any{
		"url": redact(c.url), "queue": c.queue, "queue_type": c.queueType, "protocol": "amqp 0-9-1",
		"num_records": c.numRecords, "record_size": c.recordSize, "throughput": c.throughput, "acks": c.acks,
		"compression": c.compression, "partitions": c.partitions, "producers": c.producers,
		"consumers": c.consumers, "max_pending": c.maxPending, "prefetch": c.prefetch, "payload": c.payload,
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
	for i := range c.partitions {
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
	fail   *firstError
	done   chan struct{}
	closed atomic.Bool
}

func newAMQPSender(c *config, rec *perf.Recorder, meter *perf.Meter, fail *firstError) (*amqpSender, error) {
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
	s := &amqpSender{c: c, conn: conn, ch: ch, win: newWindow(c.maxPending), sent: make([]atomic.Int64, c.maxPending),
		size: c.recordSize, rec: rec, meter: meter, fail: fail, done: make(chan struct{})}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, c.maxPending+1))
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
			s.fail.set(fmt.Errorf("message %d nacked by the broker", cf.DeliveryTag))
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

// runPublishers splits c.numRecords over c.producers publishers, each
// paced to its share of the throughput, sending record n to queue n % N.
func runPublishers(ctx context.Context, c *config, payload *perf.Payload, stamp bool, start time.Time,
	meter *perf.Meter) (*perf.Histogram, error) {
	var wg sync.WaitGroup
	var fail firstError
	recs := make([]*perf.Recorder, c.producers)
	per, extra := c.numRecords/int64(c.producers), c.numRecords%int64(c.producers)
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
				fail.set(err)
			}
		}(first, n, recs[i])
		first += n
	}
	wg.Wait()
	h := perf.NewHistogram()
	for _, r := range recs {
		h.Merge(r.Hist)
	}
	return h, fail.get()
}

// publish is one publisher: records [first, first+n).
func publish(ctx context.Context, c *config, payload *perf.Payload, stamp bool, start time.Time,
	first, n int64, rec *perf.Recorder, meter *perf.Meter, fail *firstError) error {
	s, err := newAMQPSender(c, rec, meter, fail)
	if err != nil {
		return err
	}
	defer s.close()
	scratch := make([]byte, payload.Size())
	pacer := perf.NewPacer(c.throughput/float64(c.producers), start)
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
		if err := s.send(ctx, int(idx%int64(c.partitions)), body, now); err != nil {
			if ctx.Err() == nil {
				meter.AddError()
				fail.set(err)
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
	payload, err := perf.NewPayload(c.payload, c.recordSize, 1)
	if err != nil {
		return nil, err
	}
	meter := new(perf.Meter)
	progress := perf.StartProgress(progressOut, meter, c.progress, "produce")
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
	fail firstError
}

// subscribe starts consumers over the queues, dealt among c.consumers
// connections, calling onMsg (from several goroutines) for every message:
// from the start of each queue, or with fromNow only what is published
// from now on (a quorum queue holds nothing older in a fresh run).
func subscribe(ctx context.Context, c *config, fromNow bool, onMsg func(body []byte)) (*subscription, error) {
	n := min(c.consumers, c.partitions)
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
		for q := i; q < c.partitions; q += n {
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
							sub.fail.set(fmt.Errorf("acknowledging on %s: %w", c.queueName(q), err))
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
	progress := perf.StartProgress(progressOut, meter, c.progress, "consume")
	start := time.Now()
	sub, err := subscribe(ctx, c, false, func(body []byte) {
		meter.Add(1, int64(len(body)))
		if total.Add(1) >= c.numRecords {
			doneAt.CompareAndSwap(0, int64(time.Since(start)))
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		progress.Stop()
		return nil, err
	}
	cause := waitDone(ctx, done, meter, c.idleTimeout)
	sub.stop()
	progress.Stop()
	elapsed := time.Duration(doneAt.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	res := &perf.Result{Mode: "consume", Records: meter.Records(), Bytes: meter.Bytes(),
		Samples: progress.Samples(0), Config: c.echo()}
	res.SetElapsed(elapsed)
	if res.Records < c.numRecords {
		res.FirstError = fmt.Sprintf("read %d of %d records: %v", res.Records, c.numRecords, cause)
	} else if err := sub.fail.get(); err != nil {
		res.FirstError = err.Error()
	}
	return res, ctx.Err()
}

// waitDone waits for done, ctx, or idle without a new record; it returns
// why it stopped waiting when that was not done.
func waitDone(ctx context.Context, done <-chan struct{}, meter *perf.Meter, idle time.Duration) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last, lastChange := meter.Records(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			if cur := meter.Records(); cur != last {
				last, lastChange = cur, now
			} else if now.Sub(lastChange) >= idle {
				return fmt.Errorf("no message arrived within %v", idle)
			}
		}
	}
}

func endToEnd(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	if err := ensureQueues(c); err != nil {
		return nil, err
	}
	payload, err := perf.NewPayload(c.payload, c.recordSize, 1)
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
	progress := perf.StartProgress(progressOut, consMeter, c.progress, "e2e")
	start := time.Now()
	prodHist, perr := runPublishers(ctx, c, payload, true, start, prodMeter)
	target.Store(prodMeter.Records())
	if seen.Load() >= target.Load() {
		once.Do(func() { close(done) })
	}
	cause := waitDone(ctx, done, consMeter, c.idleTimeout)
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

type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
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

// Command natsperf is the NATS JetStream counterpart of `sluice perf`: the
// same workloads (produce, consume, e2e), the same payloads, the same
// histogram and the same JSON result, so the benchmark harness can put a
// JetStream figure next to a Kafka-protocol one.
//
// How Kafka's knobs map onto JetStream:
//
//   - a partition is a stream of its own (file storage, one subject each:
//     <stream>_<i> holding <stream>.<i>); records go round-robin over them.
//
//   - acks=1 is an asynchronous publish whose acknowledgement the server
//     sends once the message is in the stream's file store (written, not
//     fsynced; JetStream syncs every two minutes by default), with at most
//     --max-pending acknowledgements outstanding per publisher. On one
//     server with one replica acks=all is the same thing, so --acks is
//     accepted and echoed but changes nothing. With --replicas 3 (a stream
//     replicated over three clustered servers) the acknowledgement comes once
//     a quorum, two of the three, has the message: again the same for both.
//
//   - consume is an ordered consumer per stream (ephemeral, no acks, flow
//     controlled) reading from the first message.
//
//   - JetStream in nats-server 2.9 has no compression: --compression must be
//     none.
//
//     natsperf produce --server nats://127.0.0.1:4222 --stream bench --num-records 1000000 --record-size 100
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	server, stream            string
	pullMaxMessages, replicas int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	return perf.Tool{
		Name: "natsperf", System: "nats", Version: natsClientVersion,
		NoCompression: "JetStream (nats-server 2.9) stores messages uncompressed",
		Flags: func(fs *flag.FlagSet, mode string) *perf.Load {
			fs.StringVar(&c.server, "server", nats.DefaultURL, "NATS server URL, or a comma-separated list of a cluster's servers")
			fs.StringVar(&c.stream, "stream", "bench", "stream name prefix (streams <stream>_0..N-1, subjects <stream>.0..N-1)")
			fs.IntVar(&c.replicas, "replicas", 1, "stream replicas when creating the streams")
			fs.IntVar(&c.pullMaxMessages, "pull-max-messages", 0, "messages per pull request of a consumer (0: client default, 500)")
			c.Load.Flags(fs, mode, perf.LoadNames{Partition: "streams", Body: "message payload",
				Acks:    "1 and all are the same (one server: stored; replicas: a quorum stored)",
				Pending: "async publish acknowledgements", NoCompression: "JetStream has no record compression here"})
			return &c.Load
		},
		Validate: func(string) error {
			if c.replicas < 1 {
				return errors.New("--replicas must be at least 1")
			}
			return nil
		},
		Produce: func(ctx context.Context, progress io.Writer) (*perf.Result, error) { return produce(ctx, &c, progress) },
		Consume: func(ctx context.Context, progress io.Writer) (*perf.Result, error) { return consume(ctx, &c, progress) },
		EndToEnd: func(ctx context.Context, progress io.Writer) (*perf.Result, error) {
			return endToEnd(ctx, &c, progress)
		},
	}.Main(ctx, args, stdout, stderr)
}

func (c *config) streamName(i int) string { return fmt.Sprintf("%s_%d", c.stream, i) }
func (c *config) subject(i int) string    { return fmt.Sprintf("%s.%d", c.stream, i) }

func (c *config) echo() map[string]any {
	return map[string]any{
		"server": c.server, "stream": c.stream, "num_records": c.NumRecords, "record_size": c.RecordSize,
		"throughput": c.Throughput, "acks": c.Acks, "compression": c.Compression, "partitions": c.Partitions,
		"producers": c.Producers, "consumers": c.Consumers, "max_pending": c.MaxPending, "payload": c.Payload,
		"replicas": c.replicas,
	}
}

func connect(c *config) (*nats.Conn, error) {
	nc, err := nats.Connect(c.server, nats.Name("natsperf"), nats.Timeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", c.server, err)
	}
	return nc, nil
}

// ensureStreams creates the file-backed streams unless they exist. A
// cluster that has only just formed may refuse a replicated stream for a
// moment (no meta leader yet, peers not yet current): such refusals are
// retried for up to 30 s.
func ensureStreams(ctx context.Context, c *config) error {
	nc, err := connect(c)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range c.Partitions {
		cfg := jetstream.StreamConfig{
			Name:     c.streamName(i),
			Subjects: []string{c.subject(i)},
			Storage:  jetstream.FileStorage,
			Replicas: c.replicas,
		}
		for {
			actx, acancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := js.CreateOrUpdateStream(actx, cfg)
			acancel()
			if err == nil {
				break
			}
			if !transient(err) || ctx.Err() != nil {
				return fmt.Errorf("creating stream %s (%d replicas): %w", c.streamName(i), c.replicas, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("creating stream %s (%d replicas): %w", c.streamName(i), c.replicas, err)
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// transient reports whether a JetStream API error is one a forming cluster
// gives before it settles: no meta leader (the request goes unanswered or
// "JetStream system temporarily unavailable", 10008), or too few current
// peers for the replicas ("insufficient resources", 10023; "no suitable
// peers for placement", 10005).
func transient(err error) bool {
	var je jetstream.JetStreamError
	if errors.As(err, &je) && je.APIError() != nil {
		switch je.APIError().ErrorCode {
		case 10005, 10008, 10023:
			return true
		}
		return false
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// publisher sends records [first, first+n) round-robin over the subjects,
// recording send-to-ack latency in rec.
type publisher struct {
	c       *config
	payload *perf.Payload
	stamp   bool
	rec     *perf.Recorder
	meter   *perf.Meter

	mu   sync.Mutex
	sent map[*nats.Msg]time.Time // send time of each message awaiting its ack
	pool sync.Pool
	fail perf.FirstError
}

func (p *publisher) onAck(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
	now := time.Now()
	p.mu.Lock()
	t, ok := p.sent[m]
	delete(p.sent, m)
	p.mu.Unlock()
	if ok {
		p.rec.Record(len(m.Data), now.Sub(t), now)
	}
	p.pool.Put(m)
}

func (p *publisher) onErr(_ jetstream.JetStream, m *nats.Msg, err error) {
	p.mu.Lock()
	delete(p.sent, m)
	p.mu.Unlock()
	p.meter.AddError()
	p.fail.Set(err)
}

func (p *publisher) run(ctx context.Context, start time.Time, first, n int64) error {
	c := p.c
	nc, err := connect(c)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(c.MaxPending),
		jetstream.WithPublishAsyncAckHandler(p.onAck),
		jetstream.WithPublishAsyncErrHandler(p.onErr))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	p.sent = make(map[*nats.Msg]time.Time, c.MaxPending)
	subjects := make([]string, c.Partitions)
	for i := range subjects {
		subjects[i] = c.subject(i)
	}
	size := p.payload.Size()
	p.pool.New = func() any {
		m := new(nats.Msg)
		if p.stamp {
			m.Data = make([]byte, 0, size)
		}
		return m
	}
	pacer := perf.NewPacer(c.Throughput/float64(c.Producers), start)
	for i := range n {
		if err := pacer.Wait(ctx, i); err != nil {
			break
		}
		idx := first + i
		m := p.pool.Get().(*nats.Msg)
		v := p.payload.At(idx)
		if p.stamp {
			buf := append(m.Data[:0], v...)
			*m = nats.Msg{Data: buf}
		} else {
			*m = nats.Msg{Data: v}
		}
		m.Subject = subjects[idx%int64(len(subjects))]
		now := time.Now()
		if p.stamp {
			perf.PutSendTime(m.Data, now.UnixNano())
		}
		p.mu.Lock()
		p.sent[m] = now
		p.mu.Unlock()
		for {
			_, err := js.PublishMsgAsync(m)
			if err == nil {
				break
			}
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) && ctx.Err() == nil {
				continue // the window is full for longer than the stall wait: keep waiting
			}
			p.onErr(js, m, err)
			break
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
	case <-time.After(60 * time.Second):
		p.fail.Set(fmt.Errorf("%d acknowledgements still outstanding after 60s", js.PublishAsyncPending()))
	}
	p.rec.Flush()
	return p.fail.Get()
}

// runPublishers splits c.NumRecords over c.Producers publishers.
func runPublishers(ctx context.Context, c *config, payload *perf.Payload, stamp bool, start time.Time,
	meter *perf.Meter) (*perf.Histogram, error) {
	pubs := make([]*publisher, c.Producers)
	var wg sync.WaitGroup
	var fail perf.FirstError
	per, extra := c.NumRecords/int64(c.Producers), c.NumRecords%int64(c.Producers)
	first := int64(0)
	for i := range pubs {
		n := per
		if int64(i) < extra {
			n++
		}
		p := &publisher{c: c, payload: payload, stamp: stamp, rec: meter.NewRecorder(), meter: meter}
		pubs[i] = p
		wg.Add(1)
		go func(first, n int64) {
			defer wg.Done()
			if err := p.run(ctx, start, first, n); err != nil {
				fail.Set(err)
			}
		}(first, n)
		first += n
	}
	wg.Wait()
	h := perf.NewHistogram()
	for _, p := range pubs {
		h.Merge(p.rec.Hist)
	}
	return h, fail.Get()
}

func produce(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	if err := ensureStreams(ctx, c); err != nil {
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
		Latency: perf.LatencyOf(hist), Config: c.echo()}
	res.SetElapsed(elapsed)
	if perr != nil {
		res.FirstError = perr.Error()
	}
	return res, ctx.Err()
}

// subscribe starts ordered consumers over the streams, dealt among
// c.Consumers connections, calling onMsg for every message: from the first
// message, or from startSeq[i] for stream i when given. stop closes
// everything it started.
func subscribe(ctx context.Context, c *config, startSeq map[int]uint64,
	onMsg func(jetstream.Msg)) (stop func(), err error) {
	n := min(c.Consumers, c.Partitions)
	var conns []*nats.Conn
	var ccs []jetstream.ConsumeContext
	stop = func() {
		for _, cc := range ccs {
			cc.Stop()
		}
		for _, nc := range conns {
			nc.Close()
		}
	}
	var opts []jetstream.PullConsumeOpt
	if c.pullMaxMessages > 0 {
		opts = append(opts, jetstream.PullMaxMessages(c.pullMaxMessages))
	}
	for i := range n {
		nc, err := connect(c)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			stop()
			return nil, fmt.Errorf("jetstream: %w", err)
		}
		for s := i; s < c.Partitions; s += n {
			cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
			if seq, ok := startSeq[s]; ok {
				cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq}
			}
			cons, err := js.OrderedConsumer(ctx, c.streamName(s), cfg)
			if err != nil {
				stop()
				return nil, fmt.Errorf("ordered consumer on %s: %w", c.streamName(s), err)
			}
			cc, err := cons.Consume(onMsg, opts...)
			if err != nil {
				stop()
				return nil, fmt.Errorf("consuming %s: %w", c.streamName(s), err)
			}
			ccs = append(ccs, cc)
		}
	}
	return stop, nil
}

func consume(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	meter := new(perf.Meter)
	var total atomic.Int64
	var doneAt atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	progress := perf.StartProgress(progressOut, meter, c.Progress, "consume")
	start := time.Now()
	stop, err := subscribe(ctx, c, nil, func(m jetstream.Msg) {
		meter.Add(1, int64(len(m.Data())))
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
	stop()
	progress.Stop()
	elapsed := time.Duration(doneAt.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	res := &perf.Result{Mode: "consume", Records: meter.Records(), Bytes: meter.Bytes(), Config: c.echo()}
	res.SetElapsed(elapsed)
	if res.Records < c.NumRecords {
		res.FirstError = fmt.Sprintf("read %d of %d records: %v", res.Records, c.NumRecords, cause)
	}
	return res, ctx.Err()
}

// waitDone waits for done, ctx, or idle without a new record; it returns
// why it stopped waiting when that was not done.
func endToEnd(ctx context.Context, c *config, progressOut io.Writer) (*perf.Result, error) {
	if err := ensureStreams(ctx, c); err != nil {
		return nil, err
	}
	payload, err := perf.NewPayload(c.Payload, c.RecordSize, 1)
	if err != nil {
		return nil, err
	}
	// Start each stream's consumer just past its current last message, so
	// streams that already hold data are not replayed.
	startSeq, err := nextSeqs(ctx, c)
	if err != nil {
		return nil, err
	}
	consMeter, prodMeter := new(perf.Meter), new(perf.Meter)
	consRec := consMeter.NewRecorder()
	var (
		mu       sync.Mutex // the consume callbacks of several streams may run at once
		seen     atomic.Int64
		target   atomic.Int64
		lastRecv atomic.Int64 // Unix nanoseconds of the latest receipt
		once     sync.Once
	)
	target.Store(1<<63 - 1)
	done := make(chan struct{})
	stop, err := subscribe(ctx, c, startSeq, func(m jetstream.Msg) {
		now := time.Now()
		sent, ok := perf.SendTime(m.Data())
		if !ok {
			return
		}
		mu.Lock()
		consRec.Record(len(m.Data()), time.Duration(now.UnixNano()-sent), now)
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
	stop()
	mu.Lock()
	consRec.Flush()
	mu.Unlock()
	progress.Stop()
	res := &perf.Result{Mode: "e2e", Records: seen.Load(), Bytes: consMeter.Bytes(), Errors: prodMeter.Errors(),
		Latency: perf.LatencyOf(consRec.Hist), ProduceLatency: perf.LatencyOf(prodHist), Config: c.echo()}
	if last := lastRecv.Load(); last > start.UnixNano() {
		res.SetElapsed(time.Duration(last - start.UnixNano()))
	}
	switch {
	case perr != nil:
		res.FirstError = "publishing: " + perr.Error()
	case res.Records < prodMeter.Records():
		res.FirstError = fmt.Sprintf("received %d of %d acknowledged messages: %v", res.Records, prodMeter.Records(), cause)
	}
	return res, ctx.Err()
}

// nextSeqs returns, for each stream, the sequence its next message will get.
func nextSeqs(ctx context.Context, c *config) (map[int]uint64, error) {
	nc, err := connect(c)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	out := make(map[int]uint64, c.Partitions)
	for i := range c.Partitions {
		st, err := js.Stream(ctx, c.streamName(i))
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", c.streamName(i), err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream %s info: %w", c.streamName(i), err)
		}
		out[i] = info.State.LastSeq + 1
	}
	return out, nil
}

func natsClientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/nats-io/nats.go" {
				return "nats.go " + m.Version
			}
		}
	}
	return "nats.go (unknown version)"
}

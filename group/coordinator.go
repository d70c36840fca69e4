package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Node is a broker's id and advertised address, the answer of
// FindCoordinator.
type Node struct {
	ID   int32
	Host string
	Port int32
}

// Backend is what the coordinator needs from the broker: its
// __consumer_offsets partitions. BrokerBackend implements it over package
// broker.
type Backend interface {
	// EnsureOffsetsTopic creates __consumer_offsets unless it exists, with
	// the Config's offsets.topic.* settings (partitions, replication
	// factor, segment bytes) and cleanup.policy=compact; it may wait
	// (until ctx is done) for the partitions to get leaders.
	EnsureOffsetsTopic(ctx context.Context) error
	// OffsetsLeader returns the broker leading partition p of
	// __consumer_offsets, with its address on the named listener (the one
	// the asking client came in on); false when the topic or a leader is
	// missing.
	OffsetsLeader(partition int32, listener string) (Node, bool)
	// Append appends batches (whole record batches v2) to
	// __consumer_offsets-partition as its leader in leaderEpoch, and returns
	// once they are committed (acks=all) or failed: REQUEST_TIMED_OUT when
	// they are not committed within timeout (offsets.commit.timeout.ms),
	// which only starts when the append has to wait. An error that is a
	// *kerr.Error is mapped as Kafka maps it; any other error means this
	// broker cannot write the partition now (NOT_COORDINATOR). Append may
	// rewrite batches in place (base offsets) and must not keep them.
	Append(ctx context.Context, partition, leaderEpoch int32, batches []byte, timeout time.Duration) error
	// Read returns whole batches of __consumer_offsets-partition from the
	// batch holding offset (at least one batch when there is one, at most
	// about maxBytes otherwise), the offset the read started at, and the
	// log end offset. An offset below the log start reads from the log
	// start, and from is then the log start: records before it are gone
	// (DeleteRecords, retention) even when their batch is returned.
	Read(ctx context.Context, partition int32, offset int64, maxBytes int32) (batches []byte, from, logEnd int64, err error)
	// PartitionExists reports whether topic has partition (OffsetCommit
	// answers UNKNOWN_TOPIC_OR_PARTITION otherwise).
	PartitionExists(topic string, partition int32) bool
}

// ErrClosed is returned by a Coordinator's methods after Close.
var ErrClosed = errors.New("group: coordinator closed")

// Options configure New.
type Options struct {
	Config  Config
	Backend Backend
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
}

// Coordinator is the broker-side group coordinator. Its state machine is
// guarded by one mutex: a connection's goroutine runs its request on the
// state machine itself, so a request answered at once (Heartbeat,
// OffsetFetch) costs no goroutine switch. A JoinGroup or SyncGroup parks
// its answer and waits for the rebalance. Timers run on one goroutine.
//
// Appends to __consumer_offsets go through one writer per partition, which
// writes them in order and several at once (group commit): the request
// that finds its partition's writer idle appends on its own goroutine,
// with what queued meanwhile, and is answered there when the append is
// committed; appends that queue behind an append in flight are written
// together by the writer's goroutine, in one Append. StartOffsetCommit
// claims an idle writer without writing, so that a connection's pipelined
// commits queue behind the first and go out in one Append when it leads.
// Loads run on a goroutine per partition.
type Coordinator struct {
	cfg     Config
	log     *slog.Logger
	backend Backend
	now     func() time.Time

	kick   chan struct{} // the timer goroutine re-reads the next deadline
	quit   chan struct{} // closed by Close
	done   chan struct{} // closed when the timer goroutine exits
	once   sync.Once
	bg     context.Context // cancelled by Close: writers and loaders
	cancel context.CancelFunc
	wg     sync.WaitGroup // writers, loaders and appends led by requests

	// mu guards the state machine and what follows.
	mu      sync.Mutex
	closed  bool
	armed   time.Time // the deadline the timer goroutine waits for (zero: none)
	st      *state
	writers map[int32]*writer
	loads   map[int32]context.CancelFunc

	createMu sync.Mutex // one EnsureOffsetsTopic at a time

	appends, batches atomic.Int64 // Stats
}

// Stats are counters of the coordinator's writes to __consumer_offsets.
type Stats struct {
	Appends int64 // Append calls to the backend
	Batches int64 // record batches written by them (commits, group metadata, tombstones)
}

// Stats returns the coordinator's counters. Batches/Appends above 1 means
// queued writes were written together.
func (c *Coordinator) Stats() Stats {
	return Stats{Appends: c.appends.Load(), Batches: c.batches.Load()}
}

// New starts a coordinator. It coordinates no group until BecomeLeader is
// called for __consumer_offsets partitions this broker leads.
func New(opts Options) (*Coordinator, error) {
	if opts.Backend == nil {
		return nil, errors.New("group: no backend")
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	bg, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:     opts.Config,
		log:     log,
		backend: opts.Backend,
		now:     now,
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		bg:      bg,
		cancel:  cancel,
		writers: make(map[int32]*writer),
		loads:   make(map[int32]context.CancelFunc),
	}
	c.st = newState(opts.Config, log, now(), randomID)
	go c.run()
	return c, nil
}

// randomID is a UUID-shaped random string, the suffix of member ids as
// Kafka makes them (client.id + "-" + UUID).
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Close stops the coordinator: parked requests are answered NOT_COORDINATOR,
// pending appends are abandoned (their requests get ErrClosed), and Close
// waits for every goroutine it started and every append in progress.
func (c *Coordinator) Close() error {
	c.once.Do(func() { close(c.quit) })
	<-c.done
	c.cancel()
	c.wg.Wait()
	return nil
}

// run is the timer goroutine: it fires the state machine's timers (session
// expiry, rebalance delays, offset retention) when due.
func (c *Coordinator) run() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		next := c.st.nextDeadline()
		c.armed = next
		c.mu.Unlock()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(c.now()), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case <-c.kick:
		case <-timer.C:
			c.locked(false, func() { c.st.advance(c.now()) })
		case <-c.quit:
			c.mu.Lock()
			c.closed = true
			for p := range c.st.partitions {
				c.st.unload(p)
				c.stopPartition(p)
			}
			c.mu.Unlock()
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// locked runs fn on the state machine, then hands the appends it made to
// the partitions' writers and tells the timer goroutine of an earlier
// deadline; false once the coordinator closed. A writer left idle with
// appends to write is led by the caller when lead is set (a request's
// goroutine: the append is its own, it waits for it anyway), else by the
// writer's goroutine.
func (c *Coordinator) locked(lead bool, fn func()) bool {
	mine, ok := c.claim(lead, fn)
	if mine != nil {
		mine.leadOnce()
		c.wg.Done()
	}
	return ok
}

// claim is locked without the lead: with lead set, the writer fn's append
// found idle is returned busy and unled (nil when there is none), and the
// caller must call its leadOnce and then c.wg.Done, soon: the partition's
// other appends queue behind it until then.
func (c *Coordinator) claim(lead bool, fn func()) (*writer, bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false
	}
	c.st.now = later(c.st.now, c.now())
	fn()
	var buf [4]*writer
	idle := c.flush(buf[:0])
	if next := c.st.nextDeadline(); !next.IsZero() && (c.armed.IsZero() || next.Before(c.armed)) {
		c.armed = next
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	var mine *writer
	if lead && len(idle) > 0 {
		mine, idle = idle[0], idle[1:]
		c.wg.Add(1) // before Close's Wait: Close sets closed under mu first
	}
	c.mu.Unlock()
	for _, w := range idle {
		w.handOver()
	}
	return mine, true
}

// flush hands the state machine's appends to the partitions' writers and
// appends to idle the writers that were idle: the caller leads them or
// hands them over to their goroutines. Under mu.
func (c *Coordinator) flush(idle []*writer) []*writer {
	for {
		ops := c.st.takeAppends()
		if len(ops) == 0 {
			return idle
		}
		for _, op := range ops {
			w, ok := c.writers[op.partition]
			if !ok || w.epoch != op.epoch {
				op.done(kerr.NotCoordinator)
				continue
			}
			if w.enqueue(op) {
				idle = append(idle, w)
			}
		}
	}
}

// post runs fn on the state machine (loaders, writers, the broker's
// leadership and marker callbacks); false once the coordinator closed.
func (c *Coordinator) post(fn func()) bool { return c.locked(false, fn) }

// call runs fn on the state machine on behalf of a request, on the
// caller's goroutine; an append fn makes to an idle writer is written
// before call returns.
func (c *Coordinator) call(ctx context.Context, fn func(st *state)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !c.locked(true, func() { fn(c.st) }) {
		return ErrClosed
	}
	return nil
}

// ask runs fn on the state machine for a request and waits for the answer
// fn gives to reply (at once, or later: a rebalance, an append).
func ask[T any](ctx context.Context, c *Coordinator, fn func(st *state, reply func(T))) (T, error) {
	ch := make(chan T, 1)
	if err := c.call(ctx, func(st *state) { fn(st, func(r T) { ch <- r }) }); err != nil {
		var zero T
		return zero, err
	}
	return wait(ctx, c, ch)
}

func wait[T any](ctx context.Context, c *Coordinator, ch <-chan T) (T, error) {
	var zero T
	select {
	case r := <-ch:
		return r, nil
	default:
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-c.done:
		// Close answered everything parked; only a reply that was
		// still waiting for an append is lost.
		select {
		case r := <-ch:
			return r, nil
		default:
			return zero, ErrClosed
		}
	}
}

// ---- leadership of __consumer_offsets partitions ----

// BecomeLeader tells the coordinator this broker now leads
// __consumer_offsets-partition at leaderEpoch: it loads the partition's
// groups (COORDINATOR_LOAD_IN_PROGRESS until done) and then coordinates
// them. Calling it again for the same epoch does nothing.
func (c *Coordinator) BecomeLeader(partition, leaderEpoch int32) {
	c.post(func() {
		if !c.st.becomeLeader(partition, leaderEpoch) {
			return
		}
		c.stopPartition(partition)
		c.startPartition(partition, leaderEpoch)
	})
}

// Resign tells the coordinator this broker no longer leads
// __consumer_offsets-partition (leaderEpoch is the epoch it led, -1 for
// any): its groups are dropped and their requests answered NOT_COORDINATOR.
func (c *Coordinator) Resign(partition, leaderEpoch int32) {
	c.post(func() {
		cur, ok := c.st.partitions[partition]
		if !ok || (leaderEpoch >= 0 && leaderEpoch < cur.epoch) {
			return
		}
		c.st.resign(partition, leaderEpoch)
		c.stopPartition(partition)
	})
}

// Coordinating reports the partitions this coordinator leads and whether
// each finished loading (for tests, metrics and the console).
func (c *Coordinator) Coordinating(ctx context.Context) (map[int32]bool, error) {
	ch := make(chan map[int32]bool, 1)
	if err := c.call(ctx, func(st *state) {
		out := make(map[int32]bool, len(st.partitions))
		for p, ps := range st.partitions {
			out[p] = ps.loaded
		}
		ch <- out
	}); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// startPartition starts the writer and the loader of a partition. Owner
// goroutine only.
func (c *Coordinator) startPartition(p, epoch int32) {
	ctx, cancel := context.WithCancel(c.bg)
	w := &writer{c: c, partition: p, epoch: epoch, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	c.writers[p] = w
	c.wg.Add(1)
	go w.run()

	lctx, lcancel := context.WithCancel(c.bg)
	c.loads[p] = lcancel
	c.wg.Add(1)
	go c.load(lctx, p, epoch)
}

func (c *Coordinator) stopPartition(p int32) {
	if w, ok := c.writers[p]; ok {
		w.cancel()
		delete(c.writers, p)
	}
	if cancel, ok := c.loads[p]; ok {
		cancel()
		delete(c.loads, p)
	}
}

// load reads a partition's log and hands the result to the state
// machine, retrying with a backoff while the log cannot be read.
func (c *Coordinator) load(ctx context.Context, p, epoch int32) {
	defer c.wg.Done()
	start := time.Now()
	backoff := 100 * time.Millisecond
	for {
		lr, err := c.readPartition(ctx, p)
		if err == nil {
			c.log.Debug("read __consumer_offsets partition", "partition", p, "took", time.Since(start))
			c.post(func() { c.st.installLoad(p, epoch, lr) })
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("loading __consumer_offsets partition failed; retrying", "partition", p, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// readPartition reads partition p from its log start to its log end. The
// log start need not be 0 (DeleteRecords or retention moved it), and may be
// the log end: an empty partition loads as such.
func (c *Coordinator) readPartition(ctx context.Context, p int32) (*loadResult, error) {
	lr := newLoadResult()
	var off int64
	for {
		b, from, end, err := c.backend.Read(ctx, p, off, c.cfg.LoadBufferSize)
		if err != nil {
			return nil, err
		}
		off = max(off, from)
		if off >= end {
			return lr, nil
		}
		next, err := lr.applyBatches(b, off)
		if err != nil {
			return nil, fmt.Errorf("__consumer_offsets-%d at %d: %w", p, off, err)
		}
		if next <= off {
			return nil, fmt.Errorf("__consumer_offsets-%d: no batch at offset %d below the log end %d", p, off, end)
		}
		off = next
	}
}

// writer appends one partition's records in order, one Append at a time.
// Appends queued while one is in flight are written together in the next
// Append (group commit). busy says someone leads the writer: a request's
// goroutine for one round (leadOnce), or the writer's goroutine, to which
// the lead is handed over (handOver) and which keeps it until the queue is
// empty.
type writer struct {
	c         *Coordinator
	partition int32
	epoch     int32
	ctx       context.Context
	cancel    context.CancelFunc

	mu    sync.Mutex
	queue []appendOp
	busy  bool
	wake  chan struct{} // buffered 1: the lead is handed to run
	taken []appendOp    // the leader's: the round being written
	buf   []byte        // the leader's: queued batches written together
}

// maxAppendBytes bounds how many queued batches one Append carries.
const maxAppendBytes = 512 << 10

// enqueue queues op; true when the writer was idle and the caller must now
// lead it (leadOnce or handOver).
func (w *writer) enqueue(op appendOp) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, op)
	if w.busy {
		return false
	}
	w.busy = true
	return true
}

// take returns the next appends to write together; none (and the writer
// idle) when the queue is empty. The leader's: what it returns is valid
// until the next take.
func (w *writer) take() []appendOp {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.taken)
	n, size := 0, 0
	for n < len(w.queue) && (n == 0 || size+len(w.queue[n].batch) <= maxAppendBytes) {
		size += len(w.queue[n].batch)
		n++
	}
	if n == 0 {
		w.busy = false
		return nil
	}
	w.taken = append(w.taken[:0], w.queue[:n]...)
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	return w.taken
}

// handOver gives the lead to the writer's goroutine.
func (w *writer) handOver() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// leadOnce writes one round on the caller's goroutine (the request whose
// append made the writer busy: its append is in this round) and hands the
// lead over when more has queued meanwhile, so a request waits for no
// append but its own.
func (w *writer) leadOnce() {
	if !w.round() {
		return
	}
	w.mu.Lock()
	if len(w.queue) == 0 {
		w.busy = false
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.handOver()
}

func (w *writer) run() {
	defer w.c.wg.Done()
	for {
		select {
		case <-w.ctx.Done():
			w.failQueued()
			return
		case <-w.wake:
		}
		for w.round() {
		}
	}
}

// round appends what is queued (up to maxAppendBytes) in one Append and
// completes it; false when nothing was queued (the writer is idle now).
func (w *writer) round() bool {
	ops := w.take()
	if len(ops) == 0 {
		return false
	}
	var err error
	switch {
	case w.ctx.Err() != nil:
		err = kerr.NotCoordinator
	case len(ops) == 1:
		err = w.append(ops[0].batch)
	default:
		w.buf = w.buf[:0]
		for _, op := range ops {
			w.buf = append(w.buf, op.batch...)
		}
		err = w.append(w.buf)
	}
	w.c.appends.Add(1)
	w.c.batches.Add(int64(len(ops)))
	w.c.post(func() {
		for _, op := range ops {
			op.done(err)
		}
	})
	return true
}

func (w *writer) append(batches []byte) error {
	if w.ctx.Err() != nil {
		return kerr.NotCoordinator
	}
	err := w.c.backend.Append(w.ctx, w.partition, w.epoch, batches, w.c.cfg.CommitTimeout)
	switch {
	case err == nil:
		return nil
	case w.ctx.Err() != nil:
		return kerr.NotCoordinator
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut
	}
	return err
}

// failQueued answers what is still queued when the writer stops.
func (w *writer) failQueued() {
	w.mu.Lock()
	ops := w.queue
	w.queue = nil
	w.mu.Unlock()
	if len(ops) == 0 {
		return
	}
	w.c.post(func() {
		for _, op := range ops {
			op.done(kerr.NotCoordinator)
		}
	})
}

// ---- requests ----

// FindCoordinator answers FindCoordinator for group keys (v0-3 one key,
// v4+ a batch): the leader of the group's __consumer_offsets partition, with
// its address on the listener the client came in on. The first lookup creates
// __consumer_offsets and waits a little for its leaders; without a leader
// the answer is COORDINATOR_NOT_AVAILABLE, and the client asks again.
func (c *Coordinator) FindCoordinator(ctx context.Context, listener string, req *kmsg.FindCoordinatorRequest) (*kmsg.FindCoordinatorResponse, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		n, code, msg := c.coordinatorFor(ctx, listener, req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, n.ID, n.Host, n.Port
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		n, code, msg := c.coordinatorFor(ctx, listener, req.CoordinatorType, key)
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Host, rc.Port, rc.ErrorCode = key, n.ID, n.Host, n.Port, code
		if msg != "" {
			rc.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return resp, nil
}

// findCoordinatorWait bounds how long FindCoordinator waits for a new
// __consumer_offsets to get leaders.
const findCoordinatorWait = 5 * time.Second

func (c *Coordinator) coordinatorFor(ctx context.Context, listener string, keyType int8, key string) (Node, int16, string) {
	none := Node{ID: -1, Port: -1}
	if keyType != 0 {
		// Transactions are not part of Sluice (InitProducerId is for
		// idempotence only), so there is no transaction coordinator.
		return none, kerr.InvalidRequest.Code, "only group coordinators (key type 0) are supported"
	}
	p := PartitionFor(key, c.cfg.NumPartitions)
	if n, ok := c.backend.OffsetsLeader(p, listener); ok {
		return n, 0, ""
	}
	if err := c.EnsureOffsetsTopic(ctx); err != nil {
		c.log.Warn("creating __consumer_offsets", "err", err)
	}
	if n, ok := c.backend.OffsetsLeader(p, listener); ok {
		return n, 0, ""
	}
	return none, kerr.CoordinatorNotAvailable.Code, ""
}

// EnsureOffsetsTopic creates __consumer_offsets unless it exists and waits
// a little for its leaders (FindCoordinator does it on first use).
func (c *Coordinator) EnsureOffsetsTopic(ctx context.Context) error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, findCoordinatorWait)
	defer cancel()
	return c.backend.EnsureOffsetsTopic(ctx)
}

// JoinGroup answers JoinGroup, waiting while the group rebalances.
// clientID is the request header's client id, clientHost the client's
// address as Kafka shows it ("/127.0.0.1").
func (c *Coordinator) JoinGroup(ctx context.Context, clientID, clientHost string, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	cl := Client{ID: clientID, Host: clientHost}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	if err := c.call(ctx, func(st *state) { st.join(cl, req, func(r *kmsg.JoinGroupResponse) { ch <- r }) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// SyncGroup answers SyncGroup, waiting for the leader's assignment.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	if err := c.call(ctx, func(st *state) { st.sync(req, func(r *kmsg.SyncGroupResponse) { ch <- r }) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// Heartbeat answers Heartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error) {
	ch := make(chan *kmsg.HeartbeatResponse, 1)
	if err := c.call(ctx, func(st *state) { ch <- st.heartbeat(req) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// LeaveGroup answers LeaveGroup.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error) {
	ch := make(chan *kmsg.LeaveGroupResponse, 1)
	if err := c.call(ctx, func(st *state) { ch <- st.leave(req) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// OffsetCommit answers OffsetCommit once the offsets are stored.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	parts := commitParts(req, c.cfg.MaxMetadataBytes, c.backend.PartitionExists)
	return ask(ctx, c, func(st *state, reply func(*kmsg.OffsetCommitResponse)) { st.commit(req, parts, reply) })
}

// StartOffsetCommit runs an OffsetCommit on the state machine as
// OffsetCommit does, but does not write its append yet when it finds the
// partition's writer idle: lead (nil when there is nothing to lead) writes
// it, with whatever queued behind it meanwhile (the same connection's next
// commits, other connections' commits of the partition), in one Append;
// answer waits for the response, given once the offsets are stored (or
// the append failed, every commit of it then failing alike). A caller
// that got a lead must call it, soon: until then the partition's other
// appends wait behind it. A connection that reads several OffsetCommits
// together starts each, then leads all, then waits for each answer in
// order (package protocol: conn.settle), so they share one Append.
func (c *Coordinator) StartOffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (lead func(), answer func() (*kmsg.OffsetCommitResponse, error), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	parts := commitParts(req, c.cfg.MaxMetadataBytes, c.backend.PartitionExists)
	ch := make(chan *kmsg.OffsetCommitResponse, 1)
	mine, ok := c.claim(true, func() {
		c.st.commit(req, parts, func(r *kmsg.OffsetCommitResponse) { ch <- r })
	})
	if !ok {
		return nil, nil, ErrClosed
	}
	if mine != nil {
		lead = func() {
			mine.leadOnce()
			c.wg.Done()
		}
	}
	return lead, func() (*kmsg.OffsetCommitResponse, error) { return wait(ctx, c, ch) }, nil
}

// OffsetFetch answers OffsetFetch.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error) {
	ch := make(chan *kmsg.OffsetFetchResponse, 1)
	if err := c.call(ctx, func(st *state) { ch <- st.fetchOffsets(req) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// OffsetDelete answers OffsetDelete once the tombstones are stored.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	ch := make(chan *kmsg.OffsetDeleteResponse, 1)
	if err := c.call(ctx, func(st *state) { st.offsetDelete(req, func(r *kmsg.OffsetDeleteResponse) { ch <- r }) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// DescribeGroups answers DescribeGroups.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error) {
	ch := make(chan *kmsg.DescribeGroupsResponse, 1)
	if err := c.call(ctx, func(st *state) { ch <- st.describe(req) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// ListGroups answers ListGroups with the groups this broker coordinates.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error) {
	ch := make(chan *kmsg.ListGroupsResponse, 1)
	if err := c.call(ctx, func(st *state) { ch <- st.list(req) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// DeleteGroups answers DeleteGroups once the tombstones are stored.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error) {
	ch := make(chan *kmsg.DeleteGroupsResponse, 1)
	if err := c.call(ctx, func(st *state) { st.deleteGroups(req, func(r *kmsg.DeleteGroupsResponse) { ch <- r }) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

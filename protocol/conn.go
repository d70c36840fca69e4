package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/internal/tlswrite"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/quota"
	"github.com/sluice-io/sluice/security"
)

// Request is one decoded request handed to a HandlerFunc.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	// Msg is the decoded body, at Version: *kmsg.ProduceRequest, ...
	Msg kmsg.Request
	// Listener is the name of the listener the connection came in on.
	Listener string
	// Principal is who the connection authenticated as: User:<name> after
	// SASL, the mapped certificate subject on SSL with a client
	// certificate, else User:ANONYMOUS (security.Anonymous).
	Principal security.Principal
	// Remote is the client's address.
	Remote string

	// size is the request frame's size (the produce quota's measure);
	// throttle and throttleKind the longest byte-rate throttle its
	// handler recorded (quotas.go); detachedAt when it detached (unix
	// nanos, 0: it did not), the end of its time against the request
	// quota.
	size         int32
	throttle     time.Duration
	throttleKind quota.Kind
	detachedAt   atomic.Int64

	c     *conn
	state atomic.Int32 // reqInline, reqDetached, reqReturned
	slot  slot         // its place in the response order (one allocation for both)

	// lead and finish are set by a handler that postponed its answer
	// (postpone); the reader's.
	lead   func()
	finish func() (kmsg.Response, error)
}

// postpone leaves the request's answer to later, on the reader, so that
// several requests read together can share one piece of work: the handler
// has started its work and returns nil, nil; before the reader handles a
// request that cannot be postponed too, or waits for the client, or
// detaches, or ends, it settles: it calls every postponed request's lead
// (nil: none; it starts what the work waits for and must not wait for
// other requests) and then, in order, its finish, which waits for and
// returns the answer. OffsetCommit postpones (OffsetCommitStarter): the
// commits of a pipelining client, and of other clients meanwhile, go to
// __consumer_offsets in one append.
func (r *Request) postpone(lead func(), finish func() (kmsg.Response, error)) {
	r.lead, r.finish = lead, finish
}

// postponedReq is a request whose answer is postponed, with the start of
// its time against the request quota.
type postponedReq struct {
	r     *Request
	start time.Time
}

// A handler runs on the goroutine that read its request (reqInline) until it
// calls Detach (reqDetached: a new goroutine carries on reading) or returns
// (reqReturned).
const (
	reqInline int32 = iota
	reqDetached
	reqReturned
)

// Detach lets the connection's next request start while this handler is
// still running (before a long wait); its response is still written in
// order. Calling it more than once, or after returning, is harmless.
func (r *Request) Detach() {
	if r.c != nil && r.state.CompareAndSwap(reqInline, reqDetached) {
		if r.c.s.cfg.Quotas != nil {
			r.detachedAt.Store(time.Now().UnixNano())
		}
		// Answers the reader held back go out before the wait (this
		// goroutine is still the reader).
		if len(r.c.postponed) > 0 {
			r.c.settle()
		}
		r.c.flushHeld()
		r.c.startReader()
	}
}

// BeforeWait implements broker.WaitHook: a Produce or Fetch that the broker
// is about to park detaches its request, so the connection reads on.
func (r *Request) BeforeWait() { r.Detach() }

// streamResponse is a response whose encoding may send file regions straight
// to the connection with sendfile (Fetch).
type streamResponse interface {
	// appendResponse appends the whole frame (size, correlation id, header
	// tags, body) to buf. Record bytes too large to copy are sent with
	// sendfile: buf is written to nc first, then the region, and the
	// returned buffer holds what follows. A nil nc copies every region.
	appendResponse(buf []byte, nc net.Conn, corr int32) ([]byte, error)
	// errorCodes counts the response's error codes but the first as
	// failures in mx and returns the first (0 when none), for Observe.
	errorCodes(mx *metrics.API) int16
	// release frees what the response holds (file regions); called once,
	// whether or not it was written.
	release()
}

// slot is one request's place in the connection's response order.
type slot struct {
	next   *slot // the next request in arrival order (conn.wmu)
	ready  bool  // the handler finished (conn.wmu)
	corr   int32
	key    int16
	start  time.Time // arrival of the frame (request metrics)
	resp   kmsg.Response
	stream streamResponse
	err    error
	none   bool // no response (acks=0 produce)
}

// errCloseConnection is returned by a handler that wants the connection
// closed without logging a problem (Kafka closes an acks=0 producer's
// connection when its produce failed, the only way to tell it).
var errCloseConnection = errors.New("closing connection as the protocol requires")

// errUnsupportedVersion marks a request of a version outside the served range.
var errUnsupportedVersion = errors.New("unsupported version")

// A connection has no goroutine of its own for reading or for writing:
//
//   - One goroutine at a time is the reader. It reads a frame, decodes it and
//     runs the handler itself, so a request that is answered at once (a
//     produce with acks=1, a fetch with data, metadata) costs no goroutine
//     switch. A handler that is about to wait calls Detach: a new goroutine
//     becomes the reader and reads on while the old one waits. This is what
//     orders handlers (handler N+1 starts after handler N returned or
//     detached) and it is how requests are pipelined.
//   - Whoever finishes the oldest unanswered request writes: the responses
//     ready at the head of the queue are encoded into one buffer and sent
//     with one write (fetch records too large to copy follow by sendfile).
//     A finisher that finds another goroutine writing leaves its response
//     to it, so no goroutine waits for another's socket write and the
//     connection's writer is never blocked on a lock held across I/O.
//   - The reader may hold back the answer of a request it handled itself
//     while the client's next request is already buffered whole (a
//     pipelining client): it handles that one first and writes both
//     answers with one write, so that k pipelined requests read with one
//     read cost one write, not k (mayHold says when; flushHeld writes
//     them before anything that may block).
//   - The reader that meets the end of the stream (or an error) waits for
//     the answers still owed, then closes the connection.
type conn struct {
	s        *Server
	nc       net.Conn
	listener string
	remote   string
	lmx      *metrics.Listener // nil without metrics

	// Authentication (sasl.go). lcfg is the listener's configuration;
	// principal is set before the first request is dispatched and never
	// changes (a re-authentication must keep it); sasl is the SASL state of
	// a SASL listener's connection (the reader's); sessionEnd is when the
	// SASL session expires (unix nanos, 0: never).
	lcfg       *Listener
	principal  security.Principal
	sasl       *saslState
	sessionEnd atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc

	br       *bufio.Reader // the reader's
	tlsSrc   *tlsSource    // under crypto/tls on a TLS listener (the reader's), else nil
	clientID string        // the client id of the last request read (the reader's)
	inflight chan struct{} // one token per request read and not yet answered
	stopped  atomic.Bool   // stopReading was called (shutdown)
	// held counts the answers the reader left unwritten since it last
	// wrote (mayHold); slowHandler is set while the connection's last
	// inline handler took longer than holdMaxHandler. Both the reader's.
	held        int
	slowHandler bool
	// postponed are the requests read whose answers wait for settle, in
	// order (the reader's; they count in held).
	postponed []postponedReq
	// muteUntil is when a quota's throttle ends (unix nanos): the reader
	// reads no frame before (quotas.go). unmute is closed by stopReading.
	muteUntil atomic.Int64
	unmute    chan struct{}

	ip    netip.Addr // the client's address, counted by the server's gate
	hasIP bool
	// Activity, stamped with the server's coarse clock for its janitor:
	// frameStart is when the frame being read began (0 between frames),
	// lastActive when a frame was last read whole or a response written.
	frameStart atomic.Int64
	lastActive atomic.Int64
	writeStart atomic.Int64 // when the write in progress began (0 when none)
	expired    atomic.Int32 // why the janitor closed it (expiredIdle, ...), 0 if it did not

	wmu        sync.Mutex
	head, tail *slot // requests not yet written, in arrival order (wmu)
	writing    bool  // a goroutine is writing (wmu)
	readDone   bool  // the reader ended (wmu)
	drained    chan struct{}
	closedOnce bool // drained was closed (wmu)
	broken     bool // a write or a handler failed: nothing more is written (writer)
}

func newConn(s *Server, nc net.Conn, l *Listener) *conn {
	ctx, cancel := context.WithCancel(s.baseCtx)
	listener := l.Name
	var src *tlsSource
	if l.TLS != nil {
		// The handshake runs on the connection's goroutine (authenticate).
		src = newTLSSource(nc)
		// Its large writes (fetch responses) leave in few socket writes.
		nc = tlswrite.Server(src, l.TLS.Config())
	}
	c := &conn{
		s: s, nc: nc, listener: listener, lcfg: l, remote: nc.RemoteAddr().String(),
		principal: security.Anonymous,
		ctx:       ctx, cancel: cancel,
		tlsSrc:   src,
		br:       bufio.NewReaderSize(nc, 32<<10),
		inflight: make(chan struct{}, s.cfg.MaxInFlight),
		drained:  make(chan struct{}),
		unmute:   make(chan struct{}),
	}
	if s.mx != nil {
		c.lmx = s.mx.Listener(listener)
	}
	c.lastActive.Store(s.clock.Load())
	return c
}

// stopReading makes the reader stop after the frame it is reading
// (shutdown); requests already read are still answered.
func (c *conn) stopReading() {
	if c.stopped.CompareAndSwap(false, true) {
		close(c.unmute)
	}
	c.nc.SetReadDeadline(time.Now())
}

// expire closes a connection the janitor found idle or stalled mid-frame:
// the reader and a writer blocked on the socket fail at once, and finish
// logs why.
func (c *conn) expire(why int32) {
	if c.expired.CompareAndSwap(0, why) {
		c.nc.SetDeadline(time.Now())
		if c.lmx != nil {
			c.lmx.Expired(expiredReason(why))
		}
	}
}

func expiredReason(why int32) string {
	if why == expiredIdle {
		return "connections.max.idle.ms"
	}
	return "socket.request.read.timeout.ms"
}

func (c *conn) serve() {
	if c.lmx != nil {
		c.lmx.Opened()
	}
	// TLS handshake and SASL authentication (sasl.go) before the first
	// request is dispatched.
	if err := c.authenticate(); err != nil {
		c.finish(err)
		return
	}
	c.readLoop()
}

// startReader hands the reader role to a new goroutine (Detach).
func (c *conn) startReader() { go c.readLoop() }

// errDetached ends a read loop whose goroutine's handler detached: another
// goroutine is the reader now.
var errDetached = errors.New("handler detached")

// readLoop reads, decodes and handles requests until the connection ends,
// the stream holds something it cannot take, or a handler detaches.
func (c *conn) readLoop() {
	for {
		err := c.readOne()
		if err == nil {
			continue
		}
		if err != errDetached {
			c.finish(err)
		}
		return
	}
}

// readOne reads and handles one request.
func (c *conn) readOne() error {
	if len(c.postponed) > 0 && !c.mayPostpone() {
		c.settle()
	}
	if c.held > 0 && !c.mayHold() {
		c.flushHeld()
	}
	if c.stopped.Load() || !c.waitMuted() {
		return io.EOF
	}
	// Idle until the next frame's first byte (connections.max.idle.ms),
	// then the frame must arrive whole in time
	// (socket.request.read.timeout.ms); the janitor watches both.
	if _, err := c.br.Peek(1); err != nil {
		return err
	}
	c.frameStart.Store(c.s.clock.Load())
	var sizeBuf [4]byte
	if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated frame size: %w", err)
		}
		return err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 10 || size > c.s.cfg.MaxRequestBytes {
		return fmt.Errorf("frame size %d outside [10, socket.request.max.bytes=%d]", size, c.s.cfg.MaxRequestBytes)
	}
	frame, fb, held, err := c.readFrame(size)
	if err != nil {
		return err
	}
	c.frameStart.Store(0)
	c.lastActive.Store(c.s.clock.Load())
	// The frame's buffer and its share of queued.max.request.bytes are
	// held until the handler returns.
	done := func() {
		putFrame(fb)
		if held > 0 {
			c.s.budget.release(held)
		}
	}
	arrival := time.Now()
	r, a, sl, err := c.decode(frame)
	if err != nil {
		c.observeDecodeError(frame, err)
		done()
		return err
	}
	if r != nil {
		r.size = size
	}
	// KIP-368: once a SASL session expired, only re-authentication may
	// go on; anything else closes the connection.
	if end := c.sessionEnd.Load(); end != 0 && arrival.UnixNano() > end && r != nil && r.Key != 17 && r.Key != 36 {
		done()
		return errSessionExpired
	}
	// At most MaxInFlight requests read and not yet answered: beyond that
	// the reader waits (and the client's requests queue in the socket).
	select {
	case c.inflight <- struct{}{}:
	default:
		select {
		case c.inflight <- struct{}{}:
		case <-c.ctx.Done():
			done()
			return c.ctx.Err()
		}
	}
	sl.start = arrival
	c.enqueue(sl)
	if a == nil { // answered while decoding (ApiVersions fallback)
		done()
		c.observe(sl, time.Now())
		c.complete(sl)
		return nil
	}
	var handleStart time.Time // the request quota's measure starts here
	if q := c.s.cfg.Quotas; q != nil && q.Enabled(quota.Request) {
		handleStart = time.Now()
	}
	c.handle(a, r, sl)
	if r.finish != nil {
		p := postponedReq{r: r, start: handleStart}
		if r.state.CompareAndSwap(reqInline, reqReturned) {
			// Postponed: answered by settle, on the reader.
			c.postponed = append(c.postponed, p)
			c.held++
			done()
			return nil
		}
		// It detached as well (a postponing handler must not): this
		// goroutine is no longer the reader, so it answers here.
		if r.lead != nil {
			r.lead()
		}
		c.finishPostponed(p)
		c.complete(sl)
		done()
		return errDetached
	}
	if q := c.s.cfg.Quotas; q != nil && (r.throttle > 0 || q.Enabled(quota.Request)) {
		c.applyQuotas(r, sl, handleStart)
	}
	now := time.Now()
	c.observe(sl, now)
	reader := r.state.CompareAndSwap(reqInline, reqReturned)
	if reader {
		// Still the reader: the answer may wait for the next buffered
		// request's (readOne's start writes it unless mayHold).
		c.slowHandler = now.Sub(arrival) > c.s.holdMax
		c.held++
		c.ready(sl)
	} else {
		c.complete(sl)
	}
	// Record bytes of a Produce request are done with once the handler
	// returned (they are in the log): the frame is reused.
	done()
	if !reader {
		return errDetached
	}
	return nil
}

// readFrame reads a frame body of size bytes. Produce and Fetch frames (the
// data path) come from a pool and go back to it (fb); others are allocated
// (their handlers may keep references into them). The buffer is not
// allocated to the announced size before the bytes arrive: up to
// frameEagerBytes at first, then growing four-fold as they come, each step
// reserved in queued.max.request.bytes first (held is what was reserved, to
// be released once the frame is done with).
func (c *conn) readFrame(size int32) (frame []byte, fb *[]byte, held int64, err error) {
	pooled := false
	if key, err := c.br.Peek(2); err == nil && key[0] == 0 && key[1] <= 1 {
		pooled = true
	}
	alloc := func(n int) ([]byte, *[]byte) {
		if pooled {
			p := getFrame(n)
			return (*p)[:cap(*p)], p
		}
		b := make([]byte, n)
		return b, nil
	}
	reserve := func(n int64) error {
		if c.s.budget == nil {
			return nil
		}
		var deadline time.Time
		if t := c.s.cfg.RequestReadTimeout; t > 0 {
			deadline = time.Unix(0, c.frameStart.Load()).Add(t)
		}
		if pending := len(c.postponed) > 0 || c.held > 0; pending && !c.s.budget.tryAcquire(n) {
			// The wait below may be for memory that other connections
			// hold while their commits queue behind this connection's
			// unwritten ones: write and answer those first. Answers
			// held back (there was room for this frame when the reader
			// checked; another connection took it since) do not wait
			// for memory either.
			if len(c.postponed) > 0 {
				c.settle()
			}
			c.flushHeld()
		} else if pending {
			held += n
			return nil
		}
		if err := c.s.budget.acquire(c.ctx, n, deadline); err != nil {
			return fmt.Errorf("frame of %d bytes: %w", size, err)
		}
		held += n
		return nil
	}
	fail := func(err error) ([]byte, *[]byte, int64, error) {
		putFrame(fb)
		if held > 0 {
			c.s.budget.release(held)
		}
		return nil, nil, 0, err
	}

	if c.tlsSrc != nil {
		c.tlsSrc.expect(int(size), c.br.Buffered())
	}
	n := min(int(size), frameEagerBytes)
	if err := reserve(int64(n)); err != nil {
		return fail(err)
	}
	buf, fb := alloc(n)
	got := 0
	for {
		want := min(int(size), len(buf))
		if _, err := io.ReadFull(c.br, buf[got:want]); err != nil {
			return fail(fmt.Errorf("truncated frame of %d bytes after %d: %w", size, got, err))
		}
		got = want
		if got == int(size) {
			return buf[:size], fb, held, nil
		}
		// More is coming: grow, reserving the difference (the old
		// buffer, a quarter of the new one, is dropped after the copy).
		next := min(int(size), 4*len(buf))
		if err := reserve(int64(next - len(buf))); err != nil {
			return fail(err)
		}
		old, oldFB := buf, fb
		buf, fb = alloc(next)
		copy(buf, old[:got])
		putFrame(oldFB)
	}
}

// decode parses one frame: the request header (v1, or v2 with tags for
// flexible versions) and the body. For an ApiVersions request of a version
// we do not serve it returns the prepared answer (a nil api).
func (c *conn) decode(frame []byte) (*Request, *api, *slot, error) {
	r, a, sl, err := decodeFrameID(frame, c.clientID)
	if r != nil {
		r.Listener, r.Remote, r.c = c.listener, c.remote, c
		r.Principal = c.principal
		c.clientID = r.ClientID
	}
	return r, a, sl, err
}

// decodeFrame parses a frame without a connection (fuzzed directly). The
// frame must hold at least 10 bytes (the reader checks the size first).
func decodeFrame(frame []byte) (*Request, *api, *slot, error) {
	return decodeFrameID(frame, "")
}

// decodeFrameID is decodeFrame reusing lastID, the client id of the
// connection's previous request, when this one carries the same (a client
// sends the same id on every request): no string allocated per request.
func decodeFrameID(frame []byte, lastID string) (*Request, *api, *slot, error) {
	if len(frame) < 10 {
		return nil, nil, nil, fmt.Errorf("frame of %d bytes is shorter than a request header", len(frame))
	}
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	rest := frame[10:]
	var clientID string
	if idLen > 0 {
		if idLen > len(rest) {
			return nil, nil, nil, fmt.Errorf("request header: client id of %d bytes in a %d byte frame", idLen, len(frame))
		}
		if string(rest[:idLen]) == lastID {
			clientID = lastID
		} else {
			clientID = string(rest[:idLen])
		}
		rest = rest[idLen:]
	}
	a := lookup(key)
	if a == nil {
		return nil, nil, nil, fmt.Errorf("unknown API key %d (version %d, client %q)", key, version, clientID)
	}
	if key == 18 && version > a.max {
		// KIP-511: answer an ApiVersions we cannot parse with a v0 body
		// holding UNSUPPORTED_VERSION and our own ApiVersions range.
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = 18, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
		return nil, nil, &slot{corr: corr, key: key, resp: resp}, nil
	}
	if version < a.min || version > a.max {
		return nil, nil, nil, fmt.Errorf("%w: %s version %d outside the served range %d-%d (client %q)", errUnsupportedVersion, kmsg.NameForKey(key), version, a.min, a.max, clientID)
	}
	msg := kmsg.RequestForKey(key)
	msg.SetVersion(version)
	if msg.IsFlexible() {
		var err error
		if rest, err = kwire.SkipTags(rest); err != nil {
			return nil, nil, nil, fmt.Errorf("%s v%d request header: %w", kmsg.NameForKey(key), version, err)
		}
	}
	if err := msg.ReadFrom(rest); err != nil {
		return nil, nil, nil, fmt.Errorf("%s v%d from client %q does not decode: %w", kmsg.NameForKey(key), version, clientID, err)
	}
	r := &Request{Key: key, Version: version, CorrelationID: corr, ClientID: clientID, Msg: msg, Principal: security.Anonymous}
	r.slot.corr, r.slot.key = corr, key
	return r, a, &r.slot, nil
}

// handle runs a handler and records its outcome in sl. A panic is caught,
// logged with its stack, and closes only this connection.
func (c *conn) handle(a *api, r *Request, sl *slot) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("handler panic", "api", kmsg.NameForKey(r.Key), "version", r.Version, "remote", c.remote, "panic", p, "stack", string(debug.Stack()))
			if sl.stream != nil {
				sl.stream.release()
			}
			sl.resp, sl.stream, sl.none = nil, nil, false
			sl.err = fmt.Errorf("internal error handling %s", kmsg.NameForKey(r.Key))
		}
	}()
	if a.stream != nil {
		sl.stream, sl.err = a.stream(c.ctx, c.s, r)
		sl.none = sl.stream == nil && sl.err == nil
		return
	}
	sl.resp, sl.err = a.handler(c.ctx, c.s, r)
	sl.none = sl.resp == nil && sl.err == nil
}

// maxHeld bounds the answers the reader holds back (mayHold);
// holdMaxHandler is the longest an inline handler may have taken for the
// reader to hold answers back behind the next one: a connection whose
// handlers wait (an OffsetCommit waiting for followers) gets each answer
// written as soon as it is ready.
const (
	maxHeld        = 16
	holdMaxHandler = 200 * time.Microsecond
)

// mayHold reports whether the reader may leave the answers it holds
// unwritten while it handles the next request: that request is buffered
// whole (reading it will not block), it is of an API whose handler answers
// promptly or detaches before a wait (holdable), there is room for it in
// the in-flight window and in queued.max.request.bytes, the connection is
// not muted or stopping, and its handlers have been quick. The reader's.
func (c *conn) mayHold() bool {
	if c.held >= maxHeld || c.slowHandler || c.stopped.Load() || len(c.inflight) >= cap(c.inflight) {
		return false
	}
	if until := c.muteUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return false
	}
	n := c.br.Buffered()
	if n < 6 {
		return false
	}
	hdr, err := c.br.Peek(6)
	if err != nil {
		return false
	}
	size := int(int32(binary.BigEndian.Uint32(hdr)))
	if size < 10 || size > n-4 || !holdable(int16(binary.BigEndian.Uint16(hdr[4:]))) {
		return false
	}
	if b := c.s.budget; b != nil && b.avail.Load() < int64(min(size, frameEagerBytes)) {
		return false
	}
	return true
}

// holdable says whether a request of API key may be handled while answers
// before it are held back: its handler answers without waiting for other
// clients, or detaches (which writes them) before it waits. JoinGroup and
// SyncGroup, which wait for the rest of the group, and the admin APIs are
// not.
func holdable(key int16) bool {
	switch key {
	case 0, 1, 2, 3, 8, 9, 12, 18: // Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch, Heartbeat, ApiVersions
		return true
	}
	return false
}

// mayPostpone reports whether the reader may leave postponed answers
// unsettled while it handles the next request: it may hold answers
// (mayHold) and the next request is an OffsetCommit, which postpones too.
// The reader's.
func (c *conn) mayPostpone() bool {
	if !c.mayHold() {
		return false
	}
	hdr, err := c.br.Peek(6) // mayHold checked that it is buffered
	return err == nil && int16(binary.BigEndian.Uint16(hdr[4:])) == 8
}

// settle answers the postponed requests: it calls every lead first (so
// that nothing waits for work not yet started: a lead holds up other
// connections' requests), then each finish in order, and marks the
// answers ready; the held answers, these among them, are written by the
// next flushHeld. The reader's.
func (c *conn) settle() {
	start := time.Now()
	for _, p := range c.postponed {
		if p.r.lead != nil {
			lead := p.r.lead
			p.r.lead = nil
			lead()
		}
	}
	for i, p := range c.postponed {
		c.finishPostponed(p)
		c.ready(&p.r.slot)
		c.postponed[i] = postponedReq{}
	}
	c.postponed = c.postponed[:0]
	// Answers are not held behind a settle that waited (an append waiting
	// for followers), as behind a slow inline handler.
	c.slowHandler = time.Since(start) > c.s.holdMax
}

// finishPostponed waits for a postponed request's answer and records it
// (quotas, metrics) as readOne does an inline handler's; the caller marks
// it ready. A panic is caught as in handle.
func (c *conn) finishPostponed(p postponedReq) {
	r, sl := p.r, &p.r.slot
	func() {
		defer func() {
			if e := recover(); e != nil {
				c.s.log.Error("handler panic", "api", kmsg.NameForKey(r.Key), "version", r.Version, "remote", c.remote, "panic", e, "stack", string(debug.Stack()))
				sl.resp, sl.err = nil, fmt.Errorf("internal error handling %s", kmsg.NameForKey(r.Key))
			}
		}()
		resp, err := r.finish()
		if sl.err == nil { // else the handler panicked after postponing
			sl.resp, sl.err = resp, err
		}
	}()
	r.finish = nil
	sl.none = sl.resp == nil && sl.err == nil
	if q := c.s.cfg.Quotas; q != nil && (r.throttle > 0 || q.Enabled(quota.Request)) {
		c.applyQuotas(r, sl, p.start)
	}
	c.observe(sl, time.Now())
}

// flushHeld writes the answers the reader held back (with any others ready
// behind them). The reader's.
func (c *conn) flushHeld() {
	c.held = 0
	c.wmu.Lock()
	c.writeReadyLocked()
}

// enqueue appends sl to the requests awaiting their answer.
func (c *conn) enqueue(sl *slot) {
	c.wmu.Lock()
	if c.tail == nil {
		c.head = sl
	} else {
		c.tail.next = sl
	}
	c.tail = sl
	c.wmu.Unlock()
}

// complete marks sl answered and, when no other goroutine is writing, writes
// every answered response at the head of the queue.
func (c *conn) complete(sl *slot) {
	c.wmu.Lock()
	sl.ready = true
	c.writeReadyLocked()
}

// ready marks sl answered without writing it (the reader holds it back).
// Whoever writes next writes it, in order.
func (c *conn) ready(sl *slot) {
	c.wmu.Lock()
	sl.ready = true
	c.wmu.Unlock()
}

// writeReadyLocked writes every answered response at the head of the queue
// unless another goroutine is writing (it will write them). Called with wmu
// held; returns with it released.
func (c *conn) writeReadyLocked() {
	if c.writing || c.head == nil || !c.head.ready {
		// The writer, or whoever completes the head, will write it.
		c.wmu.Unlock()
		return
	}
	c.writing = true
	for c.head != nil && c.head.ready {
		first, last, n := c.head, c.head, 1
		for last.next != nil && last.next.ready {
			last = last.next
			n++
		}
		c.head = last.next
		if c.head == nil {
			c.tail = nil
		}
		c.wmu.Unlock()
		c.writeStart.Store(c.s.clock.Load())
		c.write(first, last)
		c.writeStart.Store(0)
		for range n {
			<-c.inflight
		}
		c.wmu.Lock()
	}
	c.writing = false
	if c.readDone && c.head == nil && !c.closedOnce {
		c.closedOnce = true
		close(c.drained)
	}
	c.wmu.Unlock()
}

// maxWriteBuffer is how much encoded response data is gathered before it is
// written; more is written in several writes, and the buffer is not kept.
const maxWriteBuffer = 1 << 20

// write encodes the responses first..last (a run of answered requests, in
// order) and sends them with as few writes as possible: one, unless a fetch
// carries record bytes sent by sendfile. Called by the one writer.
func (c *conn) write(first, last *slot) {
	wb := getWriteBuf()
	buf := (*wb)[:0]
	for sl := first; ; sl = sl.next {
		if c.broken {
			if sl.stream != nil {
				sl.stream.release()
			}
		} else {
			var err error
			switch {
			case sl.err != nil:
				buf = c.flush(buf) // the answers before it still go out
				c.fail(sl.err, sl)
			case sl.none:
			case sl.stream != nil:
				buf, err = sl.stream.appendResponse(buf, c.nc, sl.corr)
				sl.stream.release()
			default:
				buf = kwire.AppendResponse(buf, sl.corr, sl.resp)
			}
			if err != nil {
				c.fail(fmt.Errorf("write response: %w", err), sl)
			} else if len(buf) >= maxWriteBuffer {
				buf = c.flush(buf)
			}
		}
		sl.resp, sl.stream = nil, nil
		if sl == last {
			break
		}
	}
	*wb = c.flush(buf)
	putWriteBuf(wb)
}

// flush writes buf (unless the connection broke) and returns it emptied.
func (c *conn) flush(buf []byte) []byte {
	if len(buf) > 0 && !c.broken {
		if _, err := c.nc.Write(buf); err != nil {
			c.fail(fmt.Errorf("write response: %w", err), nil)
		}
		c.lastActive.Store(c.s.clock.Load())
	}
	return buf[:0]
}

// fail stops writing after a write error or a handler error and closes the
// connection; the reader then ends and the remaining answers are dropped.
func (c *conn) fail(err error, sl *slot) {
	if c.broken {
		return
	}
	c.broken = true
	if !errors.Is(err, errCloseConnection) && c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && c.expired.Load() == 0 {
		api := ""
		if sl != nil {
			api = kmsg.NameForKey(sl.key)
		}
		c.s.log.Warn("closing connection", "remote", c.remote, "api", api, "err", err)
	}
	c.cancel()
	c.nc.Close()
}

// finish ends the connection after the reader stopped: it waits until every
// request read has been answered (or dropped, after a failure), then closes.
func (c *conn) finish(err error) {
	switch why := c.expired.Load(); {
	case why == expiredIdle:
		c.s.log.Debug("closing idle connection", "remote", c.remote, "idle", c.s.cfg.ConnectionsMaxIdle)
	case why == expiredReadTimeout:
		c.s.logLimit.log(c.s.log, slog.LevelWarn, "read-timeout", "closing connection: request frame incomplete after socket.request.read.timeout.ms",
			"remote", c.remote, "timeout", c.s.cfg.RequestReadTimeout, "err", err)
	case err == nil, errors.Is(err, io.EOF), c.stopped.Load() && errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
	default:
		c.s.log.Warn("closing connection", "remote", c.remote, "err", err)
	}
	if len(c.postponed) > 0 {
		c.settle()
	}
	if c.held > 0 {
		c.flushHeld()
	}
	c.wmu.Lock()
	c.readDone = true
	idle := c.head == nil && !c.writing
	if idle {
		c.closedOnce = true
	}
	c.wmu.Unlock()
	if !idle {
		<-c.drained
	}
	c.cancel()
	c.nc.Close()
	if c.lmx != nil {
		c.lmx.Closed()
	}
	c.s.removeConn(c)
}

// Frame buffers of Produce and Fetch requests are reused, from pools by
// power-of-two size class (4 KiB to 16 MiB): a producer's 1 MB frames would
// otherwise be a large allocation, cleared, per request. The pools empty
// themselves over garbage collections, so an idle broker holds none.
const (
	minFrameClass = 12 // 4 KiB
	maxFrameClass = 24 // 16 MiB
)

var framePools [maxFrameClass - minFrameClass + 1]sync.Pool

func frameClass(n int) int {
	c := minFrameClass
	for c <= maxFrameClass && 1<<c < n {
		c++
	}
	return c
}

// getFrame returns a buffer of at least n bytes.
func getFrame(n int) *[]byte {
	c := frameClass(n)
	if c > maxFrameClass {
		b := make([]byte, n)
		return &b
	}
	if p, ok := framePools[c-minFrameClass].Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 1<<c)
	return &b
}

// putFrame gives a buffer from getFrame back (nil is ignored).
func putFrame(p *[]byte) {
	if p == nil {
		return
	}
	n := cap(*p)
	c := frameClass(n)
	if c > maxFrameClass || 1<<c != n {
		return // an odd size: leave it to the collector
	}
	*p = (*p)[:n]
	framePools[c-minFrameClass].Put(p)
}

// Response encode buffers, shared by every connection's writer: an idle
// connection holds none.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getWriteBuf() *[]byte { return writeBufs.Get().(*[]byte) }

func putWriteBuf(b *[]byte) {
	if cap(*b) > 2*maxWriteBuffer {
		return
	}
	*b = (*b)[:0]
	writeBufs.Put(b)
}

// observe records a finished request in the metrics: it counts, with its
// latency and error codes. It allocates nothing.
func (c *conn) observe(sl *slot, now time.Time) {
	if sl.key < 0 || int(sl.key) >= len(c.s.apiMx) {
		return
	}
	mx := c.s.apiMx[sl.key]
	if mx == nil {
		return
	}
	var code int16
	switch {
	case sl.err != nil:
		// Not answerable (a handler error or panic, a failed acks=0
		// produce): the connection closes.
		code = kerr.UnknownServerError.Code
	case sl.stream != nil:
		code = sl.stream.errorCodes(mx)
	case sl.resp != nil:
		code = tallyResponse(lookup(sl.key), sl.resp, mx)
	}
	mx.Observe(now.Sub(sl.start), code)
}

// observeDecodeError counts a request that closed the connection because it
// did not decode: UNSUPPORTED_VERSION for a version outside the served
// range, INVALID_REQUEST otherwise (unknown keys count under "Unknown" or
// the key's name).
func (c *conn) observeDecodeError(frame []byte, err error) {
	if c.s.mx == nil || len(frame) < 2 {
		return
	}
	code := kerr.InvalidRequest.Code
	if errors.Is(err, errUnsupportedVersion) {
		code = kerr.UnsupportedVersion.Code
	}
	c.s.mx.API(int16(binary.BigEndian.Uint16(frame))).Observe(0, code)
}

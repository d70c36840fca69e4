package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	// Remote is the client's address.
	Remote string

	c        *conn
	detached atomic.Bool
}

// Detach lets the connection's next request start while this handler is
// still running (before a long wait); its response is still written in
// order. Calling it more than once, or after returning, is harmless.
func (r *Request) Detach() {
	if r.detached.CompareAndSwap(false, true) {
		r.c.turn <- struct{}{}
	}
}

// streamResponse is a response written straight to the connection, with
// file regions sent by sendfile (Fetch).
type streamResponse interface {
	// writeResponse writes the whole frame (size, correlation id, header
	// tags, body); w buffers the small parts and must be flushed before
	// writing to nc directly.
	writeResponse(w *bufio.Writer, nc net.Conn, corr int32) error
	// release frees what the response holds (file regions); called once,
	// whether or not it was written.
	release()
}

// slot is one request's place in the connection's response order.
type slot struct {
	done   chan struct{} // closed when the handler finished
	corr   int32
	key    int16
	resp   kmsg.Response
	stream streamResponse
	err    error
	none   bool // no response (acks=0 produce)
}

// errCloseConnection is returned by a handler that wants the connection
// closed without logging a problem (Kafka closes an acks=0 producer's
// connection when its produce failed, the only way to tell it).
var errCloseConnection = errors.New("closing connection as the protocol requires")

type conn struct {
	s        *Server
	nc       net.Conn
	listener string
	remote   string

	ctx    context.Context
	cancel context.CancelFunc

	queue      chan *slot    // requests in arrival order, read by the writer
	turn       chan struct{} // capacity 1: held by the one handler allowed to run in order
	writerDone chan struct{}
	stopped    atomic.Bool // stopReading was called (shutdown)
}

func newConn(s *Server, nc net.Conn, listener string) *conn {
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &conn{
		s: s, nc: nc, listener: listener, remote: nc.RemoteAddr().String(),
		ctx: ctx, cancel: cancel,
		queue:      make(chan *slot, s.cfg.MaxInFlight),
		turn:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	c.turn <- struct{}{}
	return c
}

// stopReading makes the reader stop after the frame it is reading
// (shutdown); requests already read are still answered.
func (c *conn) stopReading() {
	c.stopped.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

func (c *conn) serve() {
	defer c.s.removeConn(c)
	go c.writeLoop()
	err := c.readLoop()
	close(c.queue)
	switch {
	case err == nil, errors.Is(err, io.EOF), c.stopped.Load() && errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
	default:
		c.s.log.Warn("closing connection", "remote", c.remote, "err", err)
	}
	<-c.writerDone
	c.cancel()
	c.nc.Close()
}

// readLoop reads, decodes and dispatches requests until the connection
// ends or sends something it cannot take.
func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 32<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("truncated frame size: %w", err)
			}
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 10 || size > c.s.cfg.MaxRequestBytes {
			return fmt.Errorf("frame size %d outside [10, socket.request.max.bytes=%d]", size, c.s.cfg.MaxRequestBytes)
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			return fmt.Errorf("truncated frame of %d bytes: %w", size, err)
		}
		r, a, sl, err := c.decode(frame)
		if err != nil {
			return err
		}
		select {
		case c.queue <- sl:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		if a == nil { // answered while decoding (ApiVersions fallback)
			continue
		}
		select {
		case <-c.turn:
		case <-c.ctx.Done():
			sl.err = c.ctx.Err()
			close(sl.done)
			return c.ctx.Err()
		}
		go c.handle(a, r, sl)
	}
}

// decode parses one frame: the request header (v1, or v2 with tags for
// flexible versions) and the body. For an ApiVersions request of a version
// we do not serve it returns the prepared answer (a nil api).
func (c *conn) decode(frame []byte) (*Request, *api, *slot, error) {
	r, a, sl, err := decodeFrame(frame)
	if r != nil {
		r.Listener, r.Remote, r.c = c.listener, c.remote, c
	}
	return r, a, sl, err
}

// decodeFrame parses a frame without a connection (fuzzed directly). The
// frame must hold at least 10 bytes (the reader checks the size first).
func decodeFrame(frame []byte) (*Request, *api, *slot, error) {
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
		clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	sl := &slot{done: make(chan struct{}), corr: corr, key: key}
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
		sl.resp = resp
		close(sl.done)
		return nil, nil, sl, nil
	}
	if version < a.min || version > a.max {
		return nil, nil, nil, fmt.Errorf("%s version %d outside the served range %d-%d (client %q)", kmsg.NameForKey(key), version, a.min, a.max, clientID)
	}
	msg := kmsg.RequestForKey(key)
	msg.SetVersion(version)
	if msg.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil, nil, nil, fmt.Errorf("%s v%d request header: %w", kmsg.NameForKey(key), version, err)
		}
	}
	if err := msg.ReadFrom(rest); err != nil {
		return nil, nil, nil, fmt.Errorf("%s v%d from client %q does not decode: %w", kmsg.NameForKey(key), version, clientID, err)
	}
	r := &Request{Key: key, Version: version, CorrelationID: corr, ClientID: clientID, Msg: msg}
	return r, a, sl, nil
}

// skipTags skips a tagged-field section (a uvarint count, then for each a
// uvarint tag, a uvarint size and that many bytes).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged fields count")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// handle runs a handler and records its outcome in sl. A panic is caught,
// logged with its stack, and closes only this connection.
func (c *conn) handle(a *api, r *Request, sl *slot) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("handler panic", "api", kmsg.NameForKey(r.Key), "version", r.Version, "remote", c.remote, "panic", p, "stack", string(debug.Stack()))
			sl.resp, sl.stream, sl.none = nil, nil, false
			sl.err = fmt.Errorf("internal error handling %s", kmsg.NameForKey(r.Key))
		}
		r.Detach()
		close(sl.done)
	}()
	if a.stream != nil {
		sl.stream, sl.err = a.stream(c.ctx, c.s, r)
		sl.none = sl.stream == nil && sl.err == nil
		return
	}
	sl.resp, sl.err = a.handler(c.ctx, c.s, r)
	sl.none = sl.resp == nil && sl.err == nil
}

// writeLoop writes responses in request order. It coalesces responses that
// are ready back to back into one write. After a write error or a handler
// error it stops writing, closes the connection and drains the rest.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	bw := bufio.NewWriterSize(c.nc, 32<<10)
	var (
		buf     []byte
		pending *slot
		broken  bool
	)
	fail := func(err error, sl *slot) {
		broken = true
		if !errors.Is(err, errCloseConnection) && c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
			c.s.log.Warn("closing connection", "remote", c.remote, "api", kmsg.NameForKey(sl.key), "err", err)
		}
		c.cancel()
		c.nc.Close()
	}
	for {
		sl := pending
		pending = nil
		if sl == nil {
			var ok bool
			if sl, ok = <-c.queue; !ok {
				break
			}
		}
		<-sl.done
		if broken {
			if sl.stream != nil {
				sl.stream.release()
			}
			continue
		}
		var err error
		switch {
		case sl.err != nil:
			fail(sl.err, sl)
			continue
		case sl.none:
			continue
		case sl.stream != nil:
			err = sl.stream.writeResponse(bw, c.nc, sl.corr)
			sl.stream.release()
		default:
			buf = appendResponse(buf[:0], sl.corr, sl.resp)
			_, err = bw.Write(buf)
			if cap(buf) > 1<<20 {
				buf = nil
			}
		}
		if err != nil {
			fail(fmt.Errorf("write response: %w", err), sl)
			continue
		}
		// Another response ready right away? Then keep buffering.
		select {
		case next, ok := <-c.queue:
			if !ok {
				if err := bw.Flush(); err != nil {
					fail(err, sl)
				}
				return
			}
			pending = next
			select {
			case <-next.done:
				continue
			default:
			}
		default:
		}
		if err := bw.Flush(); err != nil {
			fail(fmt.Errorf("write response: %w", err), sl)
		}
	}
	if !broken {
		bw.Flush()
	}
}

// appendResponse frames resp: size, correlation id, the response header's
// empty tag section for flexible versions (never for ApiVersions, whose
// response header is always v0), then the body.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

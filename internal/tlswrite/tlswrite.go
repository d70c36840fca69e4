// Package tlswrite gives crypto/tls connections few socket writes for a
// large Write.
//
// crypto/tls seals a Write into records of at most 16 KiB and writes each
// record to the socket with a write of its own: a 1 MB produce request or
// fetch response is 64 writes, 64 trips through the kernel's send path and,
// at the other end, up to 64 arrivals to wake for. A Conn puts a coalescing
// writer between crypto/tls and the socket: the records of one Write are
// collected (up to Max bytes) and written at once when the Write has been
// sealed, so the bytes leave in a few large writes, as they do without TLS.
//
// Nothing is held past the end of a Write. What crypto/tls writes by itself
// (the handshake, alerts, a key update's answer) goes straight through, as
// does a Write that fits one record.
//
// The buffer: a client connection that has written a large Write keeps its
// buffer (at most Max bytes) for the next. A pooled one would be dropped by
// every garbage collection of a busy client (a consumer allocates for every
// record it reads) and allocated again for each fetch request. A server
// connection takes a pooled buffer for each large Write and returns it: a
// broker may hold thousands of connections, most of them idle, and
// allocates little itself.
package tlswrite

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

const (
	// Max bounds what a connection collects before it writes: four
	// writes for 1 MB.
	Max = 256 << 10
	// oneRecord is the most a TLS record carries; a Write of no more is
	// one socket write anyway.
	oneRecord = 16 << 10
	// recordOverhead bounds what a record adds to its plaintext (header,
	// tag, TLS 1.3's content type, padding).
	recordOverhead = 64
)

// Conn is a TLS connection whose large Writes leave in few socket writes.
// Everything but Write and Close is the *tls.Conn's.
type Conn struct {
	*tls.Conn
	cw *coalescer
	wm sync.Mutex // one Write at a time owns the coalescer's window
}

// Client returns the client side of a TLS connection over nc (the
// handshake runs on first use or with HandshakeContext, as tls.Client).
func Client(nc net.Conn, cfg *tls.Config) *Conn {
	cw := &coalescer{Conn: nc}
	return &Conn{Conn: tls.Client(cw, cfg), cw: cw}
}

// Server returns the server side of a TLS connection over nc.
func Server(nc net.Conn, cfg *tls.Config) *Conn {
	cw := &coalescer{Conn: nc, pooled: true}
	return &Conn{Conn: tls.Server(cw, cfg), cw: cw}
}

// Write seals b into TLS records; when b is more than one record, they are
// collected and written before Write returns.
func (c *Conn) Write(b []byte) (int, error) {
	c.wm.Lock()
	defer c.wm.Unlock()
	if len(b) <= oneRecord || !c.cw.begin(len(b)) {
		return c.Conn.Write(b)
	}
	n, err := c.Conn.Write(b)
	if ferr := c.cw.end(); err == nil {
		err = ferr
	}
	return n, err
}

// Close closes the connection. A Close while a Write's records are being
// written closes the socket at once, as tls.Conn.Close does for a Write in
// progress: it would otherwise send its close_notify behind them, and wait
// up to 5 s for a peer that does not read.
func (c *Conn) Close() error {
	c.cw.closing.Store(true)
	if c.cw.busy.Load() {
		c.cw.Conn.Close()
		if err := c.Conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	}
	return c.Conn.Close()
}

// coalescer is the socket under crypto/tls. While collecting, the records
// crypto/tls writes are appended to the buffer, which is written when it
// would overflow and when collecting ends.
type coalescer struct {
	net.Conn
	mu         sync.Mutex
	collecting bool
	buf        []byte // collected records; its capacity is kept unless pooled
	pooled     bool   // buf comes from bufs for one Write (a server's connection)
	pb         *[]byte
	err        error // a failed write: every later write fails with it

	// busy is set from begin to the end of end's write, closing by Close:
	// of a Close and a Write that meet, either Close sees busy and closes
	// the socket, or begin sees closing and the Write is not collected.
	busy, closing atomic.Bool
}

// begin starts collecting the records of a Write of size plaintext bytes;
// false when the connection is closing (the Write is not collected).
func (w *coalescer) begin(size int) bool {
	w.busy.Store(true)
	if w.closing.Load() {
		w.busy.Store(false)
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.collecting = true
	switch need := min(size+(size/oneRecord+1)*recordOverhead, Max); {
	case w.pooled:
		w.pb = bufs.Get().(*[]byte)
		w.buf = (*w.pb)[:0]
	case cap(w.buf) < need:
		w.buf = make([]byte, 0, need)
	}
	return true
}

// bufs are the pooled buffers of server connections.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, Max); return &b }}

// end stops collecting and writes what was collected.
func (w *coalescer) end() error {
	defer w.busy.Store(false)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.collecting = false
	err := w.flushLocked()
	if w.pooled && w.pb != nil {
		*w.pb = w.buf[:0]
		bufs.Put(w.pb)
		w.pb, w.buf = nil, nil
	}
	return err
}

func (w *coalescer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if !w.collecting {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		return w.write(p)
	}
	if len(w.buf)+len(p) > cap(w.buf) {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > cap(w.buf) {
			return w.write(p)
		}
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *coalescer) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// write writes p to the socket. A failure is kept: a TLS stream with a
// record missing cannot go on.
func (w *coalescer) write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

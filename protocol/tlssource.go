package protocol

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// tlsSource sits between a TLS listener's socket and crypto/tls, so that a
// large request arrives in a few large reads instead of one wake-up and one
// read per TLS record.
//
// A client's TLS stack writes each record of at most 16 KiB with a write of
// its own, and a broker that keeps up reads each of them as it comes: for a
// 1 MB produce request, 64 wake-ups and 64 reads (plaintext arrives in a few
// large reads). When the reader knows that a large frame is on its way
// (expect, from the frame's size prefix), tlsSource asks the kernel not to
// wake it before a good part of it is there (SO_RCVLOWAT on Linux) and reads
// that part with one read into a pooled buffer, which crypto/tls then takes
// from record by record without system calls.
//
// The low-water mark never exceeds what the client must still send to
// finish the frame, so the reader cannot wait for bytes that never come:
// the bytes already read but not yet handed to the frame (in this source's
// buffer, in crypto/tls, in the connection's bufio.Reader) are subtracted,
// crypto/tls's share bounded by handing it at most handChunk bytes a read
// (it then holds at most one record's plaintext and less than one chunk of
// ciphertext). A wrong estimate can only lower the mark. Deadlines
// (idle, request read timeout, shutdown) work as on any socket.
//
// All methods but the net.Conn ones it passes through run on the
// connection's reader goroutine (the handshake included).
type tlsSource struct {
	net.Conn
	lowat lowater // nil where the platform has no SO_RCVLOWAT

	buf    *[]byte // pooled while a large frame is read, nil otherwise
	r, w   int     // buf[r:w] is read from the socket, not yet handed
	err    error   // the socket's error, returned once buf is drained
	coming int64   // bytes the socket will still deliver for the frame read
	mark   int     // the low-water mark in force (1: the kernel's default)
}

const (
	// handChunk bounds one read handed to crypto/tls: a TLS 1.2/1.3
	// ciphertext record of 16 KiB plus its header and overhead.
	handChunk = 16<<10 + 2048 + 5
	// tlsHeld bounds what crypto/tls holds between reads: one record's
	// plaintext and less than one hand chunk of ciphertext.
	tlsHeld = 16<<10 + handChunk
	// minLowat: below this a frame is read as it comes.
	minLowat = 64 << 10
	// maxLowat and sourceBuf: the most the reader waits for, and reads at
	// once.
	maxLowat  = 256 << 10
	sourceBuf = 256 << 10
)

var sourceBufs = sync.Pool{New: func() any { b := make([]byte, sourceBuf); return &b }}

// lowater sets a socket's receive low-water mark.
type lowater interface{ setLowat(n int) error }

// tlsLowWater turns the low-water mark on for new connections (benchmarks
// compare with and without it).
var tlsLowWater atomic.Bool

func init() { tlsLowWater.Store(true) }

func newTLSSource(nc net.Conn) *tlsSource {
	s := &tlsSource{Conn: nc, mark: 1}
	if tlsLowWater.Load() {
		s.lowat = lowaterOf(nc)
	}
	return s
}

// expect says that the reader is about to read plain more bytes of a frame,
// of which buffered are already in its bufio.Reader.
func (s *tlsSource) expect(plain, buffered int) {
	if s.lowat == nil {
		return
	}
	held := int64(s.w - s.r)
	s.coming = int64(plain) - int64(buffered) - held - tlsHeld
}

// Read hands crypto/tls at most handChunk bytes.
func (s *tlsSource) Read(p []byte) (int, error) {
	if len(p) > handChunk {
		p = p[:handChunk]
	}
	if s.r < s.w {
		n := copy(p, (*s.buf)[s.r:s.w])
		s.r += n
		return n, nil
	}
	if s.err != nil {
		return 0, s.err
	}
	if s.coming < minLowat {
		// Nothing large on its way: straight from the socket.
		s.release()
		s.setMark(1)
		n, err := s.Conn.Read(p)
		s.coming -= int64(n)
		return n, err
	}
	if s.buf == nil {
		s.buf = sourceBufs.Get().(*[]byte)
	}
	s.setMark(int(min(s.coming, maxLowat)))
	n, err := s.Conn.Read(*s.buf)
	s.coming -= int64(n)
	s.r, s.w, s.err = 0, n, err
	if n == 0 {
		return 0, err
	}
	m := copy(p, (*s.buf)[:n])
	s.r = m
	return m, nil
}

// setMark changes the low-water mark if it is not n already. A failure
// leaves the kernel's default (every byte wakes the reader), which is
// always safe.
func (s *tlsSource) setMark(n int) {
	if s.lowat == nil || n == s.mark {
		return
	}
	if err := s.lowat.setLowat(n); err != nil {
		s.lowat = nil
		return
	}
	s.mark = n
}

// release returns the buffer once it is drained.
func (s *tlsSource) release() {
	if s.buf != nil && s.r == s.w {
		sourceBufs.Put(s.buf)
		s.buf, s.r, s.w = nil, 0, 0
	}
}

// kernelAtLeast reports whether a release string ("6.1.0-18-amd64")
// is major.minor or later.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	mnr := parts[1]
	if i := strings.IndexFunc(mnr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		mnr = mnr[:i]
	}
	mn, err := strconv.Atoi(mnr)
	if err != nil {
		return false
	}
	return maj > major || maj == major && mn >= minor
}

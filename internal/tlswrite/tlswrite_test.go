package tlswrite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPeer is a TLS server on loopback that answers each message (a 4-byte
// length and that many bytes) with the SHA-256 of its body.
func tlsPeer(t *testing.T) (addr string, trust *x509.CertPool) {
	t.Helper()
	ca := testutil.NewCA(t, "")
	cert := ca.Server(t, "peer", "127.0.0.1").KeyPair(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var n [4]byte
				for {
					if _, err := io.ReadFull(c, n[:]); err != nil {
						return
					}
					size := int(n[0])<<24 | int(n[1])<<16 | int(n[2])<<8 | int(n[3])
					h := sha256.New()
					if _, err := io.CopyN(h, c, int64(size)); err != nil {
						return
					}
					if _, err := c.Write(h.Sum(nil)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), ca.Pool()
}

// TestTLSWritesCoalesced: a request written to a client TLS connection
// leaves in a few socket writes (not one per 16 KiB TLS record), arrives
// whole and in order, and an answer read on the same connection while
// nothing is being written (the reader's own TLS traffic) is not held.
func TestTLSWritesCoalesced(t *testing.T) {
	addr, trust := tlsPeer(t)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConn{Conn: raw}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := Client(cc, &tls.Config{RootCAs: trust, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(20 * time.Second))

	for _, size := range []int{1, 100, 16 << 10, 16<<10 + 1, 300 << 10, 1 << 20, 3<<20 + 7} {
		msg := make([]byte, 4+size)
		msg[0], msg[1], msg[2], msg[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
		for i := 4; i < len(msg); i++ {
			msg[i] = byte(i * 7)
		}
		before := cc.writes.Load()
		if n, err := tc.Write(msg); err != nil || n != len(msg) {
			t.Fatalf("%d bytes: wrote %d, %v", size, n, err)
		}
		writes := cc.writes.Load() - before
		// 16 KiB records, each with its header and tag, collected up to
		// Max bytes a write.
		records := (len(msg) + 16<<10 - 1) / (16 << 10)
		maxWrites := int64(records*(16<<10+64)/Max + 1)
		if writes > maxWrites {
			t.Errorf("%d bytes in %d records: %d socket writes, want at most %d", size, records, writes, maxWrites)
		}
		want := sha256.Sum256(msg[4:])
		got := make([]byte, sha256.Size)
		if _, err := io.ReadFull(tc, got); err != nil {
			t.Fatalf("%d bytes: reading the answer: %v", size, err)
		}
		if !bytes.Equal(got, want[:]) {
			t.Fatalf("%d bytes: the peer read other bytes", size)
		}
	}
}

// TestTLSWriteFailure: a write that cannot reach the socket fails the
// Write that sealed it, and every Write after it.
func TestTLSWriteFailure(t *testing.T) {
	addr, trust := tlsPeer(t)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := Client(raw, &tls.Config{RootCAs: trust, ServerName: "127.0.0.1"})
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	msg := make([]byte, 64<<10)
	if _, err := tc.Write(msg); err == nil {
		t.Fatal("a write to a closed socket succeeded")
	}
	if _, err := tc.Write(msg[:10]); err == nil {
		t.Fatal("a write after a failed one succeeded")
	} else if !errors.Is(err, net.ErrClosed) {
		t.Logf("second write: %v", err)
	}
}

// TestServerWritesCoalesced: the server side coalesces as the client side
// does (a broker's fetch response over TLS), and small Writes still leave
// at once.
func TestServerWritesCoalesced(t *testing.T) {
	ca := testutil.NewCA(t, "")
	cert := ca.Server(t, "peer", "127.0.0.1").KeyPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 1<<20 + 5
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i * 13)
	}
	type result struct {
		writes int64
		err    error
	}
	done := make(chan result, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer raw.Close()
		cc := &countingConn{Conn: raw}
		sc := Server(cc, &tls.Config{Certificates: []tls.Certificate{cert}})
		sc.SetDeadline(time.Now().Add(20 * time.Second))
		if err := sc.Handshake(); err != nil {
			done <- result{err: err}
			return
		}
		before := cc.writes.Load()
		if _, err := sc.Write(msg); err != nil {
			done <- result{err: err}
			return
		}
		writes := cc.writes.Load() - before
		if sc.cw.buf != nil {
			done <- result{err: errors.New("the server connection kept its write buffer after the Write")}
			return
		}
		// A small answer is not held back by the coalescing.
		if _, err := sc.Write([]byte("end")); err != nil {
			done <- result{err: err}
			return
		}
		done <- result{writes: writes}
		io.Copy(io.Discard, sc)
	}()
	trust := ca.Pool()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: trust, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, size+3)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:size], msg) || string(got[size:]) != "end" {
		t.Fatal("the client read other bytes")
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	records := (size + 16<<10 - 1) / (16 << 10)
	if max := int64(records*(16<<10+64)/Max + 1); r.writes > max {
		t.Errorf("%d records in %d socket writes, want at most %d", records, r.writes, max)
	}
	t.Logf("%d bytes, %d records, %d socket writes", size, records, r.writes)
}

// stallConn tells whether a socket write is in progress and how many
// bytes went out.
type stallConn struct {
	net.Conn
	inWrite atomic.Int32
	bytes   atomic.Int64
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.inWrite.Add(1)
	defer c.inWrite.Add(-1)
	n, err := c.Conn.Write(p)
	c.bytes.Add(int64(n))
	return n, err
}

// TestCloseDuringBlockedWrite: a peer that stops reading blocks a large
// Write in the socket write of its collected records; Close then closes
// the socket at once (as tls.Conn.Close does for a Write in progress)
// instead of queueing its close_notify behind the blocked records, and
// the Write fails.
func TestCloseDuringBlockedWrite(t *testing.T) {
	ca := testutil.NewCA(t, "")
	cert := ca.Server(t, "peer", "127.0.0.1").KeyPair(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	defer close(release)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.(*tls.Conn).Handshake()
		<-release // reads nothing more
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := &stallConn{Conn: raw}
	trust := ca.Pool()
	c := Client(sc, &tls.Config{RootCAs: trust, ServerName: "127.0.0.1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		// Writes that fit the coalescer, until the socket buffers are
		// full: the last blocks in the write of its collected records,
		// after crypto/tls has sealed it.
		msg := make([]byte, 200<<10)
		for {
			if _, err := c.Write(msg); err != nil {
				wrote <- err
				return
			}
		}
	}()
	// Wait until the collected records' write is stuck.
	last := int64(-1)
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		n := sc.bytes.Load()
		stuck := c.cw.busy.Load() && sc.inWrite.Load() == 1 && n == last
		last = n
		if !stuck {
			return errors.New("the write is not blocked yet")
		}
		return nil
	})
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v with a blocked write", d)
	}
	select {
	case <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked Write did not return after Close")
	}
}

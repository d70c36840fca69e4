package protocol

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// countingConn counts the reads that reach the socket.
type countingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// tlsPair returns a TLS client and the server side as the protocol server
// builds it: crypto/tls over a tlsSource over the accepted socket, read
// through a bufio.Reader.
func tlsPair(t *testing.T) (client *tls.Conn, server *tls.Conn, src *tlsSource, raw *countingConn) {
	t.Helper()
	ca := testutil.NewCA(t, "")
	kp := ca.Server(t, "broker").KeyPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	pool := ca.Pool()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := tls.Client(nc, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	t.Cleanup(func() { cc.Close() })
	hs := make(chan error, 1)
	go func() { hs <- cc.Handshake() }()
	sc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	raw = &countingConn{Conn: sc}
	src = &tlsSource{Conn: raw, lowat: lowaterOf(sc), mark: 1}
	server = tls.Server(src, &tls.Config{Certificates: []tls.Certificate{kp}})
	t.Cleanup(func() { server.Close() })
	if err := server.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := server.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	return cc, server, src, raw
}

// readFrames reads size-prefixed frames as conn.readOne does (expect
// before the body) and echoes each frame's size back, so the client only
// sends the next frame once the last one was read whole: a low-water mark
// above what is still to come would stall the exchange until the
// deadline.
func readFrames(server *tls.Conn, src *tlsSource, n int, got chan<- []byte) error {
	br := bufio.NewReaderSize(server, 32<<10)
	for range n {
		var sz [4]byte
		if _, err := io.ReadFull(br, sz[:]); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(sz[:]))
		src.expect(size, br.Buffered())
		body := make([]byte, size)
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		got <- body
		if _, err := server.Write(sz[:]); err != nil {
			return err
		}
	}
	return nil
}

func TestTLSSourceFramesWhole(t *testing.T) {
	client, server, src, _ := tlsPair(t)
	// Sizes around the thresholds: below the low-water minimum, at it,
	// around a record, the pooled buffer and the mark's cap, and large.
	sizes := []int{1, 100, 16 << 10, 16<<10 + 1, minLowat - 1, minLowat, minLowat + tlsHeld,
		minLowat + tlsHeld + 1, 100 << 10, maxLowat - 7, maxLowat, maxLowat + 1, sourceBuf + 3,
		1 << 20, 1<<20 + 12345, 3 << 20, 5, 64 << 10, 2 << 20}
	got := make(chan []byte, 1)
	done := make(chan error, 1)
	go func() { done <- readFrames(server, src, len(sizes), got) }()
	if err := client.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for i, size := range sizes {
		frame := make([]byte, 4+size)
		binary.BigEndian.PutUint32(frame, uint32(size))
		for j := 4; j < len(frame); j++ {
			frame[j] = byte(i*31 + j)
		}
		// Write in pieces with pauses, as a client whose application
		// produces slower than the network carries.
		rest := frame
		for len(rest) > 0 {
			k := min(len(rest), 300<<10)
			if _, err := client.Write(rest[:k]); err != nil {
				t.Fatalf("frame %d (%d bytes): write: %v", i, size, err)
			}
			rest = rest[k:]
		}
		select {
		case body := <-got:
			if !bytes.Equal(body, frame[4:]) {
				t.Fatalf("frame %d (%d bytes) differs", i, size)
			}
		case err := <-done:
			t.Fatalf("frame %d (%d bytes): reader ended: %v", i, size, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("frame %d (%d bytes) not read whole within 10s: the reader waits for bytes that do not come", i, size)
		}
		var echo [4]byte
		if _, err := io.ReadFull(client, echo[:]); err != nil {
			t.Fatalf("frame %d: echo: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A large frame reaches the broker in few reads of the socket, not one per
// TLS record.
func TestTLSSourceFewReads(t *testing.T) {
	client, server, src, raw := tlsPair(t)
	if src.lowat == nil {
		t.Skip("no SO_RCVLOWAT on this platform")
	}
	const size = 4 << 20
	frame := make([]byte, 4+size)
	binary.BigEndian.PutUint32(frame, size)
	got := make(chan []byte, 1)
	done := make(chan error, 1)
	before := raw.reads.Load()
	go func() { done <- readFrames(server, src, 1, got) }()
	if _, err := client.Write(frame); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("frame not read within 20s")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 4 MiB is 256 TLS records; with the low-water mark and the 256 KiB
	// buffer the reads number about 16 plus the first few.
	reads := raw.reads.Load() - before
	t.Logf("%d socket reads for a %d-byte frame", reads, size)
	if reads > 100 {
		t.Fatalf("%d socket reads for a 4 MiB frame: the reader is woken per TLS record", reads)
	}
}

// A connection closed mid-frame ends the read with an error, not a hang.
func TestTLSSourcePeerGone(t *testing.T) {
	client, server, src, _ := tlsPair(t)
	done := make(chan error, 1)
	go func() { done <- readFrames(server, src, 1, make(chan []byte, 1)) }()
	frame := make([]byte, 4+600<<10)
	binary.BigEndian.PutUint32(frame, 1<<20) // announces more than it sends
	if _, err := client.Write(frame); err != nil {
		t.Fatal(err)
	}
	client.Close()
	select {
	case err := <-done:
		if err == nil || !(errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
			t.Fatalf("read ended with %v, want an unexpected EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader still waiting 10s after the peer closed")
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.1.0-18-amd64", true}, {"4.18.0-553.el8_10.x86_64", true}, {"4.19", true},
		{"5.4.0", true}, {"4.17.19", false}, {"3.10.0-1160.el7.x86_64", false},
		{"4.9-rc1", false}, {"", false}, {"x.y", false}, {"10.0", true},
	} {
		if got := kernelAtLeast(c.release, 4, 18); got != c.want {
			t.Errorf("kernelAtLeast(%q, 4, 18) = %v, want %v", c.release, got, c.want)
		}
	}
}

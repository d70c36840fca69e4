package zkcoord

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// handshakeTimeout bounds how long the ZooKeeper client waits for a server
// to answer its connect request (the session handshake).
//
// go-zookeeper waits ten times its receive timeout for that answer: 40 s
// with a 6 s session, 120 s with Kafka's default 18 s. A server that has
// accepted the TCP connection but does not answer — a ZooKeeper that is
// restarting (the listening socket is bound a few seconds before the server
// takes connections, and connections made in between are never answered),
// or a stalled or half-open peer — keeps the client on that connection long
// after the server has expired the session, so a short ZooKeeper restart
// turns into a lost session on every broker at once (broker registrations
// and the controllership go, and metadata changes fail until each broker
// has re-registered). ZooKeeper's own Java client gives the handshake
// sessionTimeout/len(servers); a third of the session timeout here (at
// least a second) leaves time for one more attempt, on the same or the next
// server, while the server still holds the session.
func handshakeTimeout(session time.Duration) time.Duration {
	return max(session/3, time.Second)
}

// dialer returns a zk.Dialer whose connections bound the session handshake
// by limit (see handshakeTimeout) and behave as plain connections after it;
// with tlsCfg they speak TLS (zookeeper.ssl.client.enable, tls.go).
func dialer(limit time.Duration, tlsCfg *tls.Config) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		var c net.Conn
		var err error
		if tlsCfg != nil {
			c, err = dialTLS(network, address, min(timeout, limit), tlsCfg)
		} else {
			c, err = net.DialTimeout(network, address, timeout)
		}
		if err != nil {
			return nil, err
		}
		hc := &handshakeConn{Conn: c, until: time.Now().Add(limit)}
		// The client sets no deadline on some handshake reads; the first
		// deadline call arms ours.
		c.SetDeadline(hc.until)
		return hc, nil
	}
}

// handshakeConn caps every deadline (including "no deadline") at until
// while the first frame from the server — the connect response — has not
// been read in full; after it, deadlines pass through unchanged.
type handshakeConn struct {
	net.Conn
	until time.Time

	mu   sync.Mutex
	done bool
	hdr  [4]byte
	nhdr int   // bytes of the length prefix read so far
	left int64 // bytes of the frame body still to read (valid once nhdr == 4)
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.done {
			c.consume(p[:n])
			if c.done {
				// Handshake over: drop our cap; the client sets its
				// own deadlines from here on.
				c.Conn.SetDeadline(time.Time{})
			}
		}
		c.mu.Unlock()
	}
	return n, err
}

// consume tracks the connect response frame (4-byte length, body).
func (c *handshakeConn) consume(b []byte) {
	for len(b) > 0 && !c.done {
		if c.nhdr < 4 {
			k := copy(c.hdr[c.nhdr:], b)
			c.nhdr += k
			b = b[k:]
			if c.nhdr == 4 {
				c.left = int64(int32(binary.BigEndian.Uint32(c.hdr[:])))
				if c.left <= 0 {
					c.done = true
				}
			}
			continue
		}
		k := min(int64(len(b)), c.left)
		c.left -= k
		b = b[k:]
		if c.left == 0 {
			c.done = true
		}
	}
}

func (c *handshakeConn) capped(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done || (!t.IsZero() && t.Before(c.until)) {
		return t
	}
	return c.until
}

func (c *handshakeConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.capped(t)) }

func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.capped(t))
}

func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t))
}

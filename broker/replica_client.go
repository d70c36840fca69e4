package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/kwire"
)

// brokerConn is a broker-to-broker connection: requests go one at a time
// (a replica fetcher is sequential), framed by kmsg and kwire (as package
// protocol frames the other end). It is what Kafka's NetworkClient is to its
// ReplicaFetcherThread; no client library sits in between, so the fetch
// response's record bytes are appended to the follower's log straight from
// the read buffer.
type brokerConn struct {
	conn    net.Conn
	format  *kmsg.RequestFormatter
	corr    int32
	wbuf    []byte
	rbuf    []byte
	timeout time.Duration

	// auth is how the connection authenticated (nil: it did not);
	// reauthAt is when its SASL session must be renewed (KIP-368; zero:
	// never).
	auth     *InterBrokerAuth
	addr     string
	reauthAt time.Time

	closeOnce sync.Once
}

// maxResponseBytes bounds a response frame (a fetch response is bounded by
// replica.fetch.response.max.bytes, plus framing).
const maxResponseBytes = 256 << 20

// dialBroker connects to another broker's inter-broker listener and, with
// auth, runs its TLS handshake and SASL exchange (replica_auth.go).
func dialBroker(ctx context.Context, addr, clientID string, timeout time.Duration, auth *InterBrokerAuth) (*brokerConn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	bc := &brokerConn{conn: c, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), timeout: timeout, auth: auth, addr: addr}
	if auth == nil {
		return bc, nil
	}
	if auth.TLS != nil {
		cfg := auth.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		bc.conn = tc
	}
	if auth.SASL != nil {
		if err := bc.authenticate(ctx); err != nil {
			bc.Close()
			return nil, err
		}
	}
	return bc, nil
}

// Close closes the connection (safe to call from another goroutine to
// abort a request).
func (c *brokerConn) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.conn.Close() })
	return err
}

// request sends req and reads its response. extra widens the deadline for
// requests that wait at the server (a fetch's max wait). The response may
// reference the connection's read buffer: it is valid until the next
// request.
func (c *brokerConn) request(ctx context.Context, req kmsg.Request, extra time.Duration) (kmsg.Response, error) {
	if !c.reauthAt.IsZero() && time.Now().After(c.reauthAt) {
		if err := c.authenticate(ctx); err != nil {
			return nil, fmt.Errorf("re-authentication: %w", err)
		}
	}
	return c.roundTrip(ctx, req, extra)
}

// roundTrip sends req and reads its response.
func (c *brokerConn) roundTrip(ctx context.Context, req kmsg.Request, extra time.Duration) (kmsg.Response, error) {
	c.corr++
	c.wbuf = c.format.AppendRequest(c.wbuf[:0], req, c.corr)
	deadline := time.Now().Add(c.timeout + extra)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.conn.SetDeadline(deadline)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return nil, err
	}
	frame, rbuf, err := kwire.ReadFrame(c.conn, c.rbuf, 4, maxResponseBytes)
	c.rbuf = rbuf
	if err != nil {
		return nil, err
	}
	return kwire.DecodeResponse(req, c.corr, frame)
}

// RequestBroker sends one request to a live broker of the image over the
// inter-broker listener and returns its response (a new connection each
// time: for rare requests such as ControlledShutdown).
func (b *Broker) RequestBroker(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	addr, err := b.brokerAddr(id)
	if err != nil {
		return nil, err
	}
	c, err := dialBroker(ctx, addr, b.clientID(), b.cfg.ReplicaSocketTimeout, b.cfg.InterBrokerAuth)
	if err != nil {
		return nil, fmt.Errorf("broker %d at %s: %w", id, addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	resp, err := c.request(ctx, req, 0)
	if err != nil {
		return nil, fmt.Errorf("broker %d at %s: %w", id, addr, err)
	}
	return resp, nil
}

// brokerAddr is a live broker's address on the inter-broker listener.
func (b *Broker) brokerAddr(id int32) (string, error) {
	br, ok := b.Image().Broker(id)
	if !ok {
		return "", fmt.Errorf("broker %d is not live", id)
	}
	ep, ok := br.Endpoint(b.interBrokerListener())
	if !ok {
		ep, ok = br.Endpoint("")
	}
	if !ok {
		return "", fmt.Errorf("broker %d has no endpoint", id)
	}
	return net.JoinHostPort(ep.Host, fmt.Sprint(ep.Port)), nil
}

func (b *Broker) interBrokerListener() string {
	if b.cfg.InterBrokerListener != "" {
		return b.cfg.InterBrokerListener
	}
	if len(b.cfg.Endpoints) > 0 {
		return b.cfg.Endpoints[0].Listener
	}
	return ""
}

func (b *Broker) clientID() string { return fmt.Sprintf("sluice-broker-%d", b.cfg.BrokerID) }

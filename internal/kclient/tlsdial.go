package kclient

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/sluice-io/sluice/internal/tlswrite"
)

// dialTimeout is franz-go's default dial timeout.
const dialTimeout = 10 * time.Second

// dialTLS returns a franz-go dial function that opens a TLS connection with
// cfg, its ServerName (when empty) from the address dialed, as
// kgo.DialTLSConfig does. A request's TLS records leave in a few socket
// writes instead of one per 16 KiB record (internal/tlswrite): over TLS,
// Sluice's clients produce at a lower CPU cost, and so does the broker that
// reads them.
func dialTLS(cfg *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		c := cfg.Clone()
		if c.ServerName == "" {
			h, _, err := net.SplitHostPort(host)
			if err != nil {
				return nil, err
			}
			c.ServerName = h
		}
		nc, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		tc := tlswrite.Client(nc, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
}

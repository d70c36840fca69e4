package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/internal/tlswrite"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/security"
)

// Authentication. A connection authenticates before its first request is
// dispatched, on its own goroutine (conn.authenticate):
//
//   - SSL and SASL_SSL listeners: the TLS handshake (a client certificate
//     is checked against ssl.truststore when ssl.client.auth asks for one).
//     On SSL the principal is the certificate's subject mapped by
//     ssl.principal.mapping.rules, or User:ANONYMOUS without one.
//   - SASL_PLAINTEXT and SASL_SSL listeners: Kafka's SASL exchange
//     (SaslServerAuthenticator). Until it succeeds only ApiVersions,
//     SaslHandshake and SaslAuthenticate are read; any other request closes
//     the connection without an answer, and so does a frame larger than
//     sasl.server.max.receive.size. A SaslHandshake v0 is followed by raw
//     tokens (a 4-byte size and the bytes, both ways: kafka-python, old
//     sarama); v1 by SaslAuthenticate requests. A failure is answered
//     SASL_AUTHENTICATION_FAILED (v1; nothing with v0) and the connection
//     closed, after the address's penalty (security.Throttle), and is
//     counted and logged with the client's address, never the password.
//   - PLAINTEXT: User:ANONYMOUS.
//
// With connections.max.reauth.ms the session expires: the client must
// re-authenticate (SaslHandshake v1 and SaslAuthenticate on the open
// connection, KIP-368) as the same user before it ends, or its next other
// request closes the connection.

// Defaults of the listener and server settings.
const (
	DefaultSaslMaxReceiveSize = 524288                 // sasl.server.max.receive.size
	DefaultAuthFailureDelay   = 100 * time.Millisecond // connection.failed.authentication.delay.ms
	tlsHandshakeTimeout       = 10 * time.Second
)

// unknownMechanism labels the authentication metrics of a mechanism name
// Sluice does not know (so that a client cannot add label values).
const unknownMechanism = "UNKNOWN"

// errSessionExpired closes a connection whose SASL session ended.
var errSessionExpired = errors.New("SASL session expired (connections.max.reauth.ms) without re-authentication")

// errAuthFailed closes a connection after a failed authentication (already
// logged).
var errAuthFailed = errors.New("authentication failed")

// saslState is a SASL connection's exchange (the reader's).
type saslState struct {
	mechanism string // chosen by the handshake
	server    security.SASLServer
	v0        bool // SaslHandshake v0: raw tokens follow
	started   bool // the exchange's first token was admitted by the throttle
	reauth    bool // re-authenticating an authenticated connection
	done      bool // authenticated (at least once)
	lastAuth  time.Time
}

func (l *Listener) protocol() string {
	if l.SecurityProtocol == "" {
		return "PLAINTEXT"
	}
	return l.SecurityProtocol
}

func (l *Listener) isSASL() bool {
	return l.SecurityProtocol == "SASL_PLAINTEXT" || l.SecurityProtocol == "SASL_SSL"
}

// checkListenerSecurity checks each listener's settings against its
// protocol.
func checkListenerSecurity(cfg Config) error {
	for _, l := range cfg.Listeners {
		p := l.protocol()
		switch p {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return fmt.Errorf("protocol: listener %s: unknown security protocol %q", l.Name, p)
		}
		tlsP := p == "SSL" || p == "SASL_SSL"
		if tlsP != (l.TLS != nil) {
			return fmt.Errorf("protocol: listener %s (%s): TLS configuration %s", l.Name, p, map[bool]string{true: "missing", false: "given to a listener without TLS"}[tlsP])
		}
		if l.isSASL() {
			if len(l.Mechanisms) == 0 {
				return fmt.Errorf("protocol: listener %s (%s): no SASL mechanism enabled", l.Name, p)
			}
			for _, m := range l.Mechanisms {
				if _, err := security.NewSASLServer(m, nil); err != nil {
					return fmt.Errorf("protocol: listener %s: %w", l.Name, err)
				}
			}
			if cfg.Credentials == nil {
				return fmt.Errorf("protocol: listener %s (%s): no credential store", l.Name, p)
			}
		}
	}
	return nil
}

// resolveAuthMetrics resolves the authentication counters of every
// listener (s.mu held, from resolveMetrics).
func (s *Server) resolveAuthMetrics(reg *metrics.Registry, brokerID int32) {
	s.authMx = map[string]*metrics.Authentication{}
	for _, l := range s.cfg.Listeners {
		// A SASL listener counts every mechanism Sluice knows (a client
		// may ask for one the listener does not enable) and, as
		// "UNKNOWN", any other name a client sends.
		var mechs []string
		if l.isSASL() {
			mechs = append(slices.Clone(config.SASLMechanisms), unknownMechanism)
		}
		if l.TLS != nil {
			mechs = append([]string{"SSL"}, mechs...)
		}
		for _, m := range mechs {
			s.authMx[l.Name+"/"+m] = reg.Authentication(brokerID, l.Name, m)
		}
	}
}

// authOutcome counts an authentication.
func (c *conn) authOutcome(mechanism string, ok bool) {
	mx := c.s.authMx[c.listener+"/"+mechanism]
	if mx == nil {
		if mx = c.s.authMx[c.listener+"/"+unknownMechanism]; mx == nil {
			return
		}
	}
	if ok {
		mx.Succeeded()
	} else {
		mx.Failed()
	}
}

// authFailed counts and logs a failed authentication and holds the
// connection for the address's penalty before it is answered and closed.
func (c *conn) authFailed(mechanism, user string, err error) {
	c.authOutcome(mechanism, false)
	penalty := c.s.throttle.Failed(c.ip)
	attrs := []any{"listener", c.listener, "remote", c.remote, "mechanism", mechanism, "err", err}
	if user != "" {
		attrs = append(attrs, "user", user)
	}
	c.s.log.Warn("authentication failed", attrs...)
	c.sleep(penalty)
}

func (c *conn) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}

// authSucceeded records a completed SASL exchange.
func (c *conn) authSucceeded(user string) {
	st := c.sasl
	c.authOutcome(st.mechanism, true)
	c.s.throttle.Succeeded(c.ip)
	if !st.reauth {
		c.principal = security.Principal{Type: "User", Name: user}
	}
	st.done = true
	st.lastAuth = time.Now()
	if d := c.lcfg.Reauth[st.mechanism]; d > 0 {
		c.sessionEnd.Store(st.lastAuth.Add(d).UnixNano())
	} else {
		c.sessionEnd.Store(0)
	}
	c.s.log.Debug("authenticated", "listener", c.listener, "remote", c.remote, "principal", c.principal, "mechanism", st.mechanism, "reauthentication", st.reauth)
	st.server, st.started, st.reauth = nil, false, false
}

// authenticate runs the TLS handshake and the SASL exchange of the
// connection's listener; an error closes the connection.
func (c *conn) authenticate() error {
	l := c.lcfg
	if tc, ok := c.nc.(*tlswrite.Conn); ok {
		ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			if c.ctx.Err() == nil && c.expired.Load() == 0 {
				c.authFailed("SSL", "", fmt.Errorf("TLS handshake: %w", err))
			}
			return errAuthFailed
		}
		if l.SecurityProtocol == "SSL" {
			if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
				m := l.PrincipalMapper
				if m == nil {
					m = security.DefaultPrincipalMapper
				}
				p, err := m.CertificatePrincipal(certs[0])
				if err != nil {
					c.authFailed("SSL", "", err)
					return errAuthFailed
				}
				c.principal = p
			}
			c.s.log.Debug("authenticated", "listener", c.listener, "remote", c.remote, "principal", c.principal, "mechanism", "SSL")
		}
		c.authOutcome("SSL", true)
	}
	if !l.isSASL() {
		return nil
	}
	c.sasl = &saslState{}
	return c.saslExchange()
}

// saslExchange reads the requests a connection may send before it has
// authenticated, until it has (nil) or must be closed.
func (c *conn) saslExchange() error {
	maxSize := int(c.lcfg.MaxReceiveSize)
	if maxSize <= 0 {
		maxSize = DefaultSaslMaxReceiveSize
	}
	var buf, out []byte
	for {
		if c.stopped.Load() {
			return io.EOF
		}
		if _, err := c.br.Peek(1); err != nil {
			return err
		}
		c.frameStart.Store(c.s.clock.Load())
		frame, grown, err := kwire.ReadFrame(c.br, buf, 0, maxSize)
		buf = grown
		if err != nil {
			return fmt.Errorf("before authentication: %w (sasl.server.max.receive.size=%d)", err, maxSize)
		}
		c.frameStart.Store(0)
		c.lastActive.Store(c.s.clock.Load())
		st := c.sasl

		if st.v0 {
			// A raw token: answered with a raw token, or, on failure,
			// by closing the connection.
			resp, done, err := c.saslStep(frame)
			if err != nil {
				return errAuthFailed
			}
			out = binaryAppendToken(out[:0], resp)
			if _, err := c.nc.Write(out); err != nil {
				return err
			}
			if done {
				return nil
			}
			continue
		}

		r, a, sl, err := decodeFrameID(frame, c.clientID)
		if err != nil {
			return err
		}
		if a == nil { // ApiVersions of a version we do not serve: answered while decoding
			if err := c.writeNow(&out, sl.corr, sl.resp); err != nil {
				return err
			}
			continue
		}
		r.Listener, r.Remote, r.c, r.Principal = c.listener, c.remote, c, c.principal
		c.clientID = r.ClientID
		var resp kmsg.Response
		closeAfter := false
		switch r.Key {
		case 18:
			resp, _ = handleApiVersions(c.ctx, c.s, r)
		case 17:
			resp, closeAfter = c.saslHandshake(r.Msg.(*kmsg.SASLHandshakeRequest))
		case 36:
			var done bool
			resp, done, closeAfter = c.saslAuthenticate(r.Msg.(*kmsg.SASLAuthenticateRequest))
			if done {
				if err := c.writeNow(&out, r.CorrelationID, resp); err != nil {
					return err
				}
				return nil
			}
		default:
			c.s.logLimit.log(c.s.log, slog.LevelWarn, "unauthenticated-request", "closing connection: request before authentication",
				"listener", c.listener, "remote", c.remote, "api", kmsg.NameForKey(r.Key))
			return errAuthFailed
		}
		if err := c.writeNow(&out, r.CorrelationID, resp); err != nil {
			return err
		}
		if closeAfter {
			return errAuthFailed
		}
	}
}

// writeNow writes one response at once (before authentication, when
// nothing else is being written).
func (c *conn) writeNow(buf *[]byte, corr int32, resp kmsg.Response) error {
	*buf = kwire.AppendResponse((*buf)[:0], corr, resp)
	_, err := c.nc.Write(*buf)
	c.lastActive.Store(c.s.clock.Load())
	return err
}

func binaryAppendToken(dst, tok []byte) []byte {
	n := len(tok)
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	return append(dst, tok...)
}

// saslHandshake answers a SaslHandshake: it chooses the exchange's
// mechanism. closeAfter is true when the connection must close once the
// answer is written.
func (c *conn) saslHandshake(req *kmsg.SASLHandshakeRequest) (resp *kmsg.SASLHandshakeResponse, closeAfter bool) {
	resp = req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	l := c.lcfg
	if l != nil && l.isSASL() {
		resp.SupportedMechanisms = append([]string(nil), l.Mechanisms...)
	}
	st := c.sasl
	switch {
	case st == nil:
		// Not a SASL listener: nothing to authenticate.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, false
	case st.mechanism != "" && !st.done:
		// A second handshake in the middle of the exchange.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, true
	case st.done:
		// Authenticated: only a re-authentication (KIP-368) of a
		// session that expires, at most once a second, with the same
		// mechanism, over SaslAuthenticate (v1).
		if c.sessionEnd.Load() == 0 || st.server != nil || req.Version < 1 || time.Since(st.lastAuth) < time.Second {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, false
		}
		if req.Mechanism != st.mechanism {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			c.authFailed(req.Mechanism, "", fmt.Errorf("re-authentication with mechanism %q, not %s", req.Mechanism, st.mechanism))
			c.sessionEnd.Store(1) // the next other request closes it
			return resp, false
		}
		st.reauth = true
	}
	if !slices.Contains(l.Mechanisms, req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.authFailed(req.Mechanism, "", fmt.Errorf("mechanism %q is not enabled on this listener (%v)", req.Mechanism, l.Mechanisms))
		return resp, true
	}
	srv, err := security.NewSASLServer(req.Mechanism, c.s.cfg.Credentials)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, true
	}
	st.mechanism, st.server, st.started = req.Mechanism, srv, false
	st.v0 = req.Version == 0
	return resp, false
}

// saslAuthenticate answers a SaslAuthenticate: one token of the exchange.
// done is true when the exchange completed; closeAfter when the connection
// must close once the answer is written.
func (c *conn) saslAuthenticate(req *kmsg.SASLAuthenticateRequest) (resp *kmsg.SASLAuthenticateResponse, done, closeAfter bool) {
	resp = req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st := c.sasl
	if st == nil || st.server == nil || st.v0 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake choosing a mechanism"
		resp.ErrorMessage = &msg
		return resp, false, true
	}
	tok, done, err := c.saslStep(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := security.AuthFailedMessage(st.mechanism)
		if errors.Is(err, errThrottled) {
			msg = err.Error()
		}
		resp.ErrorMessage = &msg
		return resp, false, true
	}
	resp.SASLAuthBytes = tok
	if done && req.Version >= 1 {
		resp.SessionLifetimeMillis = c.lcfg.Reauth[st.mechanism].Milliseconds()
	}
	return resp, done, false
}

var errThrottled = errors.New("too many failed authentications from this address: try again later")

// saslStep runs one client token through the exchange; the exchange's
// first token waits for the address's slot (security.Throttle). On an
// error the failure is already counted, logged and penalised.
func (c *conn) saslStep(tok []byte) ([]byte, bool, error) {
	st := c.sasl
	if !st.started {
		wait, ok := c.s.throttle.Admit(c.ip)
		if !ok {
			c.authFailed(st.mechanism, "", errThrottled)
			st.server = nil
			return nil, false, errThrottled
		}
		c.sleep(wait)
		st.started = true
	}
	resp, done, err := st.server.Next(tok)
	if err != nil {
		c.authFailed(st.mechanism, st.server.User(), err)
		st.server = nil
		if st.reauth {
			c.sessionEnd.Store(1) // the next other request closes the connection
		}
		return nil, false, err
	}
	if done {
		user := st.server.User()
		if st.reauth && user != c.principal.Name {
			err := fmt.Errorf("re-authenticated as %q, not %q", user, c.principal.Name)
			c.authFailed(st.mechanism, user, err)
			st.server = nil
			c.sessionEnd.Store(1)
			return nil, false, err
		}
		c.authSucceeded(user)
	}
	return resp, done, nil
}

package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// InterBrokerAuth is how a broker authenticates to the other brokers on the
// inter-broker listener (inter.broker.listener.name or
// security.inter.broker.protocol): replica fetchers and ControlledShutdown.
type InterBrokerAuth struct {
	// TLS is the client configuration of an SSL or SASL_SSL listener
	// (the broker's certificate for mutual TLS, the CAs it trusts); nil:
	// no TLS.
	TLS *tls.Config
	// SASL is the mechanism of a SASL_PLAINTEXT or SASL_SSL listener
	// (sasl.mechanism.inter.broker.protocol, with the broker's own
	// credentials from sasl.jaas.config); nil: no SASL.
	SASL sasl.Mechanism
}

// reauthMargin renews a SASL session this long before the server's
// lifetime ends (connections.max.reauth.ms), or at 90 % of a short one.
const reauthMargin = 5 * time.Second

// authenticate runs the SASL exchange on the connection: SaslHandshake v1
// and SaslAuthenticate v1, as Kafka's own brokers do; again, on the open
// connection, when the session's lifetime nears its end (KIP-368).
func (c *brokerConn) authenticate(ctx context.Context) error {
	mech := c.auth.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech.Name()
	r, err := c.roundTrip(ctx, hs, 0)
	if err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if hr := r.(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		return fmt.Errorf("SaslHandshake %s: %w (the broker enables %v)", mech.Name(), kerr.ErrorForCode(hr.ErrorCode), hr.SupportedMechanisms)
	}
	session, out, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return err
	}
	started := time.Now()
	for range 10 { // SCRAM takes two rounds, PLAIN one
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = out
		r, err := c.roundTrip(ctx, req, 0)
		if err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate %s: %w%s", mech.Name(), kerr.ErrorForCode(resp.ErrorCode), msg)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
		if done {
			c.reauthAt = time.Time{}
			if ms := resp.SessionLifetimeMillis; ms > 0 {
				life := time.Duration(ms) * time.Millisecond
				c.reauthAt = started.Add(max(life-reauthMargin, life*9/10))
			}
			return nil
		}
		out = next
	}
	return errors.New("SASL exchange did not complete")
}

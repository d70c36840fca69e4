package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate: v0-2
//
// Behaviour:
//   - Carries one token of the SASL exchange a SaslHandshake v1 chose
//     (before authentication, conn.saslExchange in sasl.go; after it, here,
//     for a KIP-368 re-authentication). Bad credentials, an unknown user or
//     a malformed exchange are answered SASL_AUTHENTICATION_FAILED with
//     Kafka's generic message, after the address's penalty
//     (connection.failed.authentication.delay.ms), and the connection is
//     closed (a failed re-authentication: at the next other request).
//   - Without a handshake choosing a mechanism: ILLEGAL_SASL_STATE.
//   - A re-authentication must end as the same user.
//
// Version notes:
//   - v1: SessionLifetimeMillis on the final success:
//     connections.max.reauth.ms of the mechanism (0: no expiry).
//   - v2: flexible.

func init() { register(36, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.SASLAuthenticateRequest)
	if r.c == nil {
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	resp, _, _ := r.c.saslAuthenticate(req)
	return resp, nil
}

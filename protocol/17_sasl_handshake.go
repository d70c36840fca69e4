package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1
//
// Behaviour:
//   - On a SASL_PLAINTEXT or SASL_SSL listener, before authentication
//     (conn.saslExchange in sasl.go): chooses the mechanism of the exchange
//     among sasl.enabled.mechanisms and lists them. A mechanism not enabled
//     is answered UNSUPPORTED_SASL_MECHANISM with the list, and the
//     connection closed.
//   - After authentication, dispatched here: a re-authentication
//     (KIP-368) on a connection whose session expires
//     (connections.max.reauth.ms), at most once a second, v1 only, with the
//     mechanism of the first authentication; otherwise ILLEGAL_SASL_STATE,
//     as on PLAINTEXT and SSL listeners.
//   - Advertised exactly 0-1: franz-go uses SaslAuthenticate only when the
//     advertised maximum is 1 (KAFKA-9577).
//
// Version notes:
//   - v0: the exchange's tokens follow as raw frames (a 4-byte size and the
//     bytes) instead of SaslAuthenticate requests.
//   - v1: the tokens ride SaslAuthenticate.

func init() { register(17, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.SASLHandshakeRequest)
	if r.c == nil {
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.ErrorCode = kerr.IllegalSaslState.Code // no connection to authenticate
		return resp, nil
	}
	resp, _ := r.c.saslHandshake(req)
	return resp, nil
}

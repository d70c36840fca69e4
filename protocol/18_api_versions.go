package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-3
//
// Behaviour:
//   - Lists every registered API key with exactly its registered range, so
//     only implemented APIs and versions are advertised.
//   - A version above 3 is answered before decoding (conn.decode, KIP-511):
//     a v0 body with UNSUPPORTED_VERSION listing only ApiVersions' own range,
//     so the client retries with a version we serve.
//   - The response header is always v0 (no tag section), even for v3.
//
// Version notes:
//   - v1: ThrottleMillis.
//   - v3: flexible; ClientSoftwareName and ClientSoftwareVersion, which must
//     match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? or the answer is
//     INVALID_REQUEST (librdkafka then retries with v0). No feature flags.

func init() { register(18, 0, 3, handleApiVersions) }

func handleApiVersions(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	resp.ApiKeys = registered()
	return resp, nil
}

// validSoftware applies Kafka's pattern for client software names and
// versions: alphanumerics, with '-' and '.' allowed inside.
func validSoftware(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

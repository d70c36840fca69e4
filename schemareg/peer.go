package schemareg

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Writes a registry forwards on its own behalf: the console's pages call
// DeleteVersion and DeleteSubject on the registry of their own host, which
// may not be the leader. Such a call is sent to the leader's REST API as
// the write a client would send there, and answers as the leader answers
// (its Confluent error included), once this registry's view has read what
// the leader wrote (read-your-writes, as for forwarded REST writes).
//
// The call has no user's credentials to pass on (a console user signs in
// with a session, not with basic auth), so it is signed with the key the
// cluster's registries share (Config.PeerKey): peerHeader carries the
// time and an HMAC-SHA256 of the method, the request URI and that time,
// and the leader accepts a signed write for peerSkew either way of its
// clock.

const (
	peerHeader = "X-Sluice-Peer-Signature"
	peerSkew   = time.Minute
)

// peerSignature is the signature of a write of method on uri at ms.
func peerSignature(key []byte, method, uri string, ms int64) string {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, method+"\n"+uri+"\n"+strconv.FormatInt(ms, 10))
	return hex.EncodeToString(m.Sum(nil))
}

// peerSigned reports whether req carries a valid, fresh signature of the
// shared key.
func (r *Registry) peerSigned(req *http.Request) bool {
	if len(r.cfg.PeerKey) == 0 {
		return false
	}
	ts, sig, ok := strings.Cut(req.Header.Get(peerHeader), ":")
	if !ok {
		return false
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := time.Since(time.UnixMilli(ms)); d > peerSkew || d < -peerSkew {
		return false
	}
	want := peerSignature(r.cfg.PeerKey, req.Method, req.URL.RequestURI(), ms)
	return hmac.Equal([]byte(sig), []byte(want))
}

// forwardCall sends a write (method on path, with ?permanent=true when
// permanent) to the leader, decodes its answer into out, and waits until
// this registry's view has the leader's write. An error answer is
// returned as the leader's *Error.
func (r *Registry) forwardCall(ctx context.Context, method, path string, permanent bool, out any) error {
	leader := ""
	if r.cfg.Leader != nil {
		leader = r.cfg.Leader.LeaderURL()
	}
	if leader == "" {
		return newErr(http.StatusInternalServerError, CodeUnknownLeader, "Request failed since the schema registry's leader is unknown")
	}
	if permanent {
		path += "?permanent=true"
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(leader, "/")+path, nil)
	if err != nil {
		return newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Error while forwarding the request to the leader: %v", err)
	}
	req.Header.Set("Accept", ContentType)
	req.Header.Set(forwardedHeader, "1")
	if len(r.cfg.PeerKey) > 0 {
		ms := time.Now().UnixMilli()
		req.Header.Set(peerHeader, strconv.FormatInt(ms, 10)+":"+peerSignature(r.cfg.PeerKey, method, req.URL.RequestURI(), ms))
	}
	resp, err := r.cfg.Forward.Do(req)
	if err != nil {
		return newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Error while forwarding the request to the leader %s: %v", leader, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.MaxRequestBytes))
	if err != nil {
		return newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Error while reading the leader's answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e Error
		if json.Unmarshal(body, &e) != nil || e.Code == 0 {
			return newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "The leader %s answered %s", leader, resp.Status)
		}
		e.Status = resp.StatusCode
		return &e
	}
	if err := json.Unmarshal(body, out); err != nil {
		return newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Unreadable answer from the leader %s: %v", leader, err)
	}
	if off, err := strconv.ParseInt(resp.Header.Get(offsetHeader), 10, 64); err == nil {
		return r.WaitFor(ctx, off)
	}
	return nil
}

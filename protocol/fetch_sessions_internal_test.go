package protocol

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The session cache is bounded: when full, a new consumer session gets none
// unless the least recently used one is idle past the eviction time; a
// follower's takes a consumer's place at once.
func TestFetchSessionCacheBound(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newFetchSessions(2)
	c.now = func() time.Time { return now }
	open := func(replica int32) int32 {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, replica, 0, 0
		sf, code := c.begin(req)
		if code != 0 {
			t.Fatalf("begin: %d", code)
		}
		if sf.s == nil {
			return 0
		}
		resp := &fetchResponse{version: 12}
		sf.fillFull(req, resp)
		sf.finish(resp)
		return resp.sessionID
	}
	a := open(-1)
	now = now.Add(time.Second)
	b := open(-1)
	if a == 0 || b == 0 || a == b {
		t.Fatalf("sessions %d %d", a, b)
	}
	if id := open(-1); id != 0 || c.len() != 2 {
		t.Fatalf("full cache gave a consumer session %d (%d sessions)", id, c.len())
	}
	now = now.Add(time.Second)
	f := open(2)
	if f == 0 || c.len() != 2 {
		t.Fatalf("a follower got no session in a cache of consumers (%d)", f)
	}
	if _, ok := c.sessions[a]; ok {
		t.Fatal("the follower's session did not take the least recently used one's place")
	}
	now = now.Add(fetchSessionEvictAfter)
	if id := open(-1); id == 0 {
		t.Fatal("an idle session was not evicted")
	}
	if _, ok := c.sessions[b]; ok {
		t.Fatal("the idle consumer session is still there")
	}
}

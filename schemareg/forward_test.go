package schemareg

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

type staticLeader struct {
	leading atomic.Bool
	url     atomic.Value
}

func (s *staticLeader) IsLeader() bool { return s.leading.Load() }
func (s *staticLeader) LeaderURL() string {
	u, _ := s.url.Load().(string)
	return u
}

// Two registries over one log: the follower forwards writes to the
// leader and answers only once its own view has them; a write forwarded
// to a registry that no longer leads is refused, never forwarded again.
func TestForwardToLeader(t *testing.T) {
	log := NewMemLog()
	la, lb := &staticLeader{}, &staticLeader{}
	la.leading.Store(true)
	a := New(Config{Log: log, Leader: la})
	b := New(Config{Log: log, Leader: lb})
	a.Start(context.Background())
	b.Start(context.Background())
	defer a.Close()
	defer b.Close()
	sa, sb := httptest.NewServer(a.Handler()), httptest.NewServer(b.Handler())
	defer sa.Close()
	defer sb.Close()
	la.url.Store(sa.URL)
	lb.url.Store(sa.URL)
	ta, tb := &testReg{t: t, r: a, srv: sa, log: log}, &testReg{t: t, r: b, srv: sb, log: log}

	tb.expect("POST", "/subjects/s/versions", body(avroV1), 200, `{"id":1}`)
	tb.expect("GET", "/subjects/s/versions/1", "", 200, "") // read-your-writes on the follower
	tb.expect("PUT", "/config/s", `{"compatibility":"NONE"}`, 200, `{"compatibility":"NONE"}`)
	tb.expect("GET", "/config/s", "", 200, `{"compatibilityLevel":"NONE"}`)
	ta.expect("POST", "/subjects/s/versions", body(`{"type":"string"}`), 200, `{"id":2}`)
	tb.expect("DELETE", "/subjects/s/versions/2", "", 200, `2`)
	ta.expect("GET", "/subjects/s/versions", "", 200, `[1]`)

	// leadership moves to b: a forwards to it
	la.leading.Store(false)
	lb.leading.Store(true)
	la.url.Store(sb.URL)
	lb.url.Store(sb.URL)
	ta.expect("POST", "/subjects/t/versions", body(`{"type":"long"}`), 200, `{"id":3}`)
	ta.expect("GET", "/subjects/t/versions/latest", "", 200, "")

	// nobody leads: a refuses the forwarded write with 50004 instead of
	// bouncing it
	lb.leading.Store(false)
	st, got := ta.do("POST", "/subjects/u/versions", body(`{"type":"int"}`))
	if st != 500 || !strings.Contains(got, "50004") {
		t.Fatalf("no leader: %d %s", st, got)
	}
	// unknown leader URL
	la.url.Store("")
	st, got = ta.do("POST", "/subjects/u/versions", body(`{"type":"int"}`))
	if st != 500 || !strings.Contains(got, "50004") {
		t.Fatalf("unknown leader: %d %s", st, got)
	}
	// reads never need the leader
	ta.expect("GET", "/subjects", "", 200, `["s","t"]`)
}

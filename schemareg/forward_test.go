package schemareg

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// Deletes called on a registry that is not the leader (the console's
// pages call DeleteVersion and DeleteSubject on their own host's
// registry) are forwarded to the leader, signed with the shared key when
// the leader checks credentials, and return once the follower's view has
// them; the leader's refusal comes back as its Confluent error. Without the
// key, or with another, the leader refuses the unsigned write; with a
// stale signature too.
func TestForwardDeletesFromFollower(t *testing.T) {
	log := NewMemLog()
	key := []byte("0123456789abcdef0123456789abcdef")
	auth := func(_ context.Context, user, pw string) (Role, error) {
		if user == "ops" && pw == "secret" {
			return RoleWrite, nil
		}
		return RoleNone, nil
	}
	la, lb := &staticLeader{}, &staticLeader{}
	la.leading.Store(true)
	a := New(Config{Log: log, Leader: la, Auth: auth, PeerKey: key})
	b := New(Config{Log: log, Leader: lb, Auth: auth, PeerKey: key})
	stranger := New(Config{Log: log, Leader: lb, Auth: auth, PeerKey: []byte("another key, not the cluster's!!")})
	ctx := context.Background()
	for _, r := range []*Registry{a, b, stranger} {
		r.Start(ctx)
		defer r.Close()
	}
	sa := httptest.NewServer(a.Handler())
	defer sa.Close()
	for _, l := range []*staticLeader{la, lb} {
		l.url.Store(sa.URL)
	}
	if err := a.SetConfig(ctx, "", "NONE"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{avroV1, `{"type":"string"}`, `{"type":"long"}`} {
		if _, err := a.Register(ctx, "s", SchemaRequest{Schema: s}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Register(ctx, "t", SchemaRequest{Schema: `{"type":"int"}`}); err != nil {
		t.Fatal(err)
	}

	// a soft delete of a version through b: b's own view has it at once
	if v, err := b.DeleteVersion(ctx, "s", 3, false); err != nil || v != 3 {
		t.Fatalf("delete through the follower: %d %v", v, err)
	}
	if got := versionsOf(b, "s"); got != "[1 2]" {
		t.Fatalf("follower's versions right after its delete: %s", got)
	}
	// permanently, then the leader's refusal of a version not soft-deleted
	if v, err := b.DeleteVersion(ctx, "s", 3, true); err != nil || v != 3 {
		t.Fatalf("permanent delete through the follower: %d %v", v, err)
	}
	var e *Error
	if _, err := b.DeleteVersion(ctx, "s", 2, true); !errors.As(err, &e) || e.Code != CodeVersionNotSoftDeleted || e.Status != 404 {
		t.Fatalf("the leader's refusal: %v", err)
	}
	if _, err := b.DeleteVersion(ctx, "nope", 1, false); !errors.As(err, &e) || e.Code != CodeSubjectNotFound {
		t.Fatalf("unknown subject through the follower: %v", err)
	}
	// a whole subject, soft then permanent
	if vs, err := b.DeleteSubject(ctx, "t", false); err != nil || fmt.Sprint(vs) != "[1]" {
		t.Fatalf("subject delete through the follower: %v %v", vs, err)
	}
	if vs, err := b.DeleteSubject(ctx, "t", true); err != nil || fmt.Sprint(vs) != "[1]" {
		t.Fatalf("permanent subject delete through the follower: %v %v", vs, err)
	}
	if vs := b.SubjectVersions("t"); len(vs) != 0 {
		t.Fatalf("follower's versions of t after the permanent delete: %+v", vs)
	}

	// another key: refused, nothing deleted
	if _, err := stranger.DeleteVersion(ctx, "s", 2, false); !errors.As(err, &e) || e.Code != CodeUnauthorized {
		t.Fatalf("a delete signed with another key: %v", err)
	}
	// a stale signature, or a signature of another request: refused
	old := time.Now().Add(-2 * peerSkew).UnixMilli()
	for _, sig := range []string{
		fmt.Sprintf("%d:%s", old, peerSignature(key, "DELETE", "/subjects/s/versions/2", old)),
		fmt.Sprintf("%d:%s", time.Now().UnixMilli(), peerSignature(key, "DELETE", "/subjects/s/versions/1", time.Now().UnixMilli())),
		"garbage",
	} {
		req, _ := http.NewRequest("DELETE", sa.URL+"/subjects/s/versions/2", nil)
		req.Header.Set(peerHeader, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("signature %q: %d", sig, resp.StatusCode)
		}
	}
	if got := versionsOf(a, "s"); got != "[1 2]" {
		t.Fatalf("versions after the refused deletes: %s", got)
	}

	// nobody known to lead: the follower says so
	lb.url.Store("")
	if _, err := b.DeleteVersion(ctx, "s", 2, false); !errors.As(err, &e) || e.Code != CodeUnknownLeader {
		t.Fatalf("no leader: %v", err)
	}
}

func versionsOf(r *Registry, subject string) string {
	var vs []int
	for _, v := range r.SubjectVersions(subject) {
		if !v.Deleted {
			vs = append(vs, v.Version)
		}
	}
	return fmt.Sprint(vs)
}

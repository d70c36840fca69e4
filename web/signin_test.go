package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web/webtest"
)

// TestSafeNext: the address a user is sent to after signing in stays on
// this console however a browser reads it (WHATWG: tabs and newlines are
// dropped, a backslash is a slash).
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/groups?q=x": "/groups?q=x",
		"/topics/orders/messages?from=earliest&field=key&q=a%2Fb": "/topics/orders/messages?from=earliest&field=key&q=a%2Fb",
		"/groups/caf%C3%A9%20bar":                                 "/groups/caf%C3%A9%20bar",
		"":                                                        "/",
		"/\t/evil.example/":                                       "/", // next=/%09/evil.example/ once the query is decoded
		"/\n/evil.example/":                                       "/",
		"/\r\n/evil.example/":                                     "/",
		"\t//evil.example/":                                       "/",
		" /x":                                                     "/",
		"/\\evil.example":                                         "/",
		"\\/evil.example":                                         "/",
		"/\\/evil.example":                                        "/",
		"//evil.example":                                          "/",
		"///evil.example":                                         "/",
		"/%2F%2Fevil.example":                                     "/", // next=%252F%252F…: a decoding proxy would make it //evil
		"/%2f/evil.example":                                       "/",
		"/%5Cevil.example":                                        "/",
		"/%09/evil.example":                                       "/",
		"https://evil.example/":                                   "/",
		"javascript:alert(1)":                                     "/",
		"evil.example":                                            "/",
		"/x\x00":                                                  "/",
		"/x\x7f":                                                  "/",
		"/é":                                                      "/",
		"/login?next=//evil":                                      "/",
		"/logout":                                                 "/",
		"/setup?token=x":                                          "/",
		"/" + strings.Repeat("a", maxNext):                        "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}

	// Through the pages: the raw query as a link would carry it.
	ts := newTestServer(t)
	ts.user(t, "ann", RoleViewer)
	c := ts.client(t)
	c.SignIn("ann", "password-1")
	for _, raw := range []string{"/%09/evil.example/", "/%5Cevil.example", "%2F%2Fevil.example", "/%252F%252Fevil.example", "/%0D%0A/evil.example"} {
		r := c.Get("/login?next=" + raw)
		if loc := r.Header.Get("Location"); r.StatusCode != http.StatusSeeOther || loc != "/" {
			t.Errorf("GET /login?next=%s signed in: %d → %q", raw, r.StatusCode, loc)
		}
	}
	fresh := ts.client(t)
	r := fresh.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"password-1"}, "next": {"/\t/evil.example/"}})
	if loc := r.Header.Get("Location"); loc != "/" {
		t.Fatalf("POST /login next with a tab: → %q", loc)
	}
}

// TestFailedSignInRecordsABoundedName: a megabyte user name is a failed
// sign-in that records (audit log, service log) and echoes at most a few
// dozen bytes of it; an over-long password fails without a database
// lookup.
func TestFailedSignInRecordsABoundedName(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	ts := newTestServer(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ts.user(t, "ann", RoleViewer)
	c := ts.client(t)
	huge := strings.Repeat("A", 1<<20)
	r := c.Post("/login", "/login", url.Values{"username": {huge}, "password": {"whatever-1"}})
	expectStatus(t, r, http.StatusUnauthorized)
	expectContains(t, r, "Wrong user name or password")
	if len(r.Text) > 64<<10 {
		t.Fatalf("the sign-in page echoed %d bytes", len(r.Text))
	}
	r = c.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {strings.Repeat("p", 100)}})
	expectStatus(t, r, http.StatusUnauthorized)
	entries, _, err := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "session.login"})
	if err != nil || len(entries) != 2 {
		t.Fatalf("audit: %v %v", entries, err)
	}
	for _, e := range entries {
		if len(e.User) > maxShownName+len("…") || len(e.Target) > maxShownName+len("…") {
			t.Errorf("audit entry of %d/%d bytes", len(e.User), len(e.Target))
		}
	}
	if !strings.HasPrefix(entries[1].User, "AAAA") || !strings.HasSuffix(entries[1].User, "…") {
		t.Errorf("recorded name %q", entries[1].User)
	}
	if n := len(logs.String()); n > 32<<10 {
		t.Fatalf("service log grew by %d bytes", n)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 2048 {
			t.Fatalf("service log line of %d bytes", len(line))
		}
	}
}

// tClock is a settable clock for the sign-in limiter.
type tClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *tClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *tClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestSignInBackoffPerUserAndAddress: wrong passwords slow down that user
// name from that address only, with a wait that doubles; the same user
// from another address, and another user from the same address, sign in at
// once. Behind a trusted proxy the forwarded client address is what counts
// and what the audit log records.
func TestSignInBackoffPerUserAndAddress(t *testing.T) {
	// app.Test's connections come from 0.0.0.0: trust it as the proxy.
	ts := newTestServer(t, func(c *Config) { c.TrustedProxies = []string{"0.0.0.0/32", "10.0.0.0/8"} })
	clk := &tClock{now: time.Now()}
	ts.limiter.mu.Lock()
	ts.limiter.now = clk.Now
	ts.limiter.mu.Unlock()
	ts.user(t, "ann", RoleAdmin)
	ts.user(t, "bob", RoleViewer)
	from := func(addr string) *client {
		c := ts.client(t)
		// The client's own claim, then what the proxies appended.
		c.Headers["X-Forwarded-For"] = "198.51.100.66, " + addr + ", 10.1.2.3"
		return c
	}
	a, b := from("203.0.113.1"), from("203.0.113.2")
	login := func(c *client, name, pw string) int {
		return c.Post("/login", "/login", url.Values{"username": {name}, "password": {pw}}).StatusCode
	}
	for i := 0; i < signInUserFree; i++ {
		if st := login(a, "ann", "wrong-password"); st != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, st)
		}
	}
	if st := login(a, "ann", "password-1"); st != http.StatusTooManyRequests {
		t.Fatalf("ann from A after %d failures: %d, want 429", signInUserFree, st)
	}
	if st := login(b, "ann", "password-1"); st != http.StatusSeeOther {
		t.Fatalf("ann from B: %d, want to sign in", st)
	}
	if st := login(from("203.0.113.1"), "bob", "password-1"); st != http.StatusSeeOther {
		t.Fatalf("bob from A: %d, want to sign in", st)
	}
	// The wait doubles with each further failure: 1 s, then 2 s, then 4 s.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		clk.Add(wait - 100*time.Millisecond)
		if st := login(a, "ann", "wrong-password"); st != http.StatusTooManyRequests {
			t.Fatalf("%v into a %v wait: %d, want 429", wait-100*time.Millisecond, wait, st)
		}
		clk.Add(200 * time.Millisecond)
		if st := login(a, "ann", "wrong-password"); st != http.StatusUnauthorized {
			t.Fatalf("after a %v wait: %d, want a try", wait, st)
		}
	}
	clk.Add(8 * time.Second)
	if st := login(a, "ann", "password-1"); st != http.StatusSeeOther {
		t.Fatalf("ann from A after the wait: %d", st)
	}
	// The audit log has the client behind the proxies, not the proxy nor
	// the client's own claim.
	entries, _, _ := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "session.login", Limit: 1000})
	addrs := map[string]bool{}
	for _, e := range entries {
		addrs[e.RemoteAddr] = true
	}
	if !addrs["203.0.113.1"] || !addrs["203.0.113.2"] || addrs["198.51.100.66"] || addrs["10.1.2.3"] || addrs["0.0.0.0"] {
		t.Fatalf("recorded addresses %v", addrs)
	}
}

// TestForwardedForIgnoredFromUntrustedPeers: without
// console.trusted.proxies, X-Forwarded-For is the client's claim and is
// ignored: it neither changes the recorded address nor escapes the
// backoff.
func TestForwardedForIgnoredFromUntrustedPeers(t *testing.T) {
	ts := newTestServer(t)
	ts.user(t, "ann", RoleViewer)
	for i := 0; i <= signInUserFree; i++ {
		c := ts.client(t)
		c.Headers["X-Forwarded-For"] = "203.0.113." + itoa64(int64(i+1))
		st := c.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"wrong-password"}}).StatusCode
		if i < signInUserFree && st != http.StatusUnauthorized || i == signInUserFree && st != http.StatusTooManyRequests {
			t.Fatalf("attempt %d with a new forged address: %d", i+1, st)
		}
	}
	entries, _, _ := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "session.login"})
	for _, e := range entries {
		if e.RemoteAddr != "0.0.0.0" {
			t.Fatalf("a forged address was recorded: %+v", e)
		}
	}
	if _, err := New(Config{DataDir: t.TempDir(), Brokers: []string{"127.0.0.1:1"}, TrustedProxies: []string{"10.0.0.0/33"}}); err == nil || !strings.Contains(err.Error(), "console.trusted.proxies") {
		t.Fatalf("a bad console.trusted.proxies entry: %v", err)
	}
}

// TestLimiterMemoryIsBounded: a flood of distinct names and addresses does
// not grow the limiter without bound.
func TestLimiterMemoryIsBounded(t *testing.T) {
	l := newLimiter()
	l.maxKeys = 1000
	for i := 0; i < 20000; i++ {
		l.fail("198.51.100."+itoa64(int64(i%250)), "user-"+itoa64(int64(i)))
	}
	if n := len(l.keys); n > l.maxKeys {
		t.Fatalf("%d keys, bound %d", n, l.maxKeys)
	}
}

// TestSignInWaitsForTheConsoleState: while the console is joining the
// cluster's console state (its users about to be replaced by the topic's),
// a sign-in is refused with 503 and Retry-After rather than made against
// users that are going away; once joined it succeeds. A console that
// cannot reach its topic at all still lets users sign in (read-only).
func TestSignInWaitsForTheConsoleState(t *testing.T) {
	var mu sync.Mutex
	st := consoledb.ReplicaStatus{Topic: "__sluice_console"}
	ts := newTestServer(t, func(c *Config) {
		c.ReplicaStatus = func() ConsoleStatus {
			mu.Lock()
			defer mu.Unlock()
			return ConsoleStatus{Topics: []consoledb.ReplicaStatus{st}}
		}
	})
	ts.user(t, "ann", RoleViewer)
	set := func(f func(*consoledb.ReplicaStatus)) {
		mu.Lock()
		f(&st)
		mu.Unlock()
	}
	signIn := func() webtest.Response {
		return ts.client(t).Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"password-1"}})
	}
	for _, joining := range []func(*consoledb.ReplicaStatus){
		func(s *consoledb.ReplicaStatus) { s.Started, s.Rebuilding, s.Err = false, false, "" },
		func(s *consoledb.ReplicaStatus) { s.Started, s.Rebuilding, s.Err = true, true, "" },
	} {
		set(joining)
		r := signIn()
		body := r.Text
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(body, "joining the cluster") {
			t.Fatalf("sign-in while joining (%+v): %d, Retry-After %q: %.300s", st, r.StatusCode, r.Header.Get("Retry-After"), body)
		}
	}
	set(func(s *consoledb.ReplicaStatus) {
		s.Started, s.Rebuilding, s.Err = false, false, "dial tcp: connection refused"
	})
	if r := signIn(); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with the state topic out of reach: %d", r.StatusCode)
	}
	set(func(s *consoledb.ReplicaStatus) { s.Started, s.Rebuilding, s.Err, s.Reachable = true, false, "", true })
	if r := signIn(); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in once joined: %d", r.StatusCode)
	}
}

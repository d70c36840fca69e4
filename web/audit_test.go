package web

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
)

func auditOf(t *testing.T, ts *testServer, action string) []consoledb.AuditEntry {
	t.Helper()
	es, _, err := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: action, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestRefusedRolesAndCSRFAreAudited: a request refused for its role, and
// a form refused for its CSRF token, leave an audit entry saying who, what
// and why.
func TestRefusedRolesAndCSRFAreAudited(t *testing.T) {
	ts := newTestServer(t)
	v := ts.signedIn(t, "vic", RoleViewer)
	expectStatus(t, v.Get("/users"), http.StatusForbidden)
	expectStatus(t, v.Post("/topics", "/topics", url.Values{"name": {"by-viewer"}}), http.StatusForbidden)
	es := auditOf(t, ts, "auth.role-refused")
	if len(es) != 2 || es[1].User != "vic" || es[1].Target != "GET /users" || !strings.Contains(es[1].Detail, "role viewer, needs admin") ||
		es[0].Target != "POST /topics" || es[0].Outcome == "ok" {
		t.Fatalf("role refusals: %+v", es)
	}

	op := ts.signedIn(t, "olga", RoleOperator)
	expectStatus(t, op.Do(http.MethodPost, "/topics", url.Values{"name": {"x"}}), http.StatusForbidden)
	op.Headers["Origin"] = "https://evil.example"
	expectStatus(t, op.Do(http.MethodPost, "/topics", url.Values{"name": {"x"}, "_csrf": {op.CSRF("/topics/new")}}), http.StatusForbidden)
	delete(op.Headers, "Origin")
	expectStatus(t, ts.client(t).Do(http.MethodPost, "/login", url.Values{"username": {"olga"}}), http.StatusForbidden)
	es = auditOf(t, ts, "auth.csrf-refused")
	if len(es) != 3 {
		t.Fatalf("CSRF refusals: %+v", es)
	}
	if es[2].User != "olga" || es[2].Target != "POST /topics" || es[2].Detail != "no security token" ||
		!strings.Contains(es[1].Detail, "evil.example") || es[0].User != "(anonymous)" || es[0].Target != "POST /login" {
		t.Fatalf("CSRF refusals: %+v", es)
	}
}

// TestReadsAreAuditedAsAccess: browsing, searching, exporting and tailing
// records each leave an "access." entry with the query; the key
// console.audit.access.enable=false turns them off.
func TestReadsAreAuditedAsAccess(t *testing.T) {
	for _, off := range []bool{false, true} {
		ts := newTestServer(t, func(c *Config) { c.DisableAccessAudit = off })
		createTopic(t, ts, "people", 1)
		if err := ts.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		v := ts.signedIn(t, "vic", RoleViewer)
		expectStatus(t, v.Get("/topics/people/messages?field=value&q=alice%40example.com"), http.StatusOK)
		expectStatus(t, v.Get("/topics/people/messages/export?as=csv&from=earliest"), http.StatusOK)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp := ts.openTail(t, ctx, v, "/topics/people/messages/tail")
		bufio.NewReader(resp.Body).ReadString('\n') // the stream has started
		cancel()
		resp.Body.Close()

		es := auditOf(t, ts, "access.")
		if off {
			if len(es) != 0 {
				t.Fatalf("access audited while turned off: %+v", es)
			}
			continue
		}
		got := map[string]consoledb.AuditEntry{}
		for _, e := range es {
			got[e.Action] = e
		}
		b, x, tl := got["access.messages.browse"], got["access.messages.export"], got["access.messages.tail"]
		if b.User != "vic" || b.Target != "people" || !strings.Contains(b.Detail, `q="alice@example.com"`) || !strings.Contains(b.Detail, "records=0") {
			t.Errorf("browse entry %+v", b)
		}
		if x.User != "vic" || !strings.Contains(x.Detail, "as=csv") {
			t.Errorf("export entry %+v", x)
		}
		if tl.User != "vic" || tl.Target != "people" {
			t.Errorf("tail entry %+v", tl)
		}
	}
}

// TestAuditLogRetention: the console prunes audit entries older than
// console.audit.retention.days, and the oldest beyond
// console.audit.max.rows, in its background work.
func TestAuditLogRetention(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.AuditRetention = 24 * time.Hour; c.AuditMaxRows = 5 })
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		ts.store.AppendAudit(ctx, consoledb.AuditEntry{At: time.Now().Add(-48 * time.Hour), User: "old", Action: "topic.create"})
	}
	for i := 0; i < 8; i++ {
		ts.store.AppendAudit(ctx, consoledb.AuditEntry{At: time.Now().Add(time.Duration(i-10) * time.Minute), User: "new-" + itoa64(int64(i)), Action: "topic.create"})
	}
	if err := ts.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		es := auditOf(t, ts, "topic.create")
		if len(es) != 5 || es[4].User != "new-3" || es[0].User != "new-7" {
			return fmt.Errorf("audit log holds %d entries", len(es))
		}
		return nil
	})
}

// TestCheapRefusalsDoNotFloodTheAuditLog: forms without a token from
// someone not signed in, and sign-ins refused during the backoff, cost the
// sender nothing; their entries are throttled per address and in all, and
// the next entry says how many were left out.
func TestCheapRefusalsDoNotFloodTheAuditLog(t *testing.T) {
	ts := newTestServer(t)
	clk := &tClock{now: time.Now()}
	ts.noise.mu.Lock()
	ts.noise.now = clk.Now
	ts.noise.mu.Unlock()
	anon := ts.client(t)
	for i := 0; i < 100; i++ {
		expectStatus(t, anon.Do(http.MethodPost, "/login", url.Values{"username": {"x"}}), http.StatusForbidden)
	}
	if es := auditOf(t, ts, "auth.csrf-refused"); len(es) != noisePerAddr {
		t.Fatalf("%d entries for 100 refusals from one address, want %d", len(es), noisePerAddr)
	}
	clk.Add(time.Minute)
	expectStatus(t, anon.Do(http.MethodPost, "/login", url.Values{"username": {"x"}}), http.StatusForbidden)
	es := auditOf(t, ts, "auth.csrf-refused")
	if len(es) != noisePerAddr+1 || !strings.Contains(es[0].Detail, "90 similar refusals left out") {
		t.Fatalf("after a minute: %d entries, newest %+v", len(es), es[0])
	}

	// A signed-in user's refusals are all recorded.
	op := ts.signedIn(t, "olga", RoleOperator)
	for i := 0; i < 2*noisePerAddr; i++ {
		op.Do(http.MethodPost, "/topics", url.Values{"name": {"x"}})
	}
	n := 0
	for _, e := range auditOf(t, ts, "auth.csrf-refused") {
		if e.User == "olga" {
			n++
		}
	}
	if n != 2*noisePerAddr {
		t.Fatalf("%d of the signed-in user's refusals recorded", n)
	}
}

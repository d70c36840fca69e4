package alerts

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/web"
)

// env is a console with the alert pages, over a kfake cluster and an
// alerting service sharing the console's database file, as the appliance
// wires them.
type env struct {
	srv *web.Server
	eng *alerting.Service
	db  *consoledb.DB
	lag *fakeLag
}

// fakeLag is a scripted lag source.
type fakeLag struct {
	mu     sync.Mutex
	groups []alerting.GroupLag
}

func (f *fakeLag) set(g ...alerting.GroupLag) {
	f.mu.Lock()
	f.groups = g
	f.mu.Unlock()
}

func (f *fakeLag) Lag(context.Context) ([]alerting.GroupLag, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]alerting.GroupLag(nil), f.groups...), nil
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newEnv(t testing.TB, mod ...func(*web.Config)) *env {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("alerts-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	ctx := context.Background()
	db, err := consoledb.Open(ctx, filepath.Join(dir, consoledb.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lag := &fakeLag{}
	eng, err := alerting.New(ctx, alerting.Config{
		DB:       db,
		KeyFile:  filepath.Join(dir, "alerting.key"),
		Interval: time.Second,
		Sources:  alerting.Sources{Lag: lag},
		BaseURL:  "http://console.test",
		Logger:   testLogger(),
		Metrics:  metrics.New().Alerting(),
		Retry:    alerting.RetryPolicy{Backoff: func(int) time.Duration { return 10 * time.Millisecond }, MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	eng.Start()
	t.Cleanup(func() { eng.Close() })
	cfg := web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: dir,
		Brokers: cluster.ListenAddrs(),
		Logger:  testLogger(),
		Extra:   []web.PageGroup{PageGroup(eng, Options{Interval: time.Second})},
	}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
	})
	return &env{srv: srv, eng: eng, db: db, lag: lag}
}

// client keeps cookies and drives the console through app.Test.
type client struct {
	t       testing.TB
	e       *env
	cookies map[string]string
	headers map[string]string
}

type response struct {
	*http.Response
	body string
}

func (e *env) client(t testing.TB) *client {
	return &client{t: t, e: e, cookies: map[string]string{}, headers: map[string]string{}}
}

// signedIn creates a user with role and signs in as it.
func (e *env) signedIn(t testing.TB, name string, role web.Role) *client {
	t.Helper()
	if _, err := e.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	r := c.post("/login", "/login", url.Values{"username": {name}, "password": {"password-1"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d %s", name, r.StatusCode, snippet(r.body))
	}
	return c
}

func (c *client) do(method, path string, form url.Values) response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	var ck []string
	for k, v := range c.cookies {
		ck = append(ck, k+"="+v)
	}
	if len(ck) > 0 {
		req.Header.Set("Cookie", strings.Join(ck, "; "))
	}
	resp, err := c.e.srv.App().Test(req, 30000)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, sc := range resp.Cookies() {
		if sc.MaxAge < 0 || sc.Value == "" {
			delete(c.cookies, sc.Name)
		} else {
			c.cookies[sc.Name] = sc.Value
		}
	}
	return response{resp, string(b)}
}

func (c *client) get(path string) response { return c.do(http.MethodGet, path, nil) }

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// post sends form with the CSRF token of the page at from.
func (c *client) post(from, path string, form url.Values) response {
	c.t.Helper()
	r := c.get(from)
	m := csrfRe.FindStringSubmatch(r.body)
	if m == nil {
		c.t.Fatalf("no CSRF token on %s (status %d)", from, r.StatusCode)
	}
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", m[1])
	return c.do(http.MethodPost, path, form)
}

// getJSON fetches path as JSON into v.
func (c *client) getJSON(path string, v any) response {
	c.t.Helper()
	c.headers["Accept"] = "application/json"
	defer delete(c.headers, "Accept")
	r := c.get(path)
	if v != nil && r.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(r.body), v); err != nil {
			c.t.Fatalf("%s: %v: %s", path, err, snippet(r.body))
		}
	}
	return r
}

func snippet(s string) string {
	if len(s) > 800 {
		return s[:800] + "…"
	}
	return s
}

func expectStatus(t testing.TB, r response, want int) {
	t.Helper()
	if r.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body: %s", r.Request.Method, r.Request.URL, r.StatusCode, want, snippet(r.body))
	}
}

func expectContains(t testing.TB, r response, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.body, s) {
			t.Fatalf("%s %s: body lacks %q; body: %s", r.Request.Method, r.Request.URL, s, snippet(r.body))
		}
	}
}

func expectLacks(t testing.TB, r response, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(r.body, s) {
			t.Fatalf("%s %s: body contains %q", r.Request.Method, r.Request.URL, s)
		}
	}
}

// receiver stands in for PagerDuty or a webhook receiver: it answers with
// status and records what arrives.
type receiver struct {
	srv    *httptest.Server
	status int
	mu     sync.Mutex
	got    []map[string]any
	hdrs   []http.Header
}

func newReceiver(t testing.TB, status int) *receiver {
	r := &receiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		r.mu.Lock()
		r.got = append(r.got, m)
		r.hdrs = append(r.hdrs, req.Header.Clone())
		r.mu.Unlock()
		w.WriteHeader(r.status)
		if r.status >= 300 {
			io.WriteString(w, `{"status":"invalid event","message":"Event object is invalid","errors":["Length of 'routing_key' is incorrect (should be 32 characters)"]}`)
			return
		}
		io.WriteString(w, `{"status":"success","message":"Event processed"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) events() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.got...)
}

// audit returns the audit entries of action (a prefix ending in "." for a
// family).
func (e *env) audit(t testing.TB, action string) []consoledb.AuditEntry {
	t.Helper()
	entries, _, err := e.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: action, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

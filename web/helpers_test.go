package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/web/kafka"
)

// The handler tests run against a fresh kfake cluster each (they count
// topics and records exactly). The end-to-end tests — the browser test and
// the two performance checks — run against the cluster named by
// SLUICE_TEST_BROKERS (comma-separated host:port, e.g. a Sluice broker) when
// it is set, with a unique prefix on every topic and group they create, and
// against kfake otherwise.
const brokersEnv = "SLUICE_TEST_BROKERS"

// e2eCluster returns the bootstrap brokers for an end-to-end test and the
// prefix its names must carry ("" on a private kfake cluster).
func e2eCluster(t testing.TB) ([]string, string) {
	t.Helper()
	if env := os.Getenv(brokersEnv); env != "" {
		return strings.Split(env, ","), fmt.Sprintf("e2e-%d-", time.Now().UnixNano()%1e9)
	}
	return testBrokers(t), ""
}

func testBrokers(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID("sluice-test")}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

type testServer struct {
	*Server
	brokers []string
}

func newTestServer(t testing.TB, mod ...func(*Config)) *testServer {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	cfg := Config{
		Listen:            "127.0.0.1:0",
		DataDir:           t.TempDir(),
		Logger:            testLogger(t),
		LagSampleInterval: time.Second,
	}
	for _, m := range mod {
		m(&cfg)
	}
	if len(cfg.Brokers) == 0 {
		cfg.Brokers = testBrokers(t)
	}
	brokers := cfg.Brokers
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &testServer{Server: s, brokers: brokers}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// user creates a user with password "password-1".
func (ts *testServer) user(t testing.TB, name string, role Role) {
	t.Helper()
	if _, err := ts.store.CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
}

// client is a cookie-keeping client that drives the app through
// fiber's app.Test.
type client struct {
	t       testing.TB
	ts      *testServer
	cookies map[string]string
	accept  string
	headers map[string]string
}

func (ts *testServer) client(t testing.TB) *client {
	return &client{t: t, ts: ts, cookies: map[string]string{}, headers: map[string]string{}}
}

// signedIn returns a client signed in as a new user with role.
func (ts *testServer) signedIn(t testing.TB, name string, role Role) *client {
	t.Helper()
	ts.user(t, name, role)
	c := ts.client(t)
	c.login(name, "password-1")
	return c
}

type response struct {
	*http.Response
	body string
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
	if c.accept != "" {
		req.Header.Set("Accept", c.accept)
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
	resp, err := c.ts.app.Test(req, 30000)
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

// csrf loads path and returns the CSRF token of its forms.
func (c *client) csrf(path string) string {
	c.t.Helper()
	r := c.get(path)
	m := csrfRe.FindStringSubmatch(r.body)
	if m == nil {
		c.t.Fatalf("no CSRF token on %s (status %d)", path, r.StatusCode)
	}
	return m[1]
}

// post sends a form with the CSRF token of the page at from.
func (c *client) post(from, path string, form url.Values) response {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", c.csrf(from))
	return c.do(http.MethodPost, path, form)
}

func (c *client) login(name, pw string) {
	c.t.Helper()
	r := c.post("/login", "/login", url.Values{"username": {name}, "password": {pw}})
	if r.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("sign in as %s: status %d: %s", name, r.StatusCode, snippet(r.body))
	}
}

func snippet(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
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

// kgoClient is a plain client to the test cluster, closed at cleanup.
func kgoClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, ts *testServer, name string, partitions int32) {
	t.Helper()
	if err := ts.kc.CreateTopic(context.Background(), kafka.NewTopic{Name: name, Partitions: partitions, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
}

func consoledbFilter(action string) consoledb.AuditFilter {
	return consoledb.AuditFilter{Action: action}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

type consoledbKnownBroker = consoledb.KnownBroker

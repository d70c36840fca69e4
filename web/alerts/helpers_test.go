package alerts

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
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

func newEnv(t testing.TB, mod ...func(*web.Config)) *env {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	brokers := webtest.Kfake(t, "alerts-test")
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
		Logger:   webtest.Logger(),
		Metrics:  metrics.New().Alerting(),
		// The test receivers listen on 127.0.0.1.
		AllowedTargets: []string{"127.0.0.0/8"},
		Retry:          alerting.RetryPolicy{Backoff: func(int) time.Duration { return 10 * time.Millisecond }, MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	eng.Start()
	t.Cleanup(func() { eng.Close() })
	cfg := web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: dir,
		Brokers: brokers,
		Logger:  webtest.Logger(),
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

// client drives the console in process (app.Test), keeping cookies; see
// webtest.Client.
type (
	client   = webtest.Client
	response = webtest.Response
)

var (
	snippet        = webtest.Snippet
	expectStatus   = webtest.ExpectStatus
	expectContains = webtest.ExpectContains
	expectLacks    = webtest.ExpectLacks
)

func (e *env) client(t testing.TB) *client { return webtest.NewClient(t, e.srv.App()) }

// signedIn creates a user with role and signs in as it.
func (e *env) signedIn(t testing.TB, name string, role web.Role) *client {
	t.Helper()
	if _, err := e.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	c.SignIn(name, "password-1")
	return c
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

package alerting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
)

// received is one request the test receiver got.
type received struct {
	At      time.Time
	Method  string
	Path    string
	Header  http.Header
	Body    []byte
	Status  int
	Decoded map[string]any
}

// receiver is a local HTTP endpoint standing in for PagerDuty or a webhook
// consumer. It answers with the scripted statuses in order, then with
// fallback, and records everything.
type receiver struct {
	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	script   []int
	fallback int
	body     string // response body for non-2xx answers
	got      []received
}

func newReceiver(t testing.TB, fallback int, script ...int) *receiver {
	r := &receiver{t: t, script: script, fallback: fallback}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := r.fallback
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		rec := received{At: time.Now(), Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: b, Status: status}
		json.Unmarshal(b, &rec.Decoded)
		r.got = append(r.got, rec)
		respBody := r.body
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status >= 200 && status < 300 {
			io.WriteString(w, `{"status":"success","message":"Event processed"}`)
			return
		}
		io.WriteString(w, respBody)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// accepted returns the requests answered 2xx whose JSON field key equals
// value (any value when value is "").
func (r *receiver) accepted(key, value string) []received {
	var out []received
	for _, g := range r.requests() {
		if g.Status < 200 || g.Status >= 300 {
			continue
		}
		if v, _ := g.Decoded[key].(string); value == "" || v == value {
			out = append(out, g)
		}
	}
	return out
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// logBuffer collects the service's log output, to check secrets never reach
// it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type testEnv struct {
	svc  *Service
	db   *consoledb.DB
	dir  string
	logs *logBuffer
	reg  *metrics.Registry
}

// newTestService opens a fresh database in a temporary directory and a
// Service on it with fast retries; edit adjusts the config first.
func newTestService(t testing.TB, edit func(*Config)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	db, err := consoledb.Open(ctx, filepath.Join(dir, "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	logs := &logBuffer{}
	reg := metrics.New()
	cfg := Config{
		DB:        db,
		KeyFile:   filepath.Join(dir, "alerting.key"),
		Interval:  time.Hour, // tests call EvaluateNow unless they start the loop
		BaseURL:   "https://console.example.test/",
		Source:    "sluice-test-host",
		Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:   reg.Alerting(),
		ExportLag: reg.Lag(),
		// The test receivers listen on 127.0.0.1, which notifications may
		// reach only when allowed.
		AllowedTargets: []string{"127.0.0.0/8"},
		Retry: RetryPolicy{
			MaxAttempts:    4,
			Backoff:        func(int) time.Duration { return 20 * time.Millisecond },
			AttemptTimeout: 2 * time.Second,
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	svc, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	t.Cleanup(func() { svc.Close() })
	return &testEnv{svc: svc, db: db, dir: dir, logs: logs, reg: reg}
}

func (e *testEnv) pagerDuty(t testing.TB, r *receiver, key string) Notifier {
	t.Helper()
	n, err := e.svc.CreateNotifier(context.Background(), NotifierInput{
		Name: "pd-" + t.Name(), Type: NotifierPagerDuty, URL: r.srv.URL + "/v2/enqueue", Secret: key, Enabled: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *testEnv) webhook(t testing.TB, r *receiver, token string) Notifier {
	t.Helper()
	n, err := e.svc.CreateNotifier(context.Background(), NotifierInput{
		Name: "hook-" + t.Name(), Type: NotifierWebhook, URL: r.srv.URL + "/hook", Secret: token, Enabled: true, SendResolved: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *testEnv) rule(t testing.TB, r Rule) Rule {
	t.Helper()
	r.Enabled = true
	out, err := e.svc.CreateRule(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *testEnv) evaluate(t testing.TB) {
	t.Helper()
	if err := e.svc.EvaluateNow(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitDeliveries waits until n deliveries are finished (not pending).
func (e *testEnv) waitDeliveries(t testing.TB, n int) []Delivery {
	t.Helper()
	var ds []Delivery
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		var err error
		ds, err = e.svc.Deliveries(context.Background(), DeliveryQuery{Limit: 1000})
		if err != nil {
			return err
		}
		done := 0
		for _, d := range ds {
			if d.Status != DeliveryPending {
				done++
			}
		}
		if done < n {
			return errorf("%d of %d deliveries finished", done, n)
		}
		return nil
	})
	return ds
}

func errorf(format string, args ...any) error { return fmtErrorf(format, args...) }

var fmtErrorf = fmt.Errorf

func strconvFormat(v int64) string { return fmt.Sprint(v) }

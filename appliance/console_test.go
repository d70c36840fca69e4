package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
)

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startAppliance starts a real appliance (broker, group coordinator,
// console) on free loopback ports with the given extra settings.
func startAppliance(t *testing.T, settings ...string) *App {
	t.Helper()
	dir := t.TempDir()
	base := []string{
		"listeners=PLAINTEXT://" + testutil.FreeAddr(t),
		"log.dirs=" + filepath.Join(dir, "kafka"),
		"console.data.dir=" + filepath.Join(dir, "console"),
		"offsets.topic.num.partitions=3",
		"group.initial.rebalance.delay.ms=0",
	}
	cfg, err := Load("", append(base, settings...))
	if err != nil {
		t.Fatal(err)
	}
	app, err := New(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := app.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return app
}

func consoleOf(t *testing.T, a *App) *consoleComponent {
	t.Helper()
	if a.console == nil {
		t.Fatal("the appliance has no console component")
	}
	return a.console
}

func httpGet(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// scrape fetches and parses the Prometheus text exposition at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	status, body, hdr := httpGet(t, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("metrics content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s does not parse as Prometheus text: %v", url, err)
	}
	return fams
}

// pdReceiver stands in for PagerDuty's Events API: it accepts every event
// (202) and records it.
type pdReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []map[string]any
}

func newPDReceiver(t *testing.T) *pdReceiver {
	r := &pdReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(req.Body).Decode(&m); err != nil || req.URL.Path != "/v2/enqueue" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, m)
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"status":"success","message":"Event processed","dedup_key":"x"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *pdReceiver) actions(action string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, m := range r.got {
		if m["event_action"] == action {
			out = append(out, m)
		}
	}
	return out
}

// TestServeWithConsole starts the real appliance with the console on a free
// port and the metrics on the console, and checks what `sluice serve`
// promises: Start returns with the console answering (the setup page while
// there is no admin); /metrics answers without signing in and parses as
// Prometheus text; an alert rule on lag, evaluated by the console, sends one
// PagerDuty trigger when a real consumer group stops and one resolve with
// the same dedup_key when it catches up, and the group's lag is exported;
// Close stops the console.
func TestServeWithConsole(t *testing.T) {
	testutil.Heavy(t, "a whole appliance with its console, ~8 s")
	consoleAddr := testutil.FreeAddr(t)
	// The PagerDuty stand-in listens on 127.0.0.1, which notifications
	// reach only when allowed.
	app := startAppliance(t, "console.listen="+consoleAddr, "alerting.evaluation.interval.ms=200", "console.lag.sample.interval.ms=1000",
		"alerting.allowed.targets=127.0.0.0/8")
	base := "http://" + consoleAddr
	c := consoleOf(t, app)

	// Start has returned: the console answers at once, with no admin yet.
	status, body, hdr := httpGet(t, base+"/")
	if status != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/login") {
		t.Fatalf("GET /: %d %s", status, hdr.Get("Location"))
	}
	if status, body, _ = httpGet(t, base+"/login"); status != http.StatusOK || !strings.Contains(body, "No admin yet") {
		t.Fatalf("GET /login: %d %.300s", status, body)
	}
	if status, body, _ = httpGet(t, base+"/setup?token="+c.srv.SetupToken()); status != http.StatusOK || !strings.Contains(body, `name="password"`) {
		t.Fatalf("setup page: %d %.300s", status, body)
	}
	if status, _, _ = httpGet(t, base+"/alerts"); status != http.StatusSeeOther {
		t.Fatalf("the alert pages answered %d signed out", status)
	}
	if status, _, _ = httpGet(t, base+"/moves"); status != http.StatusSeeOther {
		t.Fatalf("the partition moves page answered %d signed out", status)
	}
	if status, _, _ = httpGet(t, base+"/no-such-page"); status == http.StatusSeeOther {
		t.Fatalf("an unknown page redirects to sign in too: the check above proves nothing")
	}

	// Metrics on the console, without signing in.
	fams := scrape(t, base+"/metrics")
	for _, want := range []string{"sluice_build_info", "go_goroutines", "sluice_alerting_evaluations_total", "sluice_console_http_requests_total"} {
		if fams[want] == nil {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The pages fetched above are counted by route pattern and status.
	var loginSeen bool
	for _, m := range fams["sluice_console_http_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["route"] == "/login" && labels["method"] == "GET" && labels["code"] == "200" && m.GetCounter().GetValue() >= 1 {
			loginSeen = true
		}
	}
	if !loginSeen {
		t.Errorf("sluice_console_http_requests_total has no GET /login 200: %v", fams["sluice_console_http_requests_total"])
	}

	// A real group, a producer that never stops, and a lag rule paging a
	// local PagerDuty.
	seeds := app.BootstrapAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	topic, group := "orders", "billing"
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	pctx, pstop := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; pctx.Err() == nil; i++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			prod.Produce(pctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 11)), Value: []byte("order")}, nil)
		}
	}()
	defer func() { pstop(); pwg.Wait() }()

	consumer := func() (stop func()) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for cctx.Err() == nil {
				if fs := cl.PollFetches(cctx); fs.IsClientClosed() {
					return
				}
				if err := cl.CommitUncommittedOffsets(cctx); err != nil && cctx.Err() == nil {
					t.Logf("commit: %v", err)
				}
			}
		}()
		return func() {
			ccancel()
			<-done
			cl.Close() // leaves the group
		}
	}

	pd := newPDReceiver(t)
	n, err := c.alerts.CreateNotifier(ctx, alerting.NotifierInput{Name: "on-call", Type: alerting.NotifierPagerDuty,
		URL: pd.srv.URL + "/v2/enqueue", Secret: "0123456789abcdef0123456789abcdef", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := c.alerts.CreateRule(ctx, alerting.Rule{Name: "billing lag", Kind: alerting.KindLagRecords, Severity: alerting.SeverityCritical,
		Threshold: 300, For: 600 * time.Millisecond, ClearFor: 600 * time.Millisecond, Enabled: true,
		Scope: alerting.Scope{Pattern: group}, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}

	// The health and disk inputs are wired too: no broker is down, and a
	// log dir with less than 99.9999% free space (any real one) alerts.
	if _, err := c.alerts.CreateRule(ctx, alerting.Rule{Name: "broker down", Kind: alerting.KindBrokerDown, Severity: alerting.SeverityCritical, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.alerts.CreateRule(ctx, alerting.Rule{Name: "disk", Kind: alerting.KindDiskFreePercent, Threshold: 99.9999, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	wantDisk := fmt.Sprintf("logdir:%d:%s", app.BrokerID(), app.Config().LogDirs[0])
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		alerts, err := c.alerts.Alerts(ctx)
		if err != nil {
			return err
		}
		if st := c.alerts.Status(); len(st.SourceErrors) > 0 {
			return fmt.Errorf("source errors: %v", st.SourceErrors)
		}
		if len(alerts) != 1 || alerts[0].Subject != wantDisk || alerts[0].State != alerting.StateFiring {
			return fmt.Errorf("open alerts %+v, want one firing on %s", alerts, wantDisk)
		}
		return nil
	})

	stop := consumer()
	// Consuming: the group is Stable, its lag exported, nothing paged.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		fams := scrape(t, base+"/metrics")
		if f := fams["sluice_consumergroup_lag_records"]; f == nil || !hasLabel(f.GetMetric(), "group", group) {
			return fmt.Errorf("no exported lag for %s yet", group)
		}
		if st := c.alerts.Status(); st.LastRun.IsZero() || st.Rules != 3 {
			return fmt.Errorf("evaluator status %+v", st)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond)
	if got := pd.actions("trigger"); len(got) != 0 {
		t.Fatalf("a consuming group was paged: %v", got)
	}

	stop()
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := len(pd.actions("trigger")); n != 1 {
			return fmt.Errorf("%d triggers", n)
		}
		return nil
	})
	time.Sleep(time.Second) // more rounds while the group stays stopped
	triggers := pd.actions("trigger")
	if len(triggers) != 1 {
		t.Fatalf("%d triggers while the group stayed stopped, want 1", len(triggers))
	}
	key, _ := triggers[0]["dedup_key"].(string)
	if want := fmt.Sprintf("sluice/%s/rule-%d/group:%s", app.ClusterID(), rule.ID, group); key != want {
		t.Errorf("dedup_key %q, want %q", key, want)
	}
	payload, _ := triggers[0]["payload"].(map[string]any)
	if payload["severity"] != "critical" || payload["component"] != group || payload["class"] != "lag_records" {
		t.Errorf("trigger payload %v", payload)
	}
	if links, _ := triggers[0]["links"].([]any); len(links) == 0 || !strings.Contains(fmt.Sprint(links[0]), "/alerts/rules/") {
		t.Errorf("trigger links %v", triggers[0]["links"])
	}

	stop = consumer()
	defer func() { stop() }()
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := len(pd.actions("resolve")); n != 1 {
			return fmt.Errorf("%d resolves", n)
		}
		return nil
	})
	time.Sleep(600 * time.Millisecond)
	resolves := pd.actions("resolve")
	if len(resolves) != 1 || len(pd.actions("trigger")) != 1 || resolves[0]["dedup_key"] != key {
		t.Fatalf("after catching up: %d resolves, %d triggers, resolve key %v (trigger %q)", len(resolves), len(pd.actions("trigger")), resolves[0]["dedup_key"], key)
	}

	// Close stops the console: its port refuses connections afterwards.
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", consoleAddr, time.Second); err == nil {
		conn.Close()
		t.Fatal("the console still accepts connections after Close")
	}
}

// With metrics.listen set and the console off, the metrics have a listener
// of their own; the console port is not served.
func TestMetricsListenerWithoutConsole(t *testing.T) {
	metricsAddr := testutil.FreeAddr(t)
	app := startAppliance(t, "console.listen=", "metrics.listen="+metricsAddr, "metrics.path=/prom")
	fams := scrape(t, "http://"+metricsAddr+"/prom")
	if fams["sluice_build_info"] == nil {
		t.Fatal("no sluice_build_info on the metrics listener")
	}
	if status, _, _ := httpGet(t, "http://"+metricsAddr+"/"); status != http.StatusNotFound {
		t.Fatalf("GET / on the metrics listener: %d", status)
	}
	if c := consoleOf(t, app); c.srv != nil || c.alerts != nil {
		t.Fatal("console.listen= still built a console")
	}
}

// Bad settings of the new keys are refused by Validate, with the key named.
func TestConsoleIntervalsValidated(t *testing.T) {
	for _, kv := range []string{"alerting.evaluation.interval.ms=50", "console.lag.sample.interval.ms=10", "alerting.evaluation.interval.ms=soon"} {
		cfg, err := Load("", []string{kv})
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), strings.Split(kv, "=")[0]) {
			t.Errorf("%s: %v", kv, err)
		}
	}
}

func hasLabel(ms []*dto.Metric, name, value string) bool {
	for _, m := range ms {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return true
			}
		}
	}
	return false
}

// The overview's bytes-out rate reads the broker's per-topic counters from
// the registry; without them it reports "unknown".
func TestBytesOutTotalFromRegistry(t *testing.T) {
	reg := metrics.New()
	c := &consoleComponent{a: &App{cfg: DefaultConfig(), brokerID: 1}, reg: reg}
	if _, _, ok := c.bytesOutTotal(); ok {
		t.Fatal("bytes out known before the broker counted any")
	}
	reg.Broker(1).Topic("orders").Out(1000, 10)
	reg.Broker(1).Topic("payments").Out(24, 1)
	n, scope, ok := c.bytesOutTotal()
	if !ok || n != 1024 || scope != "this broker's metrics" {
		t.Fatalf("bytesOutTotal = %d %q %v", n, scope, ok)
	}
}

func TestAlertBaseURL(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		listen, base, cert, want string
	}{
		{":8080", "", "", "http://" + net.JoinHostPort(host, "8080")},
		{"0.0.0.0:8080", "", "", "http://" + net.JoinHostPort(host, "8080")},
		{"10.0.0.5:8443", "", "cert.pem", "https://10.0.0.5:8443"},
		{":8080", "https://sluice.example.com/", "", "https://sluice.example.com"},
	} {
		cfg := DefaultConfig()
		cfg.ConsoleListen, cfg.ConsoleBaseURL, cfg.ConsoleTLSCert = tc.listen, tc.base, tc.cert
		if got := alertBaseURL(cfg); got != tc.want {
			t.Errorf("alertBaseURL(%q, %q) = %q, want %q", tc.listen, tc.base, got, tc.want)
		}
	}
}

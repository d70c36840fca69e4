package alerting

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func counter(t *testing.T, env *testEnv, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := env.reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if f.GetType() == dto.MetricType_COUNTER {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestRetryThenDeliver: 429, then 500, then 202: the event arrives once,
// after backoff, and the log shows three attempts.
func TestRetryThenDeliver(t *testing.T) {
	var waits []int
	env := newTestService(t, func(c *Config) {
		c.Retry.Backoff = func(attempt int) time.Duration {
			waits = append(waits, attempt)
			return 60 * time.Millisecond
		}
	})
	pd := newReceiver(t, 202, 429, 500, 202)
	n := env.pagerDuty(t, pd, "0123456789abcdef0123456789abcdef")
	start := time.Now()
	d, err := env.svc.SendTest(context.Background(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DeliveryDelivered || d.Attempts != 3 || d.HTTPStatus != 202 || d.Error != "" {
		t.Fatalf("delivery %+v", d)
	}
	reqs := pd.requests()
	// 3 trigger attempts, then the test's resolve.
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i, want := range []int{429, 500, 202} {
		if reqs[i].Status != want || reqs[i].Decoded["event_action"] != "trigger" {
			t.Errorf("attempt %d answered %d (%v)", i+1, reqs[i].Status, reqs[i].Decoded["event_action"])
		}
		if string(reqs[i].Body) != string(reqs[0].Body) {
			t.Errorf("attempt %d sent a different body", i+1)
		}
	}
	if len(pd.accepted("event_action", "trigger")) != 1 {
		t.Error("the trigger was accepted more than once")
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 60*time.Millisecond {
		t.Errorf("retried after %v, before the backoff", gap)
	}
	if gap := reqs[2].At.Sub(reqs[1].At); gap < 60*time.Millisecond {
		t.Errorf("retried after %v, before the backoff", gap)
	}
	if len(waits) != 2 || waits[0] != 1 || waits[1] != 2 {
		t.Errorf("backoff asked for attempts %v", waits)
	}
	if reqs[3].Decoded["event_action"] != "resolve" || reqs[3].Decoded["dedup_key"] != reqs[0].Decoded["dedup_key"] {
		t.Errorf("test event not resolved with its dedup_key: %s", reqs[3].Body)
	}
	t.Logf("delivered after %v", time.Since(start))
	log, err := env.svc.Deliveries(context.Background(), DeliveryQuery{NotifierID: n.ID})
	if err != nil || len(log) != 2 {
		t.Fatalf("delivery log %+v, %v", log, err)
	}
	if got := log[1]; got.Action != "trigger" || !got.Test || got.Attempts != 3 || got.Status != DeliveryDelivered || got.FinishedAt.IsZero() {
		t.Errorf("log entry %+v", got)
	}
	if v := counter(t, env, "sluice_alerting_notification_attempts_total", map[string]string{"notifier_type": "pagerduty"}); v != 4 {
		t.Errorf("attempts counter %v, want 4", v)
	}
	if v := counter(t, env, "sluice_alerting_notifications_total", map[string]string{"result": "delivered"}); v != 2 {
		t.Errorf("delivered counter %v, want 2", v)
	}
}

// TestBadRequestNotRetried: a 400 is final and shows in the delivery log.
func TestBadRequestNotRetried(t *testing.T) {
	env := newTestService(t, nil)
	pd := newReceiver(t, 400)
	pd.body = `{"status":"invalid event","message":"Event object is invalid","errors":["Length of 'routing_key' is incorrect"]}`
	n := env.pagerDuty(t, pd, "0123456789abcdef0123456789abcdef")
	d, err := env.svc.SendTest(context.Background(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DeliveryFailed || d.Attempts != 1 || d.HTTPStatus != 400 || !strings.Contains(d.Error, "400") {
		t.Fatalf("delivery %+v", d)
	}
	if n := len(pd.requests()); n != 1 {
		t.Fatalf("400 was retried: %d requests", n)
	}
	log, err := env.svc.Deliveries(context.Background(), DeliveryQuery{Status: DeliveryFailed})
	if err != nil || len(log) != 1 {
		t.Fatalf("failed deliveries %+v, %v", log, err)
	}
	if !strings.Contains(log[0].Response, "Event object is invalid") || log[0].HTTPStatus != 400 || log[0].NotifierName != n.Name {
		t.Errorf("log entry %+v", log[0])
	}
	if v := counter(t, env, "sluice_alerting_notifications_total", map[string]string{"result": "failed"}); v != 1 {
		t.Errorf("failed counter %v", v)
	}
}

// TestNetworkErrorsRetriedThenGiveUp: a receiver that is not there is
// retried up to MaxAttempts.
func TestNetworkErrorsRetriedThenGiveUp(t *testing.T) {
	env := newTestService(t, func(c *Config) { c.Retry.MaxAttempts = 3 })
	gone := newReceiver(t, 202)
	gone.srv.Close()
	n := env.pagerDuty(t, gone, "0123456789abcdef0123456789abcdef")
	d, err := env.svc.SendTest(context.Background(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DeliveryFailed || d.Attempts != 3 || d.HTTPStatus != 0 || !strings.Contains(d.Error, "retryable") {
		t.Fatalf("delivery %+v", d)
	}
}

// TestSecrets: routing keys are encrypted at rest with a 0600 key file,
// never returned in full and never logged.
func TestSecrets(t *testing.T) {
	const key = "abcdef0123456789abcdef0123456789"
	env := newTestService(t, nil)
	ctx := context.Background()
	st, err := os.Stat(filepath.Join(env.dir, "alerting.key"))
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Fatalf("key file: %v %v", st, err)
	}
	pd := newReceiver(t, 400)
	pd.body = `{"status":"invalid event","message":"bad key ` + key + `"}` // a receiver echoing the key
	n := env.pagerDuty(t, pd, key)
	if !n.HasSecret || n.SecretHint != "••••6789" {
		t.Errorf("notifier %+v", n)
	}
	var raw []byte
	if err := env.db.QueryRowContext(ctx, `SELECT secret FROM alert_notifiers WHERE id = ?`, n.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), key) || len(raw) < len(key)+16 {
		t.Fatalf("secret stored in the clear or not sealed: %q", raw)
	}
	if _, err := env.svc.SendTest(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if got := pd.requests(); len(got) != 1 || got[0].Decoded["routing_key"] != key {
		t.Fatalf("the receiver did not get the key")
	}
	// An update without a secret keeps it; a PagerDuty notifier cannot drop it.
	if _, err := env.svc.UpdateNotifier(ctx, n.ID, NotifierInput{Name: n.Name, Type: NotifierPagerDuty, URL: n.URL, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, secret, err := env.svc.notifierWithSecret(ctx, n.ID); err != nil || secret != key {
		t.Errorf("secret after update without one: %v", err)
	}
	var ve *ValidationError
	if _, err := env.svc.UpdateNotifier(ctx, n.ID, NotifierInput{Name: n.Name, Type: NotifierPagerDuty, ClearSecret: true}); !errors.As(err, &ve) || ve.Fields["secret"] == "" {
		t.Errorf("clearing a PagerDuty key: %v", err)
	}
	// Nowhere in logs, the delivery log, or the database dump except sealed.
	if strings.Contains(env.logs.String(), key) {
		t.Error("the key appears in the log output")
	}
	rows, err := env.db.QueryContext(ctx, `SELECT response || error FROM alert_deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		if strings.Contains(s, key) {
			t.Errorf("the key appears in the delivery log: %q", s)
		}
	}
	rows.Close()
	// Nor anywhere in the database files (main file and WAL).
	for _, f := range []string{"console.db", "console.db-wal"} {
		b, err := os.ReadFile(filepath.Join(env.dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(b), key) {
			t.Errorf("the key appears in clear in %s", f)
		}
	}

	// A key file others can read is refused; a different key cannot open the
	// stored secret and says so.
	os.Chmod(filepath.Join(env.dir, "alerting.key"), 0o644)
	if _, err := loadOrCreateKey(filepath.Join(env.dir, "alerting.key")); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key file: %v", err)
	}
	other, _ := newSealer(make([]byte, 32))
	env.svc.sealer = other
	d, err := env.svc.SendTest(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DeliveryFailed || !strings.Contains(d.Error, "enter it again") {
		t.Errorf("undecryptable secret: %+v", d)
	}
}

func TestRuleAndNotifierValidation(t *testing.T) {
	env := newTestService(t, nil)
	ctx := context.Background()
	bad := []struct {
		r     Rule
		field string
	}{
		{Rule{Kind: KindLagRecords}, "name"},
		{Rule{Name: "x", Kind: "nope"}, "kind"},
		{Rule{Name: "x", Kind: KindLagRecords, Severity: "page"}, "severity"},
		{Rule{Name: "x", Kind: KindLagRecords, For: -time.Second}, "for"},
		{Rule{Name: "x", Kind: KindLagRecords, ClearFor: 8 * 24 * time.Hour}, "clear_for"},
		{Rule{Name: "x", Kind: KindLagRecords, Threshold: -1}, "threshold"},
		{Rule{Name: "x", Kind: KindLagRecords, Threshold: 1.5}, "threshold"},
		{Rule{Name: "x", Kind: KindLagSeconds}, "threshold"},
		{Rule{Name: "x", Kind: KindDiskFreePercent, Threshold: 100}, "threshold"},
		{Rule{Name: "x", Kind: KindBrokerDown, Threshold: 3}, "threshold"},
		{Rule{Name: "x", Kind: KindGroupStatus, MinStatus: StatusStall}, "min_status"},
		{Rule{Name: "x", Kind: KindLagRecords, MinStatus: StatusWarn}, "min_status"},
		{Rule{Name: "x", Kind: KindBrokerDown, Scope: Scope{Topic: "orders"}}, "scope_topic"},
		{Rule{Name: "x", Kind: KindLagRecords, Scope: Scope{Topic: "bad topic!"}}, "scope_topic"},
		{Rule{Name: "x", Kind: KindLagRecords, NotifierIDs: []int64{99}}, "notifiers"},
	}
	for _, b := range bad {
		_, err := env.svc.CreateRule(ctx, b.r)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Fields[b.field] == "" {
			t.Errorf("%+v: want a validation error on %s, got %v", b.r, b.field, err)
		}
	}
	hook := newReceiver(t, 200)
	n := env.webhook(t, hook, "")
	r, err := env.svc.CreateRule(ctx, Rule{Name: " group health ", Kind: KindGroupStatus, Enabled: true, Scope: Scope{Pattern: "billing-*"}, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "group health" || r.MinStatus != StatusWarn || r.Severity != SeverityWarning {
		t.Errorf("defaults not applied: %+v", r)
	}
	if _, err := env.svc.CreateRule(ctx, Rule{Name: "group health", Kind: KindBrokerDown}); err == nil {
		t.Error("duplicate name accepted")
	}
	r.Threshold, r.Kind, r.MinStatus = 5, KindLagRecords, 0
	if r, err = env.svc.UpdateRule(ctx, r); err != nil || r.Kind != KindLagRecords || r.Threshold != 5 || len(r.NotifierIDs) != 1 {
		t.Fatalf("update: %+v %v", r, err)
	}
	if err := env.svc.SetRuleEnabled(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := env.svc.Rule(ctx, r.ID); got.Enabled {
		t.Error("still enabled")
	}
	if err := env.svc.DeleteNotifier(ctx, n.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := env.svc.Rule(ctx, r.ID); len(got.NotifierIDs) != 0 {
		t.Error("deleted notifier still attached")
	}
	if err := env.svc.DeleteRule(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.svc.Rule(ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted rule: %v", err)
	}
	for _, in := range []NotifierInput{
		{Type: NotifierWebhook, URL: "http://x"},
		{Name: "a", Type: "email", URL: "http://x"},
		{Name: "a", Type: NotifierWebhook, URL: "ftp://x"},
		{Name: "a", Type: NotifierWebhook},
		{Name: "a", Type: NotifierPagerDuty},
		{Name: "a", Type: NotifierPagerDuty, Secret: "has space"},
	} {
		var ve *ValidationError
		if _, err := env.svc.CreateNotifier(ctx, in); !errors.As(err, &ve) {
			t.Errorf("%+v accepted: %v", in, err)
		}
	}
	pd, err := env.svc.CreateNotifier(ctx, NotifierInput{Name: "pd", Type: NotifierPagerDuty, Secret: "0123456789abcdef0123456789abcdef"})
	if err != nil || pd.URL != DefaultPagerDutyURL {
		t.Errorf("PagerDuty default URL: %+v %v", pd, err)
	}
	if len(Kinds()) != 16 {
		t.Errorf("%d kinds", len(Kinds()))
	}
	var one int
	if err := env.db.QueryRowContext(ctx, `SELECT 1 FROM alert_rules LIMIT 1`).Scan(&one); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("rules left: %v", err)
	}
}

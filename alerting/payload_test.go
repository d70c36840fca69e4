package alerting

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// scriptedLag is a LagSource whose answer the test sets.
type scriptedLag struct{ groups []GroupLag }

func (s *scriptedLag) Lag(context.Context) ([]GroupLag, error) { return s.groups, nil }

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPagerDutyPayloadSchema checks trigger and resolve bodies field by
// field against the Events API v2 schema.
func TestPagerDutyPayloadSchema(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{}
	env := newTestService(t, func(c *Config) {
		c.Now = clk.Now
		c.Sources.Lag = src
		c.Cluster = "prod-eu"
	})
	pd := newReceiver(t, 202)
	const key = "R0123456789abcdef0123456789abcde" // 32 characters, a ruleset key
	n := env.pagerDuty(t, pd, key)
	rule := env.rule(t, Rule{Name: "lag over 100", Kind: KindLagRecords, Severity: SeverityError, Threshold: 100,
		For: time.Minute, NotifierIDs: []int64{n.ID}, Description: "Billing must keep up."})
	long := strings.Repeat("g", 1100) // pushes summary and dedup key past their limits
	src.groups = []GroupLag{
		{Group: "billing", State: "Empty", Partitions: []PartitionLag{
			{Topic: "orders", Partition: 0, Committed: 10, LogEnd: 160, Lag: 150, LagTime: 90 * time.Second},
			{Topic: "orders", Partition: 1, Committed: 40, LogEnd: 100, Lag: 60},
		}},
		{Group: long, Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Lag: 1000}}},
	}
	env.evaluate(t) // pending
	if got := len(pd.requests()); got != 0 {
		t.Fatalf("pending alert sent %d requests", got)
	}
	start := clk.Now()
	clk.Add(time.Minute)
	env.evaluate(t) // firing
	env.waitDeliveries(t, 2)

	trig := pd.accepted("event_action", "trigger")
	if len(trig) != 2 {
		t.Fatalf("%d triggers, want 2", len(trig))
	}
	sort.Slice(trig, func(i, j int) bool { return len(trig[i].Body) < len(trig[j].Body) })
	got := trig[0]
	if got.Method != "POST" || got.Path != "/v2/enqueue" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %q", got.Method, got.Path, got.Header.Get("Content-Type"))
	}
	// Strict decode: no field outside the v2 schema.
	var ev struct {
		RoutingKey  string `json:"routing_key"`
		EventAction string `json:"event_action"`
		DedupKey    string `json:"dedup_key"`
		Payload     struct {
			Summary       string         `json:"summary"`
			Source        string         `json:"source"`
			Severity      string         `json:"severity"`
			Timestamp     string         `json:"timestamp"`
			Component     string         `json:"component"`
			Group         string         `json:"group"`
			Class         string         `json:"class"`
			CustomDetails map[string]any `json:"custom_details"`
		} `json:"payload"`
		Links []struct {
			Href string `json:"href"`
			Text string `json:"text"`
		} `json:"links"`
		Client    string `json:"client"`
		ClientURL string `json:"client_url"`
	}
	dec := json.NewDecoder(bytes.NewReader(got.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("trigger body outside the v2 schema: %v\n%s", err, got.Body)
	}
	wantTop := []string{"client", "client_url", "dedup_key", "event_action", "links", "payload", "routing_key"}
	if k := keys(got.Decoded); !reflect.DeepEqual(k, wantTop) {
		t.Errorf("top-level fields %v, want %v", k, wantTop)
	}
	wantPayload := []string{"class", "component", "custom_details", "group", "severity", "source", "summary", "timestamp"}
	if k := keys(got.Decoded["payload"].(map[string]any)); !reflect.DeepEqual(k, wantPayload) {
		t.Errorf("payload fields %v, want %v", k, wantPayload)
	}
	dedup := "sluice/prod-eu/rule-" + itoa(rule.ID) + "/group:billing"
	checks := map[string][2]string{
		"routing_key":  {ev.RoutingKey, key},
		"event_action": {ev.EventAction, "trigger"},
		"dedup_key":    {ev.DedupKey, dedup},
		"source":       {ev.Payload.Source, "sluice-test-host"},
		"severity":     {ev.Payload.Severity, "error"},
		"component":    {ev.Payload.Component, "billing"},
		"group":        {ev.Payload.Group, "prod-eu"}, // the cluster
		"class":        {ev.Payload.Class, "lag_records"},
		"client":       {ev.Client, "Sluice"},
		"client_url":   {ev.ClientURL, "https://console.example.test"},
		"summary":      {ev.Payload.Summary, `lag over 100: consumer group "billing" is 210 records behind (threshold 100)`},
	}
	for f, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", f, c[0], c[1])
		}
	}
	if ts, err := time.Parse(time.RFC3339, ev.Payload.Timestamp); err != nil || !ts.Equal(start) {
		t.Errorf("timestamp %q (%v): want the time the condition began, %v", ev.Payload.Timestamp, err, start)
	}
	cd := ev.Payload.CustomDetails
	for f, want := range map[string]any{"total_lag": 210.0, "threshold": 100.0, "partitions": 2.0, "max_lag_seconds": 90.0,
		"group": "billing", "rule": "lag over 100", "rule_id": float64(rule.ID), "subject": "group:billing",
		"description": "Billing must keep up.", "state": "Empty"} {
		if cd[f] != want {
			t.Errorf("custom_details.%s = %v, want %v", f, cd[f], want)
		}
	}
	if top, _ := cd["top_partitions_by_lag"].(map[string]any); top["orders/0"] != 150.0 || top["orders/1"] != 60.0 {
		t.Errorf("custom_details.top_partitions_by_lag = %v", cd["top_partitions_by_lag"])
	}
	if len(ev.Links) != 2 || ev.Links[0].Href != "https://console.example.test/alerts/rules/"+itoa(rule.ID) ||
		ev.Links[1].Href != "https://console.example.test/groups/billing" || ev.Links[0].Text == "" {
		t.Errorf("links %+v", ev.Links)
	}

	// The long group: summary cut to 1024 characters, dedup key hashed to
	// at most 255.
	var long1 pdEvent
	json.Unmarshal(trig[1].Body, &long1)
	if n := utf8.RuneCountInString(long1.Payload.Summary); n != 1024 {
		t.Errorf("long summary has %d characters", n)
	}
	if len(long1.DedupKey) > 255 || !regexp.MustCompile(`^sluice/prod-eu/rule-\d+/[0-9a-f]{32}$`).MatchString(long1.DedupKey) {
		t.Errorf("long dedup key %q", long1.DedupKey)
	}
	if !strings.HasSuffix(long1.Payload.Summary, "…") {
		t.Errorf("truncated summary does not end in an ellipsis")
	}

	// Caught up: a resolve carrying only routing_key, dedup_key, event_action.
	src.groups = []GroupLag{{Group: "billing", Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Lag: 0}}}}
	clk.Add(time.Minute)
	env.evaluate(t)
	env.waitDeliveries(t, 4)
	res := pd.accepted("event_action", "resolve")
	if len(res) != 2 {
		t.Fatalf("%d resolves, want 2 (billing and the long group, which vanished)", len(res))
	}
	for _, r := range res {
		if k := keys(r.Decoded); !reflect.DeepEqual(k, []string{"dedup_key", "event_action", "routing_key"}) {
			t.Errorf("resolve fields %v", k)
		}
	}
	var sawBilling bool
	for _, r := range res {
		sawBilling = sawBilling || r.Decoded["dedup_key"] == dedup
	}
	if !sawBilling {
		t.Errorf("no resolve with dedup_key %q", dedup)
	}
}

func itoa(v int64) string { return strconvFormat(v) }

// TestWebhookAlertmanagerV4 checks the webhook body against Alertmanager's
// webhook payload, version 4.
func TestWebhookAlertmanagerV4(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{groups: []GroupLag{{Group: "billing", Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Lag: 500}}}}}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src })
	hook := newReceiver(t, 200)
	n := env.webhook(t, hook, "hook-token-0123456789")
	rule := env.rule(t, Rule{Name: "BillingLag", Kind: KindLagRecords, Severity: SeverityWarning, Threshold: 10,
		Scope: Scope{Topic: "orders"}, NotifierIDs: []int64{n.ID}})
	env.evaluate(t)
	clk.Add(30 * time.Second)
	src.groups[0].Partitions[0].Lag = 0
	env.evaluate(t)
	env.waitDeliveries(t, 2)

	type amAlertV4 struct {
		Status       string            `json:"status"`
		Labels       map[string]string `json:"labels"`
		Annotations  map[string]string `json:"annotations"`
		StartsAt     time.Time         `json:"startsAt"`
		EndsAt       time.Time         `json:"endsAt"`
		GeneratorURL string            `json:"generatorURL"`
		Fingerprint  string            `json:"fingerprint"`
	}
	type amV4 struct {
		Version           string            `json:"version"`
		GroupKey          string            `json:"groupKey"`
		TruncatedAlerts   int               `json:"truncatedAlerts"`
		Status            string            `json:"status"`
		Receiver          string            `json:"receiver"`
		GroupLabels       map[string]string `json:"groupLabels"`
		CommonLabels      map[string]string `json:"commonLabels"`
		CommonAnnotations map[string]string `json:"commonAnnotations"`
		ExternalURL       string            `json:"externalURL"`
		Alerts            []amAlertV4       `json:"alerts"`
	}
	reqs := hook.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d webhook requests, want 2", len(reqs))
	}
	var msgs []amV4
	for _, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer hook-token-0123456789" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("headers %v", r.Header)
		}
		var m amV4
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("not an Alertmanager v4 payload: %v\n%s", err, r.Body)
		}
		wantTop := []string{"alerts", "commonAnnotations", "commonLabels", "externalURL", "groupKey", "groupLabels", "receiver", "status", "truncatedAlerts", "version"}
		if k := keys(r.Decoded); !reflect.DeepEqual(k, wantTop) {
			t.Errorf("fields %v, want %v", k, wantTop)
		}
		alertKeys := keys(r.Decoded["alerts"].([]any)[0].(map[string]any))
		if !reflect.DeepEqual(alertKeys, []string{"annotations", "endsAt", "fingerprint", "generatorURL", "labels", "startsAt", "status"}) {
			t.Errorf("alert fields %v", alertKeys)
		}
		msgs = append(msgs, m)
	}
	fire, res := msgs[0], msgs[1]
	wantLabels := map[string]string{"alertname": "BillingLag", "severity": "warning", "rule_id": itoa(rule.ID),
		"kind": "lag_records", "group": "billing", "topic": "orders"}
	for _, m := range msgs {
		if m.Version != "4" || m.Receiver != n.Name || m.ExternalURL != "https://console.example.test" || m.TruncatedAlerts != 0 || len(m.Alerts) != 1 {
			t.Errorf("envelope %+v", m)
		}
		if !reflect.DeepEqual(m.Alerts[0].Labels, wantLabels) || !reflect.DeepEqual(m.CommonLabels, wantLabels) {
			t.Errorf("labels %v, want %v", m.Alerts[0].Labels, wantLabels)
		}
		if _, ok := m.GroupLabels["severity"]; ok || m.GroupLabels["alertname"] != "BillingLag" || m.GroupLabels["group"] != "billing" {
			t.Errorf("groupLabels %v", m.GroupLabels)
		}
		if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(m.Alerts[0].Fingerprint) {
			t.Errorf("fingerprint %q", m.Alerts[0].Fingerprint)
		}
		if !strings.HasPrefix(m.GroupKey, "{}:{") || !strings.Contains(m.GroupKey, `group="billing"`) {
			t.Errorf("groupKey %q", m.GroupKey)
		}
		if m.Alerts[0].GeneratorURL != "https://console.example.test/alerts/rules/"+itoa(rule.ID) {
			t.Errorf("generatorURL %q", m.Alerts[0].GeneratorURL)
		}
		if !strings.Contains(m.Alerts[0].Annotations["summary"], "500 records behind") {
			t.Errorf("summary annotation %q", m.Alerts[0].Annotations["summary"])
		}
	}
	if fire.Status != "firing" || fire.Alerts[0].Status != "firing" || !fire.Alerts[0].EndsAt.IsZero() {
		t.Errorf("firing message: status %s/%s endsAt %v", fire.Status, fire.Alerts[0].Status, fire.Alerts[0].EndsAt)
	}
	if !strings.Contains(string(reqs[0].Body), `"endsAt":"0001-01-01T00:00:00Z"`) {
		t.Errorf("firing endsAt not Alertmanager's zero time")
	}
	if res.Status != "resolved" || res.Alerts[0].Status != "resolved" || !res.Alerts[0].EndsAt.Equal(clk.Now()) {
		t.Errorf("resolved message: status %s endsAt %v", res.Status, res.Alerts[0].EndsAt)
	}
	if !fire.Alerts[0].StartsAt.Equal(res.Alerts[0].StartsAt) || fire.GroupKey != res.GroupKey || fire.Alerts[0].Fingerprint != res.Alerts[0].Fingerprint {
		t.Errorf("firing and resolved are not the same alert")
	}
}

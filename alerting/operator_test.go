package alerting

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

const pdKey = "0123456789abcdef0123456789abcdef"

func billing(lag int64) []GroupLag { return group("billing", lag) }

func group(name string, lag int64) []GroupLag {
	return []GroupLag{{Group: name, State: "Stable", Members: 1, Partitions: []PartitionLag{
		{Topic: "orders", Partition: 0, Committed: 100, LogEnd: 100 + lag, Lag: lag},
	}}}
}

// TestAcknowledge: acknowledging a firing alert sends PagerDuty an
// acknowledge event with the incident's dedup key (and nothing else), once;
// the history says who; the acknowledgement ends with the alert, so the
// next incident starts unacknowledged.
func TestAcknowledge(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{groups: billing(900)}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src; c.Cluster = "prod-eu" })
	pd := newReceiver(t, 202)
	n := env.pagerDuty(t, pd, pdKey)
	rule := env.rule(t, Rule{Name: "billing lag", Kind: KindLagRecords, Severity: SeverityCritical, Threshold: 100, NotifierIDs: []int64{n.ID}})
	ctx := context.Background()

	// Pending alerts cannot be acknowledged.
	r2 := env.rule(t, Rule{Name: "slow lag", Kind: KindLagRecords, Threshold: 100, For: time.Hour})
	env.evaluate(t)
	if err := env.svc.Acknowledge(ctx, r2.ID, "group:billing", "alice", ""); !errors.Is(err, ErrNotFiring) {
		t.Fatalf("acknowledging a pending alert: %v", err)
	}
	if err := env.svc.Acknowledge(ctx, rule.ID, "group:nobody", "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("acknowledging no alert: %v", err)
	}
	env.waitDeliveries(t, 1)

	clk.Add(3 * time.Minute)
	if err := env.svc.Acknowledge(ctx, rule.ID, "group:billing", "alice", "on it"); err != nil {
		t.Fatal(err)
	}
	if err := env.svc.Acknowledge(ctx, rule.ID, "group:billing", "bob", ""); err != nil {
		t.Fatalf("acknowledging twice: %v", err)
	}
	env.waitDeliveries(t, 2)
	acks := pd.accepted("event_action", "acknowledge")
	if len(acks) != 1 {
		t.Fatalf("%d acknowledge events, want 1", len(acks))
	}
	if k := keys(acks[0].Decoded); !reflect.DeepEqual(k, []string{"dedup_key", "event_action", "routing_key"}) {
		t.Errorf("acknowledge fields %v", k)
	}
	trig := pd.accepted("event_action", "trigger")
	if len(trig) != 1 || acks[0].Decoded["dedup_key"] != trig[0].Decoded["dedup_key"] || acks[0].Decoded["routing_key"] != pdKey {
		t.Errorf("acknowledge %v does not match trigger %v", acks[0].Decoded, trig)
	}
	a := openAlerts(t, env)["billing lag group:billing"]
	if a.AckedBy != "alice" || a.AckComment != "on it" || !a.AckedAt.Equal(clk.Now()) {
		t.Errorf("open alert %+v", a)
	}
	h, _ := env.svc.History(ctx, HistoryQuery{RuleID: rule.ID, Limit: 1})
	if len(h) != 1 || h[0].Event != EventAcknowledged || h[0].Actor != "alice" || h[0].Duration != 3*time.Minute ||
		!strings.Contains(h[0].Summary, "acknowledged by alice (on it)") {
		t.Errorf("history %+v", h)
	}
	ds, _ := env.svc.Deliveries(ctx, DeliveryQuery{})
	if ds[0].Action != actionAcknowledge || ds[0].Status != DeliveryDelivered {
		t.Errorf("delivery log %+v", ds[0])
	}

	// Resolved, then firing again: a new incident, not acknowledged.
	src.groups = billing(0)
	env.evaluate(t)
	src.groups = billing(500)
	env.evaluate(t)
	if a := openAlerts(t, env)["billing lag group:billing"]; a.State != StateFiring || a.AckedBy != "" {
		t.Errorf("the new incident is %+v", a)
	}
}

// TestSilence: a silence holds a trigger back until it expires (or is
// ended); the alert shows as silenced meanwhile. An alert that fires and
// clears within a silence sends nothing at all.
func TestSilence(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src })
	pd := newReceiver(t, 202)
	n := env.pagerDuty(t, pd, pdKey)
	rule := env.rule(t, Rule{Name: "billing lag", Kind: KindLagRecords, Threshold: 100, NotifierIDs: []int64{n.ID}})
	ctx := context.Background()

	var ve *ValidationError
	for _, bad := range []Silence{
		{ExpiresAt: clk.Now().Add(time.Hour)},                                                        // neither rule nor subject
		{RuleID: rule.ID, ExpiresAt: clk.Now().Add(-time.Minute)},                                    // past
		{RuleID: rule.ID, ExpiresAt: clk.Now().Add(31 * 24 * time.Hour)},                             // too long
		{Subject: "billing", ExpiresAt: clk.Now().Add(time.Hour)},                                    // no type
		{RuleID: 9999, ExpiresAt: clk.Now().Add(time.Hour)},                                          // no such rule
		{Subject: "group:x", Comment: strings.Repeat("x", 600), ExpiresAt: clk.Now().Add(time.Hour)}, // long comment
	} {
		if _, err := env.svc.CreateSilence(ctx, bad); !errors.As(err, &ve) {
			t.Errorf("silence %+v accepted: %v", bad, err)
		}
	}
	x, err := env.svc.CreateSilence(ctx, Silence{RuleID: rule.ID, Subject: "group:billing", Comment: "maintenance", CreatedBy: "alice",
		ExpiresAt: clk.Now().Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if x.RuleName != "billing lag" || x.CreatedBy != "alice" || !x.Active(clk.Now()) {
		t.Fatalf("silence %+v", x)
	}

	// Fires within the silence: held back, shown as silenced.
	src.groups = billing(900)
	env.evaluate(t)
	clk.Add(time.Minute)
	env.evaluate(t)
	if got := len(pd.requests()); got != 0 {
		t.Fatalf("%d requests while silenced", got)
	}
	a := openAlerts(t, env)["billing lag group:billing"]
	if a.State != StateFiring || a.Notified || a.Silence == nil || a.Silence.ID != x.ID {
		t.Fatalf("silenced alert %+v", a)
	}

	// The silence expires: the next round sends the trigger.
	clk.Add(10 * time.Minute)
	env.evaluate(t)
	env.waitDeliveries(t, 1)
	if got := pd.accepted("event_action", "trigger"); len(got) != 1 {
		t.Fatalf("%d triggers after the silence expired", len(got))
	}
	if a := openAlerts(t, env)["billing lag group:billing"]; !a.Notified || a.Silence != nil {
		t.Errorf("after expiry %+v", a)
	}

	// A subject silence ended early lets the trigger out at the next round;
	// a resolve is sent although a new silence covers the alert. (Another
	// group each time: billing coming and going would count as flapping.)
	src.groups = billing(0)
	env.evaluate(t)
	env.waitDeliveries(t, 2) // billing's resolve
	x2, err := env.svc.CreateSilence(ctx, Silence{Subject: "group:shipping", CreatedBy: "bob", ExpiresAt: clk.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	src.groups = group("shipping", 900)
	env.evaluate(t)
	if got := len(pd.requests()); got != 2 {
		t.Fatalf("%d requests, want 2 (billing's trigger and resolve) while shipping is silenced", got)
	}
	if err := env.svc.EndSilence(ctx, x2.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	env.evaluate(t)
	env.waitDeliveries(t, 3)
	if got := pd.accepted("event_action", "trigger"); len(got) != 2 {
		t.Fatalf("%d triggers after the silence ended", len(got))
	}
	if _, err := env.svc.CreateSilence(ctx, Silence{RuleID: rule.ID, CreatedBy: "bob", ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	src.groups = group("shipping", 0)
	env.evaluate(t)
	env.waitDeliveries(t, 4)
	if got := pd.accepted("event_action", "resolve"); len(got) != 2 {
		t.Fatalf("%d resolves; a notified alert resolves even while silenced", len(got))
	}

	// Fired and cleared within a silence: nothing sent.
	src.groups = group("audit", 900)
	env.evaluate(t)
	src.groups = group("audit", 0)
	env.evaluate(t)
	if got := len(pd.requests()); got != 4 {
		t.Fatalf("%d requests: an alert that never notified sent something", got)
	}
	list, err := env.svc.Silences(ctx, 0)
	if err != nil || len(list) != 3 || !list[0].Active(clk.Now()) || list[len(list)-1].Active(clk.Now()) {
		t.Fatalf("silences %+v %v", list, err)
	}
}

// TestResolvedEntryHasClearingValue: the history's resolved entry says the
// value that cleared the alert and how long it lasted, not the firing
// text.
func TestResolvedEntryHasClearingValue(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{groups: billing(900)}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src })
	rule := env.rule(t, Rule{Name: "billing lag", Kind: KindLagRecords, Threshold: 100, ClearFor: time.Minute})
	env.evaluate(t)
	clk.Add(7*time.Minute + 55*time.Second)
	src.groups = billing(12)
	env.evaluate(t) // clearing
	if a := openAlerts(t, env)["billing lag group:billing"]; a.Value != "12 records" || !strings.Contains(a.Summary, "900 records") {
		t.Errorf("clearing alert %+v", a)
	}
	clk.Add(time.Minute)
	src.groups = billing(1)
	env.evaluate(t) // resolved
	h, err := env.svc.History(context.Background(), HistoryQuery{RuleID: rule.ID, Limit: 1})
	if err != nil || len(h) != 1 {
		t.Fatal(h, err)
	}
	e := h[0]
	if e.Event != EventResolved || e.Value != "1 record" || e.Duration != 8*time.Minute+55*time.Second ||
		e.Summary != `billing lag: consumer group "billing" is 1 record behind (threshold 100)` {
		t.Errorf("resolved entry %+v", e)
	}
	if events := historyEvents(t, env, rule.ID); !reflect.DeepEqual(events, []string{"group:billing firing", "group:billing resolved"}) {
		t.Errorf("events %v", events)
	}
}

// TestPreviewRule: a rule previewed against the cluster lists every subject
// in scope with its value, the ones whose condition holds first, and
// stores nothing.
func TestPreviewRule(t *testing.T) {
	src := &scriptedLag{groups: []GroupLag{
		{Group: "billing", Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Lag: 900}, {Topic: "audit", Partition: 0, Lag: 5}}},
		{Group: "shipping", Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Lag: 40}}},
		{Group: "analytics", Partitions: []PartitionLag{{Topic: "clicks", Partition: 0, Lag: 20000}}},
	}}
	env := newTestService(t, func(c *Config) { c.Sources.Lag = src })
	ctx := context.Background()
	pv, err := env.svc.PreviewRule(ctx, Rule{Name: "orders lag", Kind: KindLagRecords, Threshold: 100, Scope: Scope{Topic: "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []SubjectValue{
		{Subject: "group:billing", Value: "900 records", Holds: true, Summary: `orders lag: consumer group "billing" is 900 records behind (threshold 100)`},
		{Subject: "group:shipping", Value: "40 records", Summary: `orders lag: consumer group "shipping" is 40 records behind (threshold 100)`},
	}
	if !reflect.DeepEqual(pv.Subjects, want) || pv.Total != 2 || pv.Holding != 1 {
		t.Errorf("preview %+v", pv)
	}
	var ve *ValidationError
	if _, err := env.svc.PreviewRule(ctx, Rule{Kind: KindLagRecords}); !errors.As(err, &ve) || ve.Fields["name"] == "" {
		t.Errorf("invalid rule previewed: %v", err)
	}
	pv, err = env.svc.PreviewRule(ctx, Rule{Name: "down", Kind: KindBrokerDown})
	if err != nil || pv.SourceError == "" {
		t.Errorf("preview without a health source: %+v %v", pv, err)
	}
	if rules, _ := env.svc.Rules(ctx); len(rules) != 0 {
		t.Errorf("preview stored rules: %v", rules)
	}
}

// TestGroupStatuses: every group's Burrow status is kept whenever lag can
// be read, with no rule at all.
func TestGroupStatuses(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src; c.Interval = time.Minute })
	for i := int64(0); i < 5; i++ {
		src.groups = []GroupLag{
			{Group: "stuck", Members: 1, Partitions: []PartitionLag{{Topic: "t", Partition: 0, Committed: 10, Lag: 50 + i, CommitTime: clk.Now()}}},
			{Group: "fine", Members: 1, Partitions: []PartitionLag{{Topic: "t", Partition: 0, Committed: 10 * i, Lag: 0, CommitTime: clk.Now()}}},
		}
		env.evaluate(t)
		clk.Add(time.Minute)
	}
	m, at := env.svc.GroupStatuses()
	if at.IsZero() || m["stuck"].Status != StatusErr || m["stuck"].Partitions["STALL"] != 1 || m["fine"].Status != StatusOK {
		t.Fatalf("statuses %+v at %v", m, at)
	}
}

// TestRetryDelivery: a failed delivery keeps the request it sent, with the
// routing key redacted; retrying it sends the same event with the key, as
// a new delivery naming the one it repeats.
func TestRetryDelivery(t *testing.T) {
	src := &scriptedLag{groups: billing(900)}
	env := newTestService(t, func(c *Config) { c.Sources.Lag = src })
	pd := newReceiver(t, 202, 400)
	n := env.pagerDuty(t, pd, pdKey)
	env.rule(t, Rule{Name: "billing lag", Kind: KindLagRecords, Threshold: 100, NotifierIDs: []int64{n.ID}})
	env.evaluate(t)
	ds := env.waitDeliveries(t, 1)
	failed := ds[0]
	if failed.Status != DeliveryFailed || strings.Contains(failed.Request, pdKey) || !strings.Contains(failed.Request, `"routing_key":"[redacted]"`) ||
		!strings.Contains(failed.Request, `"event_action":"trigger"`) {
		t.Fatalf("failed delivery %+v", failed)
	}
	ctx := context.Background()
	d, err := env.svc.RetryDelivery(ctx, failed.ID)
	if err != nil || d.Status != DeliveryDelivered || d.RetryOf != failed.ID || d.Request != failed.Request {
		t.Fatalf("retry %+v %v", d, err)
	}
	got := pd.requests()
	if len(got) != 2 || got[1].Decoded["routing_key"] != pdKey || got[1].Decoded["dedup_key"] != got[0].Decoded["dedup_key"] {
		t.Fatalf("retried request %s", got[len(got)-1].Body)
	}
	if _, err := env.svc.RetryDelivery(ctx, d.ID); !errors.Is(err, ErrNotRetryable) {
		t.Errorf("retrying a delivered one: %v", err)
	}
	if _, err := env.svc.RetryDelivery(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("retrying nothing: %v", err)
	}
}

// TestRoutingKeyLength: PagerDuty's routing keys are 32 characters; a
// shorter one is refused where it is typed.
func TestRoutingKeyLength(t *testing.T) {
	env := newTestService(t, nil)
	var ve *ValidationError
	for _, k := range []string{"abc", pdKey + "0", "0123456789abcdef0123456789abcde!"} {
		_, err := env.svc.CreateNotifier(context.Background(), NotifierInput{Name: "pd", Type: NotifierPagerDuty, Secret: k})
		if !errors.As(err, &ve) || !strings.Contains(ve.Fields["secret"], "32") {
			t.Errorf("routing key %q: %v", k, err)
		}
	}
}

// TestMigrationKeepsFiringAlertsNotified: alerts firing when the console is
// upgraded were notified under the old schema; they must still resolve.
func TestMigrationKeepsFiringAlertsNotified(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := consoledb.Open(ctx, filepath.Join(dir, "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, "alerting", migrations[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO alert_rules(name, kind, enabled, severity, for_ms, clear_for_ms, created_at, updated_at)
		VALUES('old', 'lag_records', 1, 'warning', 0, 0, 1, 1);
		INSERT INTO alert_states(rule_id, subject, dedup_key, state, active_since, last_eval) VALUES(1, 'group:a', 'k', 'firing', 1, 1);
		INSERT INTO alert_states(rule_id, subject, dedup_key, state, active_since, last_eval) VALUES(1, 'group:b', 'k2', 'pending', 1, 1);`); err != nil {
		t.Fatal(err)
	}
	env := newTestService(t, func(c *Config) { c.DB = db })
	got := openAlerts(t, env)
	if !got["old group:a"].Notified || got["old group:b"].Notified {
		t.Errorf("after the upgrade: %+v", got)
	}
}

// countingLag is a scriptedLag that counts its reads.
type countingLag struct {
	scriptedLag
	reads atomic.Int64
}

func (c *countingLag) Lag(ctx context.Context) ([]GroupLag, error) {
	c.reads.Add(1)
	return c.scriptedLag.Lag(ctx)
}

// TestGroupStatusOnlyWhileLeading: the Burrow-style status is evaluated on
// the leading console only. A console standing by reads no lag and keeps
// no status; one that stops leading drops its windows and statuses, and
// leading again it judges from fresh windows, not from commits seen before
// another console took over.
func TestGroupStatusOnlyWhileLeading(t *testing.T) {
	clk := newClock()
	src := &countingLag{}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src; c.Interval = time.Minute })
	ctx := context.Background()
	round := func(leading bool, committed, lag int64) {
		t.Helper()
		src.groups = []GroupLag{{Group: "stuck", Members: 1,
			Partitions: []PartitionLag{{Topic: "t", Partition: 0, Committed: committed, Lag: lag, CommitTime: clk.Now()}}}}
		if err := env.svc.EvaluateWhileLeading(ctx, leading); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}

	// Standing by from the start: nothing read, nothing judged.
	for range 3 {
		round(false, 10, 50)
	}
	if m, _ := env.svc.GroupStatuses(); m != nil || src.reads.Load() != 0 {
		t.Fatalf("a console standing by: statuses %v, %d lag reads", m, src.reads.Load())
	}

	// Leading: the group stalls (same commit, growing lag): ERR.
	for i := range int64(5) {
		round(true, 10, 50+i)
	}
	if m, _ := env.svc.GroupStatuses(); m["stuck"].Status != StatusErr {
		t.Fatalf("statuses while leading: %+v", m)
	}
	reads := src.reads.Load()

	// Another console takes over: this one reads nothing more and shows
	// no status it no longer evaluates.
	round(false, 10, 60)
	if m, at := env.svc.GroupStatuses(); m != nil || !at.IsZero() || src.reads.Load() != reads {
		t.Fatalf("after leadership moved: statuses %v at %v, %d reads (was %d)", m, at, src.reads.Load(), reads)
	}
	env.svc.eval.mu.Lock()
	left := len(env.svc.eval.windows.m)
	env.svc.eval.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d Burrow windows kept while standing by", left)
	}

	// Leading again after the group recovered elsewhere: its first rounds
	// judge only what they see (commits moving, no lag), not the stall
	// seen before.
	round(true, 500, 0)
	round(true, 600, 0)
	if m, _ := env.svc.GroupStatuses(); m["stuck"].Status != StatusOK {
		t.Fatalf("statuses leading again: %+v", m)
	}
}

package alerts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

var pages = []string{"/alerts", "/alerts/rules", "/alerts/history", "/alerts/notifiers", "/alerts/deliveries"}

// Signed out, every page sends the browser to the sign-in page and JSON
// clients get 401; a viewer reads every page but changes nothing; a form
// without its CSRF token is refused.
func TestAuthRolesAndCSRF(t *testing.T) {
	e := newEnv(t)
	anon := e.client(t)
	for _, p := range pages {
		r := anon.Get(p)
		expectStatus(t, r, http.StatusSeeOther)
		if loc := r.Header.Get("Location"); !strings.HasPrefix(loc, "/login?next=") {
			t.Fatalf("%s signed out redirects to %q", p, loc)
		}
	}
	expectStatus(t, anon.GetJSON("/alerts/rules", nil), http.StatusUnauthorized)
	expectStatus(t, anon.Do(http.MethodPost, "/alerts/rules", url.Values{"name": {"x"}}), http.StatusForbidden)

	// Something to look at and to try to change.
	ctx := context.Background()
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "ops hook", Type: alerting.NotifierWebhook, URL: "http://127.0.0.1:9/hook", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := e.eng.CreateRule(ctx, alerting.Rule{Name: "billing lag", Kind: alerting.KindLagRecords, Threshold: 100, Enabled: true, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	ruleURL, notifierURL := fmt.Sprintf("/alerts/rules/%d", rule.ID), fmt.Sprintf("/alerts/notifiers/%d", n.ID)

	v := e.signedIn(t, "vera", web.RoleViewer)
	for _, p := range append(pages, ruleURL, notifierURL) {
		r := v.Get(p)
		expectStatus(t, r, http.StatusOK)
		expectContains(t, r, `<a href="/alerts" aria-current="page">Alerts`)
		expectLacks(t, r, "New rule", "Send test event", "Add a notifier", "Delete rule", `name="secret"`)
	}
	expectContains(t, v.Get(ruleURL), "billing lag", "&gt; 100 records", "ops hook")
	expectStatus(t, v.Get("/alerts/rules/new"), http.StatusForbidden)
	for _, p := range []string{"/alerts/rules", ruleURL, ruleURL + "/enabled", ruleURL + "/delete",
		"/alerts/notifiers", notifierURL, notifierURL + "/delete", notifierURL + "/test"} {
		r := v.Post("/alerts", p, url.Values{"name": {"sneaky"}, "enabled": {"0"}, "type": {"webhook"}, "url": {"http://x.test/"}})
		expectStatus(t, r, http.StatusForbidden)
		expectContains(t, r, "Not allowed for your role")
	}

	op := e.signedIn(t, "otto", web.RoleOperator)
	expectContains(t, op.Get("/alerts"), `href="/alerts/rules/new"`)
	r := op.Do(http.MethodPost, ruleURL+"/delete", url.Values{})
	expectStatus(t, r, http.StatusForbidden)
	r = op.Do(http.MethodPost, "/alerts/rules", url.Values{"name": {"forged"}, "kind": {"broker_down"}, "_csrf": {"not-the-token"}})
	expectStatus(t, r, http.StatusForbidden)

	if _, err := e.eng.Rule(ctx, rule.ID); err != nil {
		t.Fatalf("the rule went away after refused requests: %v", err)
	}
	rules, _ := e.eng.Rules(ctx)
	ns, _ := e.eng.Notifiers(ctx)
	if len(rules) != 1 || len(ns) != 1 || !rules[0].Enabled {
		t.Fatalf("refused requests changed something: rules %+v notifiers %+v", rules, ns)
	}
	if got := e.audit(t, "alert."); len(got) != 0 {
		t.Fatalf("refused requests were audited as changes: %+v", got)
	}
}

// An operator creates, edits, disables, enables and deletes a rule through
// the forms; mistakes (the form's own and the engine's validation) come
// back next to their fields with what was typed kept; every change is in
// the audit log.
func TestRuleLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	op := e.signedIn(t, "otto", web.RoleOperator)
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "on-call", Type: alerting.NotifierPagerDuty, Secret: "0123456789abcdef0123456789abcdef", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}

	// The empty form offers the kinds, the severities and the notifier.
	r := op.Get("/alerts/rules/new")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `<option value="lag_records" selected`, `value="disk_free_percent"`, `<option value="critical">`,
		fmt.Sprintf(`name="notifiers" value="%d"`, n.ID), "on-call", `name="for" value="5m"`)

	// Mistakes of every kind at once.
	bad := url.Values{
		"name": {""}, "description": {"page billing"}, "kind": {"lag_records"}, "severity": {"warning"},
		"threshold": {"lots"}, "for": {"soon"}, "clear_for": {"-1m"}, "scope_pattern": {"billing-*"},
		"scope_topic": {"no spaces allowed"}, "notifiers": {"x"}, "enabled": {"1"},
	}
	r = op.Post("/alerts/rules/new", "/alerts/rules", bad)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r,
		`id="e-name">Required<`,
		`is not a number`, `is not a duration`,
		`id="e-clear_for">Must be between 0 and 168h<`,
		`id="e-scope_topic">Not a valid topic name`,
		`id="e-notifiers">Unknown notifier`,
		`aria-invalid="true"`,
		`>page billing</textarea>`, `value="billing-*"`, // what was typed is kept
	)
	// A kind that cannot be limited to a topic: the engine's own check.
	bad = url.Values{"name": {"broker down"}, "kind": {"broker_down"}, "severity": {"critical"}, "for": {"1m"}, "scope_topic": {"orders"}}
	r = op.Post("/alerts/rules/new", "/alerts/rules", bad)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-scope_topic">A broker_down rule cannot be limited to a topic<`)
	if rules, _ := e.eng.Rules(ctx); len(rules) != 0 {
		t.Fatalf("a rejected form stored a rule: %+v", rules)
	}

	// A good rule.
	good := url.Values{
		"name": {"billing lag"}, "description": {"runbook: https://wiki/billing"}, "kind": {"lag_records"}, "severity": {"critical"},
		"threshold": {"1,000"}, "min_status": {"ERR"}, "for": {"90"}, "clear_for": {"2m"}, "scope_pattern": {"billing-*"},
		"scope_topic": {"orders"}, "notifiers": {fmt.Sprint(n.ID)}, "enabled": {"1"},
	}
	r = op.Post("/alerts/rules/new", "/alerts/rules", good)
	expectStatus(t, r, http.StatusSeeOther)
	rules, err := e.eng.Rules(ctx)
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules after create: %+v %v", rules, err)
	}
	rule := rules[0]
	if rule.Threshold != 1000 || rule.For != 90*time.Second || rule.ClearFor != 2*time.Minute || rule.Severity != alerting.SeverityCritical ||
		rule.Scope.Pattern != "billing-*" || rule.Scope.Topic != "orders" || !rule.Enabled || len(rule.NotifierIDs) != 1 || rule.NotifierIDs[0] != n.ID ||
		rule.MinStatus != alerting.StatusNotFound {
		t.Fatalf("stored rule: %+v", rule)
	}
	ruleURL := fmt.Sprintf("/alerts/rules/%d", rule.ID)
	if loc := r.Header.Get("Location"); loc != ruleURL {
		t.Fatalf("create redirects to %q", loc)
	}
	r = op.Get(ruleURL)
	expectContains(t, r, "Rule billing lag created.", `value="billing lag"`, `name="threshold" value="1000"`, `name="for" value="1m30s"`,
		fmt.Sprintf(`name="notifiers" value="%d" checked`, n.ID), "Disable rule")
	r = op.Get("/alerts/rules")
	expectContains(t, r, "billing lag", "Consumer lag (records)", "&gt; 1,000 records", "name matches billing-*, topic orders", "on-call", "enabled")

	// The engine refuses a second rule with the same name: shown by the name.
	r = op.Post("/alerts/rules/new", "/alerts/rules", good)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-name">A rule with this name exists<`)

	// Edit: a rejected change, then a good one (a group_status rule now).
	edit := url.Values{}
	for k, v := range good {
		edit[k] = v
	}
	edit.Set("for", "200h")
	r = op.Post(ruleURL, ruleURL, edit)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-for">Must be between 0 and 168h<`, `value="200h"`)
	edit.Set("for", "10m")
	edit.Set("kind", "group_status")
	edit.Set("threshold", "5") // ignored: the kind has no threshold
	r = op.Post(ruleURL, ruleURL, edit)
	expectStatus(t, r, http.StatusSeeOther)
	got, err := e.eng.Rule(ctx, rule.ID)
	if err != nil || got.Kind != alerting.KindGroupStatus || got.MinStatus != alerting.StatusErr || got.Threshold != 0 || got.For != 10*time.Minute {
		t.Fatalf("after edit: %+v %v", got, err)
	}
	expectContains(t, op.Get(ruleURL), "Rule billing lag saved.", `<option value="ERR" selected>`)

	// Disable and enable from the list, then delete.
	r = op.Post("/alerts/rules", ruleURL+"/enabled", url.Values{"enabled": {"0"}})
	expectStatus(t, r, http.StatusSeeOther)
	if got, _ := e.eng.Rule(ctx, rule.ID); got.Enabled {
		t.Fatal("still enabled after Disable")
	}
	expectContains(t, op.Get("/alerts/rules"), "Rule billing lag disabled.", "disabled", ">Enable</button>")
	expectStatus(t, op.Post("/alerts/rules", ruleURL+"/enabled", url.Values{"enabled": {"maybe"}}), http.StatusBadRequest)
	expectStatus(t, op.Post("/alerts/rules", ruleURL+"/enabled", url.Values{"enabled": {"1"}}), http.StatusSeeOther)
	if got, _ := e.eng.Rule(ctx, rule.ID); !got.Enabled {
		t.Fatal("still disabled after Enable")
	}
	expectStatus(t, op.Post(ruleURL, ruleURL+"/delete", nil), http.StatusSeeOther)
	if _, err := e.eng.Rule(ctx, rule.ID); !errors.Is(err, alerting.ErrNotFound) {
		t.Fatalf("rule after delete: %v", err)
	}
	expectContains(t, op.Get("/alerts/rules"), "Rule billing lag deleted", "No alert rules yet")
	expectStatus(t, op.Get(ruleURL), http.StatusNotFound)
	expectStatus(t, op.Get("/alerts/rules/nope"), http.StatusNotFound)
	expectStatus(t, op.Post("/alerts", ruleURL+"/delete", nil), http.StatusNotFound)

	// The audit log has every change, in order, by the operator.
	var actions []string
	entries := e.audit(t, "alert.rule.")
	for i := len(entries) - 1; i >= 0; i-- {
		en := entries[i]
		if en.User != "otto" || en.Target != "billing lag" {
			t.Errorf("audit entry %+v", en)
		}
		outcome := "ok"
		if en.Outcome != "ok" {
			outcome = "failed"
		}
		actions = append(actions, strings.TrimPrefix(en.Action, "alert.rule.")+":"+outcome)
	}
	want := "create:ok,create:failed,update:ok,disable:ok,enable:ok,delete:ok"
	if strings.Join(actions, ",") != want {
		t.Fatalf("audit = %v, want %s", actions, want)
	}
	if !strings.Contains(entries[len(entries)-1].Detail, "threshold=1000") {
		t.Errorf("create audit detail: %q", entries[len(entries)-1].Detail)
	}
}

// Notifier settings: the routing key is write-only (never echoed, shown as
// a hint, kept when the field is left empty, never in the audit log or
// JSON); validation errors show by their fields; "Send test event" reaches
// the receiver and the delivery log shows the answer, failures included.
func TestNotifiersTestEventAndDeliveryLog(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	op := e.signedIn(t, "otto", web.RoleOperator)
	pd := newReceiver(t, http.StatusAccepted)
	const key = "R0utingKey0123456789abcdefgh9f3a"

	// Invalid: no routing key, bad URL.
	r := op.Post("/alerts/notifiers", "/alerts/notifiers", url.Values{"name": {"on-call"}, "type": {"pagerduty"}, "url": {"events.example"}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-url">Must be an http:// or https:// URL<`, `id="e-secret">The PagerDuty integration (routing) key is required<`, `value="on-call"`)

	r = op.Post("/alerts/notifiers", "/alerts/notifiers", url.Values{
		"name": {"on-call"}, "type": {"pagerduty"}, "url": {pd.srv.URL + "/v2/enqueue"}, "secret": {key}, "enabled": {"1"}, "send_resolved": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	ns, _ := e.eng.Notifiers(ctx)
	if len(ns) != 1 || !ns[0].HasSecret || ns[0].URL != pd.srv.URL+"/v2/enqueue" {
		t.Fatalf("notifiers: %+v", ns)
	}
	nURL := fmt.Sprintf("/alerts/notifiers/%d", ns[0].ID)
	r = op.Get(nURL)
	expectContains(t, r, "Notifier on-call added.", "••••9f3a", "Send test event", "No deliveries yet")
	expectLacks(t, r, key)
	expectLacks(t, op.Get("/alerts/notifiers"), key)
	var listed map[string]any
	if r := op.GetJSON("/alerts/notifiers", &listed); strings.Contains(r.Text, key) || !strings.Contains(r.Text, "on-call") {
		t.Fatalf("notifiers as JSON: %s", r.Text)
	}

	// Change the name, leave the key empty: the key stays.
	r = op.Post(nURL, nURL, url.Values{"name": {"primary on-call"}, "type": {"pagerduty"}, "url": {pd.srv.URL + "/v2/enqueue"}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	if n, _ := e.eng.Notifier(ctx, ns[0].ID); n.Name != "primary on-call" || n.SecretHint != "••••9f3a" {
		t.Fatalf("after rename: %+v", n)
	}
	r = op.Post(nURL, nURL, url.Values{"name": {""}, "type": {"pagerduty"}, "url": {"ftp://x"}, "secret": {"a key with spaces"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-name">Required<`, `id="e-url">`, `id="e-secret">Must be printable, without spaces`)
	expectLacks(t, r, "a key with spaces")

	// Send test event: a trigger then a resolve, same dedup_key, our key.
	r = op.Post(nURL, nURL+"/test", nil)
	expectStatus(t, r, http.StatusSeeOther)
	evs := pd.events()
	if len(evs) != 2 || evs[0]["event_action"] != "trigger" || evs[1]["event_action"] != "resolve" ||
		evs[0]["routing_key"] != key || evs[0]["dedup_key"] != evs[1]["dedup_key"] {
		t.Fatalf("PagerDuty receiver got %v", evs)
	}
	payload, _ := evs[0]["payload"].(map[string]any)
	if payload["severity"] != "info" || !strings.Contains(fmt.Sprint(payload["summary"]), "Test event") {
		t.Fatalf("test payload %v", payload)
	}
	r = op.Get(nURL)
	expectContains(t, r, "Test event delivered to primary on-call (HTTP 202).", "delivered", ">202<", "test")
	r = op.Get("/alerts/deliveries")
	expectContains(t, r, "primary on-call", "trigger", "resolve", "delivered", ">202<")
	expectLacks(t, r, key, `{&#34;status&#34;:&#34;success&#34;`) // receivers' answers are for admins
	admin := e.signedIn(t, "ada", web.RoleAdmin)
	r = admin.Get("/alerts/deliveries")
	expectContains(t, r, "primary on-call", `{&#34;status&#34;:&#34;success&#34;`)
	expectLacks(t, r, key)
	expectContains(t, op.Get("/alerts/deliveries?status=failed"), "No deliveries yet")

	// A webhook whose receiver refuses with 400: not retried, shown failed.
	hook := newReceiver(t, http.StatusBadRequest)
	r = op.Post("/alerts/notifiers", "/alerts/notifiers", url.Values{"name": {"ops hook"}, "type": {"webhook"}, "url": {hook.srv.URL}, "secret": {"tok-123"}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	hookURL := r.Header.Get("Location")
	r = op.Post(hookURL, hookURL+"/test", nil)
	expectStatus(t, r, http.StatusSeeOther)
	if evs := hook.events(); len(evs) != 1 || evs[0]["version"] != "4" || hook.hdrs[0].Get("Authorization") != "Bearer tok-123" {
		t.Fatalf("webhook receiver got %v %v", evs, hook.hdrs)
	}
	r = op.Get(hookURL)
	expectContains(t, r, "failed after 1 attempt(s): HTTP 400", "HTTP 400: not retried")
	expectLacks(t, r, "Length of")
	expectContains(t, admin.Get(hookURL), "HTTP 400: not retried", "Length of")
	r = op.Get("/alerts/deliveries?status=failed")
	expectContains(t, r, "ops hook", ">400<", "failed")
	expectLacks(t, r, "primary on-call</a>")

	// Remove the webhook's token, then delete the webhook.
	r = op.Post(hookURL, hookURL, url.Values{"name": {"ops hook"}, "type": {"webhook"}, "url": {hook.srv.URL}, "clear_secret": {"1"}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	expectStatus(t, op.Post(hookURL, hookURL+"/delete", nil), http.StatusSeeOther)
	expectContains(t, op.Get("/alerts/notifiers"), "Notifier ops hook deleted.", "primary on-call")

	// Audit: every change, the key never in it.
	var actions []string
	for _, en := range e.audit(t, "alert.notifier.") {
		actions = append(actions, en.Action)
		if strings.Contains(en.Detail, key) || strings.Contains(en.Detail, "tok-123") {
			t.Fatalf("a secret reached the audit log: %+v", en)
		}
	}
	want := "alert.notifier.delete,alert.notifier.update,alert.notifier.test,alert.notifier.create,alert.notifier.test,alert.notifier.update,alert.notifier.update,alert.notifier.create,alert.notifier.create"
	if strings.Join(actions, ",") != want {
		t.Fatalf("audit (newest first) = %v\nwant %s", actions, want)
	}
}

// A firing alert shows on the open-alerts page (and its htmx fragment),
// in the rule's page and in the history; its trigger is in the delivery
// log.
func TestOpenAlertsAndHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pd := newReceiver(t, http.StatusAccepted)
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "on-call", Type: alerting.NotifierPagerDuty, URL: pd.srv.URL, Secret: "0123456789abcdef0123456789abcdef", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := e.eng.CreateRule(ctx, alerting.Rule{Name: "billing lag", Kind: alerting.KindLagRecords, Severity: alerting.SeverityCritical,
		Threshold: 1000, Enabled: true, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	v := e.signedIn(t, "vera", web.RoleViewer)
	expectContains(t, v.Get("/alerts"), "All clear", "0 firing")

	e.lag.set(alerting.GroupLag{Group: "billing", State: "Empty", Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 10, LogEnd: 5010, Lag: 5000}}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	r := v.Get("/alerts")
	expectContains(t, r, "1 firing", ">firing<", ">critical<", `href="/groups/billing"`, "5,000 records behind",
		fmt.Sprintf("sluice/rule-%d/group:billing", rule.ID), "Evaluated every 1 s")
	// The refreshing fragment is the table alone.
	v.Headers["HX-Request"] = "true"
	v.Headers["HX-Target"] = "alerts-open"
	r = v.Get("/alerts")
	delete(v.Headers, "HX-Request")
	delete(v.Headers, "HX-Target")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "billing lag")
	expectLacks(t, r, "<html")
	var open struct {
		Alerts []alerting.Alert
	}
	if v.GetJSON("/alerts", &open); len(open.Alerts) != 1 || open.Alerts[0].State != alerting.StateFiring {
		t.Fatalf("alerts as JSON: %+v", open)
	}

	expectContains(t, v.Get(fmt.Sprintf("/alerts/rules/%d", rule.ID)), "Open alerts", "5,000 records behind", ">firing<")
	expectContains(t, v.Get("/alerts/rules"), "1 firing")
	expectContains(t, v.Get("/alerts/history"), ">firing<", "billing lag", `href="/groups/billing"`)
	expectContains(t, v.Get(fmt.Sprintf("/alerts/history?rule=%d&subject=group:billing", rule.ID)), ">firing<")
	expectContains(t, v.Get("/alerts/history?subject=group:other"), "Nothing recorded")

	// The trigger went out (asynchronously) and is logged.
	deadline := time.Now().Add(10 * time.Second)
	for len(pd.events()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if evs := pd.events(); len(evs) != 1 || evs[0]["event_action"] != "trigger" {
		t.Fatalf("PagerDuty got %v", evs)
	}
	for time.Now().Before(deadline) {
		if ds, _ := e.eng.Deliveries(ctx, alerting.DeliveryQuery{}); len(ds) == 1 && ds[0].Status == alerting.DeliveryDelivered {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	expectContains(t, v.Get(fmt.Sprintf("/alerts/deliveries?rule=%d", rule.ID)), "on-call", "trigger", "delivered", fmt.Sprintf("rule %d", rule.ID))

	// Caught up: it resolves, and the page is all clear again.
	e.lag.set(alerting.GroupLag{Group: "billing", State: "Stable", Members: 1, Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 5010, LogEnd: 5010}}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	expectContains(t, v.Get("/alerts"), "All clear")
	expectContains(t, v.Get("/alerts/history"), ">resolved<")

	// A console that does not evaluate says so.
	e2 := newEnv(t, func(c *web.Config) { c.Leader = func() bool { return false } })
	expectContains(t, e2.signedIn(t, "vera", web.RoleViewer).Get("/alerts"), "This console does not evaluate the rules now")
}

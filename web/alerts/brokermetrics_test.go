package alerts

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

// The rule form offers the kinds on broker metrics, reads their fields
// (a listener for authentication failures, durations for transaction and
// reassignment thresholds), refuses bad values next to their fields, and
// the rule list says each rule in words.
func TestBrokerMetricRuleForms(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	op := e.signedIn(t, "otto", web.RoleOperator)

	r := op.Get("/alerts/rules/new")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `<option value="auth_failures"`, `>Authentication failures<`, `<option value="authz_denials"`,
		`<option value="client_throttled"`, `<option value="hanging_transaction"`, `<option value="reassignment_stuck"`,
		`<option value="schema_incompatible"`, `name="scope_listener"`, `data-kinds="auth_failures"`,
		`data-unit="failures per minute"`, `data-unit="seconds throttled per second"`)

	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"kind": {"auth_failures"}, "threshold": {"-3"}, "scope_listener": {"no spaces"}},
			`id="e-threshold">Must be 0 or more per minute<`},
		{url.Values{"kind": {"auth_failures"}, "threshold": {"5"}, "scope_listener": {"no spaces"}},
			`id="e-scope_listener">Not a listener name`},
		{url.Values{"kind": {"client_throttled"}, "threshold": {"0"}},
			`id="e-threshold">Must be more than 0 seconds per second`},
		{url.Values{"kind": {"hanging_transaction"}, "threshold": {"soon"}},
			`is not a number of seconds (or a duration such as 10m)`},
		{url.Values{"kind": {"reassignment_stuck"}, "threshold": {""}},
			`id="e-threshold">Required for this kind<`},
	} {
		tc.form.Set("name", "x")
		tc.form.Set("severity", "warning")
		tc.form.Set("for", "0")
		r := op.Post("/alerts/rules/new", "/alerts/rules", tc.form)
		expectStatus(t, r, http.StatusUnprocessableEntity)
		expectContains(t, r, tc.want)
	}
	if rules, _ := e.eng.Rules(ctx); len(rules) != 0 {
		t.Fatalf("a rejected form stored a rule: %+v", rules)
	}

	for _, f := range []url.Values{
		{"name": {"logins"}, "kind": {"auth_failures"}, "threshold": {""}, "scope_listener": {"sasl_ssl"}},
		{"name": {"denials"}, "kind": {"authz_denials"}, "threshold": {"10"}, "scope_listener": {"ignored"}},
		{"name": {"throttled"}, "kind": {"client_throttled"}, "threshold": {"0.5"}, "for": {"10m"}, "scope_pattern": {"alice/*"}},
		{"name": {"hanging"}, "kind": {"hanging_transaction"}, "threshold": {"15m"}},
		{"name": {"moves"}, "kind": {"reassignment_stuck"}, "threshold": {"600"}},
		{"name": {"schemas"}, "kind": {"schema_incompatible"}, "threshold": {"2"}},
	} {
		f.Set("severity", "critical")
		if f.Get("for") == "" {
			f.Set("for", "0")
		}
		f.Set("enabled", "1")
		r := op.Post("/alerts/rules/new", "/alerts/rules", f)
		expectStatus(t, r, http.StatusSeeOther)
	}
	rules, err := e.eng.Rules(ctx)
	if err != nil || len(rules) != 6 {
		t.Fatalf("rules %+v %v", rules, err)
	}
	byName := map[string]alerting.Rule{}
	for _, r := range rules {
		byName[r.Name] = r
	}
	if r := byName["logins"]; r.Kind != alerting.KindAuthFailures || r.Scope.Listener != "SASL_SSL" || r.Threshold != 0 {
		t.Errorf("logins rule %+v", r)
	}
	if r := byName["denials"]; r.Scope.Listener != "" {
		t.Errorf("a kind without a listener kept one: %+v", r)
	}
	if r := byName["hanging"]; r.Threshold != 900 {
		t.Errorf("hanging transaction threshold %v, want 900 s", r.Threshold)
	}
	if r := byName["throttled"]; r.For != 10*time.Minute || r.Threshold != 0.5 {
		t.Errorf("throttled rule %+v", r)
	}

	r = op.Get("/alerts/rules")
	expectContains(t, r, "Authentication failures", "&gt; 0 failures per minute", "listener SASL_SSL",
		"Authorization denials", "&gt; 10 denials per minute",
		"Client throttled", "throttled &gt; 0.5 s per second", "name matches alice/*",
		"Hanging transaction", "open &gt; 15 min",
		"Reassignment stuck", "no progress for 10 min",
		"Schema compatibility failures", "&gt; 2 failures per minute", "the schema registry (every host)")

	// The rule page of the listener-scoped rule shows the field filled in.
	r = op.Get(fmt.Sprintf("/alerts/rules/%d", byName["logins"].ID))
	expectContains(t, r, `name="scope_listener" value="SASL_SSL"`)
}

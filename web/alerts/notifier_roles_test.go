package alerts

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/web"
)

// TestNotifierRetargetNeedsKey: an operator who does not know a notifier's
// key cannot point the notifier at another URL and have "Send test event"
// deliver the kept key there; the form asks for the key again. An admin
// may move it keeping the key.
func TestNotifierRetargetNeedsKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	good := newReceiver(t, http.StatusAccepted)
	evil := newReceiver(t, http.StatusAccepted)
	const key = "R0utingKey0123456789abcdefgh9f3a"
	owner := e.signedIn(t, "owner", web.RoleOperator)
	r := owner.Post("/alerts/notifiers", "/alerts/notifiers", url.Values{
		"name": {"on-call"}, "type": {"pagerduty"}, "url": {good.srv.URL + "/v2/enqueue"}, "secret": {key}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	nURL := r.Header.Get("Location")

	mallory := e.signedIn(t, "mallory", web.RoleOperator)
	r = mallory.Post(nURL, nURL, url.Values{"name": {"on-call"}, "type": {"pagerduty"}, "url": {evil.srv.URL + "/v2/enqueue"}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-secret">The endpoint or type changed: enter the key again`)
	expectStatus(t, mallory.Post(nURL, nURL+"/test", nil), http.StatusSeeOther)
	if n := len(evil.events()); n != 0 {
		t.Fatalf("the kept key went to the new URL (%d events)", n)
	}
	if evs := good.events(); len(evs) != 2 || evs[0]["routing_key"] != key {
		t.Fatalf("the stored endpoint got %v", evs)
	}
	ns, _ := e.eng.Notifiers(ctx)
	if ns[0].URL != good.srv.URL+"/v2/enqueue" {
		t.Fatalf("URL changed: %s", ns[0].URL)
	}

	admin := e.signedIn(t, "ada", web.RoleAdmin)
	r = admin.Post(nURL, nURL, url.Values{"name": {"on-call"}, "type": {"pagerduty"}, "url": {evil.srv.URL + "/v2/enqueue"}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	if n, _ := e.eng.Notifier(ctx, ns[0].ID); n.URL != evil.srv.URL+"/v2/enqueue" || n.SecretHint != "••••9f3a" {
		t.Fatalf("admin's retarget: %+v", n)
	}
}

// TestNotifierURLsAndAnswersByRole: a webhook URL (which carries a token)
// is masked for viewers, in HTML and JSON, and in the audit log; the
// receivers' answers in the delivery log are shown to admins only.
func TestNotifierURLsAndAnswersByRole(t *testing.T) {
	e := newEnv(t)
	hook := newReceiver(t, http.StatusBadRequest) // answers with a body naming the routing key's length
	const token = "T0KEN-in-the-path-0123456789zz"
	op := e.signedIn(t, "otto", web.RoleOperator)
	hookURL := hook.srv.URL + "/hooks/" + token
	r := op.Post("/alerts/notifiers", "/alerts/notifiers", url.Values{"name": {"ops hook"}, "type": {"webhook"}, "url": {hookURL}, "enabled": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	nURL := r.Header.Get("Location")
	expectStatus(t, op.Post(nURL, nURL+"/test", nil), http.StatusSeeOther)
	expectContains(t, op.Get(nURL), token) // operators edit it

	v := e.signedIn(t, "vera", web.RoleViewer)
	admin := e.signedIn(t, "ada", web.RoleAdmin)
	for _, p := range []string{"/alerts/notifiers", nURL} {
		r := v.Get(p)
		expectStatus(t, r, http.StatusOK)
		expectContains(t, r, "••••89zz")
		expectLacks(t, r, token)
		var m map[string]any
		if r := v.GetJSON(p, &m); strings.Contains(r.Text, token) {
			t.Fatalf("%s as JSON shows the URL: %s", p, r.Text)
		}
	}
	for _, en := range e.audit(t, "alert.notifier.") {
		if strings.Contains(en.Detail, token) {
			t.Fatalf("the URL's token is in the audit log: %+v", en)
		}
	}

	for _, c := range []*client{v, op} {
		for _, p := range []string{"/alerts/deliveries", nURL} {
			expectLacks(t, c.Get(p), "Length of")
		}
		var m struct {
			Deliveries []struct{ Response string }
		}
		c.GetJSON("/alerts/deliveries", &m)
		if len(m.Deliveries) != 1 || m.Deliveries[0].Response != "" {
			t.Fatalf("deliveries as JSON to a non-admin: %+v", m)
		}
	}
	for _, p := range []string{"/alerts/deliveries", nURL} {
		expectContains(t, admin.Get(p), "Length of")
	}
	var m map[string]any
	r = admin.GetJSON("/alerts/deliveries", &m)
	if b, _ := json.Marshal(m); !strings.Contains(string(b), "Length of") {
		t.Fatalf("admin's JSON lacks the answer: %s", r.Text)
	}

}

package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestBrokerPage: /brokers/N shows the broker's log dirs, the partitions it
// leads with their sizes, and its configs with their sources, to a viewer;
// the brokers list links to it; an unknown or malformed id is a 404.
func TestBrokerPage(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "orders", 2)
	viewer := ts.signedIn(t, "vic", RoleViewer)

	r := viewer.Get("/brokers")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `href="/brokers/0"`)

	r = viewer.Get("/brokers/0")
	expectStatus(t, r, http.StatusOK)
	for _, want := range []string{"Broker 0", "Log directories", "Partitions led", `href="/topics/orders"`, "Partitions followed",
		"This broker follows no partition.", "Configs", "broker.id", "broker config file"} {
		expectContains(t, r, want)
	}

	viewer.Accept = "application/json"
	r = viewer.Get("/brokers/0")
	expectStatus(t, r, http.StatusOK)
	body := []byte(r.Text)
	var v struct {
		ID  int32 `json:"id"`
		Led []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			InSync    bool   `json:"in_sync"`
		} `json:"led"`
		Followed []any `json:"followed"`
		Configs  []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"configs"`
		ConfigsError string `json:"configs_error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if v.ID != 0 || len(v.Led) != 2 || v.Led[0].Topic != "orders" || v.Led[1].Partition != 1 || !v.Led[0].InSync || len(v.Followed) != 0 {
		t.Errorf("broker 0 as JSON: %s", body)
	}
	sources := map[string]string{}
	for _, c := range v.Configs {
		sources[c.Name] = c.Source
	}
	if sources["broker.id"] != "broker config file" || sources["compression.type"] != "default" {
		t.Errorf("configs and their sources: %v (error %q)", sources, v.ConfigsError)
	}
	viewer.Accept = ""

	for _, path := range []string{"/brokers/7", "/brokers/x", "/brokers/-1"} {
		r := viewer.Get(path)
		expectStatus(t, r, http.StatusNotFound)
		if !strings.Contains(r.Text, "brokers page") {
			t.Errorf("GET %s: the 404 does not point to the brokers page", path)
		}
	}
}

// TestBrokerDynamicConfigEdit: an operator changes a dynamic config of
// broker 0 from its page: the preview shows the override and the value in
// force before and after with their sources, nothing changes before apply,
// apply stores it and audits it; an override changed meanwhile is refused
// (409) instead of overwritten; deleting the override goes back to the
// level below; a viewer sees no form and is refused (403).
func TestBrokerDynamicConfigEdit(t *testing.T) {
	ts := newTestServer(t)
	op := ts.signedIn(t, "olga", RoleOperator)
	viewer := ts.signedIn(t, "vic", RoleViewer)
	const page = "/brokers/0"
	ctx := context.Background()

	r := op.Get(page)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `id="dynamic-configs"`, `id="dyn-broker-form"`, `id="dyn-default-form"`, `name="cfg.log.retention.ms"`, `name="was.log.retention.ms"`)
	if strings.Contains(r.Text, `name="cfg.broker.id"`) {
		t.Error("broker.id, a static key, has an edit field")
	}
	// Two forms on one page: no id twice (a label would focus the other
	// form's field).
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllStringSubmatch(r.Text, -1) {
		if ids[m[1]] {
			t.Fatalf("the broker page uses id %q twice", m[1])
		}
		ids[m[1]] = true
	}
	r = viewer.Get(page)
	expectStatus(t, r, http.StatusOK)
	for _, s := range []string{`id="dyn-broker-form"`, `id="dyn-default-form"`, `id="dyn-broker-preview"`, `name="cfg.log.retention.ms"`, `name="scope"`} {
		if strings.Contains(r.Text, s) {
			t.Errorf("a viewer's page has %s: the edit form", s)
		}
	}
	expectContains(t, r, `id="dyn-broker-log.retention.ms"`, `id="dyn-default-log.retention.ms"`) // the values, read-only
	r = viewer.Post(page, page+"/configs", url.Values{"scope": {"broker"}, "cfg.log.retention.ms": {"1h"}, "was.log.retention.ms": {""}})
	expectStatus(t, r, http.StatusForbidden)

	// Preview: 1h is 3600000 ms; nothing stored yet.
	form := url.Values{"scope": {"broker"}, "cfg.log.retention.ms": {"1h"}, "was.log.retention.ms": {""}}
	r = op.Post(page, page+"/configs", form)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `id="dyn-preview-log.retention.ms"`, "3600000", "broker (dynamic)", `id="dyn-apply-form"`, `name="apply" value="1"`)
	if cur, err := ts.kc.DynamicOverrides(ctx, 0); err != nil || cur["log.retention.ms"] != "" {
		t.Fatalf("the preview stored the change: %v %v", cur, err)
	}
	// Apply (what the preview's form posts).
	apply := url.Values{"scope": {"broker"}, "apply": {"1"}, "cfg.log.retention.ms": {"3600000"}, "was.log.retention.ms": {""}}
	r = op.Post(page, page+"/configs", apply)
	expectStatus(t, r, http.StatusSeeOther)
	if cur, err := ts.kc.DynamicOverrides(ctx, 0); err != nil || cur["log.retention.ms"] != "3600000" {
		t.Fatalf("after apply: %v %v", cur, err)
	}
	r = op.Get(page)
	expectContains(t, r, "Saved (broker 0): log.retention.ms=3600000.", `value="3600000"`)
	es := auditOf(t, ts, "broker.configs")
	if len(es) != 1 || es[0].User != "olga" || es[0].Target != "broker 0" || es[0].Detail != "log.retention.ms=3600000" || es[0].Outcome != "ok" {
		t.Fatalf("audit: %+v", es)
	}

	// A form showing the old (absent) override is stale now.
	r = op.Post(page, page+"/configs", url.Values{"scope": {"broker"}, "cfg.log.retention.ms": {"2h"}, "was.log.retention.ms": {""}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "Changed meanwhile", "3600000")

	// Delete the override: back to the level below.
	del := url.Values{"scope": {"broker"}, "cfg.log.retention.ms": {"3600000"}, "was.log.retention.ms": {"3600000"}, "reset.log.retention.ms": {"1"}}
	r = op.Post(page, page+"/configs", del)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "deleted", `name="reset.log.retention.ms" value="1"`)
	del.Set("apply", "1")
	r = op.Post(page, page+"/configs", del)
	expectStatus(t, r, http.StatusSeeOther)
	if cur, err := ts.kc.DynamicOverrides(ctx, 0); err != nil || cur["log.retention.ms"] != "" {
		t.Fatalf("after delete: %v %v", cur, err)
	}
	if es := auditOf(t, ts, "broker.configs"); len(es) != 2 || !strings.Contains(es[0].Detail+es[1].Detail, "log.retention.ms override deleted") {
		t.Fatalf("audit: %+v", es)
	}

	// A value that does not parse stays on its field.
	r = op.Post(page, page+"/configs", url.Values{"scope": {"broker"}, "cfg.log.retention.ms": {"soon"}, "was.log.retention.ms": {""}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Not saved", `aria-label="log.retention.ms (broker)"`)
	// A scope that is neither.
	r = op.Post(page, page+"/configs", url.Values{"scope": {"everything"}})
	expectStatus(t, r, http.StatusBadRequest)
}

package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/web/webtest"
)

func TestTopicCreateValidatesEveryField(t *testing.T) {
	ts := newTestServer(t)
	op := ts.signedIn(t, "op", RoleOperator)
	expectContains(t, op.Get("/topics/new"), "Create topic", `name="partitions"`)
	cases := []struct {
		form url.Values
		want []string
	}{
		{url.Values{"name": {"bad name!"}}, []string{"is not allowed in a topic name", `value="bad name!"`}},
		{url.Values{"name": {""}}, []string{"Enter a topic name"}},
		{url.Values{"name": {strings.Repeat("x", 250)}}, []string{"at most 249 characters"}},
		{url.Values{"name": {"ok"}, "partitions": {"0"}}, []string{"from 1 to 10000"}},
		{url.Values{"name": {"ok"}, "partitions": {"many"}}, []string{"from 1 to 10000", `value="many"`}},
		{url.Values{"name": {"ok"}, "replication": {"3"}}, []string{"has 1 broker(s)"}},
		{url.Values{"name": {"ok"}, "retention.ms": {"-5"}}, []string{"or -1 to keep records forever"}},
		{url.Values{"name": {"ok"}, "cleanup.policy": {"shred"}}, []string{"Choose delete, compact, or both"}},
		{url.Values{"name": {"ok"}, "configs": {"max.message.bytes"}}, []string{"Line 1: want key=value"}},
		{url.Values{"name": {"ok"}, "cleanup.policy": {"compact"}, "configs": {"cleanup.policy=delete"}}, []string{"is set above already"}},
	}
	for _, tc := range cases {
		r := op.Post("/topics/new", "/topics", tc.form)
		expectStatus(t, r, http.StatusUnprocessableEntity)
		expectContains(t, r, append(tc.want, `aria-invalid="true"`)...)
	}
	good := url.Values{"name": {"orders.v1"}, "partitions": {"3"}, "replication": {"1"}, "cleanup.policy": {"compact"},
		"retention.ms": {"86400000"}, "configs": {"# comment\nmax.message.bytes=2097152\n"}}
	r := op.Post("/topics/new", "/topics", good)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/topics/orders.v1" {
		t.Fatalf("create: %d %q %s", r.StatusCode, r.Header.Get("Location"), snippet(r.Text))
	}
	page := op.Get("/topics/orders.v1")
	expectStatus(t, page, http.StatusOK)
	expectContains(t, page, "Topic orders.v1 created.", "max.message.bytes", "2097152", "compact")
	// The broker's refusal lands on the field it concerns.
	r = op.Post("/topics/new", "/topics", url.Values{"name": {"orders.v1"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "A topic with this name exists already")
	// JSON clients get field errors.
	op.Accept = "application/json"
	r = op.Post("/topics/new", "/topics", url.Values{"name": {"x y"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	var body struct{ Fields map[string]string }
	if err := json.Unmarshal([]byte(r.Text), &body); err != nil || body.Fields["name"] == "" {
		t.Fatalf("JSON field errors: %v %s", err, r.Text)
	}
	op.Accept = ""
	entries, _, _ := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "topic.create"})
	if len(entries) != 2 || entries[0].Outcome == "ok" || entries[1].Outcome != "ok" || entries[1].User != "op" || entries[1].Target != "orders.v1" {
		t.Fatalf("audit of creations: %+v", entries)
	}
}

func TestTopicsListSearchSortPageAndInternal(t *testing.T) {
	ts := newTestServer(t)
	for i := 0; i < 120; i++ {
		createTopic(t, ts, fmt.Sprintf("svc-%03d", i), int32(1+i%4))
	}
	createTopic(t, ts, "__internal_like", 1) // a user topic, not internal: shown
	v := ts.signedIn(t, "v", RoleViewer)
	r := v.Get("/topics")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "1–50 of 121 topics", "svc-000", `rel="next"`, "121 in the cluster") // header and pager agree
	if strings.Contains(r.Text, "svc-050") {
		t.Fatal("page 1 shows row 51")
	}
	r = v.Get("/topics?page=3")
	expectContains(t, r, "101–121 of 121 topics", "svc-119")
	r = v.Get("/topics?q=SVC-11")
	expectContains(t, r, "1–10 of 10 topics", "svc-110", "svc-119")
	r = v.Get("/topics?q=nothing-like-this")
	expectContains(t, r, "No topic matches")
	// Sorted by partitions, most first: a 4-partition topic leads.
	r = v.Get("/topics?sort=partitions&desc=1")
	first := strings.Index(r.Text, "svc-003")
	if first < 0 || first > strings.Index(r.Text, "svc-000") && strings.Contains(r.Text, "svc-000") {
		t.Fatalf("sort by partitions desc: svc-003 (4 partitions) is not before svc-000")
	}
	// htmx search answers with the table alone.
	v.Headers["HX-Request"], v.Headers["HX-Target"] = "true", "topics-table"
	r = v.Get("/topics?q=svc-00")
	if strings.Contains(r.Text, "<html") || !strings.Contains(r.Text, "svc-001") {
		t.Fatalf("fragment: %s", snippet(r.Text))
	}
	delete(v.Headers, "HX-Request")
	delete(v.Headers, "HX-Target")
	// JSON.
	v.Accept = "application/json"
	r = v.Get("/topics?q=svc-01&per=10")
	var out struct {
		Topics []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
		} `json:"topics"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.Text), &out); err != nil || len(out.Topics) != 10 || out.Total != 10 || out.Topics[0].Name != "svc-010" || out.Topics[0].Partitions != 3 {
		t.Fatalf("json: %v %+v", err, out)
	}
	expectContains(t, r, `"under_replicated":0`)
	r = v.Get("/topics/svc-010")
	expectContains(t, r, `"name":"svc-010"`, `"start_offset":`, `"end_offset":`, `"is_default":`)
}

func TestTopicConfigsPartitionsDelete(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "t1", 2)
	op := ts.signedIn(t, "op", RoleOperator)
	page := "/topics/t1"
	r := op.Get(page + "?configs=all")
	expectContains(t, r, "retention.ms", "(default)", "Preview configuration changes")
	// Change one config: only it is sent.
	form := url.Values{"cfg.retention.ms": {"3600000"}, "was.retention.ms": {"604800000"},
		"cfg.cleanup.policy": {"delete"}, "was.cleanup.policy": {"delete"}}
	r = op.Post(page, page+"/configs", form)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Change configs of t1", `<td class="mono">retention.ms</td>`, "604800000", "3600000", "Apply 1 change")
	if strings.Contains(r.Text, `<td class="mono">cleanup.policy</td>`) {
		t.Fatal("the preview lists an unchanged config")
	}
	form.Set("apply", "1")
	r = op.Post(page, page+"/configs", form)
	expectStatus(t, r, http.StatusSeeOther)
	r = op.Get(page)
	expectContains(t, r, "Saved: retention.ms=3600000.", "3600000", "604800000")
	// Nothing changed.
	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"3600000"}, "was.retention.ms": {"3600000"}})
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, op.Get(page), "Nothing changed.")
	// Reset to default.
	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"3600000"}, "was.retention.ms": {"3600000"}, "reset.retention.ms": {"1"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "reset to the default", "(604800000)")
	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"3600000"}, "was.retention.ms": {"3600000"}, "reset.retention.ms": {"1"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	cfgs, _ := ts.kc.TopicConfigs(context.Background(), "t1")
	for _, c := range cfgs {
		if c.Name == "retention.ms" && !c.IsDefault {
			t.Fatalf("retention.ms not reset: %+v", c)
		}
	}
	// A config the topic does not have (a tampered form) is refused.
	r = op.Post(page, page+"/configs", url.Values{"cfg.no.such.config": {"1"}, "was.no.such.config": {""}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Not saved:", "does not describe a config named no.such.config")

	// Partitions: only more than now.
	r = op.Post(page, page+"/partitions", url.Values{"count": {"2"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "enter a larger number", `value="2"`)
	r = op.Post(page, page+"/partitions", url.Values{"count": {"abc"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	r = op.Post(page, page+"/partitions", url.Values{"count": {"5"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Add partitions to t1", "partitions 2 to 4", "breaks per-key order", `name="from" value="2"`, "Add 3 partitions")
	if n := partitionCount(t, ts, "t1"); n != 2 {
		t.Fatalf("the preview changed the topic: %d partitions", n)
	}
	r = op.Post(page, page+"/partitions", url.Values{"count": {"5"}, "from": {"2"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, op.Get(page), "now has 5 partitions")

	// Delete needs the typed name.
	r = op.Post(page, page+"/delete", url.Values{"confirm": {"t"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Type the topic name exactly")
	r = op.Post(page, page+"/delete", url.Values{"confirm": {"t1"}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/topics" {
		t.Fatalf("delete: %d %s", r.StatusCode, snippet(r.Text))
	}
	expectContains(t, op.Get("/topics"), "Topic t1 deleted.")
	r = op.Get(page)
	expectStatus(t, r, http.StatusNotFound)
	expectContains(t, r, "There is no topic t1")

	entries, _, _ := ts.store.Audit(context.Background(), consoledb.AuditFilter{Action: "topic."})
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	got := strings.Join(actions, ",")
	for _, want := range []string{"topic.delete", "topic.add-partitions", "topic.configs"} {
		if !strings.Contains(got, want) {
			t.Fatalf("audit lacks %s: %s", want, got)
		}
	}
}

// Topic configs read as an operator reads them: one-line docs, units in
// words beside the numbers, selects for the configs of a few words; the
// forms take 7d or 1GiB; a mistyped value is reported on its row, and a
// reload after it finds the topic's page, not a 404.
func TestTopicConfigsReadable(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "t1", 1)
	op := ts.signedIn(t, "op", RoleOperator)
	page := "/topics/t1"
	r := op.Get(page + "?configs=all")
	expectContains(t, r, `<select name="cfg.cleanup.policy"`, `<option value="compact,delete">`, `<select name="cfg.compression.type"`,
		`<span class="dim small">7 d</span>`, "Delete whole segments whose newest record is older than this", "no limit")
	if strings.Contains(r.Text, `<input type="text" name="cfg.cleanup.policy"`) {
		t.Fatal("cleanup.policy is a free-text box")
	}

	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"3d"}, "was.retention.ms": {"604800000"},
		"cfg.retention.bytes": {"1GiB"}, "was.retention.bytes": {"-1"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "259200000", "1073741824", `<span class="dim small">3 d</span>`)
	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"3d"}, "was.retention.ms": {"604800000"},
		"cfg.retention.bytes": {"1GiB"}, "was.retention.bytes": {"-1"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, op.Get(page), "Saved: retention.bytes=1073741824, retention.ms=259200000.")
	r = op.Get(page)
	expectContains(t, r, `<span class="dim small">3 d</span>`, `<span class="dim small">1.0 GiB</span>`)

	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"3 days"}, "was.retention.ms": {"259200000"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `<td class="invalid" id="cfg-retention.ms">`, `value="3 days"`, "is not a duration")
	// A reload of the form's address goes to the configs on the topic's page.
	r = op.Get(page + "/configs")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != page+"#configs" {
		t.Fatalf("GET %s/configs: %d %q", page, r.StatusCode, r.Header.Get("Location"))
	}

	// Create takes the same units.
	r = op.Post("/topics/new", "/topics", url.Values{"name": {"t2"}, "partitions": {"1"}, "replication": {"1"}, "retention.ms": {"12h"},
		"configs": {"segment.bytes=64MiB\nsegment.ms=1d"}})
	expectStatus(t, r, http.StatusSeeOther)
	cfgs, err := ts.kc.TopicConfigs(context.Background(), "t2")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cfgs {
		got[c.Name] = c.Value
	}
	if got["retention.ms"] != "43200000" || got["segment.bytes"] != "67108864" || got["segment.ms"] != "86400000" {
		t.Fatalf("created with %v", got)
	}
	r = op.Post("/topics/new", "/topics", url.Values{"name": {"t3"}, "partitions": {"1"}, "replication": {"1"}, "retention.ms": {"a week"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Enter a duration such as 7d")
}

func partitionCount(t *testing.T, ts *testServer, topic string) int {
	t.Helper()
	ts.kc.Invalidate()
	d, err := ts.kc.Topic(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(d.Partitions)
}

// The previews of adding partitions and changing configs: the broker
// validates first, a refused value is shown with nothing changed, a stale
// preview is not applied, a viewer is refused, and the JSON view has the
// same facts.
func TestTopicChangePreviews(t *testing.T) {
	// kfake takes any topic config value: refuse min.insync.replicas=0
	// as Kafka does, for the validation and for the change.
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("sluice-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	kc.ControlKey(kmsg.IncrementalAlterConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		for _, r := range req.Resources {
			for _, c := range r.Configs {
				if c.Name == "min.insync.replicas" && c.Value != nil && *c.Value == "0" {
					resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
					rr := kmsg.NewIncrementalAlterConfigsResponseResource()
					rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
					rr.ErrorCode = kerr.InvalidConfig.Code
					rr.ErrorMessage = kmsg.StringPtr("Invalid value 0 for configuration min.insync.replicas: Value must be at least 1")
					resp.Resources = append(resp.Resources, rr)
					return resp, nil, true
				}
			}
		}
		return nil, nil, false
	})
	// And more than 50 partitions, as a controller with a partition limit.
	kc.ControlKey(kmsg.CreatePartitions.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.CreatePartitionsRequest)
		if len(req.Topics) != 1 || req.Topics[0].Count <= 50 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = req.Topics[0].Topic, kerr.InvalidPartitions.Code
		rt.ErrorMessage = kmsg.StringPtr("at most 50 partitions per topic on this cluster")
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	ts := newTestServer(t, func(c *Config) { c.Brokers = kc.ListenAddrs() })
	createTopic(t, ts, "t1", 2)
	op := ts.signedIn(t, "op", RoleOperator)
	page := "/topics/t1"
	config := func(name string) string {
		cfgs, err := ts.kc.TopicConfigs(context.Background(), "t1")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cfgs {
			if c.Name == name {
				return c.Value
			}
		}
		return ""
	}
	before := config("min.insync.replicas")

	// A value the broker refuses is shown in the preview, beside its row;
	// nothing changes and nothing is offered to apply.
	r := op.Post(page, page+"/configs", url.Values{"cfg.min.insync.replicas": {"0"}, "was.min.insync.replicas": {before}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "The broker refuses this change", "Nothing was changed.", `class="mono invalid"`, "Refused: Invalid value 0 for configuration min.insync.replicas")
	if strings.Contains(r.Text, `name="apply"`) {
		t.Fatal("a refused preview offers to apply")
	}
	if got := config("min.insync.replicas"); got != before {
		t.Fatalf("min.insync.replicas changed by a preview: %q", got)
	}
	// JSON: each change old -> new with its source.
	jop := ts.signedIn(t, "jop", RoleOperator)
	jsonPost := func(path string, form url.Values) webtest.Response {
		t.Helper()
		jop.Accept = ""
		form.Set("_csrf", jop.CSRF(page))
		jop.Accept = "application/json"
		defer func() { jop.Accept = "" }()
		return jop.Do(http.MethodPost, path, form)
	}
	r = jsonPost(page+"/configs", url.Values{"cfg.retention.ms": {"1d"}, "was.retention.ms": {"604800000"}})
	expectStatus(t, r, http.StatusOK)
	var out struct {
		Changes []struct {
			Name, Old, Source, New string
		} `json:"changes"`
		Refused string `json:"refused"`
	}
	if err := json.Unmarshal([]byte(r.Text), &out); err != nil || len(out.Changes) != 1 || out.Changes[0].Name != "retention.ms" ||
		out.Changes[0].Old != "604800000" || out.Changes[0].New != "86400000" || out.Changes[0].Source == "" || out.Refused != "" {
		t.Fatalf("configs preview json: %v %s", err, snippet(r.Text))
	}
	if got := config("retention.ms"); got != "604800000" {
		t.Fatalf("retention.ms changed by a preview: %q", got)
	}
	// Stale: the config changed after the preview; the apply shows the
	// value now and changes nothing.
	if err := ts.kc.AlterTopicConfigs(context.Background(), "t1", []kafkaview.ConfigChange{{Name: "retention.ms", Value: "7200000"}}); err != nil {
		t.Fatal(err)
	}
	r = op.Post(page, page+"/configs", url.Values{"cfg.retention.ms": {"86400000"}, "was.retention.ms": {"604800000"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "retention.ms changed since the preview", "7200000")
	if got := config("retention.ms"); got != "7200000" {
		t.Fatalf("a stale apply changed retention.ms: %q", got)
	}

	// Partitions: the controller's refusal is shown in the preview, with
	// nothing changed and nothing to apply.
	r = op.Post(page, page+"/partitions", url.Values{"count": {"60"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "The controller refuses this change: at most 50 partitions per topic on this cluster", "INVALID_PARTITIONS", "Nothing was changed.")
	if strings.Contains(r.Text, `name="apply"`) {
		t.Fatal("a refused partitions preview offers to apply")
	}
	if n := partitionCount(t, ts, "t1"); n != 2 {
		t.Fatalf("a refused preview grew the topic to %d", n)
	}
	// Partitions: JSON preview; a stale apply is previewed again.
	r = jsonPost(page+"/partitions", url.Values{"count": {"4"}})
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `"partitions":2`, `"new_partitions":4`, `"refused":""`)
	if err := ts.kc.SetPartitionCount(context.Background(), "t1", 3); err != nil {
		t.Fatal(err)
	}
	r = op.Post(page, page+"/partitions", url.Values{"count": {"4"}, "from": {"2"}, "apply": {"1"}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "the topic has 3 partitions now, not 2", `name="from" value="3"`)
	if n := partitionCount(t, ts, "t1"); n != 3 {
		t.Fatalf("a stale apply grew the topic to %d", n)
	}

	// A viewer is refused both, preview and apply, and nothing changes.
	viewer := ts.signedIn(t, "vi", RoleViewer)
	for _, f := range []struct {
		path string
		form url.Values
	}{
		{page + "/configs", url.Values{"cfg.retention.ms": {"1000"}, "was.retention.ms": {"7200000"}}},
		{page + "/configs", url.Values{"cfg.retention.ms": {"1000"}, "was.retention.ms": {"7200000"}, "apply": {"1"}}},
		{page + "/partitions", url.Values{"count": {"6"}}},
		{page + "/partitions", url.Values{"count": {"6"}, "from": {"3"}, "apply": {"1"}}},
	} {
		expectStatus(t, viewer.Post(page, f.path, f.form), http.StatusForbidden)
	}
	if got, n := config("retention.ms"), partitionCount(t, ts, "t1"); got != "7200000" || n != 3 {
		t.Fatalf("after a viewer's posts: retention.ms %q, %d partitions", got, n)
	}
	if got := len(auditOf(t, ts, "topic.configs")) + len(auditOf(t, ts, "topic.add-partitions")); got != 0 {
		t.Fatalf("%d audit entries for previews and refused applies", got)
	}
}

package comparisons_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/comparisons"
)

// createForm is a valid create form for left vs right.
func createForm(left, right string) url.Values {
	return url.Values{
		"name": {"orders cut-over"}, "left": {left}, "right": {right},
		"pairing": {"key"}, "values": {"json"}, "ignore": {"processed_at"},
		"start": {"earliest"}, "window": {"30s"}, "mode": {"bounded"},
		"min_records": {"1"}, "max_missing": {"0"}, "max_duplicates": {"0"}, "max_out_of_order": {"-1"}, "max_unkeyed": {"0"},
	}
}

// Every route needs a signed-in user: pages send the browser to the sign-in
// page (and back), other requests get 401.
func TestRoutesNeedSignIn(t *testing.T) {
	h := newHarness(t, kfakeBrokers(t))
	anon := h.client(t)
	for _, path := range []string{"/comparisons", "/comparisons/new", "/comparisons/1", "/comparisons/1/export?format=csv", "/comparisons/1/delete"} {
		r := anon.Get(path)
		expectStatus(t, r, http.StatusSeeOther)
		if loc := r.Header.Get("Location"); loc != "/login?next="+url.QueryEscape(path) {
			t.Fatalf("GET %s signed out: redirected to %q", path, loc)
		}
	}
	for _, path := range []string{"/comparisons", "/comparisons/preview", "/comparisons/1/pause", "/comparisons/1/resume", "/comparisons/1/restart", "/comparisons/1/delete"} {
		// With the sign-in page's own CSRF token, so that the refusal is
		// the missing session, not the token.
		r := anon.Post("/login", path, createForm("a", "b"))
		expectStatus(t, r, http.StatusUnauthorized)
	}
	anon.Headers["Accept"] = "application/json"
	expectStatus(t, anon.Get("/comparisons"), http.StatusUnauthorized)
	if list, _ := h.mgr.List(context.Background()); len(list) != 0 {
		t.Fatalf("signed-out requests created comparisons: %+v", list)
	}
}

// A viewer sees the pages but cannot create, preview, pause, resume,
// restart or delete; the page hides those buttons from them.
func TestViewerCannotChange(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 10, nil, nil)
	h := newHarness(t, brokers)
	id, err := h.mgr.Create(context.Background(), "by the engine", migration.Spec{Left: "ORDER", Right: "ORDERNEW", Bounded: true}, "op")
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(t, id, migration.StateFinished)

	v := h.signedIn(t, web.RoleViewer)
	r := v.Get("/comparisons")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `<a href="/comparisons" aria-current="page">Comparisons`, "by the engine", "ORDER → ORDERNEW")
	if strings.Contains(r.Text, `href="/comparisons/new"`) {
		t.Fatal("the list offers a viewer the create form")
	}
	r = v.Get("/comparisons/1")
	expectStatus(t, r, http.StatusOK)
	for _, hidden := range []string{"/comparisons/1/pause", "/comparisons/1/restart", "/comparisons/1/delete"} {
		if strings.Contains(r.Text, hidden) {
			t.Fatalf("the detail page shows a viewer %s", hidden)
		}
	}
	expectStatus(t, v.Get("/comparisons/new"), http.StatusForbidden)
	expectStatus(t, v.Get("/comparisons/1/delete"), http.StatusForbidden)
	for _, path := range []string{"/comparisons", "/comparisons/preview", "/comparisons/1/pause", "/comparisons/1/resume", "/comparisons/1/restart", "/comparisons/1/delete"} {
		form := createForm("ORDER", "ORDERNEW")
		form.Set("confirm", "yes")
		r := v.Post("/comparisons", path, form)
		expectStatus(t, r, http.StatusForbidden)
		expectContains(t, r, "Not allowed for your role", "this needs operator")
	}
	list, _ := h.mgr.List(context.Background())
	if len(list) != 1 || list[0].State != migration.StateFinished {
		t.Fatalf("a viewer changed comparisons: %+v", list)
	}
	entries, _, _ := h.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "comparison."})
	if len(entries) != 0 {
		t.Fatalf("refused requests were audited as changes: %+v", entries)
	}
	// Viewing includes the export.
	expectStatus(t, v.Get("/comparisons/1/export?format=csv"), http.StatusOK)
}

// A form without its session's CSRF token is refused and changes nothing.
func TestCSRFRejected(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 5, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	r := op.Do(http.MethodPost, "/comparisons", createForm("ORDER", "ORDERNEW"))
	expectStatus(t, r, http.StatusForbidden)
	expectContains(t, r, "The form has expired")
	form := createForm("ORDER", "ORDERNEW")
	form.Set("_csrf", "forged-token")
	expectStatus(t, op.Do(http.MethodPost, "/comparisons", form), http.StatusForbidden)
	// Another session's token is no good either.
	other := h.signedIn(t, web.RoleOperator)
	tok := other.CSRF("/comparisons/new")
	form.Set("_csrf", tok)
	expectStatus(t, op.Do(http.MethodPost, "/comparisons", form), http.StatusForbidden)
	// A request from another site is refused before the token is checked.
	op.Headers["Origin"] = "https://evil.example"
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", createForm("ORDER", "ORDERNEW")), http.StatusForbidden)
	delete(op.Headers, "Origin")
	if list, _ := h.mgr.List(context.Background()); len(list) != 0 {
		t.Fatalf("forged forms created comparisons: %+v", list)
	}
}

// Mistakes come back next to their field, with what was typed kept.
func TestValidationErrorsRendered(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 5, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)

	r := op.Get("/comparisons/new")
	expectStatus(t, r, http.StatusOK)
	// The form offers the cluster's topics and starts from the engine's defaults.
	expectContains(t, r, `<datalist id="cmp-topics"><option value="ORDER"></option><option value="ORDERNEW"></option></datalist>`,
		`name="window" value="30s"`, `name="max_out_of_order" value="-1"`, `<option value="bounded" selected>`)

	cases := []struct {
		change      url.Values
		field, want string
	}{
		{url.Values{"left": {""}}, "left", "Enter the reference topic"},
		{url.Values{"right": {"ORDER"}}, "right", "must differ from the left one"},
		{url.Values{"right": {"ORDERNEWER"}}, "right", "There is no topic ORDERNEWER in the cluster"},
		{url.Values{"pairing": {"json"}, "key_path": {""}}, "key_path", "Enter the JSON path"},
		{url.Values{"pairing": {"json"}, "key_path": {"order.*"}}, "key_path", "wildcard"},
		{url.Values{"pairing": {"json"}, "key_path": {"order..id"}}, "key_path", ""},
		{url.Values{"values": {"bytes"}, "ignore": {"processed_at"}}, "ignore", "needs values compared as JSON"},
		{url.Values{"ignore": {"ok\nitems[oops"}}, "ignore", "Line 2 (items[oops)"},
		{url.Values{"ignore": {"header:trace"}}, "ignore", "needs &#34;Compare record headers too&#34;"},
		{url.Values{"values": {"bytes"}, "ignore": {""}, "tolerance": {"0.5"}}, "tolerance", "needs values compared as JSON"},
		{url.Values{"tolerance": {"-1"}}, "tolerance", "0 or more"},
		{url.Values{"start": {"time"}, "start_time": {""}}, "start_time", "Enter the time to start from"},
		{url.Values{"start": {"time"}, "start_time": {"yesterday"}}, "start_time", "Enter a date and time"},
		{url.Values{"window": {"forever"}}, "window", "from 1ms to 168h"},
		{url.Values{"window": {"200h"}}, "window", "from 1ms to 168h"},
		{url.Values{"mode": {"sometimes"}}, "mode", "bounded or continuous"},
		{url.Values{"min_records": {"0"}}, "min_records", "1 or more"},
		{url.Values{"min_span": {"a day"}}, "min_span", "such as 1h"},
		{url.Values{"max_missing": {"-2"}}, "max_missing", "-1 to allow any"},
		{url.Values{"max_unkeyed": {"lots"}}, "max_unkeyed", "-1 to allow any"},
	}
	for _, tc := range cases {
		form := createForm("ORDER", "ORDERNEW")
		for k, v := range tc.change {
			form[k] = v
		}
		r := op.Post("/comparisons/new", "/comparisons", form)
		expectStatus(t, r, http.StatusUnprocessableEntity)
		expectContains(t, r, `id="f-`+tc.field+`" name="`+tc.field+`"`, `aria-describedby="e-`+tc.field+`"`, `<div class="error" id="e-`+tc.field+`">`)
		if tc.want != "" {
			expectContains(t, r, tc.want)
		}
		// What was typed is kept.
		expectContains(t, r, `value="orders cut-over"`)
	}
	// Several mistakes at once are all shown.
	form := createForm("", "ORDERNEW")
	form.Set("window", "x")
	form.Set("max_duplicates", "y")
	r = op.Post("/comparisons/new", "/comparisons", form)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, `id="e-left"`, `id="e-window"`, `id="e-max_duplicates"`)
	// The preview checks the form the same way.
	expectStatus(t, op.Post("/comparisons/new", "/comparisons/preview", form), http.StatusUnprocessableEntity)
	// JSON clients get the field errors.
	op.Headers["Accept"] = "application/json"
	r = op.Post("/comparisons/new", "/comparisons", form)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	var body struct{ Fields map[string]string }
	if err := json.Unmarshal([]byte(r.Text), &body); err != nil || body.Fields["window"] == "" || body.Fields["left"] == "" {
		t.Fatalf("JSON validation answer %s (%v)", r.Text, err)
	}
	if list, _ := h.mgr.List(context.Background()); len(list) != 0 {
		t.Fatalf("invalid forms created comparisons: %+v", list)
	}
}

// Creating through the form starts the comparison, audits it, and leads to
// its page, whose counters, skew and verdict follow the engine.
func TestCreateShowsCounters(t *testing.T) {
	brokers := kfakeBrokers(t)
	bad := orderValue(42, 99.5, testTime())
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 3, 120, map[string]string{"o-0042": bad}, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)

	r := op.Get("/comparisons")
	expectContains(t, r, "No comparisons yet", `href="/comparisons/new"`)
	r = op.Post("/comparisons/new", "/comparisons", createForm("ORDER", "ORDERNEW"))
	expectStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/comparisons/1" {
		t.Fatalf("created, then sent to %q", loc)
	}
	st := h.waitState(t, 1, migration.StateFinished)
	if st.CreatedBy == "" || st.Spec.Values != "json" || len(st.Spec.Ignore) != 1 || !st.Spec.Bounded {
		t.Fatalf("stored comparison %+v", st.Stored)
	}
	r = op.Get("/comparisons/1")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Comparison orders cut-over created", // the flash
		"ORDER (left) vs ORDERNEW (right)",
		`data-verdict>Not ready</span>`, "no_mismatch (want 0, got 1)",
		`<div class="label">Left records</div><div class="value">120 <small>msgs</small>`,
		`<div class="label">Matched</div><div class="value">119 <small>pairs</small>`,
		`<div class="stat bad"><div class="label">Mismatched</div><div class="value">1 <small>pairs</small>`,
		`data-skew="p50">3 ms</td>`, `data-skew="p99">3 ms</td>`, `data-skew="max">3 ms</td>`,
		// The first example behind the failed rule, with its field diff.
		"First examples behind the failed rules", `<td>order.total</td><td class="l">63</td><td class="r">99.5</td>`)
	// Finished: the page does not poll.
	if strings.Contains(r.Text, `hx-trigger="every`) {
		t.Fatal("a finished comparison's page keeps polling")
	}
	r = op.Get("/comparisons")
	expectContains(t, r, `href="/comparisons/1">orders cut-over</a>`, ">not ready</span>", `<td class="num bad-text">1 <span class="unit">pairs</span></td>`)

	entries, _, _ := h.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "comparison.create"})
	if len(entries) != 1 || entries[0].Target != "orders cut-over" || entries[0].Outcome != "ok" || !strings.Contains(entries[0].Detail, "left=ORDER right=ORDERNEW") {
		t.Fatalf("audit of the create: %+v", entries)
	}
	// JSON, for scripts.
	op.Headers["Accept"] = "application/json"
	r = op.Get("/comparisons/1")
	var body struct {
		Comparison migration.Status `json:"comparison"`
		Total      int64            `json:"total_differences"`
	}
	if err := json.Unmarshal([]byte(r.Text), &body); err != nil || body.Comparison.Snapshot.Counters.Matched != 119 || body.Total != 1 {
		t.Fatalf("JSON detail: %v %+v", err, body)
	}
}

// A running comparison's page polls its live part; the fragment answers
// alone, and asks for a full reload once the comparison stopped.
func TestLiveFragment(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 20, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("mode", "continuous")
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", form), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateRunning)
	r := op.Get("/comparisons/1")
	expectContains(t, r, `id="cmp-live" hx-get="/comparisons/1?gen=1" hx-trigger="every 2s" hx-swap="outerHTML"`)
	expectContains(t, op.Get("/comparisons"), `id="cmp-table" hx-get="/comparisons" hx-trigger="every 5s"`)

	op.Headers["HX-Request"], op.Headers["HX-Target"] = "true", "cmp-live"
	r = op.Get("/comparisons/1?gen=1")
	expectStatus(t, r, http.StatusOK)
	if strings.Contains(r.Text, "<html") || !strings.HasPrefix(r.Text, `<div id="cmp-live"`) || r.Header.Get("HX-Refresh") != "" {
		t.Fatalf("live fragment: refresh %q, body %s", r.Header.Get("HX-Refresh"), snippet(r.Text))
	}
	delete(op.Headers, "HX-Request")
	delete(op.Headers, "HX-Target")
	expectStatus(t, op.Post("/comparisons/1", "/comparisons/1/pause", nil), http.StatusSeeOther)
	op.Headers["HX-Request"], op.Headers["HX-Target"] = "true", "cmp-live"
	r = op.Get("/comparisons/1?gen=1")
	if r.Header.Get("HX-Refresh") != "true" || strings.Contains(r.Text, "hx-trigger") {
		t.Fatalf("live fragment of a paused comparison: refresh %q, body %s", r.Header.Get("HX-Refresh"), snippet(r.Text))
	}
}

// The differences table filters by kind and pages; exports give every
// stored difference as JSON or CSV.
func TestDifferencesFilterAndExport(t *testing.T) {
	brokers := kfakeBrokers(t)
	at := testTime()
	change := map[string]string{
		"o-0010": orderValue(10, 1, at), "o-0020": orderValue(20, 2, at), "o-0030": orderValue(30, 3, at), // 3 mismatches
		"o-0040": "", // missing on the right
	}
	extra := []order{{"o-9999", orderValue(9999, 1, at)}} // missing on the left
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 50, change, extra)
	h := newHarness(t, brokers, func(o *comparisons.Options) { o.PerPage = 2 })
	op := h.signedIn(t, web.RoleOperator)
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", createForm("ORDER", "ORDERNEW")), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateFinished)

	v := h.signedIn(t, web.RoleViewer)
	r := v.Get("/comparisons/1")
	expectContains(t, r, "1–2 of 5 differences", `rel="next"`, `Mismatched<span class="n">3</span>`,
		`Missing on the right<span class="n">1</span>`, `Missing on the left (extra)<span class="n">1</span>`)
	r = v.Get("/comparisons/1?kind=mismatch")
	expectContains(t, r, "1–2 of 3 differences", `<option value="mismatch" selected>`, `href="/comparisons/1?kind=mismatch&amp;page=2#differences"`,
		// field diff and side-by-side values, the differing lines marked
		`<td>order.total</td><td class="l">15</td><td class="r">1</td>`,
		`<span class="ln mark">    &#34;total&#34;: 15,</span>`, `<span class="ln mark">    &#34;total&#34;: 1,</span>`,
		`<span class="ln">    &#34;id&#34;: &#34;o-0010&#34;,</span>`)
	if strings.Contains(diffTable(r.Text), ">Missing on the right</span>") {
		t.Fatal("the mismatch filter shows other kinds")
	}
	r = v.Get("/comparisons/1?kind=mismatch&page=2")
	expectContains(t, r, "3–3 of 3 differences", "o-0030", `rel="prev"`)
	if strings.Contains(diffTable(r.Text), "o-0010") {
		t.Fatal("page 2 repeats page 1")
	}
	r = v.Get("/comparisons/1?kind=missing_left")
	expectContains(t, r, "o-9999", "1–1 of 1 differences", "No record on this side.")
	r = v.Get("/comparisons/1?kind=duplicate")
	expectContains(t, r, "No Duplicate differences")
	expectStatus(t, v.Get("/comparisons/1?kind=bogus"), http.StatusBadRequest)

	// Export as JSON: every stored difference of the kind.
	r = v.Get("/comparisons/1/export?format=json&kind=mismatch")
	expectStatus(t, r, http.StatusOK)
	if cd := r.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="comparison-1-mismatch-`) || !strings.HasSuffix(cd, `.json"`) {
		t.Fatalf("JSON export disposition %q", cd)
	}
	var diffs []migration.Difference
	if err := json.Unmarshal([]byte(r.Text), &diffs); err != nil || len(diffs) != 3 {
		t.Fatalf("JSON export: %v, %d differences", err, len(diffs))
	}
	for _, d := range diffs {
		if d.Kind != migration.KindMismatch || len(d.Fields) != 1 || d.Fields[0].Path != "order.total" || d.Left == nil || d.Right == nil {
			t.Fatalf("exported difference %+v", d)
		}
	}
	// As CSV: all kinds, with a header row.
	r = v.Get("/comparisons/1/export?format=csv")
	expectStatus(t, r, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("CSV content type %q", ct)
	}
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil || len(rows) != 6 || strings.Join(rows[0], ",") != strings.Join(migration.DifferenceCSVHeader, ",") {
		t.Fatalf("CSV export: %v, %d rows: %q", err, len(rows), rows)
	}
	kinds := map[string]int{}
	for _, row := range rows[1:] {
		kinds[row[0]]++
	}
	if kinds["mismatch"] != 3 || kinds["missing_right"] != 1 || kinds["missing_left"] != 1 {
		t.Fatalf("CSV kinds %v", kinds)
	}
	expectStatus(t, v.Get("/comparisons/1/export?format=xml"), http.StatusBadRequest)
	expectStatus(t, v.Get("/comparisons/9/export?format=csv"), http.StatusNotFound)
	expectStatus(t, v.Get("/comparisons/9"), http.StatusNotFound)
	expectStatus(t, v.Get("/comparisons/x"), http.StatusNotFound)
}

// The preview shows the pairs that differ first, with their field diffs,
// then equal pairs, and stores nothing.
func TestPreview(t *testing.T) {
	brokers := kfakeBrokers(t)
	// The 21st pair differs: with 20 pairs shown it must still be shown,
	// and first.
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 30, map[string]string{"o-0021": orderValue(21, 7, testTime())}, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("preview", "1")
	r := op.Post("/comparisons/new", "/comparisons/preview", form)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `<h2 id="preview-h">Preview</h2>`, ">differs</span>", ">equal</span>",
		`<td>order.total</td><td class="l">31.5</td><td class="r">7</td>`, "Nothing is stored until you save",
		`value="orders cut-over"`) // the form is still filled in
	if n := strings.Count(r.Text, `<tr class="sbs-row">`); n != 20 {
		t.Fatalf("preview shows %d pairs, want 20", n)
	}
	if first := strings.Index(r.Text, `<td class="mono">o-00`); first < 0 || !strings.HasPrefix(r.Text[first:], `<td class="mono">o-0021<`) {
		t.Fatalf("the first pair shown is not the one that differs: %.200s", r.Text[max(first, 0):])
	}
	// Each side's position links to the record.
	expectContains(t, r, `href="/topics/ORDERNEW/messages?format=json&amp;from=offset&amp;limit=1&amp;offset=20&amp;partition=0#r-0-20"`)
	if list, _ := h.mgr.List(context.Background()); len(list) != 0 {
		t.Fatalf("the preview stored a comparison: %+v", list)
	}
	// ?from= copies a comparison's settings into the form.
	id, err := h.mgr.Create(context.Background(), "x", migration.Spec{Left: "ORDER", Right: "ORDERNEW", Key: "json:order.id", Values: "json", Ignore: []string{"processed_at"}, Window: migration.Duration(5e9)}, "op")
	if err != nil {
		t.Fatal(err)
	}
	r = op.Get("/comparisons/new?from=" + itoa(id))
	expectContains(t, r, `<option value="json" selected>A field of the JSON value</option>`, `name="key_path" value="order.id"`, `name="window" value="5s"`, `<option value="continuous" selected>`, ">processed_at</textarea>")
}

// Pause, resume, restart and delete: operators only, each audited, delete
// only through its confirmation.
func TestLifecycleActions(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 20, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("mode", "continuous")
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", form), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateRunning)
	expectContains(t, op.Get("/comparisons/1"), `action="/comparisons/1/pause"`, `href="/comparisons/1/delete"`, `action="/comparisons/1/restart"`)

	expectStatus(t, op.Post("/comparisons/1", "/comparisons/1/pause", nil), http.StatusSeeOther)
	h.waitState(t, 1, migration.StatePaused)
	r := op.Get("/comparisons/1")
	expectContains(t, r, "Comparison orders cut-over paused.", `action="/comparisons/1/resume"`, ">paused</span>")

	expectStatus(t, op.Post("/comparisons/1", "/comparisons/1/resume", nil), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateRunning)
	expectStatus(t, op.Post("/comparisons/1", "/comparisons/1/restart", nil), http.StatusSeeOther)
	st := h.waitState(t, 1, migration.StateRunning)
	if st.Generation != 2 {
		t.Fatalf("restart: generation %d", st.Generation)
	}
	expectContains(t, op.Get("/comparisons/1"), "restarted from its start", "restarted 1×")

	// A bare POST does not delete: it asks first.
	r = op.Post("/comparisons/1", "/comparisons/1/delete", nil)
	expectStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/comparisons/1/delete" {
		t.Fatalf("unconfirmed delete went to %q", loc)
	}
	if _, err := h.mgr.Get(context.Background(), 1); err != nil {
		t.Fatalf("unconfirmed delete deleted: %v", err)
	}
	r = op.Get("/comparisons/1/delete")
	expectContains(t, r, "Delete orders cut-over?", `name="confirm" value="yes"`, "This cannot be undone")
	expectStatus(t, op.Post("/comparisons/1/delete", "/comparisons/1/delete", url.Values{"confirm": {"yes"}}), http.StatusSeeOther)
	expectContains(t, op.Get("/comparisons"), "Comparison orders cut-over (#1) deleted.", "No comparisons yet")
	expectStatus(t, op.Get("/comparisons/1"), http.StatusNotFound)
	expectStatus(t, op.Post("/comparisons", "/comparisons/1/pause", nil), http.StatusNotFound)

	entries, _, _ := h.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "comparison."})
	var actions []string
	for _, e := range entries {
		if e.Target != "orders cut-over" || e.Outcome != "ok" {
			t.Fatalf("audit entry %+v", e)
		}
		actions = append(actions, e.Action)
	}
	got := strings.Join(actions, " ")
	for _, want := range []string{"comparison.create", "comparison.pause", "comparison.resume", "comparison.restart", "comparison.delete"} {
		if !strings.Contains(got, want) {
			t.Fatalf("audit log has %q, lacks %s", got, want)
		}
	}
}

// A failed action is audited with its outcome and explained on the page.
func TestFailedActionAudited(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 5, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleAdmin)
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", createForm("ORDER", "ORDERNEW")), http.StatusSeeOther)
	h.waitState(t, 1, migration.StateFinished)
	expectStatus(t, op.Post("/comparisons/1", "/comparisons/1/pause", nil), http.StatusSeeOther)
	expectContains(t, op.Get("/comparisons/1"), "Could not pause orders cut-over", "has finished; restart it")
	entries, _, _ := h.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "comparison.pause"})
	if len(entries) != 1 || !strings.Contains(entries[0].Outcome, "has finished") {
		t.Fatalf("audit of a failed pause: %+v", entries)
	}
	// The stylesheet is a static asset linked with its hash, so it may be
	// kept for good.
	r := op.Get("/comparisons")
	m := cssRe.FindStringSubmatch(r.Text)
	if m == nil {
		t.Fatal("the page does not link its stylesheet")
	}
	r = op.Get(m[1])
	expectStatus(t, r, http.StatusOK)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/css") || !strings.Contains(r.Text, ".sbs") ||
		!strings.Contains(r.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("stylesheet: %s, %s", r.Header.Get("Content-Type"), r.Header.Get("Cache-Control"))
	}
}

// A start time is read in the zone the form named (the viewer's), stored
// as an instant, and shown back in the viewer's zone.
func TestStartTimeInViewersZone(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 5, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	op.Cookies["tz"] = url.QueryEscape("Europe/Paris")
	expectContains(t, op.Get("/comparisons/new"), "Start time (Europe/Paris)", `name="zone" value="Europe/Paris"`)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("start", "time")
	form.Set("start_time", "2025-03-01T12:00")
	form.Set("zone", "Europe/Paris")
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", form), http.StatusSeeOther)
	st, err := h.mgr.Get(context.Background(), 1)
	if err != nil || st.Spec.Start != "2025-03-01T11:00:00Z" {
		t.Fatalf("stored start %q (%v)", st.Spec.Start, err)
	}
	op.Cookies["tz"] = url.QueryEscape("America/New_York")
	expectContains(t, op.Get("/comparisons/1"), `<time datetime="2025-03-01T11:00:00Z" title="EST · `, ">2025-03-01 06:00:00</time>")
	// The form copied from it shows the time in the viewer's zone.
	expectContains(t, op.Get("/comparisons/new?from=1"), `name="start_time" value="2025-03-01T06:00:00"`, "Start time (America/New_York)")
	// A zone name that is not one is ignored (the viewer's zone applies).
	form.Set("zone", "../../etc/passwd")
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", form), http.StatusSeeOther)
	if st, _ := h.mgr.Get(context.Background(), 2); st.Spec.Start != "2025-03-01T17:00:00Z" {
		t.Fatalf("start with a bad zone field: %q", st.Spec.Start)
	}
}

// An ignored path that matches nothing in the records is warned about in
// the preview, with the path it was probably meant to be; creating the
// comparison asks to confirm it first.
func TestUnmatchedPathWarning(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 30, map[string]string{"o-0003": orderValue(3, 9, testTime())}, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("ignore", "processed_at\ntotal")
	form.Set("preview", "1")
	r := op.Post("/comparisons/new", "/comparisons/preview", form)
	expectContains(t, r, `The ignored path <span class="mono">total</span> matches none of the 60 values read`,
		`Did you mean <span class="mono">order.total</span>?`)
	form.Del("preview")
	r = op.Post("/comparisons/new", "/comparisons", form)
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Some paths match none of the values read", `name="paths_ok" value="1"`, "Create anyway")
	if list, _ := h.mgr.List(context.Background()); len(list) != 0 {
		t.Fatalf("created without confirming: %+v", list)
	}
	form.Set("paths_ok", "1")
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", form), http.StatusSeeOther)
	// A right path is not questioned.
	form = createForm("ORDER", "ORDERNEW")
	form.Set("name", "second")
	expectStatus(t, op.Post("/comparisons/new", "/comparisons", form), http.StatusSeeOther)
}

// A comparison's most frequent differing paths are listed, and one click
// ignores one and starts the comparison over; a comparison can be edited
// (starting over) and cloned.
func TestDifferingPathsIgnoreAndEdit(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 30, nil, nil)
	h := newHarness(t, brokers)
	op := h.signedIn(t, web.RoleOperator)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("ignore", "") // processed_at differs in every pair
	r := op.Post("/comparisons/new", "/comparisons", form)
	expectStatus(t, r, http.StatusSeeOther)
	page := r.Header.Get("Location")
	ctx := context.Background()
	waitFinished := func(gen int64) {
		t.Helper()
		testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			st, err := h.mgr.Get(ctx, 1)
			if err == nil && (st.State != migration.StateFinished || st.Generation != gen || st.Live) {
				err = fmt.Errorf("state %s gen %d", st.State, st.Generation)
			}
			return err
		})
	}
	waitFinished(1)
	r = op.Get(page)
	expectContains(t, r, "Where the values differ", `<td class="mono">processed_at</td><td class="num">30</td>`, "Ignore this path and restart")
	r = op.Post(page, page+"/ignore", url.Values{"path": {"processed_at"}})
	expectStatus(t, r, http.StatusSeeOther)
	waitFinished(2)
	st, _ := h.mgr.Get(ctx, 1)
	if len(st.Spec.Ignore) != 1 || st.Spec.Ignore[0] != "processed_at" || st.Snapshot.Counters.Mismatched != 0 {
		t.Fatalf("after ignoring: %+v", st)
	}
	expectStatus(t, op.Post(page, page+"/ignore", url.Values{"path": {"processed_at"}}), http.StatusBadRequest) // ignored already
	audit, _, _ := h.srv.Store().Audit(ctx, consoledb.AuditFilter{Action: "comparison.ignore"})
	if len(audit) != 1 || audit[0].Detail != "path=processed_at" {
		t.Fatalf("audit %+v", audit)
	}

	// Edit: the form comes filled in; saving starts over.
	r = op.Get(page + "/edit")
	expectContains(t, r, "Edit comparison", `action="/comparisons/1/edit"`, ">processed_at</textarea>", "Save and restart")
	edit := createForm("ORDER", "ORDERNEW")
	edit.Set("name", "renamed")
	r = op.Post(page+"/edit", page+"/edit", edit)
	expectStatus(t, r, http.StatusSeeOther)
	waitFinished(3)
	if st, _ := h.mgr.Get(ctx, 1); st.Name != "renamed" {
		t.Fatalf("after the edit: %+v", st)
	}
	// Viewers cannot.
	v := h.signedIn(t, web.RoleViewer)
	expectStatus(t, v.Get(page+"/edit"), http.StatusForbidden)
	expectStatus(t, v.Post(page, page+"/ignore", url.Values{"path": {"x"}}), http.StatusForbidden)
	// Clone: the create form with the settings.
	expectContains(t, op.Get("/comparisons/new?from=1"), "New comparison", `value="ORDERNEW"`)
}

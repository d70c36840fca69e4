package schemas

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

const (
	avroV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"}]}`
	avroV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"note","type":["null","string"],"default":null}]}`
	// a required field added: refused under BACKWARD
	avroBad = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"qty","type":"int"}]}`
)

type env struct {
	srv *web.Server
	reg *schemareg.Registry
}

// newEnv is a console with the schema pages over a registry holding
// orders-value versions 1 and 2, in a cluster with topic "orders". With
// noRegistry the host runs none.
func newEnv(t *testing.T, noRegistry bool) *env {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	ctx := context.Background()
	reg := schemareg.New(schemareg.Config{Log: schemareg.NewMemLog()})
	reg.Start(ctx)
	t.Cleanup(func() { reg.Close() })
	for _, s := range []string{avroV1, avroV2} {
		if _, err := reg.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: s}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Register(ctx, "payments-value", schemareg.SchemaRequest{Schema: `{"type":"object"}`, SchemaType: "JSON"}); err != nil {
		t.Fatal(err)
	}
	source := func() Registry {
		if noRegistry {
			return nil
		}
		return reg
	}
	topics := func(context.Context) ([]string, error) { return []string{"orders"}, nil }
	srv, err := web.New(web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: filepath.Join(t.TempDir()),
		Brokers: webtest.Kfake(t, "schemas-test"),
		Logger:  webtest.Logger(),
		Extra:   []web.PageGroup{PageGroup(source, topics)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &env{srv: srv, reg: reg}
}

func (e *env) signedIn(t *testing.T, name string, role web.Role) *webtest.Client {
	t.Helper()
	if _, err := e.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
	c := webtest.NewClient(t, e.srv.App())
	c.SignIn(name, "password-1")
	return c
}

// TestSubjectsAndVersions: the list shows each subject's type, latest
// version, id, count and level with a link to the topic it names; a
// subject page shows the latest version's schema indented in its own key
// order, and the diff of two versions marks the added field.
func TestSubjectsAndVersions(t *testing.T) {
	e := newEnv(t, false)
	c := e.signedIn(t, "viewer", web.RoleViewer)

	r := c.Get("/schemas")
	webtest.ExpectStatus(t, r, 200)
	main := webtest.MainOf(r.Text)
	webtest.ExpectContains(t, webtest.Response{Text: main}, "orders-value", "payments-value", "Avro", "JSON Schema",
		"global compatibility BACKWARD", `href="/topics/orders"`)
	r = c.Get("/schemas?q=PAY")
	webtest.ExpectContains(t, r, "payments-value")
	webtest.ExpectLacks(t, webtest.Response{Text: webtest.MainOf(r.Text)}, "orders-value")

	var list struct{ Subjects []schemareg.SubjectInfo }
	c.GetJSON("/schemas", &list)
	if len(list.Subjects) != 2 || list.Subjects[0].Subject != "orders-value" || list.Subjects[0].LatestVersion != 2 {
		t.Fatalf("JSON list %+v", list.Subjects)
	}

	r = c.Get("/schemas/orders-value")
	webtest.ExpectStatus(t, r, 200)
	// version 2, indented, keys in the schema's own order ("type" before "name")
	webtest.ExpectContains(t, r, "Version 2", "&#34;type&#34;: &#34;record&#34;,\n  &#34;name&#34;: &#34;Order&#34;", "note", "diff with 1")
	r = c.Get("/schemas/orders-value?version=2&diff=1")
	webtest.ExpectStatus(t, r, 200)
	webtest.ExpectContains(t, r, "Version 1 → 2", `class="ln mark"`, "note")
	if !strings.Contains(r.Text, "lines differ") {
		t.Errorf("the diff does not count the lines that differ:\n%s", webtest.Snippet(r.Text))
	}

	for path, status := range map[string]int{
		"/schemas/nope":                     404,
		"/schemas/orders-value?version=9":   404,
		"/schemas/orders-value?version=x":   400,
		"/schemas/orders-value?diff=-1":     400,
		"/schemas/orders-value?diff=7":      404,
		"/schemas/" + url.PathEscape("a/b"): 404,
	} {
		webtest.ExpectStatus(t, c.Get(path), status)
	}
}

// TestDraftCheck: a draft is checked against the subject's level without
// being registered — compatible, refused with the registry's reasons, or
// not parsed — and bad form input stays beside its field.
func TestDraftCheck(t *testing.T) {
	e := newEnv(t, false)
	c := e.signedIn(t, "viewer", web.RoleViewer)
	check := func(typ, schema, against string) webtest.Response {
		return c.Post("/schemas/orders-value", "/schemas/orders-value/check",
			url.Values{"type": {typ}, "schema": {schema}, "against": {against}})
	}
	r := check("AVRO", avroV2, "")
	webtest.ExpectStatus(t, r, 200)
	webtest.ExpectContains(t, r, "the registry would accept it")
	r = check("AVRO", avroBad, "")
	webtest.ExpectContains(t, r, "the registry would refuse it", "qty")
	r = check("AVRO", `{"type":"record"`, "")
	webtest.ExpectContains(t, r, "Not checked:")
	r = check("AVRO", avroBad, "1")
	webtest.ExpectContains(t, r, "version 1 under BACKWARD")
	r = check("XML", "", "x")
	webtest.ExpectStatus(t, r, 422)
	webtest.ExpectContains(t, r, "Pick Avro, Protobuf or JSON Schema.", "Paste the schema to check.", "A version number, or empty.")
	r = check("AVRO", strings.Repeat(" ", maxDraftBytes+1), "")
	webtest.ExpectStatus(t, r, 422)
	if vs := e.reg.SubjectVersions("orders-value"); len(vs) != 2 {
		t.Fatalf("a check registered something: %d versions", len(vs))
	}
}

// TestDeletes: viewers may not delete; an operator's soft delete of a
// version, then the permanent one, then the subject's, each audited; a
// delete without the typed confirmation does nothing.
func TestDeletes(t *testing.T) {
	e := newEnv(t, false)
	viewer := e.signedIn(t, "viewer", web.RoleViewer)
	r := viewer.Get("/schemas/orders-value")
	webtest.ExpectLacks(t, r, `action="/schemas/orders-value/delete"`)
	r = viewer.Post("/schemas/orders-value", "/schemas/orders-value/delete", url.Values{"version": {"1"}, "confirm": {"orders-value"}})
	webtest.ExpectStatus(t, r, 403)

	op := e.signedIn(t, "op", web.RoleOperator)
	del := func(form url.Values) {
		t.Helper()
		r := op.Post("/schemas/orders-value", "/schemas/orders-value/delete", form)
		webtest.ExpectStatus(t, r, 303)
	}
	del(url.Values{"version": {"1"}, "confirm": {"wrong"}})
	if vs := e.reg.SubjectVersions("orders-value"); vs[0].Deleted {
		t.Fatal("deleted without the confirmation")
	}
	del(url.Values{"version": {"1"}, "confirm": {"orders-value"}})
	if vs := e.reg.SubjectVersions("orders-value"); !vs[0].Deleted {
		t.Fatal("version 1 not soft-deleted")
	}
	webtest.ExpectContains(t, op.Get("/schemas/orders-value"), "Version 1 of orders-value deleted (soft).", "soft-deleted")
	del(url.Values{"version": {"1"}, "confirm": {"orders-value"}, "permanent": {"1"}})
	if vs := e.reg.SubjectVersions("orders-value"); len(vs) != 1 {
		t.Fatalf("after the permanent delete: %d versions", len(vs))
	}
	// permanent before soft: the registry's refusal, shown
	del(url.Values{"confirm": {"orders-value"}, "permanent": {"1"}})
	webtest.ExpectContains(t, op.Get("/schemas/orders-value"), "Not deleted:", "not deleted first")
	del(url.Values{"confirm": {"orders-value"}})
	if len(e.reg.Subjects()) != 1 {
		t.Fatal("subject not soft-deleted")
	}

	entries, _, err := e.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "schema.delete", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range entries {
		b, _ := json.Marshal(a)
		got = append(got, string(b))
	}
	if len(entries) != 4 || !strings.Contains(strings.Join(got, "\n"), "version=1 permanent") {
		t.Fatalf("audit entries:\n%s", strings.Join(got, "\n"))
	}
}

// TestNoRegistry: a host without a registry says so instead of failing.
func TestNoRegistry(t *testing.T) {
	e := newEnv(t, true)
	c := e.signedIn(t, "viewer", web.RoleViewer)
	r := c.Get("/schemas")
	webtest.ExpectStatus(t, r, 404)
	webtest.ExpectContains(t, r, "No schema registry on this host", "schema.registry.listen")
}

func TestSideBySide(t *testing.T) {
	d := sideBySide("a\nb\nc", "a\nB\nc\nd")
	var kinds []string
	for _, r := range d.Rows {
		kinds = append(kinds, r.Kind+":"+r.Left+"|"+r.Right)
	}
	want := "same:a|a change:b|B same:c|c ins:|d"
	if strings.Join(kinds, " ") != want || d.Changed != 2 {
		t.Fatalf("rows %v (changed %d), want %s", kinds, d.Changed, want)
	}
	if !sideBySide(strings.Repeat("x\n", maxDiffLines+1), "x").TooLarge {
		t.Fatal("a very long schema was diffed")
	}
}

// Package schemas is the console's section for the built-in schema
// registry: the subjects list, a subject's page with its versions and the
// side-by-side diff of two of them, the compatibility check of a draft
// schema before it is registered, and soft and permanent deletes
// (operators and admins, audited). It is a web.PageGroup over the registry
// of the same process; the appliance adds it when schema.registry.listen is
// set.
package schemas

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/templates"
	tpl "github.com/sluice-io/sluice/templates/schemas"
	"github.com/sluice-io/sluice/web"
)

// Registry is what the pages use of a schema registry (*schemareg.Registry).
type Registry interface {
	Subjects() []schemareg.SubjectInfo
	SubjectVersions(subject string) []schemareg.SchemaValue
	Compatibility(subject string) string
	CheckCompatibility(subject string, version int, req schemareg.SchemaRequest) ([]string, error)
	DeleteVersion(ctx context.Context, subject string, version int, permanent bool) (int, error)
	DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error)
	Writer() (self bool, leaderURL string)
}

// Topics lists the cluster's topic names (for TopicNameStrategy links).
type Topics func(ctx context.Context) ([]string, error)

// NavOrder places "Schemas" after "Consumer groups" (40) and before
// "Alerts" (50).
const NavOrder = 45

// PageGroup returns the schema pages. registry is called on each request
// (the registry may start after the console); while it returns nil the
// pages say that this host runs no registry.
func PageGroup(registry func() Registry, topics Topics) web.PageGroup {
	return web.PageGroup{
		Name: "schemas",
		Nav:  []web.NavItem{{Label: "Schemas", Path: "/schemas", Role: web.RoleViewer, Order: NavOrder}},
		Mount: func(r *web.Router) error {
			h := handler{registry: registry, topics: topics}
			r.Get("/schemas", web.RoleViewer, h.list)
			r.Get("/schemas/:subject", web.RoleViewer, h.subject)
			r.Post("/schemas/:subject/check", web.RoleViewer, h.check)
			r.Post("/schemas/:subject/delete", web.RoleOperator, h.remove)
			return nil
		},
	}
}

type handler struct {
	registry func() Registry
	topics   Topics
}

var errNoRegistry = &web.Error{Status: fiber.StatusNotFound, Title: "No schema registry on this host",
	Text: "This host runs no schema registry.", Hint: "Set schema.registry.listen (for example :8081) and restart the service."}

func (h handler) reg() (Registry, error) {
	r := h.registry()
	if r == nil {
		return nil, errNoRegistry
	}
	return r, nil
}

// topicSet is the cluster's topics (nil when they cannot be listed: the
// pages then show no topic links).
func (h handler) topicSet(c *fiber.Ctx) map[string]bool {
	if h.topics == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 3*time.Second)
	defer cancel()
	names, err := h.topics(ctx)
	if err != nil {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// topicOf is the topic subject names by TopicNameStrategy, if it exists.
func topicOf(subject string, topics map[string]bool) string {
	for _, suf := range []string{"-value", "-key"} {
		if t, ok := strings.CutSuffix(subject, suf); ok && topics[t] {
			return t
		}
	}
	return ""
}

// GET /schemas[?q=]: the subjects, filtered by a substring.
func (h handler) list(c *fiber.Ctx) error {
	reg, err := h.reg()
	if err != nil {
		return err
	}
	all := reg.Subjects()
	q := strings.TrimSpace(strings.Clone(c.Query("q")))
	v := tpl.SubjectsView{Global: reg.Compatibility(""), Query: q, Total: len(all), Topics: map[string]string{}}
	for _, s := range all {
		if q == "" || strings.Contains(strings.ToLower(s.Subject), strings.ToLower(q)) {
			v.Subjects = append(v.Subjects, s)
		}
	}
	sort.Slice(v.Subjects, func(i, j int) bool { return v.Subjects[i].Subject < v.Subjects[j].Subject })
	topics := h.topicSet(c)
	for _, s := range v.Subjects {
		if t := topicOf(s.Subject, topics); t != "" {
			v.Topics[s.Subject] = t
		}
	}
	if web.WantsJSON(c) {
		return web.JSON(c, v)
	}
	return web.Render(c, fiber.StatusOK, tpl.SubjectsPage(web.PageFor(c, "Schemas"), v))
}

func subjectParam(c *fiber.Ctx) (string, error) {
	s, err := web.PathParam(c, "subject")
	if err == nil && s == "" {
		err = web.BadRequest("malformed subject in the address")
	}
	return s, err
}

// view builds a subject's page: version shows that version (default the
// latest), diff (>0) the diff from that version to the shown one.
func (h handler) view(c *fiber.Ctx, reg Registry, subject string, version, diff int) (tpl.SubjectView, error) {
	vs := reg.SubjectVersions(subject)
	if len(vs) == 0 {
		return tpl.SubjectView{}, web.NotFound("subject "+subject, "Pick one from the list of schemas.")
	}
	v := tpl.SubjectView{Subject: subject, Versions: vs, Compat: reg.Compatibility(subject),
		Check: templates.NewForm("type", vs[len(vs)-1].SchemaType), CanDelete: web.HasRole(c, web.RoleOperator)}
	if v.Check.Get("type") == "" {
		v.Check.Set("type", "AVRO")
	}
	if self, leader := reg.Writer(); !self {
		v.Leader = leader
		if leader == "" {
			v.Leader = "unknown at the moment"
		}
	}
	v.Topic = topicOf(subject, h.topicSet(c))
	find := func(n int) *schemareg.SchemaValue {
		for i := range vs {
			if vs[i].Version == n {
				return &vs[i]
			}
		}
		return nil
	}
	if version == 0 {
		// The latest live version, else the latest.
		v.Shown = &vs[len(vs)-1]
		for i := len(vs) - 1; i >= 0; i-- {
			if !vs[i].Deleted {
				v.Shown = &vs[i]
				break
			}
		}
	} else if v.Shown = find(version); v.Shown == nil {
		return v, web.NotFound("version "+strconv.Itoa(version)+" of "+subject, "Pick one from the subject's versions.")
	}
	v.Text = display(v.Shown)
	if diff > 0 {
		from := find(diff)
		if from == nil {
			return v, web.NotFound("version "+strconv.Itoa(diff)+" of "+subject, "Pick one from the subject's versions.")
		}
		d := sideBySide(display(from), v.Text)
		d.From, d.To = from.Version, v.Shown.Version
		v.Diff = &d
	}
	return v, nil
}

// display is a schema's text as the page shows it: JSON (Avro, JSON
// Schema) indented with its keys in their own order, Protobuf as written.
func display(sv *schemareg.SchemaValue) string {
	if sv.SchemaType == "PROTOBUF" {
		return sv.Schema
	}
	var b bytes.Buffer
	if json.Indent(&b, []byte(sv.Schema), "", "  ") != nil {
		return sv.Schema
	}
	return b.String()
}

// queryInt is a positive number from the query, 0 when absent; malformed is
// a bad request.
func queryInt(c *fiber.Ctx, key string) (int, error) {
	s := c.Query(key)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, web.BadRequest(key + " must be a version number")
	}
	return n, nil
}

// GET /schemas/:subject[?version=N][&diff=M]
func (h handler) subject(c *fiber.Ctx) error {
	reg, err := h.reg()
	if err != nil {
		return err
	}
	subject, err := subjectParam(c)
	if err != nil {
		return err
	}
	version, err := queryInt(c, "version")
	if err != nil {
		return err
	}
	diff, err := queryInt(c, "diff")
	if err != nil {
		return err
	}
	v, err := h.view(c, reg, subject, version, diff)
	if err != nil {
		return err
	}
	if web.WantsJSON(c) {
		return web.JSON(c, v)
	}
	return web.Render(c, fiber.StatusOK, tpl.SubjectPage(page(c, subject), v))
}

func page(c *fiber.Ctx, subject string) templates.Page {
	return web.PageFor(c, subject, templates.Crumb{Label: "Schemas", Href: "/schemas"}, templates.Crumb{Label: subject})
}

// maxDraftBytes bounds a draft schema (the registry's own request bound is
// larger; a form field this long is a mistake).
const maxDraftBytes = 1 << 20

// POST /schemas/:subject/check: would the registry accept the draft as the
// next version (or against one version)? Nothing is written.
func (h handler) check(c *fiber.Ctx) error {
	reg, err := h.reg()
	if err != nil {
		return err
	}
	subject, err := subjectParam(c)
	if err != nil {
		return err
	}
	v, err := h.view(c, reg, subject, 0, 0)
	if err != nil {
		return err
	}
	f := templates.NewForm("type", strings.Clone(c.FormValue("type")), "schema", strings.Clone(c.FormValue("schema")),
		"against", strings.TrimSpace(strings.Clone(c.FormValue("against"))))
	v.Check = f
	switch f.Get("type") {
	case "AVRO", "PROTOBUF", "JSON":
	default:
		v.Check.Fail("type", "Pick Avro, Protobuf or JSON Schema.")
	}
	if strings.TrimSpace(f.Get("schema")) == "" {
		v.Check.Fail("schema", "Paste the schema to check.")
	} else if len(f.Get("schema")) > maxDraftBytes {
		v.Check.Fail("schema", "At most 1 MiB.")
	}
	against := 0
	if s := f.Get("against"); s != "" {
		if against, err = strconv.Atoi(s); err != nil || against <= 0 {
			v.Check.Fail("against", "A version number, or empty.")
		}
	}
	status := fiber.StatusOK
	if len(v.Check.Errors) == 0 {
		res := &tpl.CheckResult{Level: v.Compat, Against: "every version the level requires"}
		if against > 0 {
			res.Against = "version " + strconv.Itoa(against)
			res.Level = strings.TrimSuffix(v.Compat, "_TRANSITIVE")
		}
		typ := f.Get("type")
		if typ == "AVRO" {
			typ = "" // as serializers send it
		}
		msgs, err := reg.CheckCompatibility(subject, against, schemareg.SchemaRequest{Schema: f.Get("schema"), SchemaType: typ})
		switch {
		case err != nil:
			res.Err = "Not checked: " + err.Error()
		default:
			res.Compatible, res.Messages = len(msgs) == 0, msgs
		}
		v.Result = res
	} else {
		status = fiber.StatusUnprocessableEntity
	}
	if web.WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"result": v.Result, "fields": v.Check.Errors})
	}
	return web.Render(c, status, tpl.SubjectPage(page(c, subject), v))
}

// POST /schemas/:subject/delete: a version (or the whole subject), soft or
// permanent, as the registry's DELETE endpoints.
func (h handler) remove(c *fiber.Ctx) error {
	reg, err := h.reg()
	if err != nil {
		return err
	}
	subject, err := subjectParam(c)
	if err != nil {
		return err
	}
	if strings.Clone(c.FormValue("confirm")) != subject {
		web.Flash(c, "bad", "Not deleted: type the subject's name to confirm.")
		return web.SeeOther(c, tpl.SubjectURL(subject)+"#delete")
	}
	permanent := c.FormValue("permanent") == "1"
	version := 0
	if s := strings.TrimSpace(c.FormValue("version")); s != "" {
		if version, err = strconv.Atoi(s); err != nil || version <= 0 {
			web.Flash(c, "bad", "Not deleted: the version must be a number, or empty for the whole subject.")
			return web.SeeOther(c, tpl.SubjectURL(subject)+"#delete")
		}
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 30*time.Second)
	defer cancel()
	kind := "soft"
	if permanent {
		kind = "permanent"
	}
	var what, detail string
	if version > 0 {
		what = "version " + strconv.Itoa(version) + " of " + subject
		_, err = reg.DeleteVersion(ctx, subject, version, permanent)
		detail = "version=" + strconv.Itoa(version) + " " + kind
	} else {
		what = "subject " + subject
		var vs []int
		vs, err = reg.DeleteSubject(ctx, subject, permanent)
		detail = "versions=" + joinInts(vs) + " " + kind
	}
	web.Audit(c, "schema.delete", subject, detail, err)
	if err != nil {
		web.Flash(c, "bad", "Not deleted: "+err.Error())
		return web.SeeOther(c, tpl.SubjectURL(subject)+"#delete")
	}
	web.Flash(c, "ok", strings.ToUpper(what[:1])+what[1:]+" deleted ("+kind+").")
	if reg.SubjectVersions(subject) == nil {
		return web.SeeOther(c, "/schemas")
	}
	return web.SeeOther(c, tpl.SubjectURL(subject))
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

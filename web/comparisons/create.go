package comparisons

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons/new, POST /comparisons: the create form. The form offers
// the cluster's topics; ?left=&right= pre-fill the topics and ?from=ID
// copies an existing comparison's settings. Mistakes come back next to
// their field (422) with what was typed; a topic the cluster does not have
// is refused. A created comparison starts at once and the browser goes to
// its page.

type creator interface {
	Create(ctx context.Context, name string, spec migration.Spec, createdBy string) (int64, error)
	Get(ctx context.Context, id int64) (migration.Status, error)
}

type previewer interface {
	Preview(ctx context.Context, spec migration.Spec, n int) (migration.PreviewResult, error)
}

type formEngine interface {
	creator
	previewer
}

type formHandler struct {
	eng      formEngine
	topics   topicLister // nil: topics are typed, not offered or checked
	previewN int
}

func (h formHandler) get(c *fiber.Ctx) error {
	f := defaultForm()
	if from := c.Query("from"); from != "" {
		id, err := strconv.ParseInt(from, 10, 64)
		if err != nil {
			return web.BadRequest("from=" + from + " is not a comparison number.")
		}
		st, err := h.eng.Get(c.UserContext(), id)
		if err != nil {
			return engineError(id, err)
		}
		f = formFromSpec("", st.Spec, web.Location(c))
	}
	for _, k := range []string{"left", "right"} {
		if v := c.Query(k); v != "" {
			f.Set(k, v)
		}
	}
	return h.render(c, fiber.StatusOK, views.FormView{Form: f})
}

// render shows the form with the cluster's topics.
func (h formHandler) render(c *fiber.Ctx, status int, v views.FormView) error {
	if v.Topics == nil && v.TopicsErr == "" {
		v.Topics, v.TopicsErr = h.topicNames(c.UserContext())
	}
	if v.Zone == "" {
		v.Zone = web.Location(c).String()
	}
	if web.WantsJSON(c) && status >= 400 {
		return c.Status(status).JSON(fiber.Map{"error": "invalid comparison", "fields": v.Form.Errors, "detail": v.Form.Err})
	}
	page := web.PageFor(c, "New comparison", templates.Crumb{Label: "Comparisons", Href: "/comparisons"})
	return web.Render(c, status, views.FormPage(page, v))
}

// topicNames lists the cluster's topics, internal ones left out.
func (h formHandler) topicNames(ctx context.Context) ([]string, string) {
	if h.topics == nil {
		return nil, ""
	}
	snap, err := h.topics.Metadata(ctx, 10*time.Second)
	if err != nil {
		return nil, err.Error()
	}
	names := make([]string, 0, len(snap.Topics))
	for _, t := range snap.Topics {
		if !t.Internal {
			names = append(names, t.Name)
		}
	}
	sort.Strings(names)
	return names, ""
}

// parse reads and checks the submitted form. It returns the view to show
// again (with the errors) and the spec.
func (h formHandler) parse(c *fiber.Ctx) (views.FormView, migration.Spec) {
	v := views.FormView{Form: readForm(c)}
	loc := formZone(c)
	v.Zone = loc.String()
	spec := specFromForm(&v.Form, loc)
	v.Topics, v.TopicsErr = h.topicNames(c.UserContext())
	if v.TopicsErr == "" && h.topics != nil {
		known := make(map[string]bool, len(v.Topics))
		for _, t := range v.Topics {
			known[t] = true
		}
		for _, side := range []string{"left", "right"} {
			if t := v.Form.Get(side); t != "" && !known[t] && v.Form.Error(side) == "" {
				v.Form.Fail(side, "There is no topic "+t+" in the cluster. Check the name (the list offers the cluster's topics), or create the topic first.")
			}
		}
	}
	return v, spec
}

func (h formHandler) create(c *fiber.Ctx) error {
	v, spec := h.parse(c)
	if !v.Form.OK() {
		return h.render(c, fiber.StatusUnprocessableEntity, v)
	}
	if h.pathsUnconfirmed(c, &v, spec) {
		return h.render(c, fiber.StatusUnprocessableEntity, v)
	}
	name := v.Form.Get("name")
	id, err := h.eng.Create(c.UserContext(), name, spec, userName(c))
	target := name
	if target == "" {
		target = spec.Left + " vs " + spec.Right
	}
	web.Audit(c, "comparison.create", target, describe(id, spec), err)
	if err != nil {
		failEngine(&v.Form, err)
		return h.render(c, fiber.StatusUnprocessableEntity, v)
	}
	if web.WantsJSON(c) {
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{"id": id, "url": views.URL(id)})
	}
	web.Flash(c, "ok", "Comparison "+target+" created; it is running.")
	return web.SeeOther(c, views.URL(id))
}

// pathsUnconfirmed checks, before a comparison is created or changed, that
// the paths it names (the JSON pairing path, the ignored paths) match
// something in the records: a path typed one level off otherwise passes
// silently and every pair differs. It runs the preview (at most 10 s) and,
// when a path matches none of the values read and the form does not
// confirm them (paths_ok), puts the preview in v and reports true.
func (h formHandler) pathsUnconfirmed(c *fiber.Ctx, v *views.FormView, spec migration.Spec) bool {
	if c.FormValue("paths_ok") == "1" || (!strings.HasPrefix(spec.Key, "json:") && !hasJSONIgnore(spec)) {
		return false
	}
	res, err := h.eng.Preview(c.UserContext(), spec, h.previewN)
	if err != nil || len(res.UnmatchedPaths()) == 0 {
		return false // a failing preview leaves the verdict to the engine
	}
	v.Previewed, v.Preview, v.PreviewN, v.PathsUnconfirmed = true, res, h.previewN, true
	return true
}

func hasJSONIgnore(s migration.Spec) bool {
	for _, ig := range s.Ignore {
		if !strings.HasPrefix(ig, "header:") {
			return true
		}
	}
	return false
}

// formZone is the zone the form's start time was typed in: the one the
// form was drawn with (its "zone" field, which the label named), else the
// viewer's. The two differ on a first visit, before the browser has told
// the console its zone.
func formZone(c *fiber.Ctx) *time.Location {
	if z := c.FormValue("zone"); z != "" && validZone(z) {
		if loc, err := time.LoadLocation(z); err == nil {
			return loc
		}
	}
	return web.Location(c)
}

// validZone accepts IANA zone names only (no paths).
func validZone(name string) bool {
	if len(name) > 64 || strings.Contains(name, "..") || strings.HasPrefix(name, "/") || name == "Local" {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '/', r == '_', r == '-', r == '+':
		default:
			return false
		}
	}
	return true
}

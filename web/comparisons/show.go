package comparisons

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons/:id: one comparison — the verdict with its rules and
// first examples, the counters, the latency skew, the read positions, the
// differences (?kind= filters, ?page= pages) each with the two values side
// by side, and the definition.
//
// While the comparison runs, the "cmp-live" part asks for itself every few
// seconds (htmx); the answer carries HX-Refresh when the comparison
// stopped or was restarted since the page was drawn (?gen=), so the whole
// page, differences included, is drawn again once. With scripts off, the
// page shows the same numbers on reload.

type detailEngine interface {
	getter
	Differences(ctx context.Context, id int64, q migration.DiffQuery) ([]migration.Difference, int64, error)
	DifferingPaths(ctx context.Context, id int64, limit int) ([]migration.PathCount, int, error)
}

type detailHandler struct {
	eng     detailEngine
	perPage int
	poll    time.Duration
}

func (h detailHandler) get(c *fiber.Ctx) error {
	st, err := load(c, h.eng)
	if err != nil {
		return err
	}
	v := views.DetailView{Status: st}
	if st.State == migration.StateRunning {
		v.Poll = h.poll
	}
	if web.Fragment(c, "cmp-live") {
		if gen := c.Query("gen"); st.State != migration.StateRunning || gen != strconv.FormatInt(st.Generation, 10) {
			c.Set("HX-Refresh", "true")
		}
		return web.Render(c, fiber.StatusOK, views.LiveBox(v))
	}

	kind := migration.Kind(c.Query("kind"))
	if kind != "" {
		if _, ok := migration.ParseKind(string(kind)); !ok {
			names := make([]string, len(migration.Kinds))
			for i, k := range migration.Kinds {
				names[i] = string(k)
			}
			return web.BadRequest("There is no kind of difference " + strconv.Quote(string(kind)) + "; use one of " + strings.Join(names, ", ") + ".")
		}
	}
	page, _ := strconv.Atoi(c.Query("page"))
	page = max(page, 1)
	v.Kind = kind
	diffs, total, err := h.eng.Differences(c.UserContext(), st.ID, migration.DiffQuery{Kind: kind, Offset: (page - 1) * h.perPage, Limit: h.perPage})
	if err != nil {
		v.DiffErr = err.Error()
	}
	v.Diffs = diffs
	pages := int((total + int64(h.perPage) - 1) / int64(h.perPage))
	v.Pager = templates.Pager{Page: page, Pages: pages, Total: int(total), PerPage: h.perPage, Label: "differences"}
	if page > 1 {
		v.Pager.PrevURL = views.DiffsURL(st.ID, kind, page-1)
	}
	if page < pages {
		v.Pager.NextURL = views.DiffsURL(st.ID, kind, page+1)
	}
	if st.Snapshot.Counters.Mismatched > 0 {
		v.Paths, v.PathsOf, _ = h.eng.DifferingPaths(c.UserContext(), st.ID, 10)
	}
	if web.WantsJSON(c) {
		if diffs == nil {
			diffs = []migration.Difference{}
		}
		paths := v.Paths
		if paths == nil {
			paths = []migration.PathCount{}
		}
		return web.JSON(c, fiber.Map{"comparison": st, "differences": diffs, "total_differences": total, "differing_paths": paths})
	}
	p := web.PageFor(c, st.Name, templates.Crumb{Label: "Comparisons", Href: "/comparisons"}, templates.Crumb{Label: st.Name})
	return web.Render(c, fiber.StatusOK, views.DetailPage(p, v))
}

package comparisons

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons: every comparison with its state, verdict and counters,
// newest first. While one runs, the table refreshes itself (htmx asks for
// the "cmp-table" fragment); with scripts off the page shows the same
// numbers on reload.

type lister interface {
	List(ctx context.Context) ([]migration.Status, error)
}

type listHandler struct {
	eng  lister
	poll time.Duration
}

func (h listHandler) get(c *fiber.Ctx) error {
	rows, err := h.eng.List(c.UserContext())
	if web.WantsJSON(c) {
		if err != nil {
			return err
		}
		if rows == nil {
			rows = []migration.Status{}
		}
		return web.JSON(c, fiber.Map{"comparisons": rows})
	}
	v := views.ListView{Rows: rows}
	if err != nil {
		v.Err = err.Error()
	}
	for _, st := range rows {
		if st.State == migration.StateRunning {
			v.Poll = h.poll
			break
		}
	}
	if web.Fragment(c, "cmp-table") {
		return web.Render(c, fiber.StatusOK, views.ListBox(v))
	}
	return web.Render(c, fiber.StatusOK, views.ListPage(web.PageFor(c, "Comparisons"), v))
}

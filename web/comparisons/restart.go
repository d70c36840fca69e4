package comparisons

import (
	"context"
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// POST /comparisons/:id/restart: forget a comparison's numbers and
// differences and compare again from its start (e.g. after fixing the new
// service).

type restarter interface {
	getter
	Restart(ctx context.Context, id, base int64) error
}

type restartHandler struct{ eng restarter }

func (h restartHandler) post(c *fiber.Ctx) error {
	return act(c, h.eng, "restart", "restarted from its start", h.eng.Restart)
}

// act runs one lifecycle action on comparison :id, audits it, and goes back
// to the comparison's page with a note saying what happened.
func act(c *fiber.Ctx, eng getter, action, done string, do func(ctx context.Context, id, base int64) error) error {
	st, err := load(c, eng)
	if err != nil {
		return err
	}
	err = do(c.UserContext(), st.ID, baseOf(c))
	web.Audit(c, "comparison."+action, st.Name, "id="+strconv.FormatInt(st.ID, 10), err)
	if err != nil {
		if errors.Is(err, migration.ErrNotFound) {
			return engineError(st.ID, err)
		}
		if se := staleError(err); se != nil {
			return se
		}
		if web.WantsJSON(c) {
			return c.Status(fiber.StatusConflict).JSON(fiber.Map{"error": "could not " + action, "detail": err.Error()})
		}
		web.Flash(c, "bad", "Could not "+action+" "+st.Name+": "+err.Error())
		return web.SeeOther(c, views.URL(st.ID))
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"id": st.ID, "action": action})
	}
	web.Flash(c, "ok", "Comparison "+st.Name+" "+done+".")
	return web.SeeOther(c, views.URL(st.ID))
}

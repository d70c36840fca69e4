package comparisons

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons/:id/delete asks for confirmation; POST deletes, only
// with the confirmation page's confirm=yes (a bare POST goes back to the
// question). Deleting stops the comparison and removes its numbers and
// differences; the topics are not touched.

type deleter interface {
	getter
	Delete(ctx context.Context, id, base int64) error
}

type deleteHandler struct{ eng deleter }

func (h deleteHandler) get(c *fiber.Ctx) error {
	st, err := load(c, h.eng)
	if err != nil {
		return err
	}
	p := web.PageFor(c, "Delete "+st.Name, templates.Crumb{Label: "Comparisons", Href: "/comparisons"},
		templates.Crumb{Label: st.Name, Href: views.URL(st.ID)})
	return web.Render(c, fiber.StatusOK, views.DeletePage(p, views.DeleteView{Status: st}))
}

func (h deleteHandler) post(c *fiber.Ctx) error {
	st, err := load(c, h.eng)
	if err != nil {
		return err
	}
	if c.FormValue("confirm") != "yes" {
		return web.SeeOther(c, views.URL(st.ID)+"/delete")
	}
	err = h.eng.Delete(c.UserContext(), st.ID, baseOf(c))
	web.Audit(c, "comparison.delete", st.Name, describe(st.ID, st.Spec), err)
	if err != nil {
		return engineError(st.ID, err)
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"deleted": st.ID})
	}
	web.Flash(c, "ok", "Comparison "+st.Name+" (#"+strconv.FormatInt(st.ID, 10)+") deleted.")
	return web.SeeOther(c, "/comparisons")
}

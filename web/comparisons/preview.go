package comparisons

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/web"
)

// POST /comparisons/preview: the create form sent with "Preview first
// pairs". The engine reads the first pairs with the form's settings
// (nothing is stored, at most 10 seconds) and the form comes back with
// them below, still filled in, ready to create.

func (h formHandler) preview(c *fiber.Ctx) error {
	v, spec := h.parse(c)
	if id, err := strconv.ParseInt(c.FormValue("edit_id"), 10, 64); err == nil && id > 0 {
		v.EditID = id
	}
	if !v.Form.OK() {
		return h.render(c, fiber.StatusUnprocessableEntity, v)
	}
	res, err := h.eng.Preview(c.UserContext(), spec, h.previewN)
	v.Previewed, v.Preview, v.PreviewN = true, res, h.previewN
	if err != nil {
		v.PreviewErr = err.Error()
	}
	if web.WantsJSON(c) {
		if err != nil {
			return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"error": "preview failed", "detail": err.Error()})
		}
		return web.JSON(c, res)
	}
	return h.render(c, fiber.StatusOK, v)
}

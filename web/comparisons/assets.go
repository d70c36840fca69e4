package comparisons

import (
	"github.com/gofiber/fiber/v2"

	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons/assets/:name: the pages' stylesheet. Its name carries
// the hash of its content, so it may be kept for good.

var cssName = "comparisons." + views.CSSHash + ".css"

func serveCSS(c *fiber.Ctx) error {
	if c.Params("name") != cssName {
		return web.NotFound("stylesheet "+c.Params("name"), "Reload the page: the console was updated.")
	}
	c.Set(fiber.HeaderContentType, "text/css; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "private, max-age=31536000, immutable")
	return c.Send(views.CSS)
}

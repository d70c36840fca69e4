package web

import (
	"time"

	"github.com/gofiber/fiber/v2"
)

// POST /theme: the theme switch in the header. theme is light, dark, or
// empty to follow the system; the choice is a cookie kept for a year, read
// by every page (templates.Request.Theme), and the browser goes back to
// the page it came from (back, a path of this console).

const themeCookie = "theme"

func (s *Server) setTheme(c *fiber.Ctx) error {
	switch t := c.FormValue("theme"); t {
	case "light", "dark":
		s.setCookie(c, themeCookie, t, 365*24*time.Hour)
	case "":
		s.setCookie(c, themeCookie, "", -1)
	default:
		return BadRequest("theme must be light, dark or empty")
	}
	return SeeOther(c, safeNext(c.FormValue("back")))
}

// GET /nav/badges: the counts of the nav entries that have one, as
// out-of-band swaps; every page polls it every 15 s, so the Alerts entry's
// count follows the alerts without a reload.
func navBadges(c *fiber.Ctx) error {
	return Render(c, fiber.StatusOK, navBadgesOf(c))
}

package web

import (
	"context"

	"github.com/gofiber/fiber/v2"
)

// POST /logout ends the session.

type sessionEnder interface {
	DeleteSession(ctx context.Context, token string) error
}

type logout struct{ sessions sessionEnder }

func (h logout) post(c *fiber.Ctx) error {
	s := serverOf(c)
	if tok, _ := c.Locals(localsToken).(string); tok != "" {
		if err := h.sessions.DeleteSession(requestCtx(c), tok); err != nil {
			return err
		}
		Audit(c, "session.logout", CurrentUser(c).Name, "", nil)
	}
	s.setCookie(c, sessionCookie, "", -1)
	return SeeOther(c, "/login")
}

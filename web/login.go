package web

import (
	"context"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// GET /login, POST /login: the sign-in form. Failed attempts are counted
// per address and per user name (limiter); over the limit the form answers
// 429 without checking the password.

type authenticator interface {
	Authenticate(ctx context.Context, name, password string) (consoledb.User, error)
}

type adminCounter interface {
	AdminCount(ctx context.Context) (int, error)
}

type loginHandler struct {
	users   authenticator
	admins  adminCounter
	limiter *limiter
}

func (h *loginHandler) noAdmin(c *fiber.Ctx) bool {
	n, err := h.admins.AdminCount(requestCtx(c))
	return err == nil && n == 0
}

func (h *loginHandler) get(c *fiber.Ctx) error {
	if CurrentUser(c) != nil {
		return SeeOther(c, safeNext(c.Query("next")))
	}
	return Render(c, fiber.StatusOK, templates.LoginPage(templates.NewForm(), safeNext(c.Query("next")), h.noAdmin(c)))
}

func (h *loginHandler) post(c *fiber.Ctx) error {
	name := strings.TrimSpace(c.FormValue("username"))
	password := c.FormValue("password")
	next := safeNext(c.FormValue("next"))
	f := templates.NewForm("username", name)
	ip := c.IP()
	if wait, blocked := h.limiter.blocked(ip, name); blocked {
		f.Err = "Too many failed sign-ins. Wait " + templates.Dur(wait.Round(1e9)) + " and try again."
		serverOf(c).audit(requestCtx(c), nonEmptyName(name), ip, "session.login", name, "rate limited", errors.New("too many failed sign-ins"))
		return Render(c, fiber.StatusTooManyRequests, templates.LoginPage(f, next, false))
	}
	if name == "" || password == "" {
		if name == "" {
			f.Fail("username", "Enter your user name.")
		}
		if password == "" {
			f.Fail("password", "Enter your password.")
		}
		return Render(c, fiber.StatusUnprocessableEntity, templates.LoginPage(f, next, h.noAdmin(c)))
	}
	u, err := h.users.Authenticate(requestCtx(c), name, password)
	if errors.Is(err, consoledb.ErrBadCredentials) {
		h.limiter.fail(ip, name)
		serverOf(c).audit(requestCtx(c), name, ip, "session.login", name, "", err)
		f.Err = "Wrong user name or password."
		return Render(c, fiber.StatusUnauthorized, templates.LoginPage(f, next, h.noAdmin(c)))
	}
	if err != nil {
		return err
	}
	h.limiter.succeed(name)
	s := serverOf(c)
	if err := s.signIn(c, u); err != nil {
		return err
	}
	s.audit(requestCtx(c), u.Name, ip, "session.login", u.Name, "", nil)
	return SeeOther(c, next)
}

func nonEmptyName(n string) string {
	if n == "" {
		return "(anonymous)"
	}
	return n
}

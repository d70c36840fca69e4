package web

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// GET /login, POST /login: the sign-in form. Failed attempts are counted
// per (user name, client address) and per address (limiter); while their
// backoff lasts the form answers 429 without checking the password.

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

// Bounds of the sign-in form. No user name is longer (consoledb
// .ValidateUsername) and no password either (bcrypt reads 72 bytes, and
// longer ones are refused when set), so longer input is a failed sign-in
// without a look at the database; only maxShownName bytes of it are echoed
// into the form, the audit log and the service log.
const (
	maxLoginName     = 64
	maxLoginPassword = consoledb.MaxPasswordLen
	maxShownName     = 64
)

// shownName is the user name as recorded and echoed: cut to maxShownName
// bytes (valid UTF-8, "…" marking the cut).
func shownName(name string) string {
	if len(name) <= maxShownName {
		return name
	}
	cut := name[:maxShownName]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + "…"
}

func (h *loginHandler) post(c *fiber.Ctx) error {
	raw := strings.TrimSpace(c.FormValue("username"))
	name := shownName(raw)
	password := c.FormValue("password")
	next := safeNext(c.FormValue("next"))
	f := templates.NewForm("username", strings.Clone(name))
	ip := ClientIP(c)
	if wait, blocked := h.limiter.blocked(ip, name); blocked {
		f.Err = "Too many failed sign-ins. Wait " + templates.Dur(wait.Round(time.Second)) + " and try again."
		auditNoise(c, nonEmptyName(name), "session.login", name, "refused during the sign-in backoff: wait "+wait.Round(time.Second).String(), errors.New("too many failed sign-ins"))
		return Render(c, fiber.StatusTooManyRequests, templates.LoginPage(f, next, false))
	}
	if raw == "" || password == "" {
		if name == "" {
			f.Fail("username", "Enter your user name.")
		}
		if password == "" {
			f.Fail("password", "Enter your password.")
		}
		return Render(c, fiber.StatusUnprocessableEntity, templates.LoginPage(f, next, h.noAdmin(c)))
	}
	if why := serverOf(c).joiningState(); why != "" {
		f.Err = why
		c.Set(fiber.HeaderRetryAfter, "2")
		return Render(c, fiber.StatusServiceUnavailable, templates.LoginPage(f, next, false))
	}
	var u consoledb.User
	var err error
	if len(raw) > maxLoginName || len(password) > maxLoginPassword {
		err = consoledb.ErrBadCredentials // no account has such a name or password
	} else {
		u, err = h.users.Authenticate(requestCtx(c), raw, password)
	}
	if errors.Is(err, consoledb.ErrBadCredentials) {
		h.limiter.fail(ip, name)
		serverOf(c).audit(requestCtx(c), name, ip, "session.login", name, "", err)
		f.Err = "Wrong user name or password."
		return Render(c, fiber.StatusUnauthorized, templates.LoginPage(f, next, h.noAdmin(c)))
	}
	if err != nil {
		return err
	}
	h.limiter.succeed(ip, name)
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

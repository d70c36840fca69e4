package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// GET /setup?token=…, POST /setup: the one-time page that creates the first
// admin. The token is random, printed in the log at start while no admin
// exists, kept only in memory, and void once an admin exists.

type firstAdminCreator interface {
	AdminCount(ctx context.Context) (int, error)
	CreateFirstAdmin(ctx context.Context, name, password string) (consoledb.User, error)
}

type setupHandler struct {
	s      *Server
	admins firstAdminCreator
}

// announceSetup logs the setup link when no admin exists.
func (s *Server) announceSetup(ctx context.Context) {
	n, err := s.store.AdminCount(ctx)
	if err != nil {
		s.log.Error("count console admins", "err", err)
		return
	}
	if n > 0 {
		return
	}
	tok := consoledb.NewToken()
	s.mu.Lock()
	s.setupToken = tok
	s.mu.Unlock()
	s.log.Warn("the console has no admin yet: open this link once to create one (or run `sluice console user add --role admin NAME`)",
		"url", s.URL()+"/setup?token="+tok)
}

// SetupToken is the current one-time setup token ("" when none); the
// appliance can show it elsewhere, tests use it.
func (s *Server) SetupToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setupToken
}

func (h *setupHandler) tokenOK(tok string) bool {
	want := h.s.SetupToken()
	return want != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1
}

func (h *setupHandler) closed(c *fiber.Ctx) (bool, error) {
	n, err := h.admins.AdminCount(requestCtx(c))
	if err != nil {
		return false, err
	}
	if n > 0 {
		h.s.mu.Lock()
		h.s.setupToken = ""
		h.s.mu.Unlock()
		return true, nil
	}
	return false, nil
}

func (h *setupHandler) get(c *fiber.Ctx) error {
	closed, err := h.closed(c)
	if err != nil {
		return err
	}
	if closed {
		return Render(c, fiber.StatusNotFound, templates.SetupClosed("An admin exists already. Sign in, or ask an admin for an account."))
	}
	tok := strings.Clone(c.Query("token"))
	if !h.tokenOK(tok) {
		return Render(c, fiber.StatusForbidden, templates.SetupClosed("This setup link is not valid. Use the link from the most recent start of Sluice in its log (a new one is printed at every start while no admin exists)."))
	}
	return Render(c, fiber.StatusOK, templates.SetupPage(templates.NewForm(), tok))
}

func (h *setupHandler) post(c *fiber.Ctx) error {
	closed, err := h.closed(c)
	if err != nil {
		return err
	}
	if closed {
		return Render(c, fiber.StatusNotFound, templates.SetupClosed("An admin exists already."))
	}
	tok := c.FormValue("token")
	ip := ClientIP(c)
	if wait, blocked := h.s.limiter.blocked(ip, ""); blocked {
		return Render(c, fiber.StatusTooManyRequests, templates.SetupClosed("Too many attempts. Wait "+templates.Dur(wait.Round(1e9))+"."))
	}
	if !h.tokenOK(tok) {
		h.s.limiter.fail(ip, "")
		return Render(c, fiber.StatusForbidden, templates.SetupClosed("This setup link is not valid. Use the link from the most recent start of Sluice in its log."))
	}
	name := strings.TrimSpace(c.FormValue("username"))
	pw, confirm := c.FormValue("password"), c.FormValue("confirm")
	f := templates.NewForm("username", name)
	if err := consoledb.ValidateUsername(name); err != nil {
		f.Fail("username", err.Error())
	}
	if err := consoledb.ValidatePassword(pw); err != nil {
		f.Fail("password", err.Error())
	} else if pw != confirm {
		f.Fail("confirm", "The passwords differ.")
	}
	if !f.OK() {
		return Render(c, fiber.StatusUnprocessableEntity, templates.SetupPage(f, strings.Clone(tok)))
	}
	u, err := h.admins.CreateFirstAdmin(requestCtx(c), name, pw)
	if err != nil {
		if errors.Is(err, consoledb.ErrUserExists) {
			f.Fail("username", err.Error())
			return Render(c, fiber.StatusUnprocessableEntity, templates.SetupPage(f, strings.Clone(tok)))
		}
		return err
	}
	h.s.mu.Lock()
	h.s.setupToken = ""
	h.s.mu.Unlock()
	if err := h.s.signIn(c, u); err != nil {
		return err
	}
	h.s.audit(requestCtx(c), u.Name, ip, "user.setup-admin", u.Name, "first admin created with the setup link", nil)
	Flash(c, "ok", "Welcome, "+u.Name+". You are the console's admin; add other users on the Users page.")
	return SeeOther(c, "/")
}

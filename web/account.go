package web

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// GET /account, POST /account/password: a user changes their own password
// (the current one is asked again). Their other sessions end.

type passwordChanger interface {
	CheckPassword(ctx context.Context, id int64, password string) (bool, error)
	SetPassword(ctx context.Context, id int64, password string, base consoledb.UserBase) error
}

type accountHandler struct{ users passwordChanger }

func (h accountHandler) get(c *fiber.Ctx) error {
	return Render(c, fiber.StatusOK, templates.AccountPage(PageFor(c, "Your account"), templates.AccountView{User: *CurrentUser(c), Form: templates.NewForm()}))
}

func (h accountHandler) post(c *fiber.Ctx) error {
	u := *CurrentUser(c)
	f := templates.NewForm()
	ok, err := h.users.CheckPassword(requestCtx(c), u.ID, c.FormValue("current"))
	if err != nil {
		return err
	}
	if !ok {
		f.Fail("current", "This is not your current password.")
	}
	pw := c.FormValue("password")
	if err := consoledb.ValidatePassword(pw); err != nil {
		f.Fail("password", err.Error())
	} else if pw != c.FormValue("confirm") {
		f.Fail("confirm", "The passwords differ.")
	}
	if !f.OK() {
		return Render(c, fiber.StatusUnprocessableEntity, templates.AccountPage(PageFor(c, "Your account"), templates.AccountView{User: u, Form: f}))
	}
	// SetPassword ends every session of the user, this one included; sign
	// in again right away so the user stays on the site.
	err = h.users.SetPassword(requestCtx(c), u.ID, pw, consoledb.UserBase{})
	Audit(c, "user.password", u.Name, "changed by the user; other sessions ended", err)
	if err != nil {
		return err
	}
	if err := serverOf(c).signIn(c, u); err != nil {
		return err
	}
	Flash(c, "ok", "Password changed. Your other sessions were signed out.")
	return SeeOther(c, "/account")
}

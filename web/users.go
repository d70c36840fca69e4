package web

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// GET /users, POST /users, POST /users/:id/{role,password,delete}: user
// administration (admin only). Every change is audited.

type userAdmin interface {
	Users(ctx context.Context) ([]consoledb.User, error)
	UserByID(ctx context.Context, id int64) (consoledb.User, error)
	CreateUser(ctx context.Context, name string, role consoledb.Role, password string) (consoledb.User, error)
	SetRole(ctx context.Context, id int64, role consoledb.Role, base consoledb.UserBase) error
	SetPassword(ctx context.Context, id int64, password string, base consoledb.UserBase) error
	DeleteUser(ctx context.Context, id int64, base consoledb.UserBase) error
}

type usersHandler struct{ users userAdmin }

func (h usersHandler) page(c *fiber.Ctx, status int, f templates.Form) error {
	us, err := h.users.Users(requestCtx(c))
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		out := make([]fiber.Map, 0, len(us))
		for _, u := range us {
			out = append(out, fiber.Map{"id": u.ID, "name": u.Name, "role": u.Role, "created_at": u.CreatedAt, "last_login_at": u.LastLoginAt,
				// what an edit is based on: send them back as the form fields version and updated
				"version": u.Version, "updated": u.UpdatedAt.UnixMilli()})
		}
		return c.Status(status).JSON(out)
	}
	v := templates.UsersView{Users: us, Form: f, Me: CurrentUser(c).Name}
	return Render(c, status, templates.UsersPage(PageFor(c, "Users"), v))
}

func (h usersHandler) get(c *fiber.Ctx) error {
	return h.page(c, fiber.StatusOK, templates.NewForm("role", "viewer"))
}

func (h usersHandler) post(c *fiber.Ctx) error {
	name := strings.TrimSpace(c.FormValue("username"))
	f := templates.NewForm("username", name, "role", c.FormValue("role"))
	role, err := consoledb.ParseRole(c.FormValue("role"))
	if err != nil {
		f.Fail("role", err.Error())
	}
	if err := consoledb.ValidateUsername(name); err != nil {
		f.Fail("username", err.Error())
	}
	pw := c.FormValue("password")
	if err := consoledb.ValidatePassword(pw); err != nil {
		f.Fail("password", err.Error())
	}
	if !f.OK() {
		return h.page(c, fiber.StatusUnprocessableEntity, f)
	}
	_, err = h.users.CreateUser(requestCtx(c), name, role, pw)
	Audit(c, "user.add", name, "role="+string(role), err)
	if errors.Is(err, consoledb.ErrUserExists) {
		f.Fail("username", "A user with this name exists already.")
		return h.page(c, fiber.StatusUnprocessableEntity, f)
	}
	if err != nil {
		return err
	}
	Flash(c, "ok", "User "+name+" added as "+string(role)+".")
	return SeeOther(c, "/users")
}

func (h usersHandler) target(c *fiber.Ctx) (consoledb.User, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil {
		return consoledb.User{}, BadRequest("user id must be a number")
	}
	u, err := h.users.UserByID(requestCtx(c), id)
	if errors.Is(err, consoledb.ErrNotFound) {
		return u, NotFound("user "+strconv.FormatInt(id, 10), "It may have been removed.")
	}
	return u, err
}

// base is what the posted form was based on: the user's version and
// updated time as the page showed them (the form's hidden version and
// updated fields). A change made since on any host refuses the edit
// (consoledb.StaleError, 409) instead of silently overwriting it. Without
// the fields (an API call that does not say) nothing is checked.
func base(c *fiber.Ctx) consoledb.UserBase {
	v, _ := strconv.ParseInt(c.FormValue("version"), 10, 64)
	u, _ := strconv.ParseInt(c.FormValue("updated"), 10, 64)
	return consoledb.UserBase{Version: max(v, 0), Updated: u}
}

// done redirects with a note, or answers the error as a note on the page;
// a stale edit is answered 409 with who changed the user, where and when.
func (h usersHandler) done(c *fiber.Ctx, err error, ok string) error {
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return err
		}
		if consoledb.IsStale(err) {
			return ConsoleStateError(err)
		}
		Flash(c, "bad", err.Error())
	} else {
		Flash(c, "ok", ok)
	}
	return SeeOther(c, "/users")
}

func (h usersHandler) setRole(c *fiber.Ctx) error {
	u, err := h.target(c)
	if err != nil {
		return err
	}
	role, err := consoledb.ParseRole(c.FormValue("role"))
	if err != nil {
		return BadRequest(err.Error())
	}
	err = h.users.SetRole(requestCtx(c), u.ID, role, base(c))
	Audit(c, "user.role", u.Name, string(u.Role)+" -> "+string(role), err)
	return h.done(c, err, u.Name+" is now "+string(role)+".")
}

func (h usersHandler) setPassword(c *fiber.Ctx) error {
	u, err := h.target(c)
	if err != nil {
		return err
	}
	pw := c.FormValue("password")
	if err := consoledb.ValidatePassword(pw); err != nil {
		return h.done(c, errors.New("Password of "+u.Name+" not changed: "+err.Error()), "")
	}
	err = h.users.SetPassword(requestCtx(c), u.ID, pw, base(c))
	Audit(c, "user.password", u.Name, "set by an admin; sessions ended", err)
	return h.done(c, err, "Password of "+u.Name+" changed; their sessions were ended.")
}

func (h usersHandler) remove(c *fiber.Ctx) error {
	u, err := h.target(c)
	if err != nil {
		return err
	}
	if me := CurrentUser(c); me != nil && me.ID == u.ID {
		return h.done(c, errors.New("You cannot remove yourself; another admin can."), "")
	}
	err = h.users.DeleteUser(requestCtx(c), u.ID, base(c))
	Audit(c, "user.remove", u.Name, "", err)
	return h.done(c, err, "User "+u.Name+" removed.")
}

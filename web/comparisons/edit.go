package comparisons

import (
	"context"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// GET /comparisons/:id/edit, POST /comparisons/:id/edit: the create form
// filled with a comparison's settings; saving stores them and starts the
// comparison over (its numbers and differences are forgotten). Mistakes
// come back next to their field, as on create; paths that match none of
// the records are confirmed first, as on create.

type updater interface {
	Update(ctx context.Context, id int64, name string, spec migration.Spec, base int64) error
}

type editHandler struct {
	form formHandler
	eng  updater
}

func (h editHandler) get(c *fiber.Ctx) error {
	st, err := load(c, h.form.eng)
	if err != nil {
		return err
	}
	v := views.FormView{Form: formFromSpec(st.Name, st.Spec, web.Location(c)), EditID: st.ID}
	if st.Version > 0 {
		v.Form.Set("version", strconv.FormatInt(st.Version, 10))
	}
	return h.form.render(c, fiber.StatusOK, v)
}

func (h editHandler) post(c *fiber.Ctx) error {
	st, err := load(c, h.form.eng)
	if err != nil {
		return err
	}
	v, spec := h.form.parse(c)
	v.EditID = st.ID
	base := baseOf(c)
	if base > 0 {
		v.Form.Set("version", strconv.FormatInt(base, 10))
	}
	if !v.Form.OK() || h.form.pathsUnconfirmed(c, &v, spec) {
		return h.form.render(c, fiber.StatusUnprocessableEntity, v)
	}
	name := strings.TrimSpace(v.Form.Get("name"))
	err = h.eng.Update(c.UserContext(), st.ID, name, spec, base)
	web.Audit(c, "comparison.update", st.Name, describe(st.ID, spec), err)
	if err != nil {
		if isNotFound(err) {
			return engineError(st.ID, err)
		}
		if se := staleError(err); se != nil {
			// What was typed stays; the note says who changed the
			// comparison meanwhile.
			if web.WantsJSON(c) {
				return se
			}
			v.Form.Err = se.Text + " " + se.Hint
			return h.form.render(c, se.Status, v)
		}
		failEngine(&v.Form, err)
		return h.form.render(c, fiber.StatusUnprocessableEntity, v)
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"id": st.ID, "url": views.URL(st.ID)})
	}
	web.Flash(c, "ok", "Comparison saved; it starts over with the new settings.")
	return web.SeeOther(c, views.URL(st.ID))
}

// ignorer adds a path to a comparison's ignore list.
type ignorer interface {
	getter
	updater
}

// POST /comparisons/:id/ignore (path): ignore one more path — one of the
// most frequent differing paths on the comparison's page — and start the
// comparison over.
type ignoreHandler struct{ eng ignorer }

func (h ignoreHandler) post(c *fiber.Ctx) error {
	st, err := load(c, h.eng)
	if err != nil {
		return err
	}
	path := strings.TrimSpace(strings.Clone(c.FormValue("path")))
	if path == "" || !views.CanIgnore(st.Spec, path) {
		return web.BadRequest("This path cannot be ignored here: it is empty or ignored already, or the comparison does not compare JSON values (or headers, for header:NAME).")
	}
	spec := st.Spec
	spec.Ignore = append(append([]string(nil), spec.Ignore...), path)
	err = h.eng.Update(c.UserContext(), st.ID, st.Name, spec, baseOf(c))
	web.Audit(c, "comparison.ignore", st.Name, "path="+path, err)
	if err != nil {
		if isNotFound(err) {
			return engineError(st.ID, err)
		}
		if se := staleError(err); se != nil {
			return se
		}
		web.Flash(c, "bad", "Not changed: "+err.Error())
		return web.SeeOther(c, views.URL(st.ID))
	}
	web.Flash(c, "ok", "Now ignoring "+path+"; the comparison starts over.")
	return web.SeeOther(c, views.URL(st.ID))
}

func isNotFound(err error) bool { return errorsIs(err, migration.ErrNotFound) }

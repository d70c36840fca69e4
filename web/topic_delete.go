package web

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/templates"
)

// POST /topics/:name/delete: delete a topic after its name was typed in the
// confirmation field (checked here; the page's script only disables the
// button until then).

type topicDeleter interface {
	DeleteTopic(ctx context.Context, name string) error
}

type topicDelete struct {
	kc   topicDeleter
	show topicShow
}

func (h topicDelete) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	if c.FormValue("confirm") != name {
		v, err := h.show.view(c, name)
		if err != nil {
			return err
		}
		f := templates.NewForm("confirm", c.FormValue("confirm"))
		f.Fail("confirm", "Type the topic name exactly ("+name+") to confirm.")
		v.DeleteForm = f
		return h.show.render(c, fiber.StatusUnprocessableEntity, v)
	}
	err = h.kc.DeleteTopic(requestCtx(c), name)
	Audit(c, "topic.delete", name, "", err)
	if err != nil {
		if isUnknownTopic(err) {
			return NotFound("topic "+name, "It may have been deleted already.")
		}
		v, verr := h.show.view(c, name)
		if verr != nil {
			return verr
		}
		v.DeleteForm = templates.NewForm()
		v.DeleteForm.Err = err.Error()
		return h.show.render(c, fiber.StatusUnprocessableEntity, v)
	}
	Flash(c, "ok", "Topic "+name+" deleted.")
	return SeeOther(c, "/topics")
}

package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/notifiers/:id: change a notifier. An empty key field keeps
// the stored key; "Remove the stored token" clears a webhook's token. A new
// URL or type needs the key entered again, except from an admin.

type notifierUpdater interface {
	Notifier(ctx context.Context, id int64) (alerting.Notifier, error)
	UpdateNotifier(ctx context.Context, id int64, in alerting.NotifierInput) (alerting.Notifier, error)
}

type notifierUpdate struct {
	eng  notifierUpdater
	show notifierShow // renders a rejected edit
}

func (h notifierUpdate) post(c *fiber.Ctx) error {
	id, err := pathID(c, "notifier")
	if err != nil {
		return err
	}
	stored, err := h.eng.Notifier(c.UserContext(), id)
	if err != nil {
		return engineError(err, "notifier "+c.Params("id"))
	}
	in, f := parseNotifier(c)
	// Only an admin may point a notifier elsewhere without entering its
	// key again (alerting.NotifierInput.KeepSecretOnRetarget).
	in.KeepSecretOnRetarget = web.HasRole(c, web.RoleAdmin)
	n, err := h.eng.UpdateNotifier(c.UserContext(), id, in)
	web.Audit(c, "alert.notifier.update", stored.Name, describeNotifier(in, false), err)
	if err == nil {
		if web.WantsJSON(c) {
			return web.JSON(c, fiber.Map{"notifier": n})
		}
		web.Flash(c, "ok", "Notifier "+n.Name+" saved.")
		return web.SeeOther(c, views.NotifierURL(id))
	}
	if isNotFound(err) {
		return engineError(err, "notifier "+c.Params("id"))
	}
	if e := web.ConsoleStateError(err); e != nil {
		// Changed on another host since this form was shown (or the
		// state cannot be reached): the form keeps what was typed (not
		// the key), with why it was not saved.
		f.Err = e.Text + " " + e.Hint
		if web.WantsJSON(c) {
			return jsonFormError(c, e.Status, f)
		}
		return h.show.render(c, e.Status, stored, f)
	}
	if !applyValidation(&f, err) {
		return engineError(err, "notifier")
	}
	if web.WantsJSON(c) {
		return jsonFormError(c, fiber.StatusUnprocessableEntity, f)
	}
	return h.show.render(c, fiber.StatusUnprocessableEntity, stored, f)
}

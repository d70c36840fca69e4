package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/notifiers: add a notifier. Its key is stored encrypted and
// never shown again; a rejected form comes back without it.

type notifierCreator interface {
	CreateNotifier(ctx context.Context, in alerting.NotifierInput) (alerting.Notifier, error)
}

type notifierCreate struct {
	eng  notifierCreator
	list notifiersList // renders a rejected form
}

func (h notifierCreate) post(c *fiber.Ctx) error {
	in, f := parseNotifier(c)
	n, err := h.eng.CreateNotifier(c.UserContext(), in)
	web.Audit(c, "alert.notifier.create", in.Name, describeNotifier(in, true), err)
	if err == nil {
		if web.WantsJSON(c) {
			return c.Status(fiber.StatusCreated).JSON(fiber.Map{"notifier": n})
		}
		web.Flash(c, "ok", "Notifier "+n.Name+" added. Send it a test event to check the endpoint and key.")
		return web.SeeOther(c, views.NotifierURL(n.ID))
	}
	if !applyValidation(&f, err) {
		return engineError(err, "notifier")
	}
	if web.WantsJSON(c) {
		return jsonFormError(c, fiber.StatusUnprocessableEntity, f)
	}
	ns, lerr := h.list.eng.Notifiers(c.UserContext())
	if lerr != nil {
		return engineError(lerr, "notifiers")
	}
	return h.list.render(c, fiber.StatusUnprocessableEntity, ns, f)
}

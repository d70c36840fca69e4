package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/notifiers: the notifiers with their stored key's hint and
// their last delivery, and the form that adds one (operators).

type notifierDirectory interface {
	Notifiers(ctx context.Context) ([]alerting.Notifier, error)
	Deliveries(ctx context.Context, q alerting.DeliveryQuery) ([]alerting.Delivery, error)
}

type notifiersList struct{ eng notifierDirectory }

func (h notifiersList) get(c *fiber.Ctx) error {
	ns, err := h.eng.Notifiers(c.UserContext())
	if err != nil {
		return engineError(err, "notifiers")
	}
	ns = notifiersFor(c, ns)
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"notifiers": orEmpty(ns)})
	}
	return h.render(c, fiber.StatusOK, ns, newNotifierForm())
}

// render shows the list with the add form f (empty, or a rejected one).
func (h notifiersList) render(c *fiber.Ctx, status int, ns []alerting.Notifier, f templates.Form) error {
	v := views.NotifiersView{Notifiers: ns, Form: f, Last: map[int64]alerting.Delivery{}}
	for _, n := range ns {
		if ds, err := h.eng.Deliveries(c.UserContext(), alerting.DeliveryQuery{NotifierID: n.ID, Limit: 1}); err == nil && len(ds) > 0 {
			v.Last[n.ID] = ds[0]
		}
	}
	return web.Render(c, status, views.NotifiersPage(page(c, "Notifiers"), v))
}

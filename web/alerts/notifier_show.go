package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/notifiers/:id: a notifier's settings (its key only as a
// hint, its URL masked for viewers), the rules that use it, its recent deliveries, and for operators
// the edit form and the "Send test event" button.

type notifierReader interface {
	Notifier(ctx context.Context, id int64) (alerting.Notifier, error)
	Rules(ctx context.Context) ([]alerting.Rule, error)
	Deliveries(ctx context.Context, q alerting.DeliveryQuery) ([]alerting.Delivery, error)
}

type notifierShow struct{ eng notifierReader }

func (h notifierShow) get(c *fiber.Ctx) error {
	id, err := pathID(c, "notifier")
	if err != nil {
		return err
	}
	n, err := h.eng.Notifier(c.UserContext(), id)
	if err != nil {
		return engineError(err, "notifier "+c.Params("id"))
	}
	n = notifierFor(c, n)
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"notifier": n})
	}
	return h.render(c, fiber.StatusOK, n, notifierFormOf(n))
}

// render shows notifier n with form f (its settings, or a rejected edit).
func (h notifierShow) render(c *fiber.Ctx, status int, n alerting.Notifier, f templates.Form) error {
	ctx := c.UserContext()
	v := views.NotifierView{Notifier: n, Form: f}
	if rules, err := h.eng.Rules(ctx); err == nil {
		for _, r := range rules {
			for _, id := range r.NotifierIDs {
				if id == n.ID {
					v.Rules = append(v.Rules, r)
				}
			}
		}
	}
	ds, _ := h.eng.Deliveries(ctx, alerting.DeliveryQuery{NotifierID: n.ID, Limit: 50})
	v.Deliveries = deliveriesFor(c, ds)
	p := page(c, n.Name, templates.Crumb{Label: "Notifiers", Href: "/alerts/notifiers"})
	return web.Render(c, status, views.NotifierPage(p, v))
}

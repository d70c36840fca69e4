package alerts

import (
	"context"
	"net/url"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/deliveries?notifier=&status=&rule=&before=: the delivery log,
// newest first, 100 a page: every trigger, resolve and test event with its
// attempts, last HTTP status and, for admins, the receiver's answer (secrets
// removed).

type deliveryReader interface {
	Deliveries(ctx context.Context, q alerting.DeliveryQuery) ([]alerting.Delivery, error)
	Notifiers(ctx context.Context) ([]alerting.Notifier, error)
}

type deliveries struct{ eng deliveryReader }

func (h deliveries) get(c *fiber.Ctx) error {
	ctx := c.UserContext()
	q := alerting.DeliveryQuery{NotifierID: queryID(c, "notifier"), RuleID: queryID(c, "rule"), BeforeID: queryID(c, "before"), Limit: pageSize}
	switch st := c.Query("status"); st {
	case alerting.DeliveryDelivered, alerting.DeliveryFailed, alerting.DeliveryPending:
		q.Status = st
	}
	ds, err := h.eng.Deliveries(ctx, q)
	if err != nil {
		return engineError(err, "delivery log")
	}
	ds = deliveriesFor(c, ds)
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"deliveries": orEmpty(ds)})
	}
	v := views.DeliveriesView{Deliveries: ds, NotifierID: q.NotifierID, Status: q.Status, RuleID: q.RuleID}
	if ns, err := h.eng.Notifiers(ctx); err == nil {
		v.Notifiers = ns
	} else {
		v.Err = err.Error()
	}
	if len(ds) == pageSize {
		vals := url.Values{"before": {strconv.FormatInt(ds[len(ds)-1].ID, 10)}}
		for k, id := range map[string]int64{"notifier": q.NotifierID, "rule": q.RuleID} {
			if id != 0 {
				vals.Set(k, strconv.FormatInt(id, 10))
			}
		}
		if q.Status != "" {
			vals.Set("status", q.Status)
		}
		v.NextURL = "/alerts/deliveries?" + vals.Encode()
	}
	return web.Render(c, fiber.StatusOK, views.DeliveriesPage(page(c, "Delivery log"), v))
}

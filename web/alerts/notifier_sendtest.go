package alerts

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/notifiers/:id/test: send a test event now ("info" trigger;
// PagerDuty's is resolved right after, so no incident stays open) and come
// back to the notifier's page, whose delivery log shows the answer.

type testSender interface {
	Notifier(ctx context.Context, id int64) (alerting.Notifier, error)
	SendTest(ctx context.Context, notifierID int64) (alerting.Delivery, error)
}

type notifierSendTest struct{ eng testSender }

// testTimeout bounds a test delivery, retries included, so the button
// answers while the operator waits.
const testTimeout = 20 * time.Second

func (h notifierSendTest) post(c *fiber.Ctx) error {
	id, err := pathID(c, "notifier")
	if err != nil {
		return err
	}
	n, err := h.eng.Notifier(c.UserContext(), id)
	if err != nil {
		return engineError(err, "notifier "+c.Params("id"))
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), testTimeout)
	defer cancel()
	d, err := h.eng.SendTest(ctx, id)
	outcome := err
	if err == nil && d.Status != alerting.DeliveryDelivered {
		outcome = fmt.Errorf("%s: %s", d.Status, d.Error)
	}
	web.Audit(c, "alert.notifier.test", n.Name, fmt.Sprintf("http_status=%d attempts=%d", d.HTTPStatus, d.Attempts), outcome)
	if err != nil {
		return engineError(err, "notifier "+n.Name)
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"delivery": deliveriesFor(c, []alerting.Delivery{d})[0]})
	}
	switch {
	case d.Status == alerting.DeliveryDelivered:
		web.Flash(c, "ok", fmt.Sprintf("Test event delivered to %s (HTTP %d).", n.Name, d.HTTPStatus))
	case d.HTTPStatus != 0:
		web.Flash(c, "bad", fmt.Sprintf("Test event to %s failed after %d attempt(s): HTTP %d. The delivery log below has the answer.", n.Name, d.Attempts, d.HTTPStatus))
	default:
		web.Flash(c, "bad", fmt.Sprintf("Test event to %s failed after %d attempt(s): %s", n.Name, d.Attempts, d.Error))
	}
	return web.SeeOther(c, views.NotifierURL(id))
}

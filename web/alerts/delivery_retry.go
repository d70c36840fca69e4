package alerts

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/deliveries/:id/retry: send a failed notification again,
// now: the same request (the delivery log keeps it, its key redacted) to
// the notifier's current URL with its current key, logged as a new
// delivery. Retried like a test event for up to 20 s.

type deliveryRetrier interface {
	RetryDelivery(ctx context.Context, id int64) (alerting.Delivery, error)
}

type deliveryRetry struct{ eng deliveryRetrier }

func (h deliveryRetry) post(c *fiber.Ctx) error {
	id, err := pathID(c, "delivery")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), testTimeout)
	defer cancel()
	d, err := h.eng.RetryDelivery(ctx, id)
	outcome := err
	if err == nil && d.Status != alerting.DeliveryDelivered {
		outcome = fmt.Errorf("%s: %s", d.Status, d.Error)
	}
	web.Audit(c, "alert.delivery.retry", strconv.FormatInt(id, 10), fmt.Sprintf("http_status=%d attempts=%d", d.HTTPStatus, d.Attempts), outcome)
	back := backTo(c, "/alerts/deliveries")
	switch {
	case errors.Is(err, alerting.ErrNotRetryable):
		web.Flash(c, "warn", "Only a failed delivery can be sent again.")
		return web.SeeOther(c, back)
	case err != nil:
		return engineError(err, "delivery "+strconv.FormatInt(id, 10))
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"delivery": deliveriesFor(c, []alerting.Delivery{d})[0]})
	}
	if d.Status == alerting.DeliveryDelivered {
		web.Flash(c, "ok", fmt.Sprintf("Sent again to %s: delivered (HTTP %d).", d.NotifierName, d.HTTPStatus))
	} else {
		web.Flash(c, "bad", fmt.Sprintf("Sent again to %s: failed after %d attempt(s): %s", d.NotifierName, d.Attempts, d.Error))
	}
	return web.SeeOther(c, back)
}

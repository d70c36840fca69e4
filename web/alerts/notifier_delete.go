package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/notifiers/:id/delete: delete a notifier. Rules stop sending
// to it; its delivery log stays.

type notifierDeleter interface {
	Notifier(ctx context.Context, id int64) (alerting.Notifier, error)
	DeleteNotifier(ctx context.Context, id int64) error
}

type notifierDelete struct{ eng notifierDeleter }

func (h notifierDelete) post(c *fiber.Ctx) error {
	id, err := pathID(c, "notifier")
	if err != nil {
		return err
	}
	n, err := h.eng.Notifier(c.UserContext(), id)
	if err != nil {
		return engineError(err, "notifier "+c.Params("id"))
	}
	err = h.eng.DeleteNotifier(c.UserContext(), id)
	web.Audit(c, "alert.notifier.delete", n.Name, "type="+string(n.Type), err)
	if err != nil {
		return engineError(err, "notifier "+n.Name)
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"deleted": id})
	}
	web.Flash(c, "ok", "Notifier "+n.Name+" deleted.")
	return web.SeeOther(c, "/alerts/notifiers")
}

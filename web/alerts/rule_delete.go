package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/rules/:id/delete: delete a rule. Its firing alerts are
// resolved at once (their notifiers get the resolve); its history stays.

type ruleDeleter interface {
	Rule(ctx context.Context, id int64) (alerting.Rule, error)
	DeleteRule(ctx context.Context, id int64) error
}

type ruleDelete struct{ eng ruleDeleter }

func (h ruleDelete) post(c *fiber.Ctx) error {
	id, err := pathID(c, "alert rule")
	if err != nil {
		return err
	}
	r, err := h.eng.Rule(c.UserContext(), id)
	if err != nil {
		return engineError(err, "alert rule "+c.Params("id"))
	}
	err = h.eng.DeleteRule(c.UserContext(), id)
	web.Audit(c, "alert.rule.delete", r.Name, describeRule(r), err)
	if err != nil {
		return engineError(err, "alert rule "+r.Name)
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"deleted": id})
	}
	web.Flash(c, "ok", "Rule "+r.Name+" deleted; its firing alerts were resolved.")
	return web.SeeOther(c, "/alerts/rules")
}

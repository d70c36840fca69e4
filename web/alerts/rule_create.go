package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/rules: create a rule from the form. Mistakes come back next
// to their fields (422) with what was typed kept.

type ruleCreator interface {
	CreateRule(ctx context.Context, r alerting.Rule) (alerting.Rule, error)
}

type ruleCreate struct {
	eng  ruleCreator
	form ruleForm
}

func (h ruleCreate) post(c *fiber.Ctx) error {
	r, f, sel := h.form.parse(c)
	if f.OK() {
		created, err := h.eng.CreateRule(c.UserContext(), r)
		web.Audit(c, "alert.rule.create", r.Name, describeRule(r), err)
		if err == nil {
			if web.WantsJSON(c) {
				return c.Status(fiber.StatusCreated).JSON(fiber.Map{"rule": created})
			}
			web.Flash(c, "ok", "Rule "+created.Name+" created.")
			return web.SeeOther(c, views.RuleURL(created.ID))
		}
		if !applyValidation(&f, err) {
			return engineError(err, "rule")
		}
	}
	if web.WantsJSON(c) {
		return jsonFormError(c, fiber.StatusUnprocessableEntity, f)
	}
	v, err := h.form.view(c, alerting.Rule{}, f, sel)
	if err != nil {
		return err
	}
	return renderRule(c, fiber.StatusUnprocessableEntity, "New alert rule", v)
}

package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/rules/:id: save the edit form. Open alerts keep their dedup
// keys; subjects the rule no longer covers resolve at the next evaluation.

type ruleUpdater interface {
	Rule(ctx context.Context, id int64) (alerting.Rule, error)
	UpdateRule(ctx context.Context, r alerting.Rule) (alerting.Rule, error)
}

type ruleUpdate struct {
	eng  ruleUpdater
	show ruleShow // renders a rejected edit
}

func (h ruleUpdate) post(c *fiber.Ctx) error {
	id, err := pathID(c, "alert rule")
	if err != nil {
		return err
	}
	stored, err := h.eng.Rule(c.UserContext(), id)
	if err != nil {
		return engineError(err, "alert rule "+c.Params("id"))
	}
	r, f, sel := h.show.form.parse(c)
	r.ID = id
	if f.OK() {
		updated, err := h.eng.UpdateRule(c.UserContext(), r)
		web.Audit(c, "alert.rule.update", stored.Name, describeRule(r), err)
		if err == nil {
			if web.WantsJSON(c) {
				return web.JSON(c, fiber.Map{"rule": updated})
			}
			web.Flash(c, "ok", "Rule "+updated.Name+" saved.")
			return web.SeeOther(c, views.RuleURL(id))
		}
		if isNotFound(err) {
			return engineError(err, "alert rule "+c.Params("id"))
		}
		if e := web.ConsoleStateError(err); e != nil {
			// Another console changed the rule since this form was shown
			// (or the state cannot be reached): the form keeps what was
			// typed, with why it was not saved.
			f.Err = e.Text + " " + e.Hint
			if web.WantsJSON(c) {
				return jsonFormError(c, e.Status, f)
			}
			return h.show.render(c, e.Status, stored, f, sel)
		}
		if !applyValidation(&f, err) {
			return engineError(err, "rule")
		}
	}
	if web.WantsJSON(c) {
		return jsonFormError(c, fiber.StatusUnprocessableEntity, f)
	}
	return h.show.render(c, fiber.StatusUnprocessableEntity, stored, f, sel)
}

package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/rules/:id: a rule's settings (the edit form for operators),
// its open alerts and its recent history. Notifications link here.

type ruleReader interface {
	Rule(ctx context.Context, id int64) (alerting.Rule, error)
	Alerts(ctx context.Context) ([]alerting.Alert, error)
	History(ctx context.Context, q alerting.HistoryQuery) ([]alerting.HistoryEntry, error)
}

type ruleShow struct {
	eng  ruleReader
	form ruleForm
}

func (h ruleShow) get(c *fiber.Ctx) error {
	id, err := pathID(c, "alert rule")
	if err != nil {
		return err
	}
	r, err := h.eng.Rule(c.UserContext(), id)
	if err != nil {
		return engineError(err, "alert rule "+c.Params("id"))
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"rule": r})
	}
	f, sel := formOf(r)
	return h.render(c, fiber.StatusOK, r, f, sel)
}

// render shows rule r with form f (the stored settings, or a rejected
// edit).
func (h ruleShow) render(c *fiber.Ctx, status int, r alerting.Rule, f templates.Form, sel map[int64]bool) error {
	ctx := c.UserContext()
	v, err := h.form.view(c, r, f, sel)
	if err != nil {
		return err
	}
	if alerts, err := h.eng.Alerts(ctx); err == nil {
		for _, a := range alerts {
			if a.RuleID == r.ID {
				v.Alerts = append(v.Alerts, a)
			}
		}
	}
	v.History, _ = h.eng.History(ctx, alerting.HistoryQuery{RuleID: r.ID, Limit: 10})
	return renderRule(c, status, r.Name, v)
}

package alerts

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/rules: every rule with its condition, scope, notifiers and
// open alerts; operators get enable/disable and delete buttons.

type ruleLister interface {
	Rules(ctx context.Context) ([]alerting.Rule, error)
	Notifiers(ctx context.Context) ([]alerting.Notifier, error)
	Alerts(ctx context.Context) ([]alerting.Alert, error)
}

type rulesList struct{ eng ruleLister }

func (h rulesList) get(c *fiber.Ctx) error {
	ctx := c.UserContext()
	rules, err := h.eng.Rules(ctx)
	if err != nil {
		return engineError(err, "rules")
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"rules": orEmpty(rules)})
	}
	v := views.RulesView{Rules: rules, Notifiers: map[int64]string{}, Open: map[int64]views.OpenCount{}}
	if ns, err := h.eng.Notifiers(ctx); err == nil {
		for _, n := range ns {
			v.Notifiers[n.ID] = n.Name
		}
	} else {
		v.Err = err.Error()
	}
	if alerts, err := h.eng.Alerts(ctx); err == nil {
		for _, a := range alerts {
			o := v.Open[a.RuleID]
			if a.State == alerting.StateFiring {
				o.Firing++
			} else {
				o.Pending++
			}
			v.Open[a.RuleID] = o
		}
	} else {
		v.Err = err.Error()
	}
	return web.Render(c, fiber.StatusOK, views.RulesPage(page(c, "Alert rules"), v))
}

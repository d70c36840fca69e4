package alerts

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts: the alerts pending or firing now, how the last evaluation
// went, and counts of rules and notifiers. The table refreshes itself
// (htmx fragment "alerts-open").

type openSource interface {
	Alerts(ctx context.Context) ([]alerting.Alert, error)
	Rules(ctx context.Context) ([]alerting.Rule, error)
	Notifiers(ctx context.Context) ([]alerting.Notifier, error)
	Status() alerting.EvaluatorStatus
}

type openAlerts struct {
	eng        openSource
	interval   time.Duration
	evaluating func() bool
}

func (h openAlerts) get(c *fiber.Ctx) error {
	ctx := c.UserContext()
	v := views.OpenView{Eval: views.Evaluation{Evaluating: h.evaluating(), Interval: h.interval, Status: h.eng.Status()}}
	alerts, err := h.eng.Alerts(ctx)
	if err != nil {
		v.Err = err.Error()
	}
	v.Alerts = alerts
	if rules, err := h.eng.Rules(ctx); err == nil {
		v.Rules = len(rules)
	} else if v.Err == "" {
		v.Err = err.Error()
	}
	if ns, err := h.eng.Notifiers(ctx); err == nil {
		v.Notifiers = len(ns)
	}
	if web.WantsJSON(c) {
		if err != nil {
			return engineError(err, "alerts")
		}
		return web.JSON(c, fiber.Map{"alerts": orEmpty(alerts), "evaluation": v.Eval})
	}
	if web.Fragment(c, "alerts-open") {
		return web.Render(c, fiber.StatusOK, views.OpenTable(v))
	}
	return web.Render(c, fiber.StatusOK, views.OpenPage(page(c, "Alerts"), v))
}

// orEmpty makes a nil list encode as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

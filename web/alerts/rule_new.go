package alerts

import (
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/rules/new: the empty rule form, with sensible defaults.

type ruleNew struct{ form ruleForm }

func (h ruleNew) get(c *fiber.Ctx) error {
	v, err := h.form.view(c, alerting.Rule{}, newRuleForm(), map[int64]bool{})
	if err != nil {
		return err
	}
	return renderRule(c, fiber.StatusOK, "New alert rule", v)
}

// renderRule renders the rule page (new or stored).
func renderRule(c *fiber.Ctx, status int, title string, v views.RuleView) error {
	return web.Render(c, status, views.RulePage(page(c, title, templates.Crumb{Label: "Rules", Href: "/alerts/rules"}), v))
}

package alerts

import (
	"context"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/rules/:id/enabled (enabled=1 or 0): enable or disable a
// rule. A disabled rule's alerts resolve at the next evaluation.

type ruleEnabler interface {
	Rule(ctx context.Context, id int64) (alerting.Rule, error)
	SetRuleEnabled(ctx context.Context, id int64, enabled bool) error
}

type ruleEnabled struct{ eng ruleEnabler }

func (h ruleEnabled) post(c *fiber.Ctx) error {
	id, err := pathID(c, "alert rule")
	if err != nil {
		return err
	}
	var on bool
	switch formValue(c, "enabled") {
	case "1", "true", "on":
		on = true
	case "0", "false", "off":
	default:
		return web.BadRequest("enabled must be 1 or 0")
	}
	r, err := h.eng.Rule(c.UserContext(), id)
	if err != nil {
		return engineError(err, "alert rule "+c.Params("id"))
	}
	action, word := "alert.rule.disable", "disabled"
	if on {
		action, word = "alert.rule.enable", "enabled"
	}
	err = h.eng.SetRuleEnabled(c.UserContext(), id, on)
	web.Audit(c, action, r.Name, "", err)
	if err != nil {
		return engineError(err, "alert rule "+r.Name)
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"id": id, "enabled": on})
	}
	note := "Rule " + r.Name + " " + word + "."
	if !on {
		note += " Its firing alerts resolve at the next evaluation."
	}
	web.Flash(c, "ok", note)
	return web.SeeOther(c, backTo(c, "/alerts/rules"))
}

// backTo is where a button's POST returns: the alert page it was pressed
// on (from the Referer), else def. Only a local /alerts path is followed.
func backTo(c *fiber.Ctx, def string) string {
	u, err := url.Parse(c.Get(fiber.HeaderReferer))
	if err != nil || u.Path == "" || (u.Host != "" && u.Host != c.Hostname()) {
		return def
	}
	if u.Path != "/alerts" && !strings.HasPrefix(u.Path, "/alerts/") || strings.Contains(u.Path, "//") {
		return def
	}
	p := u.EscapedPath()
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

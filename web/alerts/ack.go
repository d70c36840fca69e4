package alerts

import (
	"context"
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
)

// POST /alerts/ack (rule, subject, comment, back): acknowledge a firing
// alert. The rule's PagerDuty notifiers that were sent its trigger get an
// acknowledge event with the same dedup_key; the history and the audit log
// say who. The browser goes back to the page it came from (the open alerts
// or the overview).

type acknowledger interface {
	Acknowledge(ctx context.Context, ruleID int64, subject, by, comment string) error
}

type acknowledge struct{ eng acknowledger }

func (h acknowledge) post(c *fiber.Ctx) error {
	ruleID, err := strconv.ParseInt(c.FormValue("rule"), 10, 64)
	if err != nil || ruleID <= 0 {
		return web.BadRequest("rule must be a rule number")
	}
	subject, comment := formValue(c, "subject"), formValue(c, "comment")
	user := ""
	if u := web.CurrentUser(c); u != nil {
		user = u.Name
	}
	err = h.eng.Acknowledge(c.UserContext(), ruleID, subject, user, comment)
	web.Audit(c, "alert.acknowledge", subject, "rule="+strconv.FormatInt(ruleID, 10)+" comment="+strconv.Quote(comment), err)
	back := formBack(c, "/alerts")
	switch {
	case err == nil:
	case errors.Is(err, alerting.ErrNotFiring), isNotFound(err):
		if web.WantsJSON(c) {
			return c.Status(fiber.StatusConflict).JSON(fiber.Map{"error": "the alert is not firing (it may have resolved)"})
		}
		web.Flash(c, "warn", "Not acknowledged: the alert on "+subject+" is not firing any more.")
		return web.SeeOther(c, back)
	default:
		if ve, ok := asValidation(err); ok {
			return web.BadRequest(ve.Error())
		}
		return engineError(err, "alert")
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"acknowledged": true})
	}
	web.Flash(c, "ok", "Acknowledged the alert on "+subject+".")
	return web.SeeOther(c, back)
}

// formBack is the form's "back" field when it is a path of the console, def
// otherwise.
func formBack(c *fiber.Ctx, def string) string {
	b := formValue(c, "back")
	if b == "" || b[0] != '/' || len(b) > 1 && (b[1] == '/' || b[1] == '\\') || len(b) > 2000 {
		return def
	}
	for i := 0; i < len(b); i++ {
		if b[i] <= ' ' || b[i] >= 0x7f || b[i] == '\\' {
			return def
		}
	}
	return b
}

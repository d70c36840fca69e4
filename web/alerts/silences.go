package alerts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/silences, POST /alerts/silences: the silences, active ones
// first, and the form that adds one: a rule, a subject (group:billing), or
// both, for a while (30 min to 30 days) or until a time, with a comment.
// While a silence covers an alert its trigger is held back; if the alert
// still fires when the silence ends, the trigger goes out then. ?rule= and
// ?subject= fill the form in (the open alerts' "Silence" links).

type silenceReader interface {
	Silences(ctx context.Context, limit int) ([]alerting.Silence, error)
	Rules(ctx context.Context) ([]alerting.Rule, error)
}

type silencesList struct{ eng silenceReader }

// silenceDurations are the form's choices; "until" takes a time.
var silenceDurations = []templates.Option{
	{Value: "30m", Label: "30 minutes"}, {Value: "1h", Label: "1 hour"}, {Value: "2h", Label: "2 hours"},
	{Value: "4h", Label: "4 hours"}, {Value: "8h", Label: "8 hours"}, {Value: "24h", Label: "1 day"},
	{Value: "72h", Label: "3 days"}, {Value: "168h", Label: "1 week"}, {Value: "until", Label: "until a time…"},
}

func (h silencesList) get(c *fiber.Ctx) error {
	f := templates.NewForm("rule", strings.Clone(c.Query("rule")), "subject", strings.Clone(c.Query("subject")), "for", "2h")
	return h.render(c, fiber.StatusOK, f)
}

func (h silencesList) render(c *fiber.Ctx, status int, f templates.Form) error {
	ctx := c.UserContext()
	list, err := h.eng.Silences(ctx, 200)
	if err != nil {
		return engineError(err, "silences")
	}
	if web.WantsJSON(c) && status < 400 {
		return web.JSON(c, fiber.Map{"silences": orEmpty(list)})
	}
	v := views.SilencesView{Silences: list, Form: f, Durations: silenceDurations, Zone: web.Location(c).String(), Now: time.Now()}
	if rules, err := h.eng.Rules(ctx); err == nil {
		v.Rules = rules
	} else {
		v.Err = err.Error()
	}
	return web.Render(c, status, views.SilencesPage(page(c, "Silences"), v))
}

type silenceCreator interface {
	CreateSilence(ctx context.Context, x alerting.Silence) (alerting.Silence, error)
}

type silenceCreate struct {
	eng  silenceCreator
	list silencesList
}

func (h silenceCreate) post(c *fiber.Ctx) error {
	f := templates.NewForm()
	for _, k := range []string{"rule", "subject", "for", "until", "comment"} {
		f.Set(k, formValue(c, k))
	}
	x := alerting.Silence{Subject: f.Get("subject"), Comment: f.Get("comment")}
	if u := web.CurrentUser(c); u != nil {
		x.CreatedBy = u.Name
	}
	if r := f.Get("rule"); r != "" {
		id, err := strconv.ParseInt(r, 10, 64)
		if err != nil || id <= 0 {
			f.Fail("rule", "choose a rule from the list")
		}
		x.RuleID = id
	}
	switch d := f.Get("for"); d {
	case "until":
		t, err := parseLocalTime(f.Get("until"), web.Location(c))
		if err != nil {
			f.Fail("until", err.Error())
		}
		x.ExpiresAt = t
	default:
		dur, err := time.ParseDuration(d)
		if err != nil || dur <= 0 {
			f.Fail("for", "choose how long")
		}
		x.ExpiresAt = time.Now().Add(dur)
	}
	if f.OK() {
		created, err := h.eng.CreateSilence(c.UserContext(), x)
		web.Audit(c, "alert.silence.create", silenceTarget(x), fmt.Sprintf("expires=%s comment=%q", x.ExpiresAt.UTC().Format(time.RFC3339), x.Comment), err)
		if err == nil {
			if web.WantsJSON(c) {
				return c.Status(fiber.StatusCreated).JSON(fiber.Map{"silence": created})
			}
			web.Flash(c, "ok", "Silenced "+silenceTarget(created)+" until "+templates.TimeText(withZone(c), created.ExpiresAt)+".")
			return web.SeeOther(c, "/alerts/silences")
		}
		if ve, ok := asValidation(err); ok {
			for k, msg := range ve.Fields {
				if k == "expires" {
					k = "for"
					if f.Get("for") == "until" {
						k = "until"
					}
				}
				f.Fail(k, msg)
			}
		} else {
			return engineError(err, "silence")
		}
	}
	if web.WantsJSON(c) {
		return jsonFormError(c, fiber.StatusUnprocessableEntity, f)
	}
	return h.list.render(c, fiber.StatusUnprocessableEntity, f)
}

// silenceTarget says what a silence covers, for messages and the audit.
func silenceTarget(x alerting.Silence) string {
	switch {
	case x.RuleID != 0 && x.Subject != "":
		return fmt.Sprintf("rule %d on %s", x.RuleID, x.Subject)
	case x.RuleID != 0:
		return fmt.Sprintf("rule %d", x.RuleID)
	}
	return x.Subject
}

type silenceEnder interface {
	EndSilence(ctx context.Context, id int64, by string) error
}

type silenceEnd struct{ eng silenceEnder }

// POST /alerts/silences/:id/end: end a silence now; the triggers it held
// back go out at the next evaluation round.
func (h silenceEnd) post(c *fiber.Ctx) error {
	id, err := pathID(c, "silence")
	if err != nil {
		return err
	}
	user := ""
	if u := web.CurrentUser(c); u != nil {
		user = u.Name
	}
	err = h.eng.EndSilence(c.UserContext(), id, user)
	web.Audit(c, "alert.silence.end", strconv.FormatInt(id, 10), "", err)
	if err != nil {
		return engineError(err, "silence "+strconv.FormatInt(id, 10))
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"ended": true})
	}
	web.Flash(c, "ok", "Silence ended. Alerts it held back are notified at the next evaluation.")
	return web.SeeOther(c, "/alerts/silences")
}

// parseLocalTime reads a datetime-local value in the viewer's zone (or RFC
// 3339).
func parseLocalTime(s string, loc *time.Location) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("enter a date and time (%s)", loc)
}

// withZone is a render context with the viewer's zone, for texts built in
// handlers.
func withZone(c *fiber.Ctx) context.Context {
	return templates.WithRequest(c.UserContext(), &templates.Request{Loc: web.Location(c)})
}

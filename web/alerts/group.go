// Package alerts is the console's alerting section: open alerts, alert
// rules (list, create, edit, enable/disable, delete), the history of alert
// state changes, notifiers (PagerDuty Events API v2 and Alertmanager-style
// webhooks, with a "send test event" button) and the delivery log. It is a
// web.PageGroup over an *alerting.Service; the appliance adds it to the
// console with web.Config.Extra.
//
// One file per route. Every handler declares the narrow part of the
// alerting service it uses. Viewers may look at everything; operators and
// admins may change rules and notifiers. Every change is written to the
// audit log with web.Audit. Notifier secrets (PagerDuty routing keys,
// webhook tokens) are write-only: forms never echo them, pages show only the
// stored hint (••••9f3a), and audit entries say only whether one changed.
package alerts

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	"github.com/sluice-io/sluice/web"
)

// Options tune the alert pages.
type Options struct {
	// Interval is how often the rules are evaluated (shown on the pages).
	// Default 30s.
	Interval time.Duration
	// Evaluating reports whether this console evaluates the rules now.
	// Default: the console's IsLeader (the console doing the cluster's
	// background work evaluates).
	Evaluating func() bool
}

// NavOrder places "Alerts" after "Consumer groups" (40) in the main
// navigation.
const NavOrder = 50

// PageGroup returns the alert pages over eng, for web.Config.Extra. The
// pages only read and change what eng stores; evaluating the rules is the
// caller's job (the appliance runs eng.EvaluateNow on the console that does
// the background work).
func PageGroup(eng *alerting.Service, opts Options) web.PageGroup {
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	return web.PageGroup{
		Name: "alerts",
		Nav: []web.NavItem{{Label: "Alerts", Path: "/alerts", Role: web.RoleViewer, Order: NavOrder,
			Badge: func(ctx context.Context) (int, string) { return navBadge(ctx, eng) }}},
		Mount: func(r *web.Router) error {
			evaluating := opts.Evaluating
			if evaluating == nil {
				evaluating = r.Server().IsLeader
			}
			mount(r, eng, opts.Interval, evaluating)
			return nil
		},
		Overview:      func(ctx context.Context) templ.Component { return overviewPanel(ctx, eng) },
		OverviewOrder: 1, // what is firing comes first
		GroupStatus:   func() (map[string]templates.GroupHealth, time.Time, bool) { return groupStatuses(eng) },
		Events: func(ctx context.Context, subject string, since, until time.Time) ([]templates.ChartEvent, error) {
			return subjectEvents(ctx, eng, subject, since, until)
		},
	}
}

func mount(r *web.Router, eng *alerting.Service, interval time.Duration, evaluating func() bool) {
	r.Get("/alerts", web.RoleViewer, openAlerts{eng: eng, interval: interval, evaluating: evaluating}.get)

	r.Get("/alerts/rules", web.RoleViewer, rulesList{eng: eng}.get)
	form := ruleForm{eng: eng}
	r.Get("/alerts/rules/new", web.RoleOperator, ruleNew{form: form}.get)
	r.Post("/alerts/rules/preview", web.RoleOperator, rulePreview{eng: eng, form: form}.post)
	// The preview answers a POST; reloading it asks for the form again.
	r.Get("/alerts/rules/preview", web.RoleOperator, func(c *fiber.Ctx) error { return web.SeeOther(c, "/alerts/rules/new") })
	r.Post("/alerts/rules", web.RoleOperator, ruleCreate{eng: eng, form: form}.post)
	show := ruleShow{eng: eng, form: form}
	r.Get("/alerts/rules/:id", web.RoleViewer, show.get)
	r.Post("/alerts/rules/:id", web.RoleOperator, ruleUpdate{eng: eng, show: show}.post)
	r.Post("/alerts/rules/:id/enabled", web.RoleOperator, ruleEnabled{eng: eng}.post)
	r.Post("/alerts/rules/:id/delete", web.RoleOperator, ruleDelete{eng: eng}.post)

	r.Get("/alerts/history", web.RoleViewer, history{eng: eng}.get)

	nlist := notifiersList{eng: eng}
	r.Get("/alerts/notifiers", web.RoleViewer, nlist.get)
	r.Post("/alerts/notifiers", web.RoleOperator, notifierCreate{eng: eng, list: nlist}.post)
	nshow := notifierShow{eng: eng}
	r.Get("/alerts/notifiers/:id", web.RoleViewer, nshow.get)
	r.Post("/alerts/notifiers/:id", web.RoleOperator, notifierUpdate{eng: eng, show: nshow}.post)
	r.Post("/alerts/notifiers/:id/delete", web.RoleOperator, notifierDelete{eng: eng}.post)
	r.Post("/alerts/notifiers/:id/test", web.RoleOperator, notifierSendTest{eng: eng}.post)

	r.Get("/alerts/deliveries", web.RoleViewer, deliveries{eng: eng}.get)
	r.Post("/alerts/deliveries/:id/retry", web.RoleOperator, deliveryRetry{eng: eng}.post)

	r.Post("/alerts/ack", web.RoleOperator, acknowledge{eng: eng}.post)
	sl := silencesList{eng: eng}
	r.Get("/alerts/silences", web.RoleViewer, sl.get)
	r.Post("/alerts/silences", web.RoleOperator, silenceCreate{eng: eng, list: sl}.post)
	r.Post("/alerts/silences/:id/end", web.RoleOperator, silenceEnd{eng: eng}.post)
}

// ---- shared helpers ----

// page is the layout data of an alert page, with crumbs back to the
// section.
func page(c *fiber.Ctx, title string, crumbs ...templates.Crumb) templates.Page {
	if len(crumbs) > 0 {
		crumbs = append([]templates.Crumb{{Label: "Alerts", Href: "/alerts"}}, crumbs...)
	}
	return web.PageFor(c, title, crumbs...)
}

// pathID reads the :id path parameter.
func pathID(c *fiber.Ctx, what string) (int64, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, web.NotFound(what+" "+strings.Clone(c.Params("id")), "Pick one from the list.")
	}
	return id, nil
}

// queryID reads an optional numeric query parameter (0 when absent or
// malformed).
func queryID(c *fiber.Ctx, key string) int64 {
	id, err := strconv.ParseInt(c.Query(key), 10, 64)
	if err != nil || id < 0 {
		return 0
	}
	return id
}

// formValue is a trimmed copy of a form field (Fiber reuses its buffers).
func formValue(c *fiber.Ctx, key string) string {
	return strings.TrimSpace(strings.Clone(c.FormValue(key)))
}

// checked reports whether checkbox key was ticked.
func checked(c *fiber.Ctx, key string) bool {
	switch formValue(c, key) {
	case "1", "on", "true", "yes":
		return true
	}
	return false
}

// engineError turns an alerting error into an error page: not found, or
// the console database failing.
func engineError(err error, what string) error {
	if isNotFound(err) {
		return web.NotFound(what, "It may have been deleted. Pick one from the list.")
	}
	if e := web.ConsoleStateError(err); e != nil {
		return e
	}
	return &web.Error{Status: fiber.StatusInternalServerError, Title: "The alert store failed",
		Text: err.Error(), Hint: "The console database may be busy or full; the console log has the details.", Err: err}
}

// applyValidation copies an engine's field errors into the form; any other
// error becomes the form-wide error. It reports whether err was a
// validation error.
func applyValidation(f *templates.Form, err error) bool {
	if ve, ok := asValidation(err); ok {
		for k, msg := range ve.Fields {
			f.Fail(k, msg)
		}
		return true
	}
	f.Err = "Not saved: " + err.Error()
	return false
}

// ---- what each role sees ----

// notifierFor is n as the request's user may see it: a viewer sees the URL
// masked like a secret (webhook URLs often carry a token); operators, who
// edit it, see it whole.
func notifierFor(c *fiber.Ctx, n alerting.Notifier) alerting.Notifier {
	if !web.HasRole(c, web.RoleOperator) {
		n.URL = alerting.MaskURL(n.URL)
	}
	return n
}

func notifiersFor(c *fiber.Ctx, ns []alerting.Notifier) []alerting.Notifier {
	out := make([]alerting.Notifier, len(ns))
	for i, n := range ns {
		out[i] = notifierFor(c, n)
	}
	return out
}

// deliveriesFor is the delivery log as the request's user may see it: the
// receivers' answers only for admins (a receiver's body is whatever the
// target returned, which may be internal data).
func deliveriesFor(c *fiber.Ctx, ds []alerting.Delivery) []alerting.Delivery {
	if web.HasRole(c, web.RoleAdmin) {
		return ds
	}
	out := make([]alerting.Delivery, len(ds))
	for i, d := range ds {
		d.Response = ""
		out[i] = d
	}
	return out
}

// jsonFormError answers a rejected form as JSON.
func jsonFormError(c *fiber.Ctx, status int, f templates.Form) error {
	return c.Status(status).JSON(fiber.Map{"error": "invalid input", "fields": f.Errors, "detail": f.Err})
}

package alerts

import (
	"context"
	"time"

	"github.com/a-h/templ"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/alerts"
)

// What the alert pages give the console's own pages: the overview's panel
// of firing and pending alerts, the Alerts entry's badge, every group's
// Burrow status for the groups list, and the alert events of a group's
// lag chart. None of them is a route.

// overviewPanel is the alerts panel of the overview.
func overviewPanel(ctx context.Context, eng *alerting.Service) templ.Component {
	v := views.OverviewPanelView{}
	alerts, err := eng.Alerts(ctx)
	if err != nil {
		v.Err = err.Error()
	}
	v.Alerts = alerts
	if rules, err := eng.Rules(ctx); err == nil {
		v.Rules = len(rules)
	}
	return views.OverviewPanel(v)
}

// navBadge is the count on the Alerts entry: the firing alerts, red while
// one of them is unacknowledged.
func navBadge(ctx context.Context, eng *alerting.Service) (int, string) {
	firing, unacked, err := eng.OpenCounts(ctx)
	switch {
	case err != nil || firing == 0:
		return 0, ""
	case unacked > 0:
		return firing, "bad"
	}
	return firing, "warn"
}

func groupStatuses(eng *alerting.Service) (map[string]templates.GroupHealth, time.Time, bool) {
	m, at := eng.GroupStatuses()
	if m == nil {
		return nil, time.Time{}, false
	}
	out := make(map[string]templates.GroupHealth, len(m))
	for g, h := range m {
		out[g] = templates.GroupHealth{Status: h.Status.String(), Partitions: h.Partitions}
	}
	return out, at, true
}

// subjectEvents are the alerts fired, acknowledged and resolved about
// subject, as markers of its timeline.
func subjectEvents(ctx context.Context, eng *alerting.Service, subject string, since, until time.Time) ([]templates.ChartEvent, error) {
	hs, err := eng.SubjectEvents(ctx, subject, since, until)
	if err != nil {
		return nil, err
	}
	out := make([]templates.ChartEvent, 0, len(hs))
	for _, h := range hs {
		ev := templates.ChartEvent{At: h.At, Label: h.Summary, Href: views.RuleURL(h.RuleID)}
		switch h.Event {
		case alerting.EventFiring:
			ev.Kind = "fired"
			ev.Label = "Alert fired: " + h.Summary
		case alerting.EventResolved:
			ev.Kind = "resolved"
			ev.Label = "Alert resolved: " + h.Summary
		case alerting.EventAcknowledged:
			ev.Kind = "acknowledged"
		default:
			continue
		}
		out = append(out, ev)
	}
	return out, nil
}

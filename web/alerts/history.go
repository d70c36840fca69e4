package alerts

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	views "github.com/sluice-io/sluice/templates/alerts"
	"github.com/sluice-io/sluice/web"
)

// GET /alerts/history?rule=&subject=&before=: alert state changes, newest
// first, 100 a page.

type historyReader interface {
	History(ctx context.Context, q alerting.HistoryQuery) ([]alerting.HistoryEntry, error)
	Rules(ctx context.Context) ([]alerting.Rule, error)
}

type history struct{ eng historyReader }

const pageSize = 100

func (h history) get(c *fiber.Ctx) error {
	ctx := c.UserContext()
	q := alerting.HistoryQuery{RuleID: queryID(c, "rule"), Subject: c.Query("subject"), BeforeID: queryID(c, "before"), Limit: pageSize}
	q.Subject = strings.Clone(q.Subject) // Fiber reuses its buffers
	entries, err := h.eng.History(ctx, q)
	if err != nil {
		return engineError(err, "history")
	}
	if web.WantsJSON(c) {
		return web.JSON(c, fiber.Map{"history": orEmpty(entries)})
	}
	v := views.HistoryView{Entries: entries, RuleID: q.RuleID, Subject: q.Subject}
	if rules, err := h.eng.Rules(ctx); err == nil {
		v.Rules = rules
	} else {
		v.Err = err.Error()
	}
	if len(entries) == pageSize {
		vals := url.Values{"before": {strconv.FormatInt(entries[len(entries)-1].ID, 10)}}
		if q.RuleID != 0 {
			vals.Set("rule", strconv.FormatInt(q.RuleID, 10))
		}
		if q.Subject != "" {
			vals.Set("subject", q.Subject)
		}
		v.NextURL = "/alerts/history?" + vals.Encode()
	}
	return web.Render(c, fiber.StatusOK, views.HistoryPage(page(c, "Alert history"), v))
}

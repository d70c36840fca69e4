package web

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// GET /audit: the audit log, newest first, filtered by user, action (or
// action prefix such as "topic.") and text, paged by id.

type auditReader interface {
	Audit(ctx context.Context, f consoledb.AuditFilter) ([]consoledb.AuditEntry, bool, error)
}

type auditLog struct{ log auditReader }

func (h auditLog) get(c *fiber.Ctx) error {
	f := consoledb.AuditFilter{
		User:   strings.Clone(strings.TrimSpace(c.Query("user"))),
		Action: strings.Clone(strings.TrimSpace(c.Query("action"))),
		Search: strings.Clone(strings.TrimSpace(c.Query("q"))),
		Limit:  100,
	}
	if b, err := strconv.ParseInt(c.Query("before"), 10, 64); err == nil && b > 0 {
		f.BeforeID = b
	}
	entries, more, err := h.log.Audit(requestCtx(c), f)
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		return JSON(c, entries)
	}
	v := templates.AuditView{Entries: entries, Filter: f}
	if more && len(entries) > 0 {
		q := url.Values{}
		for k, val := range map[string]string{"user": f.User, "action": f.Action, "q": f.Search} {
			if val != "" {
				q.Set(k, val)
			}
		}
		q.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		v.NextURL = "/audit?" + q.Encode()
	}
	return Render(c, fiber.StatusOK, templates.AuditPage(PageFor(c, "Audit log"), v))
}

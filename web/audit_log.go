package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/safecsv"
	"github.com/sluice-io/sluice/templates"
)

// GET /audit: the audit log, newest first, filtered by user, action (any
// part of it: "session" finds session.login, "topic." every topic change)
// and text, paged by id. ?as=csv or ?as=json downloads the entries the
// filter selects (the newest 10,000 at most).

type auditReader interface {
	Audit(ctx context.Context, f consoledb.AuditFilter) ([]consoledb.AuditEntry, bool, error)
}

type auditLog struct{ log auditReader }

func (h auditLog) get(c *fiber.Ctx) error {
	f := consoledb.AuditFilter{
		User:       strings.Clone(strings.TrimSpace(c.Query("user"))),
		ActionLike: strings.ToLower(strings.TrimSpace(c.Query("action"))),
		Search:     strings.Clone(strings.TrimSpace(c.Query("q"))),
		Limit:      100,
	}
	if b, err := strconv.ParseInt(c.Query("before"), 10, 64); err == nil && b > 0 {
		f.BeforeID = b
	}
	if as := c.Query("as"); as != "" {
		return h.export(c, f, as)
	}
	entries, more, err := h.log.Audit(requestCtx(c), f)
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		return JSON(c, fiber.Map{"entries": auditEntriesJSON(entries), "more": more})
	}
	v := templates.AuditView{Entries: entries, Filter: f}
	filter := func() url.Values {
		q := url.Values{}
		for k, val := range map[string]string{"user": f.User, "action": f.ActionLike, "q": f.Search} {
			if val != "" {
				q.Set(k, val)
			}
		}
		return q
	}
	if more && len(entries) > 0 {
		q := filter()
		q.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		v.NextURL = "/audit?" + q.Encode()
	}
	if len(entries) > 0 {
		q := filter()
		q.Set("as", "csv")
		v.ExportCSV = "/audit?" + q.Encode()
		q.Set("as", "json")
		v.ExportJSON = "/audit?" + q.Encode()
	}
	return Render(c, fiber.StatusOK, templates.AuditPage(PageFor(c, "Audit log"), v))
}

// maxAuditExport bounds the entries one export holds.
const maxAuditExport = 10_000

// export writes the entries f selects, newest first, as CSV or JSON.
func (h auditLog) export(c *fiber.Ctx, f consoledb.AuditFilter, as string) error {
	if as != "csv" && as != "json" {
		return BadRequest("as must be csv or json")
	}
	f.BeforeID, f.Limit = 0, 1000
	var all []consoledb.AuditEntry
	for len(all) < maxAuditExport {
		page, more, err := h.log.Audit(requestCtx(c), f)
		if err != nil {
			return err
		}
		all = append(all, page...)
		if !more || len(page) == 0 {
			break
		}
		f.BeforeID = page[len(page)-1].ID
	}
	if len(all) > maxAuditExport {
		all = all[:maxAuditExport]
	}
	AuditAccess(c, "audit.export", "", fmt.Sprintf("as=%s entries=%d user=%q action=%q q=%q", as, len(all), f.User, f.ActionLike, f.Search))
	stamp := time.Now().UTC().Format("20060102-150405")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="sluice-audit-`+stamp+"."+as+`"`)
	if as == "json" {
		out := auditEntriesJSON(all)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		enc := json.NewEncoder(c.Response().BodyWriter())
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	w := safecsv.NewWriter(c.Response().BodyWriter())
	w.Write([]string{"id", "at", "user", "action", "target", "detail", "remote_addr", "outcome"})
	for _, e := range all {
		w.Write([]string{strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), e.User, e.Action, e.Target, e.Detail, e.RemoteAddr, e.Outcome})
	}
	return w.Flush()
}

// auditJSON is an audit entry in the export (snake_case, as every JSON
// answer of the console).
type auditJSON struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	User       string    `json:"user"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	Detail     string    `json:"detail"`
	RemoteAddr string    `json:"remote_addr"`
	Outcome    string    `json:"outcome"`
}

func auditEntriesJSON(es []consoledb.AuditEntry) []auditJSON {
	out := make([]auditJSON, 0, len(es))
	for _, e := range es {
		out = append(out, auditJSON{ID: e.ID, At: e.At.UTC(), User: e.User, Action: e.Action, Target: e.Target, Detail: e.Detail, RemoteAddr: e.RemoteAddr, Outcome: e.Outcome})
	}
	return out
}

package web

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
)

// Audit records a change made by the request's user: action (e.g.
// "topic.create"), target (the topic name), detail (parameters) and the
// outcome (err nil means ok). Call it after every change, successful or not.
// A failure to write the audit log is logged, not returned: the change has
// already happened.
func Audit(c *fiber.Ctx, action, target, detail string, err error) {
	s := serverOf(c)
	if s == nil {
		return
	}
	s.audit(requestCtx(c), requestUser(c), ClientIP(c), action, target, detail, err)
}

// AuditAccess records that the request's user read data that may be
// personal (records browsed, searched, exported or tailed): a lighter
// entry than a change, action "access.<what>", written to the audit log
// but not to the service log, and not at all when
// console.audit.access.enable is false.
func AuditAccess(c *fiber.Ctx, what, target, detail string) {
	s := serverOf(c)
	if s == nil || s.cfg.DisableAccessAudit {
		return
	}
	e := consoledb.AuditEntry{At: time.Now(), User: requestUser(c), Action: "access." + what, Target: target, Detail: detail, RemoteAddr: ClientIP(c)}
	s.writeAudit(requestCtx(c), e)
}

func requestUser(c *fiber.Ctx) string {
	if u := CurrentUser(c); u != nil {
		return u.Name
	}
	return "(anonymous)"
}

func (s *Server) audit(ctx context.Context, user, addr, action, target, detail string, err error) {
	e := consoledb.AuditEntry{At: time.Now(), User: user, Action: action, Target: target, Detail: detail, RemoteAddr: addr}
	if err != nil {
		e.Outcome = err.Error()
	}
	e.Bound() // what reaches the service log is bounded too
	s.writeAudit(ctx, e)
	s.log.Info("console change", "user", e.User, "action", e.Action, "target", e.Target, "from", e.RemoteAddr, "ok", err == nil)
}

func (s *Server) writeAudit(ctx context.Context, e consoledb.AuditEntry) {
	e.Bound()
	if ctx.Err() != nil {
		// The request timed out; the record still matters.
		c2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = c2
	}
	if _, werr := s.store.AppendAudit(ctx, e); werr != nil {
		s.log.Error("audit log write failed", "action", e.Action, "target", e.Target, "user", e.User, "err", werr)
	}
}

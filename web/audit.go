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
	user := "(anonymous)"
	if u := CurrentUser(c); u != nil {
		user = u.Name
	}
	s.audit(requestCtx(c), user, c.IP(), action, target, detail, err)
}

func (s *Server) audit(ctx context.Context, user, addr, action, target, detail string, err error) {
	e := consoledb.AuditEntry{At: time.Now(), User: user, Action: action, Target: target, Detail: detail, RemoteAddr: addr}
	if err != nil {
		e.Outcome = err.Error()
	}
	if ctx.Err() != nil {
		// The request timed out; the record still matters.
		c2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = c2
	}
	if _, werr := s.store.AppendAudit(ctx, e); werr != nil {
		s.log.Error("audit log write failed", "action", action, "target", target, "user", user, "err", werr)
	}
	s.log.Info("console change", "user", user, "action", action, "target", target, "from", addr, "ok", err == nil)
}

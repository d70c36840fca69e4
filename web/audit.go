package web

import (
	"context"
	"strconv"
	"sync"
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

// Refusals that cost the client nothing — a form without a valid CSRF token
// from someone not signed in, a sign-in refused while its backoff lasts —
// would let anyone fill the audit log and the service log as fast as they
// can send requests. Their entries are throttled: at most noisePerAddr a
// minute per client address and noiseTotal a minute in all; the next entry
// recorded says how many were left out.
const (
	noisePerAddr = 10
	noiseTotal   = 300
)

type noiseGate struct {
	mu      sync.Mutex
	window  time.Time      // start of the current minute. Lock mu.
	total   int            // entries let through this minute. Lock mu.
	perAddr map[string]int // entries let through this minute, per address (at most noiseTotal keys). Lock mu.
	dropped int64          // entries left out since the last one let through. Lock mu.
	now     func() time.Time
}

func newNoiseGate() *noiseGate { return &noiseGate{perAddr: map[string]int{}, now: time.Now} }

// allow reports whether an entry from addr is recorded now, and how many
// were left out before it.
func (g *noiseGate) allow(addr string) (bool, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if now.Sub(g.window) >= time.Minute {
		g.window, g.total = now, 0
		clear(g.perAddr)
	}
	if g.total >= noiseTotal || g.perAddr[addr] >= noisePerAddr {
		g.dropped++
		return false, 0
	}
	g.total++
	g.perAddr[addr]++
	d := g.dropped
	g.dropped = 0
	return true, d
}

// auditNoise records a refusal that may be part of a flood (see noiseGate),
// as user.
func auditNoise(c *fiber.Ctx, user, action, target, detail string, err error) {
	s := serverOf(c)
	if s == nil {
		return
	}
	addr := ClientIP(c)
	ok, dropped := s.noise.allow(addr)
	if !ok {
		return
	}
	if dropped > 0 {
		detail += " (" + strconv.FormatInt(dropped, 10) + " similar refusals left out of the log before this one)"
	}
	s.audit(requestCtx(c), user, addr, action, target, detail, err)
}

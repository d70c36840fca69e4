package web

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/compress"
)

const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// routes builds the middleware chain and every route. Public routes (sign
// in, setup, assets, health, metrics) are registered on the app; the rest
// through a Router, which checks the session and role.
func (s *Server) routes() error {
	if err := s.buildNav(); err != nil {
		return err
	}
	app := s.app
	if s.cfg.ObserveHTTP != nil {
		app.Use(s.observeHTTP)
	}
	app.Use(s.recoverPanic)
	app.Use(s.securityHeaders)
	app.Use(compress.New(compress.Config{
		Level: compress.LevelBestSpeed,
		Next: func(c *fiber.Ctx) bool {
			p := c.Path()
			return strings.HasPrefix(p, "/static/") || strings.HasSuffix(p, "/tail") || p == s.cfg.MetricsPath
		},
	}))
	app.Get("/healthz", s.healthz)
	app.Get("/static/:name", serveAsset)
	if s.cfg.Metrics != nil {
		app.Get(s.cfg.MetricsPath, adaptor.HTTPHandler(s.cfg.Metrics))
	}
	app.Use(s.session)
	app.Use(s.checkCSRF)

	login := &loginHandler{users: s.store, limiter: s.limiter, admins: s.store}
	app.Get("/login", login.get)
	app.Post("/login", login.post)
	app.Post("/logout", logout{sessions: s.store}.post)
	setup := &setupHandler{s: s, admins: s.store}
	app.Get("/setup", setup.get)
	app.Post("/setup", setup.post)

	r := &Router{s: s, r: app}
	r.Post("/theme", RoleViewer, s.setTheme)
	r.Get("/nav/badges", RoleViewer, navBadges)
	r.Get("/", RoleViewer, overviewHandler{kc: s.kc, lag: s.samples, brokers: s.store, traffic: s.samples,
		panels: s.overviewPanels(), status: s.groupStatus()}.get)
	r.Get("/brokers", RoleViewer, brokersHandler{kc: s.kc, known: s.store}.get)
	r.Get("/brokers/:id", RoleViewer, brokerDetail{kc: s.kc}.get)
	r.Post("/brokers/:id/configs", RoleOperator, brokerConfigs{kc: s.kc}.post)
	r.Post("/brokers/:id/forget", RoleAdmin, brokerForget{known: s.store}.post)

	r.Get("/topics", RoleViewer, topicsList{kc: s.kc}.get)
	create := topicCreate{kc: s.kc}
	r.Get("/topics/new", RoleOperator, create.get)
	r.Post("/topics", RoleOperator, create.post)
	show := topicShow{kc: s.kc, lag: s.samples, schemas: topicSchemas{rd: s.kc, dec: s.cfg.Decoder, subjects: s.cfg.SchemaSubjects}}
	r.Get("/topics/:name", RoleViewer, show.get)
	r.Post("/topics/:name/configs", RoleOperator, topicConfigs{kc: s.kc, show: show}.post)
	r.Get("/topics/:name/configs", RoleViewer, topicConfigs{kc: s.kc, show: show}.get)
	r.Post("/topics/:name/partitions", RoleOperator, topicPartitions{kc: s.kc, show: show}.post)
	r.Post("/topics/:name/delete", RoleOperator, topicDelete{kc: s.kc, show: show}.post)
	r.Post("/topics/:name/purge", RoleOperator, topicPurge{kc: s.kc, show: show}.post)
	r.Get("/topics/:name/elect", RoleOperator, topicElect{kc: s.kc}.get)
	r.Post("/topics/:name/elect", RoleOperator, topicElect{kc: s.kc}.post)

	browse := messagesBrowse{kc: s.kc, dec: s.cfg.Decoder}
	r.Get("/topics/:name/messages", RoleViewer, browse.get)
	r.Post("/topics/:name/messages", RoleOperator, messagesProduce{kc: s.kc, browse: browse}.post)
	r.Get("/topics/:name/messages/export", RoleViewer, messagesExport{kc: s.kc, dec: s.cfg.Decoder}.get)
	r.Get("/topics/:name/messages/tail", RoleViewer, messagesTail{kc: s.kc, base: s.ctx, dec: s.cfg.Decoder}.get)

	r.Get("/groups", RoleViewer, groupsList{lag: s.kc, trends: s.store, status: s.groupStatus()}.get)
	gshow := groupShow{kc: s.kc, history: s.store, interval: s.cfg.LagSampleInterval, rates: s.samples, audit: s.store,
		events: s.timelineEvents, status: s.groupStatus()}
	r.Get("/groups/:name", RoleViewer, gshow.get)
	r.Post("/groups/:name/reset", RoleOperator, groupReset{kc: s.kc, show: gshow}.post)
	gdel := groupDelete{kc: s.kc, show: gshow}
	r.Post("/groups/:name/delete", RoleOperator, gdel.deleteGroup)
	r.Post("/groups/:name/offsets/delete", RoleOperator, gdel.deleteOffsets)

	r.Get("/transactions", RoleViewer, transactionsList{kc: s.kc}.get)
	r.Get("/transactions/:id/abort", RoleOperator, transactionAbort{kc: s.kc}.get)
	r.Post("/transactions/:id/abort", RoleOperator, transactionAbort{kc: s.kc}.post)

	users := usersHandler{users: s.store}
	r.Get("/users", RoleAdmin, users.get)
	r.Post("/users", RoleAdmin, users.post)
	r.Post("/users/:id/role", RoleAdmin, users.setRole)
	r.Post("/users/:id/password", RoleAdmin, users.setPassword)
	r.Post("/users/:id/delete", RoleAdmin, users.remove)
	account := accountHandler{users: s.store}
	r.Get("/account", RoleViewer, account.get)
	r.Post("/account/password", RoleViewer, account.post)
	r.Get("/audit", RoleAdmin, auditLog{log: s.store}.get)
	r.Get("/console/status", RoleAdmin, consoleStatus{s: s}.get)

	for _, g := range s.cfg.Extra {
		if g.Mount == nil {
			continue
		}
		if err := g.Mount(r); err != nil {
			return fmt.Errorf("page group %s: %w", g.Name, err)
		}
	}
	app.Use(func(c *fiber.Ctx) error { return fiber.ErrNotFound })
	return nil
}

func (s *Server) securityHeaders(c *fiber.Ctx) error {
	h := &c.Response().Header
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	if s.tls != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	return c.Next()
}

func (s *Server) recoverPanic(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "method", c.Method(), "path", c.Path(), "panic", fmt.Sprint(r))
			err = &Error{Status: fiber.StatusInternalServerError, Title: "Something went wrong", Text: "The console hit an internal error.", Hint: "The console log has the details."}
		}
	}()
	return c.Next()
}

// healthz answers 200 when the console's database answers; it does not
// depend on the cluster, so a load balancer keeps the console reachable to
// show that the cluster is down.
func (s *Server) healthz(c *fiber.Ctx) error {
	ctx, cancel := contextWithTimeout(s, 2*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		return c.Status(fiber.StatusServiceUnavailable).SendString("console database: " + err.Error())
	}
	return c.SendString("ok")
}

// PathParam returns the path parameter name, URL-decoded (group names and
// schema subjects may hold any character; links escape them with
// url.PathEscape). Page groups use it too.
func PathParam(c *fiber.Ctx, name string) (string, error) {
	v, err := url.PathUnescape(c.Params(name))
	if err != nil {
		return "", BadRequest("malformed " + name + " in the address")
	}
	return strings.Clone(v), nil
}

func contextWithTimeout(s *Server, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, d)
}

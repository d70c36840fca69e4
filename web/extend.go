package web

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/templates"
)

// Role is what a user may do; see consoledb.Role.
type Role = consoledb.Role

// The roles, least to most privileged.
const (
	RoleViewer   = consoledb.RoleViewer
	RoleOperator = consoledb.RoleOperator
	RoleAdmin    = consoledb.RoleAdmin
)

// PageGroup is a set of pages added to the console by another package, for
// example alert rules or migration comparisons. The appliance passes them in
// Config.Extra:
//
//	web.PageGroup{
//		Name: "alerts",
//		Nav:  []web.NavItem{{Label: "Alerts", Path: "/alerts", Role: web.RoleViewer, Order: 50}},
//		Mount: func(r *web.Router) error {
//			h := &alertsHandler{rules: rules}
//			r.Get("/alerts", web.RoleViewer, h.list)
//			r.Post("/alerts", web.RoleOperator, h.create)
//			return nil
//		},
//		Run: func(ctx context.Context, s *web.Server) error { ... }, // optional
//	}
//
// Routes registered through the Router get the same session, role check,
// CSRF check and error pages as the built-in ones.
type PageGroup struct {
	// Name identifies the group in logs.
	Name string
	// Nav are entries for the layout's main navigation.
	Nav []NavItem
	// Mount registers the group's routes.
	Mount func(r *Router) error
	// Run, when set, is the group's background work. It runs from Start
	// until Close cancels ctx; Close waits for it to return. Check
	// s.IsLeader() before doing cluster-wide work.
	Run func(ctx context.Context, s *Server) error

	// Overview, when set, is the group's panel on the overview, the
	// incident screen (alerts firing, comparisons not ready). It is called
	// when the overview renders and at each of its refreshes, with the
	// request's context (its render context carries the viewer's zone and
	// role), so it must answer quickly.
	Overview func(ctx context.Context) templ.Component
	// OverviewOrder places the panel among the others (ascending; default
	// the group's first nav entry's Order).
	OverviewOrder int
	// GroupStatus, when set, reports every consumer group's health as the
	// group evaluates it (the alert pages' Burrow status), for the consumer
	// groups list; ok false when it has none (a console that does not
	// evaluate).
	GroupStatus func() (statuses map[string]templates.GroupHealth, at time.Time, ok bool)
	// Events, when set, returns the markers of a subject's timeline
	// ("group:billing") between since and until, for the lag chart: alerts
	// fired, acknowledged and resolved.
	Events func(ctx context.Context, subject string, since, until time.Time) ([]templates.ChartEvent, error)
}

// NavItem is an entry of the main navigation. It is shown to users whose
// role includes Role, ordered by Order (built-in entries use 10..40 for the
// cluster pages and 90..95 for administration), and marked current on pages
// whose path starts with Path (or equals "/" for the overview).
type NavItem struct {
	Label string
	Path  string
	Role  Role
	Order int
	// Badge, when set, is a count shown beside the entry and its colour
	// (bad, warn, info; 0 hides it), e.g. the firing alerts. It is called
	// on every page and every 15 s by the page's badge refresh, so it must
	// answer from memory or a quick query.
	Badge func(ctx context.Context) (n int, kind string)
}

func builtinNav() []NavItem {
	return []NavItem{
		{Label: "Overview", Path: "/", Role: RoleViewer, Order: 10},
		{Label: "Brokers", Path: "/brokers", Role: RoleViewer, Order: 20},
		{Label: "Topics", Path: "/topics", Role: RoleViewer, Order: 30},
		{Label: "Consumer groups", Path: "/groups", Role: RoleViewer, Order: 40},
		{Label: "Transactions", Path: "/transactions", Role: RoleViewer, Order: 45},
		{Label: "Users", Path: "/users", Role: RoleAdmin, Order: 90},
		{Label: "Audit log", Path: "/audit", Role: RoleAdmin, Order: 95},
	}
}

// consoleStatusNav is the status page's nav entry, where the console's
// state is replicated.
var consoleStatusNav = NavItem{Label: "Console status", Path: "/console/status", Role: RoleAdmin, Order: 96}

// Router registers routes that need a signed-in user with a role. POST
// routes are also CSRF-checked (every unsafe method is, app-wide).
type Router struct {
	s      *Server
	r      fiber.Router
	prefix string
}

// Server is the console the routes belong to: its database, cluster client
// and logger.
func (r *Router) Server() *Server { return r.s }

// Get registers a GET (and HEAD) route allowed to role need and above.
func (r *Router) Get(path string, need Role, h fiber.Handler) {
	r.r.Get(path, r.s.requireRole(need), h)
}

// Post registers a POST route allowed to role need and above.
func (r *Router) Post(path string, need Role, h fiber.Handler) {
	r.r.Post(path, r.s.requireRole(need), h)
}

// Group returns a router for paths under prefix.
func (r *Router) Group(prefix string) *Router {
	return &Router{s: r.s, r: r.r.Group(prefix), prefix: r.prefix + prefix}
}

func (s *Server) buildNav() error {
	nav := builtinNav()
	if s.cfg.ReplicaStatus != nil {
		nav = append(nav, consoleStatusNav)
	}
	seen := map[string]bool{}
	for _, n := range nav {
		seen[n.Path] = true
	}
	for _, g := range s.cfg.Extra {
		for _, n := range g.Nav {
			if n.Label == "" || !strings.HasPrefix(n.Path, "/") {
				return fmt.Errorf("page group %s: nav entry %q needs a label and a path starting with /", g.Name, n.Label)
			}
			if seen[n.Path] {
				return fmt.Errorf("page group %s: nav path %s is taken", g.Name, n.Path)
			}
			seen[n.Path] = true
			if n.Role == "" {
				n.Role = RoleViewer
			}
			if n.Order == 0 {
				n.Order = 50
			}
			nav = append(nav, n)
		}
	}
	sort.SliceStable(nav, func(i, j int) bool { return nav[i].Order < nav[j].Order })
	s.nav = nav
	return nil
}

// overviewPanels are the page groups' overview panels, in order.
func (s *Server) overviewPanels() []overviewPanel {
	var out []overviewPanel
	for _, g := range s.cfg.Extra {
		if g.Overview == nil {
			continue
		}
		order := g.OverviewOrder
		if order == 0 && len(g.Nav) > 0 {
			order = g.Nav[0].Order
		}
		out = append(out, overviewPanel{order: order, render: g.Overview})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

// groupStatus is the first page group's GroupStatus, or nil.
func (s *Server) groupStatus() func() (map[string]templates.GroupHealth, time.Time, bool) {
	for _, g := range s.cfg.Extra {
		if g.GroupStatus != nil {
			return g.GroupStatus
		}
	}
	return nil
}

// timelineEvents asks every page group for the markers of subject's
// timeline, oldest first.
func (s *Server) timelineEvents(ctx context.Context, subject string, since, until time.Time) []templates.ChartEvent {
	var out []templates.ChartEvent
	for _, g := range s.cfg.Extra {
		if g.Events == nil {
			continue
		}
		evs, err := g.Events(ctx, subject, since, until)
		if err != nil {
			s.log.Warn("timeline events", "group", g.Name, "subject", subject, "err", err)
			continue
		}
		out = append(out, evs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Package comparisons is the console's pages for migration comparisons
// (package migration): prove that a new topic (ORDERNEW) carries the same
// records as the old one (ORDER) before cutting over.
//
// The pages are a web.PageGroup the appliance passes in web.Config.Extra:
//
//	GET  /comparisons                 list: state, verdict, counters (viewer)
//	GET  /comparisons/new             create form (operator)
//	POST /comparisons                 create (operator)
//	POST /comparisons/preview         the form again, with its first pairs (operator)
//	GET  /comparisons/:id             detail: verdict, live counters, skew, differences (viewer)
//	GET  /comparisons/:id/export      differences as JSON or CSV (viewer)
//	POST /comparisons/:id/pause       (operator)
//	POST /comparisons/:id/resume      (operator)
//	POST /comparisons/:id/restart     (operator)
//	GET  /comparisons/:id/delete      confirmation (operator)
//	POST /comparisons/:id/delete      (operator)
//
// One file per route; each handler declares the narrow interface of the
// engine it uses, and Engine is their union (a *migration.Manager). Every
// change is written to the audit log with web.Audit, successful or not.
package comparisons

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/migration"
	views "github.com/sluice-io/sluice/templates/comparisons"
	"github.com/sluice-io/sluice/web"
)

// Engine is what the pages need of the comparison engine; a
// *migration.Manager is one.
type Engine interface {
	Create(ctx context.Context, name string, spec migration.Spec, createdBy string) (int64, error)
	Preview(ctx context.Context, spec migration.Spec, n int) (migration.PreviewResult, error)
	List(ctx context.Context) ([]migration.Status, error)
	Get(ctx context.Context, id int64) (migration.Status, error)
	Differences(ctx context.Context, id int64, q migration.DiffQuery) ([]migration.Difference, int64, error)
	Export(ctx context.Context, id int64, kind migration.Kind, format string, w io.Writer) error
	// The changes take base, the comparison's version the operator's page
	// showed (0: no check); one based on a replaced version is refused.
	Update(ctx context.Context, id int64, name string, spec migration.Spec, base int64) error
	DifferingPaths(ctx context.Context, id int64, limit int) ([]migration.PathCount, int, error)
	Pause(ctx context.Context, id, base int64) error
	Resume(ctx context.Context, id, base int64) error
	Restart(ctx context.Context, id, base int64) error
	Delete(ctx context.Context, id, base int64) error
}

var _ Engine = (*migration.Manager)(nil)

// Options tune the pages. The zero value is usable.
type Options struct {
	// NavOrder places "Comparisons" in the main navigation (default 60:
	// after Consumer groups 40 and Alerts 50, before Users 90).
	NavOrder int
	// PreviewPairs is how many pairs the create form's preview shows
	// (default 20, at most 1000).
	PreviewPairs int
	// PerPage is the differences shown per page (default 20, at most 200).
	PerPage int
	// Poll is how often the detail page refreshes the live numbers of a
	// running comparison, and the list while one runs (default 2s on the
	// detail page; the list uses at least 5s).
	Poll time.Duration

	// Manager configures the engine that PageGroup builds when it is given
	// no Engine: a migration.Manager over the console's own database, so
	// the caller needs no database handle before web.New. Brokers is
	// required then; Logger defaults to the console's.
	Manager migration.ManagerOptions
	// OnManager, when set, receives the Manager that PageGroup built (at
	// mount, inside web.New): register migration.NewCollector(m) and hand
	// m.Statuses to alert rules there.
	OnManager func(m *migration.Manager)
}

func (o *Options) defaults() {
	if o.NavOrder == 0 {
		o.NavOrder = 60
	}
	if o.PreviewPairs <= 0 {
		o.PreviewPairs = 20
	}
	o.PreviewPairs = min(o.PreviewPairs, 1000)
	if o.PerPage <= 0 {
		o.PerPage = 20
	}
	o.PerPage = min(o.PerPage, 200)
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
}

// PageGroup returns the comparisons pages for web.Config.Extra.
//
// With an Engine (usually a *migration.Manager over the console's
// database), the caller owns it: Start it before serving and Close it after
// the console. With eng nil, the group owns one: Mount opens the migration
// store in the console's database (r.Server().DB()) and builds a
// migration.Manager with opts.Manager, passing it to opts.OnManager; Run
// starts it once this console does the cluster's background work
// (web.Server.IsLeader) and closes it when the console closes.
func PageGroup(eng Engine, opts Options) web.PageGroup {
	opts.defaults()
	if m, ok := eng.(*migration.Manager); ok && m == nil {
		eng = nil
	}
	g := &group{eng: eng, opts: opts}
	pg := web.PageGroup{
		Name:          "comparisons",
		Nav:           []web.NavItem{{Label: "Comparisons", Path: "/comparisons", Role: web.RoleViewer, Order: opts.NavOrder}},
		Mount:         g.mount,
		Overview:      g.overview,
		OverviewOrder: 2, // after the alerts
	}
	if eng == nil {
		pg.Run = g.run
	}
	return pg
}

type group struct {
	eng   Engine
	opts  Options
	owned *migration.Manager // built by mount when no Engine was given
}

// topicLister lists the cluster's topics for the form (the console's
// cluster client).
type topicLister interface {
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
}

func (g *group) mount(r *web.Router) error {
	s := r.Server()
	if g.eng == nil {
		mo := g.opts.Manager
		if len(mo.Brokers) == 0 {
			return errors.New("comparisons: no Engine and no Options.Manager.Brokers to build one")
		}
		if mo.Logger == nil {
			mo.Logger = s.Logger().With("component", "migration")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		store, err := migration.OpenStore(ctx, s.DB())
		if err != nil {
			return fmt.Errorf("comparisons: %w", err)
		}
		g.owned = migration.NewManager(store, mo)
		g.eng = g.owned
		if g.opts.OnManager != nil {
			g.opts.OnManager(g.owned)
		}
	}
	var topics topicLister
	if kc := s.Kafka(); kc != nil {
		topics = kc
	}
	show := detailHandler{eng: g.eng, perPage: g.opts.PerPage, poll: g.opts.Poll}
	form := formHandler{eng: g.eng, topics: topics, previewN: g.opts.PreviewPairs}

	r.Get("/comparisons", web.RoleViewer, listHandler{eng: g.eng, poll: max(g.opts.Poll, 5*time.Second)}.get)
	r.Get("/comparisons/new", web.RoleOperator, form.get)
	r.Post("/comparisons", web.RoleOperator, form.create)
	r.Post("/comparisons/preview", web.RoleOperator, form.preview)
	// The preview answers a POST; reloading it asks for the form again.
	r.Get("/comparisons/preview", web.RoleOperator, func(c *fiber.Ctx) error { return web.SeeOther(c, "/comparisons/new") })
	r.Get("/comparisons/:id", web.RoleViewer, show.get)
	edit := editHandler{form: form, eng: g.eng}
	r.Get("/comparisons/:id/edit", web.RoleOperator, edit.get)
	r.Post("/comparisons/:id/edit", web.RoleOperator, edit.post)
	r.Post("/comparisons/:id/ignore", web.RoleOperator, ignoreHandler{eng: g.eng}.post)
	r.Get("/comparisons/:id/export", web.RoleViewer, exportHandler{eng: g.eng}.get)
	r.Post("/comparisons/:id/pause", web.RoleOperator, pauseHandler{eng: g.eng}.post)
	r.Post("/comparisons/:id/resume", web.RoleOperator, resumeHandler{eng: g.eng}.post)
	r.Post("/comparisons/:id/restart", web.RoleOperator, restartHandler{eng: g.eng}.post)
	del := deleteHandler{eng: g.eng}
	r.Get("/comparisons/:id/delete", web.RoleOperator, del.get)
	r.Post("/comparisons/:id/delete", web.RoleOperator, del.post)
	return nil
}

// overview is the overview's panel: the comparisons running, and those
// whose verdict is not ready.
func (g *group) overview(ctx context.Context) templ.Component {
	if g.eng == nil {
		return nil
	}
	list, err := g.eng.List(ctx)
	var rows []migration.Status
	for _, st := range list {
		if st.State == migration.StateRunning || !st.Verdict.Ready {
			rows = append(rows, st)
		}
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return views.OverviewPanel(rows, msg)
}

// run starts the owned Manager once this console does the background work,
// and closes it (each running comparison saves a checkpoint) at shutdown.
func (g *group) run(ctx context.Context, s *web.Server) error {
	m := g.owned
	if m == nil {
		return nil
	}
	defer m.Close()
	for !s.IsLeader() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	if err := m.Start(ctx); err != nil {
		return fmt.Errorf("comparisons: resume running comparisons: %w", err)
	}
	<-ctx.Done()
	return ctx.Err()
}

// ---- helpers shared by the handlers ----

// getter reads one comparison.
type getter interface {
	Get(ctx context.Context, id int64) (migration.Status, error)
}

// comparisonID reads the :id path parameter.
func comparisonID(c *fiber.Ctx) (int64, error) {
	raw := c.Params("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, web.NotFound("comparison "+strconv.Quote(raw), "Comparisons are numbered; the list is at /comparisons.")
	}
	return id, nil
}

// load reads comparison :id, answering 404 when there is none.
func load(c *fiber.Ctx, eng getter) (migration.Status, error) {
	id, err := comparisonID(c)
	if err != nil {
		return migration.Status{}, err
	}
	st, err := eng.Get(c.UserContext(), id)
	if err != nil {
		return st, engineError(id, err)
	}
	return st, nil
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// baseOf is the version of the comparison a posted action is based on (the
// page's hidden version field; 0 when the request does not say, which
// checks nothing).
func baseOf(c *fiber.Ctx) int64 {
	v, _ := strconv.ParseInt(c.FormValue("version"), 10, 64)
	return max(v, 0)
}

// staleError is the 409 page of an action refused because the comparison
// was changed since the page was opened (on any host), or nil.
func staleError(err error) *web.Error {
	if se := web.ConsoleStateError(err); se != nil && se.Status == fiber.StatusConflict {
		return se
	}
	return nil
}

// engineError maps an engine error to the page that explains it.
func engineError(id int64, err error) error {
	if errors.Is(err, migration.ErrNotFound) {
		return web.NotFound("comparison "+strconv.FormatInt(id, 10), "It may have been deleted. The comparisons are listed at /comparisons.")
	}
	return err
}

func userName(c *fiber.Ctx) string {
	if u := web.CurrentUser(c); u != nil {
		return u.Name
	}
	return ""
}

// describe is the audit detail of a comparison.
func describe(id int64, s migration.Spec) string {
	d := fmt.Sprintf("id=%d left=%s right=%s key=%s values=%s start=%s window=%s", id, s.Left, s.Right, s.Key, s.Values, s.Start, s.Window)
	if s.Bounded {
		d += " bounded"
	} else {
		d += " continuous"
	}
	return d
}

// Package moves is the console's partition moves page, for operators and
// admins: the reassignments in progress with their progress in bytes
// (read from the cluster, so it survives a reload), and three moves, each
// previewed then confirmed — spread a topic over a broker set (or change
// its replication factor), give a broker its share (`sluice broker add`),
// drain a broker (`sluice broker drain`) — optionally throttled; and
// cancelling moves. The plans, the throttle and the cancellation are
// package reassign's, shared with the CLI. Starting and cancelling are
// audited.
//
// A throttle the page sets is recorded in the console's replicated
// settings (one row per topic, and one for the brokers' rates); the page
// group's background work, on the leading console only, removes the
// throttle of each recorded topic once its moves ended, and the brokers'
// rates once nothing moves in the cluster, whether the page is open or
// not.
package moves

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/human"
	"github.com/sluice-io/sluice/reassign"
	"github.com/sluice-io/sluice/templates"
	tpl "github.com/sluice-io/sluice/templates/moves"
	"github.com/sluice-io/sluice/web"
)

// NavOrder places "Partition moves" after Brokers (20).
const NavOrder = 25

// Options configure the page group.
type Options struct {
	// CleanupInterval is how often the leading console looks for ended
	// moves whose throttle to remove (default 5 s).
	CleanupInterval time.Duration
	// Grace is how long after a throttled move started the cleaner leaves
	// the throttles alone (default 30 s): the page records a throttle
	// before it sets it and starts the move, and a round in between would
	// find the topic not moving yet.
	Grace time.Duration
}

// The settings rows recording the throttles the console set.
// Each holds when it was written (Unix milliseconds) and the rate.
const (
	topicKeyPrefix = "moves.throttle.topic:" // + topic
	ratesKey       = "moves.throttle.rates"  // the brokers' rates were set
)

// recordValue is a record's value: when, and the rate.
func recordValue(at time.Time, rate int64) string {
	return strconv.FormatInt(at.UnixMilli(), 10) + " " + strconv.FormatInt(rate, 10)
}

// recordedAt reads when a record was written (zero when unreadable: old).
func recordedAt(v string) time.Time {
	ms, _, _ := strings.Cut(v, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// requestTimeout bounds one page's Kafka requests.
const requestTimeout = 30 * time.Second

// PageGroup returns the partition moves page.
func PageGroup(o Options) web.PageGroup {
	if o.CleanupInterval <= 0 {
		o.CleanupInterval = 5 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	return web.PageGroup{
		Name: "moves",
		Nav:  []web.NavItem{{Label: "Partition moves", Path: "/moves", Role: web.RoleOperator, Order: NavOrder}},
		Mount: func(r *web.Router) error {
			s := r.Server()
			h := handler{adm: func() *kadm.Client { return s.Kafka().Admin() }, store: s.Store()}
			r.Get("/moves", web.RoleOperator, h.list)
			r.Post("/moves/preview", web.RoleOperator, h.preview)
			r.Post("/moves/start", web.RoleOperator, h.start)
			r.Post("/moves/cancel", web.RoleOperator, h.cancel)
			return nil
		},
		Run: func(ctx context.Context, s *web.Server) error {
			c := Cleaner{Admin: func() *kadm.Client { return s.Kafka().Admin() }, Store: s.Store(), Leader: s.IsLeader, Logger: s.Logger(), Grace: o.Grace}
			c.Run(ctx, o.CleanupInterval)
			return nil
		},
	}
}

type handler struct {
	adm   func() *kadm.Client
	store *consoledb.Console
}

// GET /moves: the moves in progress and the forms; the progress alone for
// the page's refresh; JSON with Accept: application/json.
func (h handler) list(c *fiber.Ctx) error {
	return h.page(c, fiber.StatusOK, templates.NewForm())
}

func (h handler) page(c *fiber.Ctx, status int, f templates.Form) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	pv := h.progress(ctx)
	if web.WantsJSON(c) {
		moves := make([]reassign.Progress, 0, len(pv.Moves))
		for _, m := range pv.Moves {
			moves = append(moves, m.Progress)
		}
		out := fiber.Map{"moves": moves, "bytes_copied": pv.Copied, "bytes_total": pv.Total, "percent": pv.Percent(),
			"throttled_topics": nonNil(pv.Throttled), "error": pv.Err}
		if len(f.Errors) > 0 || f.Err != "" {
			out["fields"], out["form_error"] = f.Errors, f.Err
		}
		return c.Status(status).JSON(out)
	}
	if web.Fragment(c, "moves-progress") {
		return web.Render(c, status, tpl.Progress(pv))
	}
	v := tpl.View{Progress: pv, Form: f}
	if a, live, err := reassign.LoadAssignment(ctx, h.adm()); err == nil {
		v.Brokers = live
		for _, k := range a.Parts {
			if !slices.Contains(v.Topics, k.Topic) {
				v.Topics = append(v.Topics, k.Topic)
			}
		}
	} else if pv.Err == "" {
		v.Progress.Err = err.Error()
	}
	return web.Render(c, status, tpl.Page(web.PageFor(c, "Partition moves"), v))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// progress reads the moves in progress and what they copied.
func (h handler) progress(ctx context.Context) tpl.ProgressView {
	var v tpl.ProgressView
	if rows, err := h.store.SettingsWithPrefix(ctx, topicKeyPrefix); err == nil {
		for k := range rows {
			v.Throttled = append(v.Throttled, strings.TrimPrefix(k, topicKeyPrefix))
		}
		slices.Sort(v.Throttled)
	}
	moving, err := reassign.InProgress(ctx, h.adm(), nil)
	if err != nil {
		v.Err = refusal(err)
		return v
	}
	ps, err := reassign.MeasureProgress(ctx, h.adm(), moving)
	if err != nil {
		v.Err = refusal(err)
		return v
	}
	for _, p := range ps {
		v.Moves = append(v.Moves, tpl.Move{Progress: p})
		if p.Total < 0 || v.Total < 0 {
			v.Total = -1
			continue
		}
		v.Total += p.Total
		v.Copied += p.Copied
	}
	return v
}

// moveFields are the fields of a move form, in order.
var moveFields = []string{"kind", "topic", "brokers", "rf", "broker", "throttle"}

// request is a move form read and checked.
type request struct {
	form     templates.Form
	kind     string
	topic    string
	brokers  []int32
	rf       int
	broker   int32
	throttle int64
}

// maxBrokers bounds the broker list of a form.
const maxBrokers = 1000

func readRequest(c *fiber.Ctx) request {
	f := templates.NewForm()
	for _, k := range moveFields {
		f.Set(k, strings.TrimSpace(strings.Clone(c.FormValue(k))))
	}
	r := request{form: f, kind: f.Get("kind")}
	switch r.kind {
	case "topic":
		r.topic = f.Get("topic")
		if r.topic == "" || len(r.topic) > 249 {
			r.form.Fail("topic", "Choose a topic.")
		}
		for _, s := range strings.Split(f.Get("brokers"), ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil || n < 0 {
				r.form.Fail("brokers", fmt.Sprintf("%q is not a broker id: give ids separated by commas, such as 1,2,3.", short(s)))
				break
			}
			if !slices.Contains(r.brokers, int32(n)) {
				r.brokers = append(r.brokers, int32(n))
			}
			if len(r.brokers) > maxBrokers {
				r.form.Fail("brokers", "Too many brokers.")
				break
			}
		}
		if len(r.brokers) == 0 && r.form.Error("brokers") == "" {
			r.form.Fail("brokers", "Give the brokers the topic goes to, such as 1,2,3.")
		}
		if s := f.Get("rf"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 32767 {
				r.form.Fail("rf", "A replication factor of 1 or more, or empty to keep each partition's.")
			} else {
				r.rf = n
			}
		}
	case "add", "drain":
		n, err := strconv.ParseInt(f.Get("broker"), 10, 32)
		if err != nil || n < 0 {
			r.form.Fail("broker", "Choose a broker.")
		}
		r.broker = int32(n)
	default:
		r.form.Err = "Choose a move: reassign a topic, add a broker or drain a broker."
		return r
	}
	if s := strings.TrimSuffix(f.Get("throttle"), "/s"); s != "" {
		n, err := human.ParseBytes(strings.TrimSpace(s))
		switch {
		case err != nil:
			r.form.Fail("throttle", "Bytes per second: a whole number, or with a unit (512KiB, 10MB).")
		case n <= 0:
			r.form.Fail("throttle", "More than 0 bytes per second (empty: no throttle).")
		default:
			r.throttle = n
		}
	}
	return r
}

// title names the move.
func (r request) title() string {
	switch r.kind {
	case "topic":
		return "Reassign topic " + r.topic
	case "add":
		return "Add broker " + templates.Itoa(r.broker)
	}
	return "Drain broker " + templates.Itoa(r.broker)
}

// plan computes the move's plan from the cluster as it is now, failing
// fields of r.form when it cannot be made.
func (h handler) plan(ctx context.Context, r *request) (reassign.Plan, map[reassign.Part][]int32, error) {
	a, live, err := reassign.LoadAssignment(ctx, h.adm())
	if err != nil {
		return reassign.Plan{}, nil, err
	}
	var plan reassign.Plan
	switch r.kind {
	case "topic":
		for _, b := range r.brokers {
			if !slices.Contains(live, b) {
				r.form.Fail("brokers", fmt.Sprintf("Broker %d is not live; live now: %s.", b, templates.Join(live)))
				return plan, nil, nil
			}
		}
		plan, err = reassign.Spread(a, r.topic, r.brokers, r.rf)
		if err != nil {
			field := "brokers"
			if strings.Contains(err.Error(), "topic ") {
				field = "topic"
			}
			r.form.Fail(field, capital(err.Error())+".")
			return plan, nil, nil
		}
	case "add":
		if !slices.Contains(live, r.broker) {
			r.form.Fail("broker", fmt.Sprintf("Broker %d is not live: start it with this cluster's zookeeper.connect first.", r.broker))
			return plan, nil, nil
		}
		plan = reassign.Add(a, r.broker, live)
	case "drain":
		var stuck []reassign.Part
		plan, stuck = reassign.Drain(a, r.broker, live)
		if len(stuck) > 0 {
			names := make([]string, 0, 10)
			for _, k := range stuck[:min(len(stuck), 10)] {
				names = append(names, k.String())
			}
			r.form.Fail("broker", fmt.Sprintf("%s cannot move off broker %d: every other live broker already holds a replica (%s). Add a broker or lower their replication factor first.",
				templates.Plural(len(stuck), "partition", "partitions"), r.broker, strings.Join(names, ", ")))
			return plan, nil, nil
		}
	}
	return plan, a.Current, nil
}

// short is s cut to 20 bytes, for an error message.
func short(s string) string {
	if len(s) > 20 {
		return strings.ToValidUTF8(s[:20], "") + "…"
	}
	return s
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// planHash fingerprints a plan and the replicas it moves from.
func planHash(plan reassign.Plan, current map[reassign.Part][]int32) string {
	hs := sha256.New()
	for _, e := range plan.Partitions {
		b, _ := json.Marshal([]any{e.Topic, e.Partition, e.Replicas, current[reassign.Part{Topic: e.Topic, Partition: e.Partition}]})
		hs.Write(b)
	}
	return hex.EncodeToString(hs.Sum(nil))[:24]
}

// POST /moves/preview: what the move does, and its confirmation.
func (h handler) preview(c *fiber.Ctx) error {
	r := readRequest(c)
	if !r.form.OK() {
		return h.page(c, fiber.StatusUnprocessableEntity, r.form)
	}
	return h.showPreview(c, fiber.StatusOK, r, "")
}

func (h handler) showPreview(c *fiber.Ctx, status int, r request, note string) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	plan, current, err := h.plan(ctx, &r)
	if err != nil {
		return web.Unavailable(err)
	}
	if !r.form.OK() {
		return h.page(c, fiber.StatusUnprocessableEntity, r.form)
	}
	steps, total, err := reassign.Preview(ctx, h.adm(), plan, current)
	if err != nil {
		return web.Unavailable(err)
	}
	v := tpl.PreviewView{Title: r.title(), Form: r.form, Hash: planHash(plan, current), Steps: steps, Bytes: total, Throttle: r.throttle, Note: note}
	if web.WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"move": v.Title, "plan": v.Hash, "steps": nonNil(steps), "bytes_to_copy": total,
			"throttle": r.throttle, "note": note})
	}
	return web.Render(c, status, tpl.PreviewPage(web.PageFor(c, v.Title, templates.Crumb{Label: "Partition moves", Href: "/moves"}), v))
}

// POST /moves/start: start the previewed move. The plan is computed again
// and started only when it is the one previewed (plan: its hash);
// otherwise the new plan is shown to confirm.
func (h handler) start(c *fiber.Ctx) error {
	r := readRequest(c)
	if !r.form.OK() {
		return h.page(c, fiber.StatusUnprocessableEntity, r.form)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	plan, current, err := h.plan(ctx, &r)
	if err != nil {
		return web.Unavailable(err)
	}
	if !r.form.OK() {
		return h.page(c, fiber.StatusUnprocessableEntity, r.form)
	}
	if want := c.FormValue("plan"); want != planHash(plan, current) {
		return h.showPreview(c, fiber.StatusConflict, r, "The cluster changed since the preview (replicas moved, brokers came or went): this is the move now. Review it and start again.")
	}
	if len(plan.Partitions) == 0 {
		web.Flash(c, "ok", r.title()+": nothing to move.")
		return web.SeeOther(c, "/moves")
	}
	steps := reassign.Steps(plan, current, nil)
	if r.throttle > 0 {
		// Recorded first: a throttle the console cannot remove later is not
		// set at all.
		if err := h.record(ctx, plan.Topics(), r.throttle); err != nil {
			web.Audit(c, "moves.start", r.title(), describe(steps, r.throttle), err)
			r.form.Err = "Not started: the console could not record the throttle to remove it later (" + err.Error() + ")."
			return h.page(c, fiber.StatusServiceUnavailable, r.form)
		}
	}
	th, refused, err := reassign.Start(ctx, h.adm(), plan, r.throttle)
	if r.throttle > 0 {
		// Again, now the partitions move: the grace starts from here.
		_ = h.record(ctx, plan.Topics(), r.throttle)
	}
	if err == nil && len(refused) > 0 {
		err = fmt.Errorf("refused %d of %d: %s", len(refused), len(plan.Partitions), strings.Join(refused[:min(len(refused), 10)], "; "))
	}
	detail := describe(steps, r.throttle)
	if len(th.Brokers) > 0 {
		detail += " throttled-brokers=" + templates.Join(th.Brokers)
	}
	web.Audit(c, "moves.start", r.title(), detail, err)
	if err != nil && len(refused) < len(plan.Partitions) && len(refused) > 0 {
		web.Flash(c, "bad", r.title()+": started "+strconv.Itoa(len(plan.Partitions)-len(refused))+" moves; "+err.Error())
		return web.SeeOther(c, "/moves")
	}
	if err != nil {
		r.form.Err = "Not started: " + refusalText(err)
		return h.page(c, fiber.StatusUnprocessableEntity, r.form)
	}
	msg := r.title() + ": started " + templates.Plural(len(plan.Partitions), "move", "moves") + "."
	if r.throttle > 0 {
		msg += " Throttled to " + human.BytesText(r.throttle) + "/s; the throttle is removed once they end."
	}
	web.Flash(c, "ok", msg)
	return web.SeeOther(c, "/moves")
}

// describe is a move for the audit log: its partitions (the first 20),
// the bytes to copy and the throttle.
func describe(steps []reassign.Step, throttle int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "partitions=%d throttle=%d", len(steps), throttle)
	for i, s := range steps {
		if i == 20 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s-%d:%s->%s", s.Topic, s.Partition, templates.Join(s.From), templates.Join(s.To))
	}
	return b.String()
}

// record notes the throttle of topics, for the cleaner.
func (h handler) record(ctx context.Context, topics []string, rate int64) error {
	v := recordValue(time.Now(), rate)
	for _, t := range topics {
		if err := h.store.SetSetting(ctx, topicKeyPrefix+t, v); err != nil {
			return err
		}
	}
	return h.store.SetSetting(ctx, ratesKey, v)
}

// POST /moves/cancel: cancel one partition's move (topic, partition) or
// every move (all=1); the throttle of the topics whose moves all ended
// goes at once, the rest's once they end.
func (h handler) cancel(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	var parts []reassign.Part
	target := "all"
	if c.FormValue("all") == "1" {
		moving, err := reassign.InProgress(ctx, h.adm(), nil)
		if err != nil {
			return web.Unavailable(err)
		}
		for _, m := range moving {
			parts = append(parts, reassign.Part{Topic: m.Topic, Partition: m.Partition})
		}
		if len(parts) == 0 {
			web.Flash(c, "ok", "No move in progress: nothing to cancel.")
			return web.SeeOther(c, "/moves")
		}
	} else {
		topic := strings.Clone(c.FormValue("topic"))
		p, err := strconv.ParseInt(c.FormValue("partition"), 10, 32)
		if topic == "" || len(topic) > 249 || err != nil || p < 0 {
			return web.BadRequest("give topic and partition, or all=1")
		}
		parts = []reassign.Part{{Topic: topic, Partition: int32(p)}}
		target = parts[0].String()
	}
	failed, err := reassign.Cancel(ctx, h.adm(), parts)
	if err == nil && len(failed) > 0 {
		err = fmt.Errorf("not cancelled: %s", strings.Join(failed[:min(len(failed), 10)], "; "))
	}
	var topics []string
	for _, k := range parts {
		if !slices.Contains(topics, k.Topic) {
			topics = append(topics, k.Topic)
		}
	}
	slices.Sort(topics)
	detail := fmt.Sprintf("partitions=%d", len(parts))
	if err == nil {
		// The throttle of the cancelled moves: removed now where nothing
		// moves any more, by the cleaner once the rest ended.
		cl, _, cerr := reassign.ClearFinished(ctx, h.adm(), topics)
		if cerr == nil {
			for _, t := range append(slices.Clone(cl.Topics), cl.Gone...) {
				_ = h.store.DeleteSetting(ctx, topicKeyPrefix+t)
			}
			if len(cl.Topics) > 0 {
				detail += " throttle-removed=" + strings.Join(cl.Topics, ",")
			}
		}
	}
	web.Audit(c, "moves.cancel", target, detail, err)
	if err != nil {
		web.Flash(c, "bad", "Not cancelled: "+refusalText(err))
		return web.SeeOther(c, "/moves")
	}
	web.Flash(c, "ok", "Cancelled "+templates.Plural(len(parts), "move", "moves")+": each partition goes back to its original replicas.")
	return web.SeeOther(c, "/moves")
}

// refusal is an error reading the moves in words.
func refusal(err error) string {
	return refusalText(err)
}

func refusalText(err error) string {
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the brokers refused: the console's principal may not alter or describe the cluster (CLUSTER_AUTHORIZATION_FAILED). Add it to super.users, or grant it Alter and Describe on the cluster."
	case errors.Is(err, kerr.UnsupportedVersion):
		return "the brokers do not support partition reassignments (" + err.Error() + ")."
	}
	return err.Error()
}

// Cleaner removes the throttles the page set once their moves ended: each
// round (while Leader says this console leads) it reads the recorded
// topics, removes the throttle of those with no partition moving, and the
// brokers' rates once nothing moves in the cluster, deleting the records
// of what it removed.
type Cleaner struct {
	Admin  func() *kadm.Client
	Store  *consoledb.Console
	Leader func() bool
	Logger *slog.Logger
	// Grace: a round does nothing while a record is younger (see
	// Options.Grace).
	Grace time.Duration
}

// Run runs a round every interval until ctx ends.
func (cl Cleaner) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if cl.Leader() {
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			if err := cl.Round(rctx); err != nil && ctx.Err() == nil {
				cl.Logger.Warn("partition moves: removing throttles", "err", err)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round is one round of the cleaner.
func (cl Cleaner) Round(ctx context.Context) error {
	rows, err := cl.Store.SettingsWithPrefix(ctx, "moves.throttle.")
	if err != nil || len(rows) == 0 {
		return err
	}
	var topics []string
	for k, v := range rows {
		if time.Since(recordedAt(v)) < cl.Grace {
			return nil // a move is starting
		}
		if t, ok := strings.CutPrefix(k, topicKeyPrefix); ok {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	res, done, err := reassign.ClearFinished(ctx, cl.Admin(), topics)
	if err != nil {
		return err
	}
	for _, t := range append(slices.Clone(res.Topics), res.Gone...) {
		if err := cl.Store.DeleteSetting(ctx, topicKeyPrefix+t); err != nil {
			return err
		}
	}
	if len(res.Topics) > 0 || len(res.Brokers) > 0 {
		cl.Logger.Info("partition moves ended: throttle removed", "topics", res.Topics, "brokers", res.Brokers, "moves_left", res.Pending)
	}
	if done {
		return cl.Store.DeleteSetting(ctx, ratesKey)
	}
	return nil
}

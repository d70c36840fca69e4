// Package quotas is the console's client quotas page, for admins only
// (quotas are an access-control setting): every quota entity (user, client
// id, user and client id, and their defaults) with its producer_byte_rate,
// consumer_byte_rate, request_percentage and controller_mutation_rate in
// words and units; set and
// delete quotas over the Kafka protocol (Describe/AlterClientQuotas, as
// kafka-configs.sh and `sluice quotas` do), each change audited; and the
// time each client was throttled on the console's own broker, in all and
// since the page's previous reading, read from the process's Prometheus
// registry.
package quotas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/human"
	"github.com/sluice-io/sluice/templates"
	tpl "github.com/sluice-io/sluice/templates/quotas"
	"github.com/sluice-io/sluice/web"
)

// NavOrder places "Quotas" among the admin entries, after the ACLs (92).
const NavOrder = 93

// Options configure the page group.
type Options struct {
	// Metrics, when set, is the process's Prometheus registry, read for
	// sluice_broker_client_throttle_seconds_total (the brokers in this
	// process); nil when the console runs without a broker.
	Metrics prometheus.Gatherer
}

// PageGroup returns the quotas page.
func PageGroup(o Options) web.PageGroup {
	return web.PageGroup{
		Name: "quotas",
		Nav:  []web.NavItem{{Label: "Quotas", Path: "/quotas", Role: web.RoleAdmin, Order: NavOrder}},
		Mount: func(r *web.Router) error {
			s := r.Server()
			h := handler{adm: func() *kadm.Client { return s.Kafka().Admin() }, metrics: o.Metrics, last: &reading{}}
			r.Get("/quotas", web.RoleAdmin, h.list)
			r.Post("/quotas", web.RoleAdmin, h.set)
			r.Post("/quotas/delete", web.RoleAdmin, h.delete)
			return nil
		},
	}
}

type handler struct {
	adm     func() *kadm.Client
	metrics prometheus.Gatherer
	last    *reading // the previous throttle reading
}

// reading is a reading of the throttle counters, kept to tell which
// clients were throttled lately: a page compares the counters with the
// reading at least minWindow old, then replaces it.
type reading struct {
	mu   sync.Mutex
	at   time.Time
	sums map[[3]string]float64
}

// minWindow is the shortest time "lately" spans.
const minWindow = 10 * time.Second

// requestTimeout bounds one page's Kafka requests.
const requestTimeout = 15 * time.Second

// The quota keys the page shows and sets, in order, with their words.
var keys = []struct{ key, label, field string }{
	{cluster.QuotaProducerByteRate, "Produce rate", "producer_byte_rate"},
	{cluster.QuotaConsumerByteRate, "Fetch rate", "consumer_byte_rate"},
	{cluster.QuotaRequestPercentage, "Request time", "request_percentage"},
	{cluster.QuotaControllerMutationRate, "Partition mutations", "controller_mutation_rate"},
}

func newForm() templates.Form { return templates.NewForm("entity", "client") }

func (h handler) list(c *fiber.Ctx) error { return h.page(c, fiber.StatusOK, newForm()) }

func (h handler) page(c *fiber.Ctx, status int, f templates.Form) error {
	v := tpl.View{Form: f}
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	// No component, not strict: every entity (as `sluice quotas list`).
	described, err := h.adm().DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		if v.Refused = refusal(err); v.Refused == "" {
			return web.Unavailable(err)
		}
	}
	v.Entities = entities(described)
	if h.metrics != nil {
		v.ThrottleKnown = true
		v.Throttle = h.throttled(time.Now())
	}
	if web.WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"entities": v.Entities, "throttle": v.Throttle, "refused": v.Refused, "fields": f.Errors})
	}
	return web.Render(c, status, tpl.Page(web.PageFor(c, "Quotas"), v))
}

// entities are the described quotas in words, each entity once, sorted
// by label.
func entities(described kadm.DescribedClientQuotas) []tpl.Entity {
	seen := map[string]bool{}
	var out []tpl.Entity
	for _, d := range described {
		var e tpl.Entity
		for _, comp := range d.Entity {
			switch comp.Type {
			case "user":
				e.HasUser, e.UserDefault = true, comp.Name == nil
				if comp.Name != nil {
					e.User = *comp.Name
				}
			case "client-id":
				e.HasClient, e.ClientDefault = true, comp.Name == nil
				if comp.Name != nil {
					e.ClientID = *comp.Name
				}
			}
		}
		e.Label = label(e)
		if seen[e.Label] || len(d.Values) == 0 {
			continue
		}
		seen[e.Label] = true
		vals := map[string]float64{}
		for _, qv := range d.Values {
			vals[qv.Key] = qv.Value
		}
		for _, k := range keys {
			if val, ok := vals[k.key]; ok {
				e.Quotas = append(e.Quotas, tpl.Quota{Key: k.key, Label: k.label, Value: valueText(k.key, val)})
				delete(vals, k.key)
			}
		}
		for k, val := range vals { // a key this page does not know
			e.Quotas = append(e.Quotas, tpl.Quota{Key: k, Label: k, Value: human.Number(val)})
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

// label is an entity in words.
func label(e tpl.Entity) string {
	user := `user "` + e.User + `"`
	if e.UserDefault {
		user = "every user (default)"
	}
	client := `client id "` + e.ClientID + `"`
	if e.ClientDefault {
		client = "every client id (default)"
	}
	switch {
	case e.HasUser && e.HasClient && e.ClientDefault:
		return "clients of " + user + ", each by default"
	case e.HasUser && e.HasClient:
		return client + " of " + user
	case e.HasUser:
		return user
	case e.HasClient:
		return client
	}
	return "(no entity)"
}

// valueText is a quota's value with its unit.
func valueText(key string, v float64) string {
	switch key {
	case cluster.QuotaProducerByteRate, cluster.QuotaConsumerByteRate:
		if v >= 0 && v < math.MaxInt64 && v == math.Trunc(v) {
			return human.BytesText(int64(v)) + "/s (" + human.Number(v) + " bytes per second)"
		}
		return human.Number(v) + " bytes per second"
	case cluster.QuotaRequestPercentage:
		return human.Number(v) + " % of one request thread"
	case cluster.QuotaControllerMutationRate:
		return human.Number(v) + " partitions created or deleted per second"
	}
	return human.Number(v)
}

// throttled reads the throttle times of the process's brokers, summed
// over brokers, longest first, with each client's throttle time since the
// previous reading.
func (h handler) throttled(now time.Time) []tpl.Throttled {
	sums := readThrottle(h.metrics)
	h.last.mu.Lock()
	prev, prevAt := h.last.sums, h.last.at
	if prev == nil || now.Sub(prevAt) >= minWindow {
		h.last.sums, h.last.at = sums, now
	}
	h.last.mu.Unlock()
	out := make([]tpl.Throttled, 0, len(sums))
	for k, s := range sums {
		if s <= 0 {
			continue
		}
		t := tpl.Throttled{User: k[0], ClientID: k[1], QuotaType: k[2], Seconds: s}
		if prev != nil && now.After(prevAt) {
			t.Window = now.Sub(prevAt).Round(time.Second)
			t.Recent = s - prev[k]
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seconds != out[j].Seconds {
			return out[i].Seconds > out[j].Seconds
		}
		return out[i].User+"\x00"+out[i].ClientID < out[j].User+"\x00"+out[j].ClientID
	})
	return out
}

// readThrottle sums sluice_broker_client_throttle_seconds_total over
// brokers, by user, client id and quota type.
func readThrottle(g prometheus.Gatherer) map[[3]string]float64 {
	sums := map[[3]string]float64{}
	families, err := g.Gather()
	if err != nil && len(families) == 0 {
		return sums
	}
	for _, mf := range families {
		if mf.GetName() != "sluice_broker_client_throttle_seconds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k [3]string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "user":
					k[0] = lp.GetValue()
				case "client_id":
					k[1] = lp.GetValue()
				case "quota_type":
					k[2] = lp.GetValue()
				}
			}
			sums[k] += m.GetCounter().GetValue()
		}
	}
	return sums
}

// maxNameBytes bounds a user or client id.
const maxNameBytes = 255

func validName(s, what string) string {
	switch {
	case s == "":
		return "Enter the " + what + "."
	case len(s) > maxNameBytes:
		return "At most 255 bytes."
	case !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "Letters, digits and punctuation only (no control characters)."
	}
	return ""
}

// kinds are the entity choices of the form: whether each of user and
// client id is named (1), the default (d) or absent (0).
var kinds = map[string][2]byte{
	"client":                      {'0', '1'},
	"user":                        {'1', '0'},
	"user+client":                 {'1', '1'},
	"user+default-client":         {'1', 'd'},
	"default-user":                {'d', '0'},
	"default-client":              {'0', 'd'},
	"default-user+client":         {'d', '1'},
	"default-user+default-client": {'d', 'd'},
}

// entityOf builds the entity the form names, failing fields in f.
func entityOf(f *templates.Form) kadm.ClientQuotaEntity {
	kind, ok := kinds[f.Get("entity")]
	if !ok {
		f.Fail("entity", "Pick what the quota applies to.")
		return nil
	}
	var e kadm.ClientQuotaEntity
	for i, comp := range []struct{ typ, field, what string }{{"user", "user", "user's name"}, {"client-id", "client_id", "client id"}} {
		switch kind[i] {
		case '1':
			name := f.Get(comp.field)
			if msg := validName(name, comp.what); msg != "" {
				f.Fail(comp.field, msg)
			}
			e = append(e, kadm.ClientQuotaEntityComponent{Type: comp.typ, Name: &name})
		case 'd':
			if f.Get(comp.field) != "" {
				f.Fail(comp.field, "Leave this empty: the choice above is the default, for every "+strings.TrimSuffix(comp.what, "'s name")+".")
			}
			e = append(e, kadm.ClientQuotaEntityComponent{Type: comp.typ})
		}
	}
	return e
}

// parseRate reads a rate field: bytes per second (with a unit, 1MiB) for
// the byte rates, a percentage for request_percentage, partitions per
// second for controller_mutation_rate. Kafka refuses values that are not
// positive.
func parseRate(key, s string) (float64, string) {
	switch key {
	case cluster.QuotaProducerByteRate, cluster.QuotaConsumerByteRate:
		n, err := human.ParseBytes(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
		if err != nil {
			return 0, "Bytes per second: a whole number, or with a unit (512KiB, 10MB, 1GiB)."
		}
		if n <= 0 {
			return 0, "More than 0 bytes per second (delete the quota to remove the limit)."
		}
		return float64(n), ""
	case cluster.QuotaControllerMutationRate:
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, "Partitions per second, e.g. 10 or 0.5."
		}
		if v <= 0 {
			return 0, "More than 0 partitions per second (delete the quota to remove the limit)."
		}
		return v, ""
	default:
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, "A percentage, e.g. 50 or 200."
		}
		if v <= 0 {
			return 0, "More than 0 percent (delete the quota to remove the limit)."
		}
		return v, ""
	}
}

// POST /quotas: set the quotas of an entity. The first POST only previews
// (each quota the form sets, its value now and after, validated by the
// brokers with validate_only); the preview posts the form again with
// apply=1 and the values it showed ("was.<key>"), and a quota changed
// since is previewed again instead of overwritten.
func (h handler) set(c *fiber.Ctx) error {
	f := templates.NewForm("entity", strings.Clone(c.FormValue("entity")),
		"user", strings.TrimSpace(strings.Clone(c.FormValue("user"))),
		"client_id", strings.TrimSpace(strings.Clone(c.FormValue("client_id"))))
	e := entityOf(&f)
	var ops []kadm.AlterClientQuotaOp
	var detail []string
	var rows []tpl.Change
	for _, k := range keys {
		if k.field == "" {
			continue
		}
		text := strings.TrimSpace(strings.Clone(c.FormValue(k.field)))
		f.Set(k.field, text)
		if text == "" {
			continue
		}
		v, msg := parseRate(k.key, text)
		if msg == "" && k.key == cluster.QuotaControllerMutationRate && len(e) == 2 {
			msg = "A user or a client id alone: Kafka has no partition mutation quota for a user's client id."
		}
		if msg != "" {
			f.Fail(k.field, msg)
			continue
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k.key, Value: v})
		detail = append(detail, k.key+"="+strconv.FormatFloat(v, 'f', -1, 64))
		rows = append(rows, tpl.Change{Key: k.key, Label: k.label, New: valueText(k.key, v)})
	}
	if len(ops) == 0 && f.Error("producer_byte_rate")+f.Error("consumer_byte_rate")+f.Error("request_percentage")+f.Error("controller_mutation_rate") == "" {
		f.Fail("producer_byte_rate", "Set at least one of the produce rate, the fetch rate, the request time and the partition mutations.")
	}
	if !f.OK() {
		return h.page(c, fiber.StatusUnprocessableEntity, f)
	}
	// The values now, for the preview and the stale check.
	now, err := h.current(c, e)
	if err != nil {
		if f.Err = refusal(err); f.Err == "" {
			return web.Unavailable(err)
		}
		return h.page(c, fiber.StatusUnprocessableEntity, f)
	}
	pv := tpl.Preview{Entity: label(entityView(e)), Form: f}
	for i := range rows {
		if val, ok := now[rows[i].Key]; ok {
			rows[i].Old = valueText(rows[i].Key, val)
			rows[i].Was = strconv.FormatFloat(val, 'f', -1, 64)
		}
	}
	pv.Rows = rows
	page := web.PageFor(c, "Set quotas", templates.Crumb{Label: "Quotas", Href: "/quotas"})
	if c.FormValue("apply") != "1" {
		status := fiber.StatusOK
		if err := h.validate(c, e, ops); err != nil {
			if pv.Refused = refusal(err); pv.Refused == "" {
				pv.Refused = err.Error()
			}
			status = fiber.StatusUnprocessableEntity
		}
		if web.WantsJSON(c) {
			changes := make([]fiber.Map, 0, len(rows))
			for _, r := range rows {
				changes = append(changes, fiber.Map{"key": r.Key, "old": r.Old, "new": r.New})
			}
			return c.Status(status).JSON(fiber.Map{"entity": strings.Trim(e.String(), "{}"), "changes": changes, "refused": pv.Refused})
		}
		return web.Render(c, status, tpl.PreviewPage(page, pv))
	}
	// Stale: a quota the preview showed changed since (by someone else).
	var moved []string
	for _, r := range rows {
		if string(c.Request().PostArgs().Peek("was."+r.Key)) != r.Was {
			moved = append(moved, r.Key)
		}
	}
	if len(moved) > 0 {
		pv.Err = "Not changed: " + strings.Join(moved, ", ") + " changed since the preview. Check the values now below and apply again."
		return web.Render(c, fiber.StatusConflict, tpl.PreviewPage(page, pv))
	}
	err = h.alter(c, e, ops)
	target := strings.Trim(e.String(), "{}")
	web.Audit(c, "quota.set", target, strings.Join(detail, " "), err)
	if err != nil {
		if f.Err = refusal(err); f.Err == "" {
			f.Err = "Not changed: " + err.Error()
		}
		return h.page(c, fiber.StatusUnprocessableEntity, f)
	}
	web.Flash(c, "ok", "Quotas of "+label(entityView(e))+" set.")
	return web.SeeOther(c, "/quotas")
}

// POST /quotas/delete: delete every quota of an entity.
func (h handler) delete(c *fiber.Ctx) error {
	var e kadm.ClientQuotaEntity
	for _, comp := range []struct{ typ, has, name, def string }{
		{"user", "has_user", "user", "user_default"}, {"client-id", "has_client", "client_id", "client_default"},
	} {
		if c.FormValue(comp.has) != "true" {
			continue
		}
		if c.FormValue(comp.def) == "1" {
			e = append(e, kadm.ClientQuotaEntityComponent{Type: comp.typ})
			continue
		}
		name := strings.Clone(c.FormValue(comp.name))
		if validName(name, comp.typ) != "" {
			return web.BadRequest("malformed " + comp.typ)
		}
		e = append(e, kadm.ClientQuotaEntityComponent{Type: comp.typ, Name: &name})
	}
	if len(e) == 0 {
		return web.BadRequest("name the entity: user and/or client id")
	}
	ops := make([]kadm.AlterClientQuotaOp, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k.key, Remove: true})
	}
	err := h.alter(c, e, ops)
	web.Audit(c, "quota.delete", strings.Trim(e.String(), "{}"), "", err)
	switch {
	case err == nil:
		web.Flash(c, "ok", "Quotas of "+label(entityView(e))+" deleted: its clients fall back to the next matching quota, or none.")
	case refusal(err) != "":
		web.Flash(c, "bad", refusal(err))
	default:
		web.Flash(c, "bad", "Not deleted: "+err.Error())
	}
	return web.SeeOther(c, "/quotas")
}

// current reads the quotas e has now (DescribeClientQuotas, strict).
func (h handler) current(c *fiber.Ctx, e kadm.ClientQuotaEntity) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	comps := make([]kadm.DescribeClientQuotaComponent, 0, len(e))
	for _, comp := range e {
		dc := kadm.DescribeClientQuotaComponent{Type: comp.Type, MatchName: comp.Name}
		if comp.Name == nil {
			dc.MatchType = kmsg.QuotasMatchTypeDefault
		}
		comps = append(comps, dc)
	}
	described, err := h.adm().DescribeClientQuotas(ctx, true, comps)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	want := label(entityView(e))
	for _, d := range described {
		if label(entityView(d.Entity)) != want || len(d.Entity) != len(e) {
			continue
		}
		for _, v := range d.Values {
			out[v.Key] = v.Value
		}
	}
	return out, nil
}

// validate asks the brokers whether they take ops (AlterClientQuotas with
// validate_only): nothing changes.
func (h handler) validate(c *fiber.Ctx, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	return h.alterOrValidate(c, e, ops, true)
}

func (h handler) alter(c *fiber.Ctx, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	return h.alterOrValidate(c, e, ops, false)
}

func (h handler) alterOrValidate(c *fiber.Ctx, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp, validateOnly bool) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), requestTimeout)
	defer cancel()
	alter := h.adm().AlterClientQuotas
	if validateOnly {
		alter = h.adm().ValidateAlterClientQuotas
	}
	res, err := alter(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
			}
			return r.Err
		}
	}
	return nil
}

func entityView(e kadm.ClientQuotaEntity) tpl.Entity {
	var v tpl.Entity
	for _, comp := range e {
		if comp.Type == "user" {
			v.HasUser, v.UserDefault = true, comp.Name == nil
			if comp.Name != nil {
				v.User = *comp.Name
			}
		} else {
			v.HasClient, v.ClientDefault = true, comp.Name == nil
			if comp.Name != nil {
				v.ClientID = *comp.Name
			}
		}
	}
	return v
}

// refusal is what the page says when the brokers refuse, or "".
func refusal(err error) string {
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "The brokers refused: the console's principal may not change or describe quotas (CLUSTER_AUTHORIZATION_FAILED). Add it to super.users, or grant it AlterConfigs and DescribeConfigs on the cluster."
	case errors.Is(err, kerr.UnsupportedVersion):
		return "The brokers do not support client quotas (" + err.Error() + ")."
	}
	return ""
}

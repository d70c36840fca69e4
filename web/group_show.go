package web

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
	"github.com/sluice-io/sluice/templates"
)

// GET /groups/:name: one group's lag per partition (records and time),
// members and assignments, the lag history chart, and the reset form.

type groupDescriber interface {
	Group(ctx context.Context, name string) (*kafkaview.GroupDetail, error)
}

type lagHistory interface {
	LagHistory(ctx context.Context, group, topic string, since, until time.Time) ([]consoledb.LagPoint, error)
}

type partitionRates interface {
	PartitionRates(group string) []sampler.PartitionRate
}

type auditSearcher interface {
	Audit(ctx context.Context, f consoledb.AuditFilter) ([]consoledb.AuditEntry, bool, error)
}

type groupShow struct {
	kc       groupDescriber
	history  lagHistory
	interval time.Duration
	rates    partitionRates // nil: no rates
	audit    auditSearcher  // offset resets, for the chart's markers
	// events returns the page groups' markers of a subject's timeline.
	events func(ctx context.Context, subject string, since, until time.Time) []templates.ChartEvent
	status func() (map[string]templates.GroupHealth, time.Time, bool)
}

var historyRanges = []string{"1h", "6h", "24h", "7d"}

func rangeDuration(r string) (time.Duration, bool) {
	switch r {
	case "1h":
		return time.Hour, true
	case "6h":
		return 6 * time.Hour, true
	case "24h":
		return 24 * time.Hour, true
	case "7d":
		return 7 * 24 * time.Hour, true
	}
	return 0, false
}

func (h groupShow) get(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	if WantsJSON(c) {
		hist := make([]fiber.Map, 0, len(v.History))
		for _, p := range v.History {
			hist = append(hist, fiber.Map{"at": p.At, "lag": p.Lag, "lag_ms": p.LagTime.Milliseconds()})
		}
		members := make([]fiber.Map, 0, len(v.Detail.Members))
		for _, m := range v.Detail.Members {
			assigned := make([]fiber.Map, 0, len(m.Assigned))
			for _, a := range m.Assigned {
				assigned = append(assigned, fiber.Map{"topic": a.Topic, "partitions": orEmpty(a.Partitions)})
			}
			members = append(members, fiber.Map{"member_id": m.ID, "instance_id": m.InstanceID, "client_id": m.ClientID, "host": m.Host, "assigned": assigned})
		}
		rate := fiber.Map{"known": v.Rate.Known, "consumed_per_sec": v.Rate.Consumed, "produced_per_sec": v.Rate.Produced, "state": v.Rate.State}
		if v.Rate.State == "draining" {
			rate["drain_ms"] = v.Rate.Drain.Milliseconds()
		}
		return JSON(c, fiber.Map{"group": groupToJSON(v.Detail.Lag), "members": members, "history": hist, "rate": rate})
	}
	return h.render(c, fiber.StatusOK, v)
}

func (h groupShow) view(c *fiber.Ctx, name string) (templates.GroupView, error) {
	ctx := requestCtx(c)
	d, err := h.kc.Group(ctx, name)
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownGroup) {
			return templates.GroupView{}, NotFound("consumer group "+name, "Groups appear when a consumer joins them or commits offsets; the Consumer groups page lists them.")
		}
		return templates.GroupView{}, Unavailable(err)
	}
	r := c.Query("range", "6h")
	span, ok := rangeDuration(r)
	if !ok {
		r, span = "6h", 6*time.Hour
	}
	until := time.Now()
	since := until.Add(-span)
	v := templates.GroupView{Detail: d, Range: r, Ranges: historyRanges, Since: since, Until: until,
		Sampling: h.interval, ResetForm: templates.NewForm("mode", "earliest")}
	seen := map[string]bool{}
	for _, p := range d.Lag.Partitions {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			v.Topics = append(v.Topics, p.Topic)
		}
	}
	sort.Strings(v.Topics)
	if t := c.Query("topic"); seen[t] {
		v.Topic = strings.Clone(t)
	}
	if v.History, err = h.history.LagHistory(ctx, name, v.Topic, since, until); err != nil {
		return templates.GroupView{}, err
	}
	if h.events != nil {
		v.Events = h.events(ctx, "group:"+name, since, until)
	}
	if h.audit != nil {
		resets, _, err := h.audit.Audit(ctx, consoledb.AuditFilter{Action: "group.reset-offsets", Target: name, Since: since, Until: until, Limit: 100})
		if err == nil {
			for _, e := range resets {
				if e.Outcome != "ok" {
					continue
				}
				v.Events = append(v.Events, templates.ChartEvent{At: e.At, Kind: "reset", Label: "Offsets reset by " + e.User + ": " + e.Detail})
			}
		}
		sort.SliceStable(v.Events, func(i, j int) bool { return v.Events[i].At.Before(v.Events[j].At) })
	}
	if h.status != nil {
		if m, _, ok := h.status(); ok {
			v.Status, v.HasStatus = m[name], true
		}
	}
	v.Rate, v.Rates = groupRates(h.rates, name, d.Lag)
	return v, nil
}

// groupRates are the group's consumption and production rates and time to
// catch up, in all and per partition, from the sampler's recent samples.
func groupRates(src partitionRates, group string, g lag.Group) (templates.GroupRate, map[string]templates.GroupRate) {
	per := map[string]templates.GroupRate{}
	if src == nil {
		return templates.GroupRate{State: "unknown"}, per
	}
	rates := src.PartitionRates(group)
	lagOf := map[string]int64{}
	for _, p := range g.Partitions {
		lagOf[p.Topic+"/"+strconv.Itoa(int(p.Partition))] = p.Lag
	}
	now := time.Now()
	for _, r := range rates {
		k := r.Topic + "/" + strconv.Itoa(int(r.Partition))
		gr := toGroupRate(r, lagOf[k])
		for i, l := range r.Lags {
			gr.Lags = append(gr.Lags, templates.Point{At: now.Add(-time.Duration(len(r.Lags)-1-i) * r.Over / time.Duration(max(len(r.Lags)-1, 1))), V: float64(l)})
		}
		per[k] = gr
	}
	return toGroupRate(sampler.SumRates(rates), g.TotalLag), per
}

func toGroupRate(r sampler.PartitionRate, lagNow int64) templates.GroupRate {
	gr := templates.GroupRate{Known: r.Known, Consumed: max(r.Consumed, 0), Produced: r.Produced, Over: r.Over}
	d, st := r.TimeToDrain(lagNow)
	switch st {
	case sampler.DrainDraining:
		gr.State, gr.Drain = "draining", d
	case sampler.DrainCaughtUp:
		gr.State = "caught up"
	case sampler.DrainGrowing:
		gr.State = "growing"
	case sampler.DrainStopped:
		gr.State = "stopped"
	default:
		gr.State = "unknown"
	}
	return gr
}

func (h groupShow) render(c *fiber.Ctx, status int, v templates.GroupView) error {
	p := PageFor(c, v.Detail.Lag.Group, templates.Crumb{Label: "Consumer groups", Href: "/groups"})
	return Render(c, status, templates.GroupPage(p, v))
}

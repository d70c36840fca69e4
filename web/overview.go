package web

import (
	"context"
	"sort"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
	"github.com/sluice-io/sluice/templates"
)

// GET /: the incident screen. What needs attention first — the page
// groups' panels (alerts firing and pending, comparisons running or not
// ready), brokers down, under-replicated and offline partitions — then the
// cluster's figures, its throughput over the last hour, and the groups with
// the most lag. The body refreshes itself every 10 s with htmx (the
// #overview fragment), so an alert that fires shows without a reload.

type overviewCluster interface {
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
	Lag(ctx context.Context, groups ...string) ([]lag.Group, error)
}

type recentLag interface {
	LatestLag(maxAge time.Duration) ([]lag.Group, time.Time, bool)
}

type knownBrokers interface {
	KnownBrokers(ctx context.Context) ([]consoledb.KnownBroker, error)
}

type trafficSource interface {
	Traffic() sampler.Traffic
	TrafficHistory() []sampler.TrafficPoint
}

// overviewPanel is a page group's panel on the overview.
type overviewPanel struct {
	order  int
	render func(ctx context.Context) templ.Component
}

type overviewHandler struct {
	kc      overviewCluster
	lag     recentLag
	brokers knownBrokers
	traffic trafficSource
	panels  []overviewPanel
	status  func() (map[string]templates.GroupHealth, time.Time, bool)
}

// maxPartitionIssues bounds the partitions the overview lists by name.
const maxPartitionIssues = 50

func (h overviewHandler) get(c *fiber.Ctx) error {
	ctx := requestCtx(c)
	v := templates.OverviewView{Controller: -1}
	snap, err := h.kc.Metadata(ctx, 5*time.Second)
	if err != nil {
		v.Err = err.Error()
	} else {
		v.ClusterID, v.Controller = snap.ClusterID, snap.Controller
		if b, ok := snap.Broker(snap.Controller); ok {
			v.ControllerAddr = b.Addr()
		}
		v.BrokersUp = len(snap.Brokers)
		for _, t := range snap.Topics {
			if t.Internal {
				v.InternalTopics++
			} else {
				v.Topics++
			}
			for _, p := range t.Partitions {
				offline := p.Leader < 0
				if !offline && !p.UnderReplicated() {
					continue
				}
				if len(v.PartitionIssues) < maxPartitionIssues {
					v.PartitionIssues = append(v.PartitionIssues, templates.PartitionIssue{Topic: t.Name, Partition: p.Partition,
						Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR, Offline: offline})
				}
			}
		}
		sort.SliceStable(v.PartitionIssues, func(i, j int) bool {
			return v.PartitionIssues[i].Offline && !v.PartitionIssues[j].Offline
		})
		v.Partitions, v.UnderReplicated, v.Offline = snap.PartitionCount()
		if known, err := h.brokers.KnownBrokers(ctx); err == nil {
			for _, k := range known {
				if _, up := snap.Broker(k.ID); !up {
					v.BrokersDown = append(v.BrokersDown, k)
				}
			}
		}
	}
	v.Traffic = h.traffic.Traffic()
	for _, p := range h.traffic.TrafficHistory() {
		v.MessagesInHistory = append(v.MessagesInHistory, templates.Point{At: p.At, V: p.MessagesIn})
		if p.BytesIn >= 0 {
			v.BytesInHistory = append(v.BytesInHistory, templates.Point{At: p.At, V: p.BytesIn})
		}
	}
	groups, at, ok := h.lag.LatestLag(2 * time.Minute)
	if !ok && err == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		groups, err = h.kc.Lag(lctx)
		cancel()
		at = time.Now()
		if err != nil {
			v.LagErr = err.Error()
		}
	}
	v.Groups, v.LagAt = len(groups), at
	top := append([]lag.Group(nil), groups...)
	sort.SliceStable(top, func(i, j int) bool { return top[i].TotalLag > top[j].TotalLag })
	if len(top) > 10 {
		top = top[:10]
	}
	v.TopLag = top
	if h.status != nil {
		v.Statuses, _, _ = h.status()
	}
	if WantsJSON(c) {
		return JSON(c, overviewJSON(v))
	}
	rctx := templates.WithRequest(ctx, requestInfo(c))
	for _, p := range h.panels {
		if comp := p.render(rctx); comp != nil {
			v.Panels = append(v.Panels, comp)
		}
	}
	if Fragment(c, "overview") {
		// The navigation's counts come along (swapped out of band), so the
		// Alerts badge agrees with the alerts panel as soon as it changes.
		return Render(c, fiber.StatusOK, templ.Join(templates.OverviewBody(v), navBadgesOf(c)))
	}
	return Render(c, fiber.StatusOK, templates.OverviewPage(PageFor(c, "Overview"), v))
}

// overviewJSON is the overview's figures as JSON (snake_case, like every
// JSON answer of the console).
func overviewJSON(v templates.OverviewView) fiber.Map {
	issues := make([]fiber.Map, 0, len(v.PartitionIssues))
	for _, p := range v.PartitionIssues {
		issues = append(issues, fiber.Map{"topic": p.Topic, "partition": p.Partition, "leader": p.Leader,
			"replicas": orEmpty(p.Replicas), "isr": orEmpty(p.ISR), "offline": p.Offline})
	}
	down := make([]fiber.Map, 0, len(v.BrokersDown))
	for _, b := range v.BrokersDown {
		down = append(down, fiber.Map{"id": b.ID, "host": b.Host, "port": b.Port, "last_seen_at": b.LastSeenAt})
	}
	top := make([]groupJSON, 0, len(v.TopLag))
	for _, g := range v.TopLag {
		top = append(top, groupToJSON(g))
	}
	m := fiber.Map{
		"cluster_id": v.ClusterID, "controller": v.Controller, "brokers_up": v.BrokersUp, "brokers_down": down,
		"topics": v.Topics, "internal_topics": v.InternalTopics, "partitions": v.Partitions,
		"under_replicated": v.UnderReplicated, "offline": v.Offline, "partition_issues": issues,
		"groups": v.Groups, "top_lag": top, "lag_at": v.LagAt,
	}
	if v.Traffic.Known {
		m["messages_in_per_sec"] = v.Traffic.MessagesIn
		if v.Traffic.BytesIn >= 0 {
			m["bytes_in_per_sec"] = v.Traffic.BytesIn
		}
		if v.Traffic.BytesOut >= 0 {
			m["bytes_out_per_sec"] = v.Traffic.BytesOut
		}
	}
	if v.Err != "" {
		m["error"] = v.Err
	}
	if v.LagErr != "" {
		m["lag_error"] = v.LagErr
	}
	return m
}

// orEmpty makes a nil list encode as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

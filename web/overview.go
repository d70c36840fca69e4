package web

import (
	"context"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/lag"
	"github.com/sluice-io/sluice/lag/sampler"
	"github.com/sluice-io/sluice/templates"
)

// GET /: the cluster at a glance. Refreshes itself every 10 s with htmx
// (the #overview fragment).

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
}

type overviewHandler struct {
	kc      overviewCluster
	lag     recentLag
	brokers knownBrokers
	traffic trafficSource
}

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
		}
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
	if WantsJSON(c) {
		return JSON(c, v)
	}
	if Fragment(c, "overview") {
		return Render(c, fiber.StatusOK, templates.OverviewBody(v))
	}
	return Render(c, fiber.StatusOK, templates.OverviewPage(PageFor(c, "Overview"), v))
}

package web

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /brokers: every broker with its load, disk and version, and the
// brokers seen before that are missing now.

type brokerSource interface {
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
	BrokerInfos(ctx context.Context, snap *kafkaview.Snapshot) ([]kafkaview.BrokerInfo, error)
}

type brokersHandler struct {
	kc    brokerSource
	known knownBrokers
}

func (h brokersHandler) get(c *fiber.Ctx) error {
	ctx := requestCtx(c)
	v := templates.BrokersView{Controller: -1}
	snap, err := h.kc.Metadata(ctx, 2*time.Second)
	if err != nil {
		v.Err = err.Error()
	} else {
		v.Controller, v.ClusterID = snap.Controller, snap.ClusterID
		v.Brokers, err = h.kc.BrokerInfos(ctx, snap)
		if err != nil {
			v.Err = err.Error()
		}
		if known, err := h.known.KnownBrokers(ctx); err == nil {
			for _, k := range known {
				if _, up := snap.Broker(k.ID); !up {
					v.Down = append(v.Down, k)
				}
			}
		}
	}
	if WantsJSON(c) {
		return JSON(c, brokersJSON(v))
	}
	return Render(c, fiber.StatusOK, templates.BrokersPage(PageFor(c, "Brokers"), v))
}

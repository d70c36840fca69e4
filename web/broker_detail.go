package web

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /brokers/:id: one broker's log dirs, the partitions it leads and
// follows, and its configs with their sources.

type brokerDetailSource interface {
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
	BrokerDetail(ctx context.Context, snap *kafkaview.Snapshot, id int32) (*kafkaview.BrokerDetail, error)
}

type brokerDetail struct{ kc brokerDetailSource }

func (h brokerDetail) get(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 32)
	if err != nil || id < 0 {
		return NotFound("broker "+strconv.Quote(c.Params("id")), "Broker ids are numbers: see the brokers page.")
	}
	ctx := requestCtx(c)
	snap, err := h.kc.Metadata(ctx, 2*time.Second)
	if err != nil {
		return err
	}
	d, err := h.kc.BrokerDetail(ctx, snap, int32(id))
	if errors.Is(err, kafkaview.ErrNoBroker) {
		return NotFound("live broker "+strconv.Itoa(int(id)), "The cluster's metadata does not list it: see the brokers page for the brokers that are down.")
	}
	if err != nil {
		return err
	}
	v := templates.BrokerView{Detail: d}
	if WantsJSON(c) {
		return JSON(c, brokerDetailJSON(v))
	}
	return Render(c, fiber.StatusOK, templates.BrokerPage(PageFor(c, "Broker "+strconv.Itoa(int(id))), v))
}

func brokerDetailJSON(v templates.BrokerView) fiber.Map {
	d := v.Detail
	replicas := func(rs []kafkaview.BrokerReplica) []fiber.Map {
		out := make([]fiber.Map, 0, len(rs))
		for _, r := range rs {
			out = append(out, fiber.Map{"topic": r.Topic, "partition": r.Partition, "leader": r.Leader, "replicas": r.Replicas,
				"in_sync": r.InSync, "size": r.Size, "offset_lag": r.OffsetLag})
		}
		return out
	}
	cfgs := make([]fiber.Map, 0, len(d.Configs))
	for _, c := range d.Configs {
		var val any = c.Value
		if c.Null || c.Sensitive {
			val = nil
		}
		cfgs = append(cfgs, fiber.Map{"name": c.Name, "value": val, "sensitive": c.Sensitive, "source": c.Source})
	}
	dirs := make([]fiber.Map, 0, len(d.LogDirs))
	for _, l := range d.LogDirs {
		dirs = append(dirs, fiber.Map{"dir": l.Dir, "bytes": l.Bytes, "total_bytes": l.TotalBytes, "free_bytes": l.FreeBytes, "error": l.Err})
	}
	return fiber.Map{"id": d.Info.ID, "host": d.Info.Host, "port": d.Info.Port, "rack": d.Info.Rack, "controller": d.Info.Controller,
		"log_bytes": d.Info.LogBytes, "log_dirs": dirs, "log_dirs_error": d.LogDirsErr,
		"led": replicas(d.Led), "followed": replicas(d.Follow), "configs": cfgs, "configs_error": d.ConfigsErr}
}

package web

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/config"

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
	id, err := brokerID(c)
	if err != nil {
		return err
	}
	v, err := h.view(c, id)
	if err != nil {
		return err
	}
	return h.render(c, fiber.StatusOK, v)
}

// brokerID is the :id of a broker page.
func brokerID(c *fiber.Ctx) (int32, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 32)
	if err != nil || id < 0 {
		return 0, NotFound("broker "+strconv.Quote(c.Params("id")), "Broker ids are numbers: see the brokers page.")
	}
	return int32(id), nil
}

// view describes broker id, with its dynamic configs for the edit forms.
func (h brokerDetail) view(c *fiber.Ctx, id int32) (templates.BrokerView, error) {
	ctx := requestCtx(c)
	snap, err := h.kc.Metadata(ctx, 2*time.Second)
	if err != nil {
		return templates.BrokerView{}, err
	}
	d, err := h.kc.BrokerDetail(ctx, snap, id)
	if errors.Is(err, kafkaview.ErrNoBroker) {
		return templates.BrokerView{}, NotFound("live broker "+strconv.Itoa(int(id)), "The cluster's metadata does not list it: see the brokers page for the brokers that are down.")
	}
	if err != nil {
		return templates.BrokerView{}, err
	}
	return templates.BrokerView{Detail: d, Dynamic: dynamicConfigs(d), BrokerForm: templates.NewForm(), DefaultForm: templates.NewForm()}, nil
}

func (h brokerDetail) render(c *fiber.Ctx, status int, v templates.BrokerView) error {
	if WantsJSON(c) {
		return c.Status(status).JSON(brokerDetailJSON(v))
	}
	return Render(c, status, templates.BrokerPage(PageFor(c, "Broker "+strconv.Itoa(int(v.Detail.Info.ID)),
		templates.Crumb{Label: "Brokers", Href: "/brokers"}), v))
}

// dynamicConfigs are the configs a broker applies at run time (the
// config table's dynamic keys), with the value in force on d and the
// overrides of the broker and of the cluster default.
func dynamicConfigs(d *kafkaview.BrokerDetail) []templates.DynamicConfig {
	described := make(map[string]kafkaview.BrokerConfig, len(d.Configs))
	for _, c := range d.Configs {
		described[c.Name] = c
	}
	var out []templates.DynamicConfig
	for _, name := range config.DynamicKeys() {
		dc := templates.DynamicConfig{Name: name}
		if c, ok := described[name]; ok {
			dc.InForce, dc.Source, dc.Sensitive = c.Value, c.Source, c.Sensitive
			if c.Kafka == kmsg.ConfigSourceDynamicBrokerConfig {
				dc.Broker, dc.HasBroker = c.Value, true
			}
			for _, s := range c.Synonyms {
				if s.Kafka == kmsg.ConfigSourceDynamicBrokerConfig {
					dc.Broker, dc.HasBroker = s.Value, true
				}
			}
		}
		if v, ok := d.ClusterDefaults[name]; ok {
			dc.Default, dc.HasDefault = v, true
		}
		out = append(out, dc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func brokerDetailJSON(v templates.BrokerView) fiber.Map {
	d := v.Detail
	replicas := func(rs []kafkaview.BrokerReplica, followed bool) []fiber.Map {
		out := make([]fiber.Map, 0, len(rs))
		for _, r := range rs {
			m := fiber.Map{"topic": r.Topic, "partition": r.Partition, "leader": r.Leader, "replicas": r.Replicas,
				"in_sync": r.InSync, "size": r.Size, "offset_lag": r.OffsetLag}
			if followed {
				// The replica fetcher's lag in offsets (DescribeLogDirs).
				m["fetcher_lag"] = r.OffsetLag
			}
			out = append(out, m)
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
	dyn := make([]fiber.Map, 0, len(v.Dynamic))
	for _, c := range v.Dynamic {
		m := fiber.Map{"name": c.Name, "value": c.InForce, "source": c.Source, "broker_override": nil, "cluster_default": nil}
		if c.HasBroker {
			m["broker_override"] = c.Broker
		}
		if c.HasDefault {
			m["cluster_default"] = c.Default
		}
		if c.Sensitive {
			m["value"], m["broker_override"], m["cluster_default"] = nil, nil, nil
		}
		dyn = append(dyn, m)
	}
	forms := fiber.Map{}
	for scope, f := range map[string]templates.Form{templates.ScopeBroker: v.BrokerForm, templates.ScopeDefault: v.DefaultForm} {
		if f.Err != "" || len(f.Errors) > 0 {
			forms[scope] = fiber.Map{"error": f.Err, "fields": f.Errors}
		}
	}
	dirs := make([]fiber.Map, 0, len(d.LogDirs))
	for _, l := range d.LogDirs {
		dirs = append(dirs, fiber.Map{"dir": l.Dir, "bytes": l.Bytes, "total_bytes": l.TotalBytes, "free_bytes": l.FreeBytes, "error": l.Err})
	}
	return fiber.Map{"id": d.Info.ID, "host": d.Info.Host, "port": d.Info.Port, "rack": d.Info.Rack, "controller": d.Info.Controller,
		"log_bytes": d.Info.LogBytes, "log_dirs": dirs, "log_dirs_error": d.LogDirsErr,
		"led": replicas(d.Led, false), "followed": replicas(d.Follow, true), "configs": cfgs, "configs_error": d.ConfigsErr,
		"dynamic_configs": dyn, "cluster_defaults_error": d.ClusterDefaultsErr, "errors": forms}
}

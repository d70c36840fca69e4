package web

import (
	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// The JSON answers of the brokers, topics and topic pages, in snake_case
// like every JSON answer of the console (the page views are Go structs
// for the templates, not an API).

func partitionMetaJSON(p kafkaview.PartitionMeta) fiber.Map {
	return fiber.Map{"partition": p.Partition, "leader": p.Leader, "leader_epoch": p.LeaderEpoch,
		"replicas": orEmpty(p.Replicas), "isr": orEmpty(p.ISR), "offline_replicas": orEmpty(p.Offline), "error": p.Err}
}

func topicsJSON(v templates.TopicsView) fiber.Map {
	rows := make([]fiber.Map, 0, len(v.Rows))
	for _, r := range v.Rows {
		m := fiber.Map{"name": r.Meta.Name, "internal": r.Meta.Internal, "partitions": len(r.Meta.Partitions),
			"replication": r.Meta.Replication, "under_replicated": r.Meta.UnderReplicated, "offline": r.Meta.Offline, "error": r.Meta.Err}
		if r.HasStats {
			m["messages"], m["size_bytes"] = r.Stats.Messages, r.Stats.Size
		}
		rows = append(rows, m)
	}
	return fiber.Map{"topics": rows, "total": v.Pager.Total, "page": v.Pager.Page, "pages": v.Pager.Pages, "per_page": v.Pager.PerPage,
		"in_cluster": v.TotalTopics, "internal_in_cluster": v.InternalTopics, "stats_error": v.StatsErr, "error": v.Err}
}

func topicDetailJSON(d *kafkaview.TopicDetail) fiber.Map {
	parts := make([]fiber.Map, 0, len(d.Partitions))
	for _, p := range d.Partitions {
		m := partitionMetaJSON(p.PartitionMeta)
		m["start_offset"], m["end_offset"], m["size_bytes"] = p.Start, p.End, p.Size
		m["last_stable_offset"] = p.Stable
		parts = append(parts, m)
	}
	cfgs := make([]fiber.Map, 0, len(d.Configs))
	for _, c := range d.Configs {
		m := fiber.Map{"name": c.Name, "value": c.Value, "default": c.Default, "is_default": c.IsDefault, "source": c.Source,
			"sensitive": c.Sensitive, "read_only": c.ReadOnly}
		if c.Sensitive {
			m["value"] = nil
		} else if c.Null {
			m["value"] = nil
		}
		cfgs = append(cfgs, m)
	}
	return fiber.Map{"name": d.Meta.Name, "internal": d.Meta.Internal, "replication": d.Meta.Replication,
		"under_replicated": d.Meta.UnderReplicated, "offline": d.Meta.Offline, "messages": d.Messages, "size_bytes": d.Size,
		"partitions": parts, "configs": cfgs, "config_error": d.ConfigErr, "offsets_error": d.OffsetsErr}
}

func brokersJSON(v templates.BrokersView) fiber.Map {
	up := make([]fiber.Map, 0, len(v.Brokers))
	for _, b := range v.Brokers {
		dirs := make([]fiber.Map, 0, len(b.LogDirs))
		for _, d := range b.LogDirs {
			dirs = append(dirs, fiber.Map{"dir": d.Dir, "bytes": d.Bytes, "total_bytes": d.TotalBytes, "free_bytes": d.FreeBytes, "error": d.Err})
		}
		up = append(up, fiber.Map{"id": b.ID, "host": b.Host, "port": b.Port, "rack": b.Rack, "leaders": b.Leaders, "replicas": b.Replicas,
			"up": b.Up, "controller": b.Controller, "log_dirs": dirs, "log_bytes": b.LogBytes, "total_bytes": b.TotalBytes,
			"free_bytes": b.FreeBytes, "version": b.Version, "error": b.Err})
	}
	down := make([]fiber.Map, 0, len(v.Down))
	for _, k := range v.Down {
		down = append(down, fiber.Map{"id": k.ID, "host": k.Host, "port": k.Port, "rack": k.Rack, "first_seen_at": k.FirstSeenAt, "last_seen_at": k.LastSeenAt})
	}
	return fiber.Map{"brokers": up, "down": down, "controller": v.Controller, "cluster_id": v.ClusterID, "error": v.Err}
}

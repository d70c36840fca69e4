package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GroupLag is one consumer group's lag as the background lag sampler sees it.
type GroupLag struct {
	Group      string
	Members    int
	Partitions []PartitionLag
}

// PartitionLag is a group's lag on one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	Lag       int64         // records between the committed offset and the high watermark
	LagTime   time.Duration // how far behind in time (0 when caught up or unknown)
}

// Lag exports consumer-group lag. Exactly one process of a cluster (the one
// doing the console's background work) should feed it, so lag is not counted
// once per host.
type Lag struct {
	mu     sync.Mutex
	groups []GroupLag // Lock mu.
	at     time.Time  // Lock mu.

	records, seconds, members, updated *prometheus.Desc
}

// Lag returns the consumer-group lag exporter, registering it on first use.
func (r *Registry) Lag() *Lag {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lag == nil {
		r.lag = &Lag{
			records: prometheus.NewDesc("sluice_consumergroup_lag_records", "Records between the group's committed offset and the partition's high watermark.", []string{"group", "topic", "partition"}, nil),
			seconds: prometheus.NewDesc("sluice_consumergroup_lag_seconds", "How far behind in time the group is on the partition (age of the first unconsumed record relative to the newest).", []string{"group", "topic", "partition"}, nil),
			members: prometheus.NewDesc("sluice_consumergroup_members", "Members of the consumer group.", []string{"group"}, nil),
			updated: prometheus.NewDesc("sluice_consumergroup_lag_updated_timestamp_seconds", "Unix time of the lag sample exported now.", nil, nil),
		}
		r.reg.MustRegister(r.lag)
	}
	return r.lag
}

// Update replaces the exported lag with groups, sampled at at. Groups and
// partitions absent from groups disappear from the export. A group or
// partition listed twice is exported once (the last one wins).
func (l *Lag) Update(groups []GroupLag, at time.Time) {
	seen := make(map[string]int, len(groups))
	out := make([]GroupLag, 0, len(groups))
	for _, g := range groups {
		parts := make([]PartitionLag, 0, len(g.Partitions))
		idx := make(map[partitionKey]int, len(g.Partitions))
		for _, p := range g.Partitions {
			k := partitionKey{p.Topic, p.Partition}
			if i, dup := idx[k]; dup {
				parts[i] = p
				continue
			}
			idx[k] = len(parts)
			parts = append(parts, p)
		}
		g.Partitions = parts
		if i, dup := seen[g.Group]; dup {
			out[i] = g
			continue
		}
		seen[g.Group] = len(out)
		out = append(out, g)
	}
	l.mu.Lock()
	l.groups, l.at = out, at
	l.mu.Unlock()
}

func (l *Lag) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.records
	ch <- l.seconds
	ch <- l.members
	ch <- l.updated
}

func (l *Lag) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	groups, at := l.groups, l.at
	l.mu.Unlock()
	if at.IsZero() {
		return
	}
	ch <- prometheus.MustNewConstMetric(l.updated, prometheus.GaugeValue, float64(at.UnixNano())/1e9)
	for _, g := range groups {
		ch <- prometheus.MustNewConstMetric(l.members, prometheus.GaugeValue, float64(g.Members), g.Group)
		for _, p := range g.Partitions {
			part := itoa32(p.Partition)
			ch <- prometheus.MustNewConstMetric(l.records, prometheus.GaugeValue, float64(p.Lag), g.Group, p.Topic, part)
			ch <- prometheus.MustNewConstMetric(l.seconds, prometheus.GaugeValue, p.LagTime.Seconds(), g.Group, p.Topic, part)
		}
	}
}

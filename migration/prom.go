package migration

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// StatusSource is what the metric collector and alert rules read: the
// Manager implements it. It is deliberately tiny so the alerting package
// can depend on it (or on a copy of it) without depending on the engine.
type StatusSource interface {
	Statuses() []Status
}

// Collector exports every comparison's numbers as Prometheus gauges:
//
//	sluice_migration_records{comparison,name,outcome}   outcome: left, right, matched, mismatched,
//	        missing_right, missing_left, duplicates_left, duplicates_right, out_of_order,
//	        unkeyed_left, unkeyed_right, pending_left, pending_right
//	sluice_migration_ready{comparison,name}              1 when the verdict is "ready to cut over"
//	sluice_migration_running{comparison,name}            1 while being compared
//	sluice_migration_skew_seconds{comparison,name,quantile}  quantile: 0.5, 0.99, 1 (max)
//	sluice_migration_remaining_records{comparison,name}  records left to read (bounded) or lag
//
// They are gauges, not counters: a restarted comparison starts again from 0.
// Register it once, in the process that runs the comparisons.
type Collector struct {
	src       StatusSource
	records   *prometheus.Desc
	ready     *prometheus.Desc
	running   *prometheus.Desc
	skew      *prometheus.Desc
	remaining *prometheus.Desc
}

// NewCollector returns a collector over src.
func NewCollector(src StatusSource) *Collector {
	labels := []string{"comparison", "name"}
	return &Collector{
		src:       src,
		records:   prometheus.NewDesc("sluice_migration_records", "Records of a topic comparison by outcome.", append(labels, "outcome"), nil),
		ready:     prometheus.NewDesc("sluice_migration_ready", "1 when the comparison's verdict is ready to cut over, else 0.", labels, nil),
		running:   prometheus.NewDesc("sluice_migration_running", "1 while the comparison is running, else 0.", labels, nil),
		skew:      prometheus.NewDesc("sluice_migration_skew_seconds", "Latency skew (right record time minus left) of compared pairs.", append(labels, "quantile"), nil),
		remaining: prometheus.NewDesc("sluice_migration_remaining_records", "Records left to read (bounded) or consumer lag (continuous).", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.ready, c.running, c.skew, c.remaining} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.src.Statuses() {
		id := strconv.FormatInt(st.ID, 10)
		k := st.Snapshot.Counters
		for _, o := range []struct {
			name string
			v    int64
		}{
			{"left", k.LeftRecords}, {"right", k.RightRecords}, {"matched", k.Matched}, {"mismatched", k.Mismatched},
			{"missing_right", k.MissingRight}, {"missing_left", k.MissingLeft},
			{"duplicates_left", k.DuplicatesLeft}, {"duplicates_right", k.DuplicatesRight},
			{"out_of_order", k.OutOfOrder}, {"unkeyed_left", k.UnkeyedLeft}, {"unkeyed_right", k.UnkeyedRight},
			{"pending_left", k.PendingLeft}, {"pending_right", k.PendingRight},
		} {
			ch <- prometheus.MustNewConstMetric(c.records, prometheus.GaugeValue, float64(o.v), id, st.Name, o.name)
		}
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, b2f(st.Verdict.Ready), id, st.Name)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, b2f(st.State == StateRunning), id, st.Name)
		for _, q := range []struct {
			label string
			v     float64
		}{{"0.5", st.Snapshot.Skew.P50.Seconds()}, {"0.99", st.Snapshot.Skew.P99.Seconds()}, {"1", st.Snapshot.Skew.Max.Seconds()}} {
			ch <- prometheus.MustNewConstMetric(c.skew, prometheus.GaugeValue, q.v, id, st.Name, q.label)
		}
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(st.Snapshot.Remaining()), id, st.Name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

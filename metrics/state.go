package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionStats is what a broker reports about one partition replica it
// holds, at scrape time.
type PartitionStats struct {
	Topic     string
	Partition int32
	// Leader is true when this broker leads the partition.
	Leader bool
	// UnderReplicated: led here and the ISR is smaller than the replica set.
	UnderReplicated bool
	// UnderMinISR: led here and the ISR is smaller than min.insync.replicas.
	UnderMinISR    bool
	LogSizeBytes   int64
	LogStartOffset int64
	LogEndOffset   int64
	Segments       int
}

// BrokerSnapshot collects what OnCollect callbacks report during one scrape.
// Reporting the same partition twice (two callbacks, or two brokers sharing
// an id in one test process) adds the sizes and keeps the larger offsets.
type BrokerSnapshot struct {
	partitions, leaders, underReplicated, underMinISR int
	controllerActive                                  bool
	offline                                           int
	purgatory                                         map[string]int
	logs                                              map[partitionKey]*PartitionStats
}

type partitionKey struct {
	topic     string
	partition int32
}

// Partition reports one partition replica held by the broker.
func (s *BrokerSnapshot) Partition(p PartitionStats) {
	s.partitions++
	if p.Leader {
		s.leaders++
		if p.UnderReplicated {
			s.underReplicated++
		}
		if p.UnderMinISR {
			s.underMinISR++
		}
	}
	if s.logs == nil {
		s.logs = map[partitionKey]*PartitionStats{}
	}
	k := partitionKey{p.Topic, p.Partition}
	if old := s.logs[k]; old != nil {
		old.LogSizeBytes += p.LogSizeBytes
		old.Segments += p.Segments
		old.LogStartOffset = max(old.LogStartOffset, p.LogStartOffset)
		old.LogEndOffset = max(old.LogEndOffset, p.LogEndOffset)
		return
	}
	s.logs[k] = &p
}

// Controller reports whether this broker is the active controller and, when
// it is, how many partitions of the cluster have no live leader.
func (s *BrokerSnapshot) Controller(active bool, offlinePartitions int) {
	s.controllerActive = s.controllerActive || active
	if active {
		s.offline += offlinePartitions
	}
}

// Purgatory reports how many delayed operations of a kind ("produce",
// "fetch", "join", "heartbeat", ...) wait now. Keep the kinds a fixed set.
func (s *BrokerSnapshot) Purgatory(operation string, waiting int) {
	if s.purgatory == nil {
		s.purgatory = map[string]int{}
	}
	s.purgatory[operation] += waiting
}

// stateCollector turns OnCollect callbacks into gauges at scrape time.
type stateCollector struct {
	r *Registry

	partitions, leaders, underReplicated, underMinISR *prometheus.Desc
	controllerActive, offline, purgatory              *prometheus.Desc
	logSize, logStart, logEnd, logSegments            *prometheus.Desc
}

func newStateCollector(r *Registry) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{
		r:                r,
		partitions:       d("sluice_broker_partitions", "Partition replicas held by the broker.", "broker"),
		leaders:          d("sluice_broker_leader_partitions", "Partitions the broker leads.", "broker"),
		underReplicated:  d("sluice_broker_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set.", "broker"),
		underMinISR:      d("sluice_broker_under_min_isr_partitions", "Partitions led here whose ISR is below min.insync.replicas.", "broker"),
		controllerActive: d("sluice_controller_active", "1 when this broker is the active controller.", "broker"),
		offline:          d("sluice_controller_offline_partitions", "Partitions of the cluster without a live leader (reported by the active controller only).", "broker"),
		purgatory:        d("sluice_broker_purgatory_size", "Delayed operations waiting, by kind.", "broker", "operation"),
		logSize:          d("sluice_log_size_bytes", "Bytes of the partition's log segments on this broker.", "broker", "topic", "partition"),
		logStart:         d("sluice_log_start_offset", "First offset of the partition's log on this broker.", "broker", "topic", "partition"),
		logEnd:           d("sluice_log_end_offset", "Next offset to be written to the partition's log on this broker.", "broker", "topic", "partition"),
		logSegments:      d("sluice_log_segments", "Segments of the partition's log on this broker.", "broker", "topic", "partition"),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.partitions, c.leaders, c.underReplicated, c.underMinISR,
		c.controllerActive, c.offline, c.purgatory, c.logSize, c.logStart, c.logEnd, c.logSegments} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.mu.Lock()
	brokers := make([]*Broker, 0, len(c.r.brokers))
	for _, b := range c.r.brokers {
		brokers = append(brokers, b)
	}
	c.r.mu.Unlock()
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].id < brokers[j].id })

	for _, b := range brokers {
		b.mu.Lock()
		fns := make([]func(*BrokerSnapshot), 0, len(b.callbacks))
		for _, fn := range b.callbacks {
			fns = append(fns, fn)
		}
		b.mu.Unlock()
		if len(fns) == 0 {
			continue // nothing reports state for this broker: export nothing rather than zeros
		}
		var s BrokerSnapshot
		for _, fn := range fns {
			fn(&s)
		}
		l := b.label
		gauge := func(d *prometheus.Desc, v float64, lv ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		gauge(c.partitions, float64(s.partitions), l)
		gauge(c.leaders, float64(s.leaders), l)
		gauge(c.underReplicated, float64(s.underReplicated), l)
		gauge(c.underMinISR, float64(s.underMinISR), l)
		active := 0.0
		if s.controllerActive {
			active = 1
		}
		gauge(c.controllerActive, active, l)
		gauge(c.offline, float64(s.offline), l)
		for op, n := range s.purgatory {
			gauge(c.purgatory, float64(n), l, op)
		}
		for k, p := range s.logs {
			part := itoa32(k.partition)
			gauge(c.logSize, float64(p.LogSizeBytes), l, k.topic, part)
			gauge(c.logStart, float64(p.LogStartOffset), l, k.topic, part)
			gauge(c.logEnd, float64(p.LogEndOffset), l, k.topic, part)
			gauge(c.logSegments, float64(p.Segments), l, k.topic, part)
		}
	}
}

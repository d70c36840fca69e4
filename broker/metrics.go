package broker

import (
	"maps"
	"slices"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/storage"
)

// The broker's Prometheus metrics (package metrics), on Config.Metrics:
//
//   - Traffic counters, counted where the data moves, through handles
//     resolved once per partition (newPartition) so the data path neither
//     allocates nor locks for them: topic bytes and messages in after a
//     successful leader append (a retried duplicate is not counted again),
//     topic bytes and messages out for consumer fetches and replication bytes
//     out for follower fetches (countSent, called by Fetch once per region
//     it answers with), replication bytes in after a follower's
//     append, ISR shrinks and expands after the ISR change is written.
//   - State gauges, read at scrape time (collectMetrics): partitions held and
//     led, under-replicated and under-min-ISR partitions, the active
//     controller and the offline partitions it sees, each partition's log
//     size, start and end offsets and segments, and the requests parked in
//     the purgatory (enterPurgatory/leavePurgatory).
//
// A topic's series are removed when its last partition leaves this broker.

// delayedOp is a kind of request parked in the purgatory.
type delayedOp int

const (
	// delayedProduce is an acks=all produce waiting for the high watermark.
	delayedProduce delayedOp = iota
	// delayedFetch is a fetch waiting for min_bytes or max_wait_ms.
	delayedFetch
	numDelayedOps
)

// delayedOpNames are the operation label values of
// sluice_broker_purgatory_size, Kafka's purgatory names.
var delayedOpNames = [numDelayedOps]string{"produce", "fetch"}

// enterPurgatory counts a request of kind op that starts waiting; call
// leavePurgatory when it stops.
func (b *Broker) enterPurgatory(op delayedOp) { b.purgatory[op].Add(1) }

// leavePurgatory counts a request of kind op that stopped waiting.
func (b *Broker) leavePurgatory(op delayedOp) { b.purgatory[op].Add(-1) }

// Metrics is the registry the broker's metrics go to (Config.Metrics, or
// metrics.Default() when that was nil); the protocol server's request
// metrics default to it too.
func (b *Broker) Metrics() *metrics.Registry { return b.cfg.Metrics }

// countSent counts a region returned by Read as sent in a fetch response:
// to a consumer (replicaID < 0) as the topic's bytes out and messages out,
// to a follower replica as replication bytes out. Messages are the region's
// offset span (storage.ReadInfo.NextOffset - FirstOffset): exact in a log
// without gaps, an upper bound in a compacted one, counting whole batches
// even when the fetch offset lies inside the first. Call it once per region
// actually answered with, not for the reads a parked fetch repeats.
func (p *Partition) countSent(info *storage.ReadInfo, replicaID int32) {
	n := int(info.Region.Len)
	if n <= 0 {
		return
	}
	if replicaID >= 0 {
		p.b.mx.ReplicationOut(n)
		return
	}
	p.mx.Out(n, int(info.NextOffset-info.FirstOffset))
}

// countISRChange counts a written ISR change: a shrink when a member left,
// an expand when one joined (a reassignment can do both at once).
func (b *Broker) countISRChange(before, after []int32) {
	for _, r := range before {
		if !slices.Contains(after, r) {
			b.mx.ISRShrink()
			break
		}
	}
	for _, r := range after {
		if !slices.Contains(before, r) {
			b.mx.ISRExpand()
			break
		}
	}
}

// forgetTopicMetrics removes the traffic series of each topic of dropped
// whose last partition has left this broker (deleted, or reassigned away).
// Called from applyLocal, which alone adds partitions, after it removed
// them.
func (b *Broker) forgetTopicMetrics(dropped []*Partition) {
	if len(dropped) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, p := range dropped {
		gone[p.tp.Topic] = true
	}
	b.mu.RLock()
	for tp := range b.partitions {
		delete(gone, tp.Topic)
	}
	b.mu.RUnlock()
	for topic := range gone {
		b.mx.RemoveTopic(topic)
	}
}

// collectMetrics reports the broker's state at scrape time.
func (b *Broker) collectMetrics(s *metrics.BrokerSnapshot) {
	self := b.cfg.BrokerID
	b.mu.RLock()
	parts := slices.Collect(maps.Values(b.partitions))
	b.mu.RUnlock()
	for _, p := range parts {
		p.mu.RLock()
		leader := p.leader == self && !p.removed
		isr, replicas, minISR := len(p.isr), len(p.replicas), p.settings.minISR
		p.mu.RUnlock()
		s.Partition(metrics.PartitionStats{
			Topic:           p.tp.Topic,
			Partition:       p.tp.Partition,
			Leader:          leader,
			UnderReplicated: leader && isr < replicas,
			UnderMinISR:     leader && int32(isr) < minISR,
			LogSizeBytes:    p.log.Size(),
			LogStartOffset:  p.log.LogStartOffset(),
			LogEndOffset:    p.log.LogEndOffset(),
			Segments:        p.log.NumSegments(),
		})
	}
	img := b.Image()
	active := img.Controller == self
	offline := 0
	if active {
		offline = img.offlinePartitions()
	}
	s.Controller(active, offline)
	for op, name := range delayedOpNames {
		s.Purgatory(name, int(b.purgatory[op].Load()))
	}
}

// offlinePartitions counts the partitions of the image (topics being
// deleted aside) without a live leader.
func (im *Image) offlinePartitions() int {
	live := make(map[int32]bool, len(im.Brokers))
	for _, br := range im.Brokers {
		live[br.ID] = true
	}
	n := 0
	for _, t := range im.Topics {
		if t.Deleting {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || !live[p.Leader] {
				n++
			}
		}
	}
	return n
}

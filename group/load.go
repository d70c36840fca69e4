package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// Loading and unloading __consumer_offsets partitions. When this broker
// becomes the leader of a partition, the coordinator reads the partition's
// log from start to end and rebuilds the groups whose partition it is;
// requests for those groups meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
// When it stops leading, the groups are dropped and their requests get
// NOT_COORDINATOR, so clients look the coordinator up again.

// loadResult is the state of one partition's log: the last value of every
// key, tombstones applied.
type loadResult struct {
	offsets map[string]map[topicPartition]offsetCommit
	groups  map[string]*storedGroup
	records int
	skipped int   // records of unknown key versions
	corrupt int   // records whose key or value did not decode (skipped)
	lastErr error // the last of those decode errors
}

func newLoadResult() *loadResult {
	return &loadResult{
		offsets: make(map[string]map[topicPartition]offsetCommit),
		groups:  make(map[string]*storedGroup),
	}
}

// apply folds one record into the result.
func (lr *loadResult) apply(key, value []byte) error {
	k, err := decodeKey(key)
	if err != nil {
		return err
	}
	lr.records++
	switch k.kind {
	case kindOffset:
		tp := topicPartition{k.topic, k.partition}
		if value == nil {
			if m, ok := lr.offsets[k.group]; ok {
				delete(m, tp)
				if len(m) == 0 {
					delete(lr.offsets, k.group)
				}
			}
			return nil
		}
		c, err := decodeOffsetValue(value)
		if err != nil {
			return err
		}
		m, ok := lr.offsets[k.group]
		if !ok {
			m = make(map[topicPartition]offsetCommit)
			lr.offsets[k.group] = m
		}
		m[tp] = c
	case kindGroup:
		if value == nil {
			delete(lr.groups, k.group)
			return nil
		}
		sg, err := decodeGroupValue(value)
		if err != nil {
			return err
		}
		lr.groups[k.group] = &sg
	default:
		lr.skipped++
	}
	return nil
}

// applyBatches folds every record of the concatenated batches that lies at
// or after from (a read may start inside the first batch). Control batches
// and aborted transactions do not occur in a log Sluice wrote; control
// records are skipped. It returns the offset after the last batch.
func (lr *loadResult) applyBatches(b []byte, from int64) (next int64, err error) {
	next = from
	err = record.ForEachBatch(b, func(h *record.BatchHeader, batch []byte) error {
		if h.NextOffset() > next {
			next = h.NextOffset()
		}
		if h.Control() {
			return nil
		}
		return record.Records(batch, func(h *record.BatchHeader, r *record.Record) error {
			if h.BaseOffset+int64(r.OffsetDelta) < from {
				return nil
			}
			// A record that does not decode is skipped, not fatal: one bad
			// record must not keep every group of the partition away.
			if err := lr.apply(r.Key, r.Value); err != nil {
				lr.corrupt++
				lr.lastErr = fmt.Errorf("offset %d: %w", h.BaseOffset+int64(r.OffsetDelta), err)
			}
			return nil
		})
	})
	return next, err
}

// becomeLeader starts coordinating partition p at leaderEpoch. It returns
// true when the partition must be loaded (the driver then reads the log and
// calls installLoad); a repeated call for the same epoch is a no-op.
func (st *state) becomeLeader(p, epoch int32) bool {
	if cur, ok := st.partitions[p]; ok {
		if cur.epoch == epoch {
			return false
		}
		st.unload(p)
	}
	st.partitions[p] = &partitionState{id: p, epoch: epoch, groups: make(map[string]*group)}
	return true
}

// resign stops coordinating partition p. An epoch older than the one being
// coordinated is stale and ignored; -1 resigns whatever epoch.
func (st *state) resign(p, epoch int32) {
	cur, ok := st.partitions[p]
	if !ok || (epoch >= 0 && epoch < cur.epoch) {
		return
	}
	st.unload(p)
}

func (st *state) unload(p int32) {
	cur, ok := st.partitions[p]
	if !ok {
		return
	}
	for _, name := range sortedKeys(cur.groups) {
		g := cur.groups[name]
		for _, m := range g.members {
			if m.join != nil {
				m.join.reply(joinErr(m.join.req, kerr.NotCoordinator.Code, m.id))
				m.join = nil
			}
			if m.sync != nil {
				m.sync.reply(syncErr(m.sync.req, kerr.NotCoordinator.Code))
				m.sync = nil
			}
		}
		g.seq++
		delete(st.groups, name)
	}
	delete(st.partitions, p)
	st.log.Info("group coordinator resigned partition", "partition", p, "epoch", cur.epoch, "groups", len(cur.groups))
}

// installLoad builds the groups of partition p from its log. It ignores a
// result for an epoch that is no longer current (the partition moved while
// it loaded).
func (st *state) installLoad(p, epoch int32, lr *loadResult) {
	ps, ok := st.partitions[p]
	if !ok || ps.epoch != epoch || ps.loaded {
		return
	}
	names := make(map[string]bool)
	for name := range lr.offsets {
		names[name] = true
	}
	for name := range lr.groups {
		names[name] = true
	}
	for name := range names {
		if PartitionFor(name, st.cfg.NumPartitions) != p {
			st.log.Warn("group found in the wrong __consumer_offsets partition (offsets.topic.num.partitions changed?); ignored",
				"group", name, "partition", p)
			continue
		}
		g := newGroup(name, p, st.now)
		if offs, ok := lr.offsets[name]; ok {
			g.offsets = offs
		}
		if sg, ok := lr.groups[name]; ok {
			st.restoreGroup(g, sg)
		}
		st.groups[name] = g
		ps.groups[name] = g
	}
	ps.loaded = true
	st.log.Info("group coordinator loaded partition", "partition", p, "epoch", epoch,
		"groups", len(ps.groups), "records", lr.records, "skipped", lr.skipped)
	if lr.corrupt > 0 {
		st.log.Warn("corrupt __consumer_offsets records skipped while loading", "partition", p,
			"records", lr.corrupt, "last_err", lr.lastErr)
	}
}

// restoreGroup sets g from its stored metadata: a group with members is
// Stable in its stored generation and its members must heartbeat within
// their session timeout, as Kafka does after a coordinator move.
func (st *state) restoreGroup(g *group, sg *storedGroup) {
	g.protocolType = sg.protocolType
	g.generation = sg.generation
	g.protocol = sg.protocol
	g.leader = sg.leader
	if sg.stateTimestamp >= 0 {
		g.stateTime = time.UnixMilli(sg.stateTimestamp)
	}
	if len(sg.members) == 0 {
		g.state = stateEmpty
		g.protocol, g.leader = "", ""
		return
	}
	g.state = stateStable
	for _, sm := range sg.members {
		m := &member{
			id:               sm.memberID,
			instanceID:       sm.instanceID,
			clientID:         sm.clientID,
			clientHost:       sm.clientHost,
			protocolType:     sg.protocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: sg.protocol, Metadata: sm.subscription}},
			sessionTimeout:   time.Duration(sm.sessionTimeout) * time.Millisecond,
			rebalanceTimeout: time.Duration(sm.rebalanceTimeout) * time.Millisecond,
			assignment:       sm.assignment,
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.statics[m.instanceID] = m.id
		}
		st.touch(g, m)
	}
	if _, ok := g.members[g.leader]; !ok {
		g.leader = sortedKeys(g.members)[0]
	}
}

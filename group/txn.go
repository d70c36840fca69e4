package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// Transactional offset commits (KIP-98, KIP-447). TxnOffsetCommit writes
// the offsets as a transactional batch of the producer into the group's
// __consumer_offsets partition; they stay pending, invisible to
// OffsetFetch, until the transaction's marker lands on that partition:
// COMMIT makes each one the committed offset unless a plain commit written
// after it exists, ABORT drops them. Loading does the same from the log.

// pendingOffset is a transactional commit waiting for its marker; seq
// orders it against plain commits (log order).
type pendingOffset struct {
	c   offsetCommit
	seq uint64
}

// nextSeq is the next position in the order commits were stored.
func (st *state) nextSeq() uint64 { st.seq++; return st.seq }

// txnCommit handles TxnOffsetCommit.
func (st *state) txnCommit(req *kmsg.TxnOffsetCommitRequest, unknown map[topicPartition]bool, reply func(*kmsg.TxnOffsetCommitResponse)) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := make(map[topicPartition]int16)
	answer := func() {
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = codes[topicPartition{t.Topic, p.Partition}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
	}
	all := func(code int16) {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				codes[topicPartition{t.Topic, p.Partition}] = code
			}
		}
		answer()
	}
	if code := st.coordinatorError(req.Group); code != 0 {
		all(code)
		return
	}
	generation, memberID, instanceID := int32(-1), "", ""
	if req.Version >= 3 {
		generation, memberID, instanceID = req.Generation, req.MemberID, instanceOf(req.InstanceID)
	}
	g, ok := st.groups[req.Group]
	if !ok {
		if generation >= 0 || memberID != "" {
			all(kerr.IllegalGeneration.Code)
			return
		}
		g = st.getOrCreate(req.Group)
	}
	// KIP-447: a commit naming a member or generation is checked against
	// the group (GroupCoordinator.validateOffsetCommit).
	if g.state == stateDead {
		all(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if generation >= 0 || memberID != "" || instanceID != "" {
		if g.fenced(instanceID, memberID) {
			all(kerr.FencedInstanceID.Code)
			return
		}
		m, ok := g.members[memberID]
		if !ok {
			all(kerr.UnknownMemberID.Code)
			return
		}
		if generation != g.generation {
			all(kerr.IllegalGeneration.Code)
			return
		}
		st.touch(g, m)
	}
	nowMs := st.now.UnixMilli()
	var recs []record.Record
	commits := make(map[topicPartition]offsetCommit)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			md := instanceOf(p.Metadata)
			switch {
			case unknown[tp]:
				codes[tp] = kerr.UnknownTopicOrPartition.Code
				continue
			case len(md) > st.cfg.MaxMetadataBytes:
				codes[tp] = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			c := offsetCommit{offset: p.Offset, leaderEpoch: -1, metadata: md, commitTime: nowMs, expireTime: -1}
			if req.Version >= 2 {
				c.leaderEpoch = p.LeaderEpoch
			}
			commits[tp] = c
			recs = append(recs, record.Record{
				Key:   encodeOffsetKey(nil, g.name, tp.topic, tp.partition),
				Value: encodeOffsetValue(nil, c),
			})
		}
	}
	if len(recs) == 0 {
		st.maybeDropUnused(g)
		answer()
		return
	}
	batch, err := record.BuildBatch(record.BatchOptions{
		PartitionLeaderEpoch: -1, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		BaseSequence: 0, Transactional: true, BaseTimestamp: nowMs,
	}, recs)
	if err != nil {
		all(kerr.UnknownServerError.Code)
		return
	}
	pid := req.ProducerID
	st.appendBatch(g.partition, batch, func(err error) {
		code := int16(0)
		if err != nil {
			code = commitErrorCode(err)
			st.log.Warn("storing transactional offsets failed", "group", g.name, "producer_id", pid, "err", err)
		}
		live := st.groups[g.name] == g
		if err == nil && live {
			seq := st.nextSeq()
			if g.pendingTxn == nil {
				g.pendingTxn = make(map[int64]map[topicPartition]pendingOffset)
			}
			m := g.pendingTxn[pid]
			if m == nil {
				m = make(map[topicPartition]pendingOffset)
				g.pendingTxn[pid] = m
			}
			for tp, c := range commits {
				m[tp] = pendingOffset{c: c, seq: seq}
			}
		}
		for tp := range commits {
			codes[tp] = code
		}
		if live {
			st.maybeDropUnused(g)
		}
		answer()
	})
}

// txnMarker applies a transaction's marker written on __consumer_offsets
// partition p: the producer's pending offsets of every group there are
// committed or dropped.
func (st *state) txnMarker(p int32, producerID int64, commit bool) {
	ps, ok := st.partitions[p]
	if !ok {
		return
	}
	for _, g := range ps.groups {
		m, ok := g.pendingTxn[producerID]
		if !ok {
			continue
		}
		delete(g.pendingTxn, producerID)
		if !commit {
			continue
		}
		for tp, po := range m {
			if g.offsetSeq[tp] > po.seq {
				continue // a plain commit written after it wins
			}
			g.offsets[tp] = po.c
			g.setSeq(tp, po.seq)
		}
	}
}

// setSeq records the position of tp's committed offset.
func (g *group) setSeq(tp topicPartition, seq uint64) {
	if g.offsetSeq == nil {
		g.offsetSeq = make(map[topicPartition]uint64)
	}
	g.offsetSeq[tp] = seq
}

// hasPending reports whether tp of g has a transactional commit waiting
// for its marker (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT).
func (g *group) hasPending(tp topicPartition) bool {
	for _, m := range g.pendingTxn {
		if _, ok := m[tp]; ok {
			return true
		}
	}
	return false
}

// TxnOffsetCommit answers TxnOffsetCommit once the offsets are stored
// (pending until the transaction's marker).
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	var unknown map[topicPartition]bool
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if !c.backend.PartitionExists(t.Topic, p.Partition) {
				if unknown == nil {
					unknown = make(map[topicPartition]bool)
				}
				unknown[topicPartition{t.Topic, p.Partition}] = true
			}
		}
	}
	ch := make(chan *kmsg.TxnOffsetCommitResponse, 1)
	if err := c.call(ctx, func(st *state) { st.txnCommit(req, unknown, func(r *kmsg.TxnOffsetCommitResponse) { ch <- r }) }); err != nil {
		return nil, err
	}
	return wait(ctx, c, ch)
}

// TxnMarker tells the coordinator that a transaction's marker was written
// on __consumer_offsets-partition (the broker's marker listener).
func (c *Coordinator) TxnMarker(partition int32, producerID int64, commit bool) {
	c.post(func() { c.st.txnMarker(partition, producerID, commit) })
}

package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// txnCommitParts reads a TxnOffsetCommit's partitions (as commitParts).
func txnCommitParts(req *kmsg.TxnOffsetCommitRequest, maxMetadata int, exists func(topic string, partition int32) bool) []commitPart {
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	parts := make([]commitPart, 0, n)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			cp := commitPart{
				tp:        topicPartition{t.Topic, p.Partition},
				c:         offsetCommit{offset: p.Offset, leaderEpoch: -1, metadata: instanceOf(p.Metadata), commitTime: -1, expireTime: -1},
				retention: -1,
			}
			if req.Version >= 2 {
				cp.c.leaderEpoch = p.LeaderEpoch
			}
			cp.code = partCode(cp.tp, cp.c.metadata, maxMetadata, exists)
			parts = append(parts, cp)
		}
	}
	return parts
}

// txnOffsetCommitResponse answers req with the codes of its parts.
func txnOffsetCommitResponse(req *kmsg.TxnOffsetCommitRequest, parts []commitPart) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	i := 0
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		rt.Default()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			rp.Default()
			rp.Partition, rp.ErrorCode = p.Partition, parts[i].code
			i++
		}
	}
	return resp
}

// txnCommit handles TxnOffsetCommit; parts are the request's
// (txnCommitParts). The offsets are written as the producer's
// transactional batch and kept pending until its marker.
func (st *state) txnCommit(req *kmsg.TxnOffsetCommitRequest, parts []commitPart, reply func(*kmsg.TxnOffsetCommitResponse)) {
	refuse := func(code int16) {
		refuseAll(parts, code)
		reply(txnOffsetCommitResponse(req, parts))
	}
	if code := st.coordinatorError(req.Group); code != 0 {
		refuse(code)
		return
	}
	generation, memberID, instanceID := int32(-1), "", ""
	if req.Version >= 3 {
		generation, memberID, instanceID = req.Generation, req.MemberID, instanceOf(req.InstanceID)
	}
	g, ok := st.groups[req.Group]
	if !ok {
		if generation >= 0 || memberID != "" {
			refuse(kerr.IllegalGeneration.Code)
			return
		}
		g = st.getOrCreate(req.Group)
	}
	// KIP-447: a commit naming a member or generation is checked against
	// the group (GroupCoordinator.validateOffsetCommit).
	if g.state == stateDead {
		refuse(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if generation >= 0 || memberID != "" || instanceID != "" {
		if g.fenced(instanceID, memberID) {
			refuse(kerr.FencedInstanceID.Code)
			return
		}
		m, ok := g.members[memberID]
		if !ok {
			refuse(kerr.UnknownMemberID.Code)
			return
		}
		if generation != g.generation {
			refuse(kerr.IllegalGeneration.Code)
			return
		}
		st.touch(g, m)
	}
	pid := req.ProducerID
	st.storeOffsets(g, parts, &txnProducer{id: pid, epoch: req.ProducerEpoch}, func(err error) {
		if err != nil {
			st.log.Warn("storing transactional offsets failed", "group", g.name, "producer_id", pid, "err", err)
		}
		live := st.groups[g.name] == g
		if err == nil && live {
			var seq uint64
			for _, cp := range parts {
				if !cp.store {
					continue
				}
				if seq == 0 {
					seq = st.nextSeq()
					if g.pendingTxn == nil {
						g.pendingTxn = make(map[int64]map[topicPartition]pendingOffset)
					}
				}
				m := g.pendingTxn[pid]
				if m == nil {
					m = make(map[topicPartition]pendingOffset)
					g.pendingTxn[pid] = m
				}
				m[cp.tp] = pendingOffset{c: cp.c, seq: seq}
			}
		}
		if live {
			st.maybeDropUnused(g)
		}
		reply(txnOffsetCommitResponse(req, parts))
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
	parts := txnCommitParts(req, c.cfg.MaxMetadataBytes, c.backend.PartitionExists)
	return ask(ctx, c, func(st *state, reply func(*kmsg.TxnOffsetCommitResponse)) { st.txnCommit(req, parts, reply) })
}

// TxnMarker tells the coordinator that a transaction's marker was written
// on __consumer_offsets-partition (the broker's marker listener).
func (c *Coordinator) TxnMarker(partition int32, producerID int64, commit bool) {
	c.post(func() { c.st.txnMarker(partition, producerID, commit) })
}

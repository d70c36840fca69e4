package group

import (
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, the
// retention of offsets (offsets.retention.minutes) and storing group
// metadata. Offsets live in memory in group.offsets and in the log as
// records of the group's __consumer_offsets partition; memory changes only
// once the log append succeeded.

// storeErrorCode maps an append failure to what Kafka answers for group
// metadata (GroupMetadataManager.storeGroup).
func storeErrorCode(err error) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		// Storage errors (closed or deleted log, I/O): this broker cannot
		// coordinate the group now, as Kafka says for KAFKA_STORAGE_ERROR.
		return kerr.NotCoordinator.Code
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError, kerr.NotCoordinator:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}

// commitErrorCode maps an append failure to what Kafka answers for an
// offset commit (GroupMetadataManager.storeOffsets).
func commitErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
			return kerr.InvalidCommitOffsetSize.Code
		}
	}
	return storeErrorCode(err)
}

// storeGroup appends g's metadata with its members' current assignments.
func (st *state) storeGroup(g *group, done func(error)) {
	assignments := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		assignments[id] = m.assignment
	}
	st.storeGroupWith(g, assignments, done)
}

// storeGroupWith appends g's metadata record (key v2, value v3) with the
// given assignments.
func (st *state) storeGroupWith(g *group, assignments map[string][]byte, done func(error)) {
	sg := storedGroup{
		protocolType:   g.protocolType,
		generation:     g.generation,
		protocol:       g.protocol,
		leader:         g.leader,
		stateTimestamp: st.now.UnixMilli(),
	}
	if g.state == stateEmpty || len(g.members) == 0 {
		sg.protocol, sg.leader = "", ""
	} else {
		for _, id := range sortedKeys(g.members) {
			m := g.members[id]
			md, _ := m.metadataFor(g.protocol)
			sg.members = append(sg.members, storedMember{
				memberID:         m.id,
				instanceID:       m.instanceID,
				clientID:         m.clientID,
				clientHost:       m.clientHost,
				rebalanceTimeout: int32(m.rebalanceTimeout / time.Millisecond),
				sessionTimeout:   int32(m.sessionTimeout / time.Millisecond),
				subscription:     md,
				assignment:       assignments[id],
			})
		}
	}
	st.appendRecords(g.partition, []offsetsRecord{{
		key:   encodeGroupKey(nil, g.name),
		value: encodeGroupValue(nil, &sg),
	}}, nil, done)
}

// commitPart is one partition of an OffsetCommit or TxnOffsetCommit, in
// request order: the offset to store and the answer's code.
type commitPart struct {
	tp        topicPartition
	c         offsetCommit // commitTime -1: the coordinator's clock when stored
	retention int64        // ms after the commit time the offset expires; -1: none
	code      int16        // set before the write for a part that is refused
	store     bool         // written (storeOffsets)
}

// partCode is the code refusing an offset of tp with metadata md before
// anything is written (UNKNOWN_TOPIC_OR_PARTITION when exists says the
// partition does not exist, OFFSET_METADATA_TOO_LARGE above maxMetadata),
// 0 when it may be stored. It needs no state: connection goroutines call
// it before taking the coordinator's lock.
func partCode(tp topicPartition, md string, maxMetadata int, exists func(topic string, partition int32) bool) int16 {
	switch {
	case !exists(tp.topic, tp.partition):
		return kerr.UnknownTopicOrPartition.Code
	case len(md) > maxMetadata:
		return kerr.OffsetMetadataTooLarge.Code
	}
	return 0
}

// commitParts reads an OffsetCommit's partitions (partCode's arguments
// refuse some).
func commitParts(req *kmsg.OffsetCommitRequest, maxMetadata int, exists func(topic string, partition int32) bool) []commitPart {
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
			if req.Version >= 6 {
				cp.c.leaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 && p.Timestamp != -1 {
				cp.c.commitTime = p.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				cp.retention = req.RetentionTimeMillis
			}
			cp.code = partCode(cp.tp, cp.c.metadata, maxMetadata, exists)
			parts = append(parts, cp)
		}
	}
	return parts
}

// refuseAll answers every part with code.
func refuseAll(parts []commitPart, code int16) {
	for i := range parts {
		parts[i].code, parts[i].store = code, false
	}
}

// storeOffsets writes the offsets of g's parts that are not refused as
// offset commit records, in one batch of g's partition: the coordinator's
// own, or producer's transactional batch (TxnOffsetCommit). done runs once
// they are stored or the write failed (err); each written part's code is
// then 0 or commitErrorCode(err), and its commit time set. With nothing to
// write, done runs at once with nil.
func (st *state) storeOffsets(g *group, parts []commitPart, producer *txnProducer, done func(err error)) {
	nowMs := st.now.UnixMilli()
	// Keys and values are encoded into one scratch buffer, from which the
	// batch is built: one copy, one allocation (the batch).
	enc := st.encScratch[:0]
	ends := st.endScratch[:0]
	for i := range parts {
		cp := &parts[i]
		cp.store = cp.code == 0
		if !cp.store {
			continue
		}
		if cp.c.commitTime == -1 {
			cp.c.commitTime = nowMs
		}
		if cp.retention >= 0 {
			cp.c.expireTime = cp.c.commitTime + cp.retention
		}
		enc = encodeOffsetKey(enc, g.name, cp.tp.topic, cp.tp.partition)
		ends = append(ends, len(enc))
		enc = encodeOffsetValue(enc, cp.c)
		ends = append(ends, len(enc))
	}
	st.encScratch, st.endScratch = enc, ends
	if len(ends) == 0 {
		done(nil)
		return
	}
	recs := st.recsScratch[:0]
	from := 0
	for i := 0; i < len(ends); i += 2 {
		recs = append(recs, offsetsRecord{key: enc[from:ends[i]], value: enc[ends[i]:ends[i+1]]})
		from = ends[i+1]
	}
	st.appendRecords(g.partition, recs, producer, func(err error) {
		code := int16(0)
		if err != nil {
			code = commitErrorCode(err)
		}
		for i := range parts {
			if parts[i].store {
				parts[i].code = code
			}
		}
		done(err)
	})
	clear(recs)
	st.recsScratch = recs[:0]
	if cap(st.encScratch) > maxScratchBytes {
		// A huge commit: do not keep its buffers.
		st.encScratch, st.endScratch, st.recsScratch, st.recordScratch = nil, nil, nil, nil
	}
}

// maxScratchBytes bounds the encoding buffer storeOffsets keeps for the
// next commit.
const maxScratchBytes = 64 << 10

// offsetCommitResponse answers req with the codes of its parts.
func offsetCommitResponse(req *kmsg.OffsetCommitRequest, parts []commitPart) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	i := 0
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		rt.Default()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			rp.Default()
			rp.Partition, rp.ErrorCode = p.Partition, parts[i].code
			i++
		}
	}
	return resp
}

// commit handles OffsetCommit; parts are the request's (commitParts).
func (st *state) commit(req *kmsg.OffsetCommitRequest, parts []commitPart, reply func(*kmsg.OffsetCommitResponse)) {
	refuse := func(code int16) {
		refuseAll(parts, code)
		reply(offsetCommitResponse(req, parts))
	}
	if code := st.coordinatorError(req.Group); code != 0 {
		refuse(code)
		return
	}
	generation, memberID, instanceID := req.Generation, req.MemberID, instanceOf(req.InstanceID)
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	g, ok := st.groups[req.Group]
	if !ok {
		if generation >= 0 {
			// A group member of a generation this coordinator does not
			// know (the group expired or was deleted).
			refuse(kerr.IllegalGeneration.Code)
			return
		}
		g = st.getOrCreate(req.Group)
	}
	switch {
	case g.state == stateDead:
		refuse(kerr.CoordinatorNotAvailable.Code)
		return
	case g.fenced(instanceID, memberID):
		refuse(kerr.FencedInstanceID.Code)
		return
	case generation < 0 && g.state == stateEmpty:
		// A simple consumer: Kafka only stores its offsets.
	default:
		m, ok := g.members[memberID]
		if !ok {
			refuse(kerr.UnknownMemberID.Code)
			return
		}
		if generation != g.generation {
			refuse(kerr.IllegalGeneration.Code)
			return
		}
		if g.state == stateCompletingRebalance {
			refuse(kerr.RebalanceInProgress.Code)
			return
		}
		// Stable, or PreparingRebalance where the previous generation may
		// still commit what it processed; a commit keeps a member alive.
		st.touch(g, m)
	}
	st.storeOffsets(g, parts, nil, func(err error) {
		if err != nil {
			st.log.Warn("storing offsets failed", "group", g.name, "err", err)
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
				}
				g.offsets[cp.tp] = cp.c
				g.setSeq(cp.tp, seq)
			}
		}
		if live {
			st.maybeDropUnused(g)
		}
		reply(offsetCommitResponse(req, parts))
	})
}

// fetchOffsets handles OffsetFetch: one group before v8, several from v8.
func (st *state) fetchOffsets(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group = rg.Group
			var topics []string
			var parts map[string][]int32
			if rg.Topics != nil {
				parts = make(map[string][]int32)
				for _, t := range rg.Topics {
					topics = addTopicParts(topics, parts, t.Topic, t.Partitions)
				}
			}
			code, offs := st.groupOffsets(rg.Group, rg.Topics != nil, topics, parts, req.RequireStable)
			out.ErrorCode = code
			for _, t := range offs {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t.topic
				for _, p := range t.partitions {
					op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					op.Partition = p.partition
					op.Offset = p.c.offset
					op.LeaderEpoch = p.c.leaderEpoch
					op.Metadata = kmsg.StringPtr(p.c.metadata)
					op.ErrorCode = p.code
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return resp
	}
	var topics []string
	var parts map[string][]int32
	requested := req.Topics != nil || req.Version < 2 // v0-1 have no "all topics"
	if requested {
		parts = make(map[string][]int32)
		for _, t := range req.Topics {
			topics = addTopicParts(topics, parts, t.Topic, t.Partitions)
		}
	}
	code, offs := st.groupOffsets(req.Group, requested, topics, parts, req.Version >= 7 && req.RequireStable)
	if code != 0 && req.Version < 2 {
		// No top-level error before v2: every partition carries it.
		offs = offs[:0]
		for _, t := range topics {
			ot := fetchedTopic{topic: t}
			for _, p := range parts[t] {
				ot.partitions = append(ot.partitions, fetchedPartition{partition: p, c: noCommit, code: code})
			}
			offs = append(offs, ot)
		}
	}
	resp.ErrorCode = code
	for _, t := range offs {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t.topic
		for _, p := range t.partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition = p.partition
			op.Offset = p.c.offset
			op.LeaderEpoch = p.c.leaderEpoch
			op.Metadata = kmsg.StringPtr(p.c.metadata)
			op.ErrorCode = p.code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

var noCommit = offsetCommit{offset: -1, leaderEpoch: -1}

type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition int32
	c         offsetCommit
	code      int16
}

// groupOffsets returns the committed offsets of group: of the requested
// topics and partitions (-1 where nothing is committed), or of everything
// committed when requested is false.
// addTopicParts adds a requested topic's partitions to parts, and the topic
// to topics the first time it is named: a topic named N times is answered
// once with all its partitions, not N times with all of them (N² entries
// from a request of N).
func addTopicParts(topics []string, parts map[string][]int32, topic string, partitions []int32) []string {
	if _, ok := parts[topic]; !ok {
		topics = append(topics, topic)
		parts[topic] = nil
	}
	parts[topic] = append(parts[topic], partitions...)
	return topics
}

// With stable (OffsetFetch v7+ require_stable), a partition with a
// transactional commit waiting for its marker answers
// UNSTABLE_OFFSET_COMMIT and offset -1 (Kafka's per-partition answer).
func (st *state) groupOffsets(name string, requested bool, topics []string, parts map[string][]int32, stable bool) (int16, []fetchedTopic) {
	if code := st.coordinatorError(name); code != 0 {
		return code, nil
	}
	g := st.groups[name]
	var out []fetchedTopic
	if requested {
		for _, t := range topics {
			ft := fetchedTopic{topic: t}
			for _, p := range parts[t] {
				c, code := noCommit, int16(0)
				if g != nil {
					tp := topicPartition{t, p}
					if have, ok := g.offsets[tp]; ok {
						c = have
					}
					if stable && g.hasPending(tp) {
						c, code = noCommit, kerr.UnstableOffsetCommit.Code
					}
				}
				ft.partitions = append(ft.partitions, fetchedPartition{partition: p, c: c, code: code})
			}
			out = append(out, ft)
		}
		return 0, out
	}
	if g == nil {
		return 0, nil
	}
	byTopic := make(map[string][]fetchedPartition)
	for tp, c := range g.offsets {
		fp := fetchedPartition{partition: tp.partition, c: c}
		if stable && g.hasPending(tp) {
			fp.c, fp.code = noCommit, kerr.UnstableOffsetCommit.Code
		}
		byTopic[tp.topic] = append(byTopic[tp.topic], fp)
	}
	for _, t := range sortedKeys(byTopic) {
		ps := byTopic[t]
		sort.Slice(ps, func(i, j int) bool { return ps[i].partition < ps[j].partition })
		out = append(out, fetchedTopic{topic: t, partitions: ps})
	}
	return 0, out
}

// subscribedTopics is the union of the topics the members of a consumer
// group subscribe to; ok is false when some member's metadata does not
// decode (then every topic counts as subscribed).
func (g *group) subscribedTopics() (map[string]bool, bool) {
	topics := make(map[string]bool)
	for _, m := range g.members {
		protocol := g.protocol
		if protocol == "" && len(m.protocols) > 0 {
			protocol = m.protocols[0].Name
		}
		md, ok := m.metadataFor(protocol)
		if !ok {
			return nil, false
		}
		var cm kmsg.ConsumerMemberMetadata
		if err := cm.ReadFrom(md); err != nil {
			return nil, false
		}
		for _, t := range cm.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

// offsetDelete handles OffsetDelete: offsets of topics no member
// subscribes to (any, for an Empty group) are deleted with tombstones.
func (st *state) offsetDelete(req *kmsg.OffsetDeleteRequest, reply func(*kmsg.OffsetDeleteResponse)) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if code := st.coordinatorError(req.Group); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	g, ok := st.groups[req.Group]
	if !ok || g.state == stateDead {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		reply(resp)
		return
	}
	var subscribed map[string]bool
	allSubscribed := false
	if g.state != stateEmpty {
		if g.protocolType != "consumer" {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			reply(resp)
			return
		}
		subscribed, ok = g.subscribedTopics()
		allSubscribed = !ok
	}
	codes := make(map[topicPartition]int16)
	var recs []offsetsRecord
	var deleting []topicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if allSubscribed || subscribed[t.Topic] {
				codes[tp] = kerr.GroupSubscribedToTopic.Code
				continue
			}
			if _, ok := g.offsets[tp]; ok {
				deleting = append(deleting, tp)
				recs = append(recs, offsetsRecord{key: encodeOffsetKey(nil, g.name, tp.topic, tp.partition)})
			}
		}
	}
	answer := func() {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = codes[topicPartition{t.Topic, p.Partition}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
	}
	if len(recs) == 0 {
		answer()
		return
	}
	st.appendRecords(g.partition, recs, nil, func(err error) {
		for _, tp := range deleting {
			if err != nil {
				codes[tp] = storeErrorCode(err)
				continue
			}
			if st.groups[g.name] == g {
				delete(g.offsets, tp)
			}
		}
		answer()
	})
}

// expireOffsets removes offsets past offsets.retention.minutes, as Kafka
// 2.1+ does (KIP-211): the offsets of an Empty group expire once it has
// been empty for the retention; those of a Stable consumer group only for
// topics it no longer subscribes to; a simple consumer's (no protocol
// type) by commit time; an offset committed with an explicit retention
// (OffsetCommit v2-v4) at its expire time. A group left Empty without
// offsets is removed, with a tombstone for its metadata.
func (st *state) expireOffsets() {
	nowMs := st.now.UnixMilli()
	retention := st.cfg.OffsetsRetention.Milliseconds()
	for _, name := range sortedKeys(st.groups) {
		g := st.groups[name]
		var base func(c offsetCommit) int64
		var subscribed map[string]bool
		switch {
		case g.protocolType == "" && g.state == stateEmpty:
			base = func(c offsetCommit) int64 { return c.commitTime }
		case g.state == stateEmpty:
			empty := g.stateTime.UnixMilli()
			base = func(offsetCommit) int64 { return empty }
		case g.protocolType == "consumer" && g.state == stateStable:
			var ok bool
			if subscribed, ok = g.subscribedTopics(); ok {
				base = func(c offsetCommit) int64 { return c.commitTime }
			}
		}
		var recs []offsetsRecord
		if base != nil {
			for _, tp := range sortedOffsetKeys(g.offsets) {
				c := g.offsets[tp]
				if subscribed[tp.topic] {
					continue
				}
				expired := (c.expireTime >= 0 && nowMs >= c.expireTime) ||
					(c.expireTime < 0 && nowMs-base(c) >= retention)
				if expired {
					delete(g.offsets, tp)
					recs = append(recs, offsetsRecord{key: encodeOffsetKey(nil, g.name, tp.topic, tp.partition)})
				}
			}
		}
		dead := g.state == stateEmpty && len(g.offsets) == 0 && len(g.pending) == 0 && len(g.pendingTxn) == 0
		if dead {
			recs = append(recs, offsetsRecord{key: encodeGroupKey(nil, g.name)})
			st.removeGroup(g)
		}
		if len(recs) == 0 {
			continue
		}
		st.log.Info("group offsets expired", "group", name, "tombstones", len(recs), "group_removed", dead)
		st.appendRecords(g.partition, recs, nil, func(err error) {
			if err != nil {
				st.log.Warn("writing offset tombstones failed", "group", name, "err", err)
			}
		})
	}
}

func sortedOffsetKeys(m map[topicPartition]offsetCommit) []topicPartition {
	out := make([]topicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

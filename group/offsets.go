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
	}}, done)
}

// commit handles OffsetCommit. unknown holds partitions the caller found
// not to exist (UNKNOWN_TOPIC_OR_PARTITION); it may be nil.
func (st *state) commit(req *kmsg.OffsetCommitRequest, unknown map[topicPartition]bool, reply func(*kmsg.OffsetCommitResponse)) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	codes := make(map[topicPartition]int16)
	answer := func() {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
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
	generation, memberID, instanceID := req.Generation, req.MemberID, instanceOf(req.InstanceID)
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	g, ok := st.groups[req.Group]
	if !ok {
		if generation >= 0 {
			// A group member of a generation this coordinator does not
			// know (the group expired or was deleted).
			all(kerr.IllegalGeneration.Code)
			return
		}
		g = st.getOrCreate(req.Group)
	}
	switch {
	case g.state == stateDead:
		all(kerr.CoordinatorNotAvailable.Code)
		return
	case g.fenced(instanceID, memberID):
		all(kerr.FencedInstanceID.Code)
		return
	case generation < 0 && g.state == stateEmpty:
		// A simple consumer: Kafka only stores its offsets.
	default:
		m, ok := g.members[memberID]
		if !ok {
			all(kerr.UnknownMemberID.Code)
			return
		}
		if generation != g.generation {
			all(kerr.IllegalGeneration.Code)
			return
		}
		if g.state == stateCompletingRebalance {
			all(kerr.RebalanceInProgress.Code)
			return
		}
		// Stable, or PreparingRebalance where the previous generation may
		// still commit what it processed; a commit keeps a member alive.
		st.touch(g, m)
	}

	nowMs := st.now.UnixMilli()
	var recs []offsetsRecord
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
			if req.Version >= 6 {
				c.leaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 && p.Timestamp != -1 {
				c.commitTime = p.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				c.expireTime = c.commitTime + req.RetentionTimeMillis
			}
			commits[tp] = c
			recs = append(recs, offsetsRecord{
				key:   encodeOffsetKey(nil, g.name, tp.topic, tp.partition),
				value: encodeOffsetValue(nil, c),
			})
		}
	}
	if len(recs) == 0 {
		st.maybeDropUnused(g)
		answer()
		return
	}
	st.appendRecords(g.partition, recs, func(err error) {
		code := int16(0)
		if err != nil {
			code = commitErrorCode(err)
			st.log.Warn("storing offsets failed", "group", g.name, "err", err)
		}
		for tp, c := range commits {
			codes[tp] = code
			if err == nil && st.groups[g.name] == g {
				g.offsets[tp] = c
			}
		}
		if st.groups[g.name] == g {
			st.maybeDropUnused(g)
		}
		answer()
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
			code, offs := st.groupOffsets(rg.Group, rg.Topics != nil, topics, parts)
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
	code, offs := st.groupOffsets(req.Group, requested, topics, parts)
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

func (st *state) groupOffsets(name string, requested bool, topics []string, parts map[string][]int32) (int16, []fetchedTopic) {
	if code := st.coordinatorError(name); code != 0 {
		return code, nil
	}
	g := st.groups[name]
	var out []fetchedTopic
	if requested {
		for _, t := range topics {
			ft := fetchedTopic{topic: t}
			for _, p := range parts[t] {
				c := noCommit
				if g != nil {
					if have, ok := g.offsets[topicPartition{t, p}]; ok {
						c = have
					}
				}
				ft.partitions = append(ft.partitions, fetchedPartition{partition: p, c: c})
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
		byTopic[tp.topic] = append(byTopic[tp.topic], fetchedPartition{partition: tp.partition, c: c})
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
	st.appendRecords(g.partition, recs, func(err error) {
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
		dead := g.state == stateEmpty && len(g.offsets) == 0 && len(g.pending) == 0
		if dead {
			recs = append(recs, offsetsRecord{key: encodeGroupKey(nil, g.name)})
			st.removeGroup(g)
		}
		if len(recs) == 0 {
			continue
		}
		st.log.Info("group offsets expired", "group", name, "tombstones", len(recs), "group_removed", dead)
		st.appendRecords(g.partition, recs, func(err error) {
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

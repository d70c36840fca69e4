package protocol

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
)

// Fetch sessions (KIP-227), as Kafka's FetchSessionCache keeps them. A
// client that fetches many partitions sends them all once (a full fetch
// with session_epoch 0), gets a session id, and from then on sends only
// the partitions whose position changed (added or updated) and those it no
// longer wants (forgotten_topics_data), each request with the next epoch.
// The broker answers with the partitions that have something to say:
// records, an error, a diverging epoch, or a high watermark, last stable
// offset or log start offset different from the last one sent. An idle
// consumer or follower of thousands of partitions thus sends and receives a
// few bytes per poll instead of every partition each time.
//
// The sessions are change-driven (broker.SessionWatch): each partition of a
// session stays registered with the partition it read, and every change
// there (append, high watermark, log start or leadership move) marks it.
// An incremental fetch reads only the partitions the request names, those
// marked since the last fetch and those whose last read was not quiet
// (records, an error, a position short of the reader's limit); the others
// would answer exactly as last time, so they are not touched. A parked
// fetch waits on the session's one channel, and the partitions marked
// meanwhile join it. A follower's quiet partitions keep its lag clock
// through the session's fetches (Kafka: a follower caught up and idle
// stays in the ISR), so an idle follower's empty incremental fetch costs
// the leader nothing per partition.
//
//   - session_id 0, epoch -1: a full fetch without a session (the answer's
//     session id is 0). session_id 0, epoch 0: a full fetch that opens a
//     session; its id is in the answer (0 when the cache is full).
//   - session_id s, epoch 0: closes s and opens a new session; epoch -1:
//     closes s and fetches without one.
//   - session_id s, epoch e > 0: incremental. An unknown s (never given,
//     evicted, or opened by another replica id) gets FETCH_SESSION_ID_NOT_FOUND;
//     an e other than the session's next epoch INVALID_FETCH_SESSION_EPOCH,
//     and the client starts again with a full fetch.
//   - The cache holds up to fetchSessionSlots sessions (Kafka's
//     max.incremental.fetch.session.cache.slots default). When it is full
//     a new session takes the place of the least recently used one if that
//     one is idle for fetchSessionEvictAfter
//     (min.incremental.fetch.session.eviction.ms) or if the new one is a
//     follower's and the old one a consumer's; otherwise it gets no session.
//     A session's partitions are bounded by its requests (max request size).

const (
	fetchSessionSlots      = 1000
	fetchSessionEvictAfter = 2 * time.Minute
)

// sessionPartition is a partition of a session: the position the client
// gave last, and what the last answer told it.
type sessionPartition struct {
	topic                                string
	partition                            int32
	fetchOffset                          int64
	maxBytes                             int32
	currentLeaderEpoch, lastFetchedEpoch int32
	highWatermark, lastStable, logStart  int64 // last sent; -2: never
	removed, sentRecords                 bool
	// hint lets the next fetch skip reading the partition while nothing
	// changed there (broker.ReadHint).
	hint broker.ReadHint
	// watch is the partition's registration with the session's watch
	// (nil: not read here yet).
	watch *broker.PartitionWatch
}

// fetchPartition is the broker's fetch of sp.
func (sp *sessionPartition) fetchPartition() broker.FetchPartition {
	return broker.FetchPartition{
		Topic: sp.topic, Partition: sp.partition, FetchOffset: sp.fetchOffset,
		PartitionMaxBytes: sp.maxBytes, CurrentLeaderEpoch: sp.currentLeaderEpoch, LastFetchedEpoch: sp.lastFetchedEpoch,
		Hint: sp.hint, Watch: sp.watch,
	}
}

type sessionKey struct {
	topic     string
	partition int32
}

type fetchSession struct {
	id        int32
	replicaID int32
	epoch     int32 // the epoch the next request must carry
	lastUsed  time.Time
	parts     []sessionPartition
	index     map[sessionKey]int // into parts
	busy      bool               // a request of it is being answered
	// watch marks the partitions that changed (broker.SessionWatch);
	// active are the partitions every fetch reads: those whose last read
	// was not quiet, named by the last request, or marked.
	watch  *broker.SessionWatch
	active map[sessionKey]struct{}
	order  []int // reused: the indexes of the partitions a fetch reads
	// aclGen is the authorizer's generation at the session's last
	// fetch: a consumer's incremental fetch after the ACLs changed reads
	// (and so checks) every partition of the session once.
	aclGen uint64
}

// close unregisters the session's partitions from their watches.
func (s *fetchSession) close() {
	for i := range s.parts {
		s.parts[i].watch.Close()
	}
}

// fetchSessions is the server's session cache.
type fetchSessions struct {
	mu       sync.Mutex
	slots    int
	sessions map[int32]*fetchSession
	now      func() time.Time
}

func newFetchSessions(slots int) *fetchSessions {
	return &fetchSessions{slots: slots, sessions: map[int32]*fetchSession{}, now: time.Now}
}

// len is the number of sessions.
func (c *fetchSessions) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// nextEpoch is the epoch after e (wrapping to 1, as Kafka's).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// sessionFetch is one request's use of the cache: the session (nil:
// sessionless) and, for an incremental fetch, which partitions to answer.
type sessionFetch struct {
	c           *fetchSessions
	s           *fetchSession
	incremental bool
}

// begin decides how req is answered. It returns a top-level error code
// (the request is answered with it and nothing else), or the session to use
// (nil: none). A full fetch that opens a session fills resp from req as a
// sessionless one does; an incremental one fills resp from the session.
func (c *fetchSessions) begin(req *kmsg.FetchRequest) (sf sessionFetch, code int16) {
	sf.c = c
	if req.Version < 7 {
		return sf, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	switch {
	case req.SessionEpoch == -1:
		if req.SessionID != 0 {
			c.remove(req.SessionID)
		}
		return sf, 0
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			c.remove(req.SessionID)
		}
		sf.s = c.open(req.ReplicaID, now)
		return sf, 0
	}
	s := c.sessions[req.SessionID]
	if req.SessionID == 0 || s == nil || s.replicaID != req.ReplicaID {
		return sf, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != s.epoch || s.busy {
		return sf, kerr.InvalidFetchSessionEpoch.Code
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = now
	s.busy = true
	sf.s, sf.incremental = s, true
	return sf, 0
}

// open adds a session, evicting one if the cache is full and one may go;
// nil when none may. c.mu is held.
func (c *fetchSessions) open(replicaID int32, now time.Time) *fetchSession {
	if c.slots <= 0 {
		return nil
	}
	if len(c.sessions) >= c.slots {
		var lru *fetchSession
		for _, s := range c.sessions {
			if !s.busy && (lru == nil || s.lastUsed.Before(lru.lastUsed)) {
				lru = s
			}
		}
		if lru == nil || (now.Sub(lru.lastUsed) < fetchSessionEvictAfter && !(replicaID >= 0 && lru.replicaID < 0)) {
			return nil
		}
		delete(c.sessions, lru.id)
		lru.close()
	}
	s := &fetchSession{replicaID: replicaID, epoch: 1, lastUsed: now, index: map[sessionKey]int{}, busy: true,
		watch: broker.NewSessionWatch(replicaID), active: map[sessionKey]struct{}{}}
	for {
		s.id = rand.Int32()
		if _, taken := c.sessions[s.id]; s.id != 0 && !taken {
			break
		}
	}
	c.sessions[s.id] = s
	return s
}

func (c *fetchSessions) remove(id int32) {
	if s := c.sessions[id]; s != nil && !s.busy {
		delete(c.sessions, id)
		s.close()
	}
}

// fillIncremental sets the session's partitions from an incremental
// request: added and updated ones take their new position, forgotten ones
// leave. It then fills resp with the partitions to read, in the session's
// order (a topic may appear more than once, as in Kafka's answers): those
// the request named, those marked changed since the last fetch, and those
// whose last read was not quiet. The others would answer as last time.
func (sf *sessionFetch) fillIncremental(req *kmsg.FetchRequest, resp *fetchResponse) {
	s := sf.s
	removed := false
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			key := sessionKey{ft.Topic, p}
			if i, ok := s.index[key]; ok {
				s.parts[i].removed = true
				s.parts[i].watch.Close()
				removed = true
				delete(s.index, key)
				delete(s.active, key)
			}
		}
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			key := sessionKey{rt.Topic, rp.Partition}
			sp := sessionPartition{topic: rt.Topic, partition: rp.Partition, fetchOffset: rp.FetchOffset,
				maxBytes: rp.PartitionMaxBytes, currentLeaderEpoch: rp.CurrentLeaderEpoch, lastFetchedEpoch: -1,
				highWatermark: -2, lastStable: -2, logStart: -2}
			if req.Version < 9 {
				sp.currentLeaderEpoch = -1
			}
			if req.Version >= 12 {
				sp.lastFetchedEpoch = rp.LastFetchedEpoch
			}
			s.active[key] = struct{}{}
			if i, ok := s.index[key]; ok {
				old := &s.parts[i]
				sp.highWatermark, sp.lastStable, sp.logStart = old.highWatermark, old.lastStable, old.logStart
				sp.watch = old.watch
				*old = sp
				continue
			}
			s.index[key] = len(s.parts)
			s.parts = append(s.parts, sp)
		}
	}
	// Drop forgotten partitions (the index is rebuilt only then).
	if removed {
		kept := s.parts[:0]
		for _, sp := range s.parts {
			if !sp.removed {
				kept = append(kept, sp)
			}
		}
		clear(s.parts[len(kept):])
		s.parts = kept
		sf.reindex()
	}
	sf.takeChanged()
	order := s.order[:0]
	for key := range s.active {
		if i, ok := s.index[key]; ok {
			order = append(order, i)
		}
	}
	slices.Sort(order)
	s.order = order
	topics := 0
	for j, i := range order {
		if j == 0 || s.parts[order[j-1]].topic != s.parts[i].topic {
			topics++
		}
	}
	resp.reserve(topics, len(order))
	for _, i := range order {
		sp := &s.parts[i]
		if n := len(resp.topics); n == 0 || resp.topics[n-1].name != sp.topic {
			resp.topics = append(resp.topics, fetchTopic{name: sp.topic})
		}
		resp.topics[len(resp.topics)-1].partitions++
		resp.req.Partitions = append(resp.req.Partitions, sp.fetchPartition())
	}
	resp.req.Session = s.watch
	resp.req.More = sf.more
}

// checkACLs records the authorizer's generation gen; when it is not the one
// of the session's last fetch, every partition of the session is read by
// this (incremental) fetch, so that each topic's Read is checked again and a
// consumer that lost it is told on its idle partitions too. Before
// fillIncremental.
func (sf *sessionFetch) checkACLs(gen uint64) {
	s := sf.s
	if s == nil || s.aclGen == gen {
		return
	}
	if sf.incremental && s.aclGen != 0 {
		for key := range s.index {
			s.active[key] = struct{}{}
		}
	}
	s.aclGen = gen
}

// takeChanged makes the session's partitions marked changed since the last
// call active, and returns the indexes of those that were not.
func (sf *sessionFetch) takeChanged() []int {
	s := sf.s
	var added []int
	for _, w := range s.watch.Take() {
		tp := w.Partition().TopicPartition()
		key := sessionKey{tp.Topic, tp.Partition}
		i, ok := s.index[key]
		if !ok || s.parts[i].watch != w {
			continue // forgotten or read again elsewhere since
		}
		if _, ok := s.active[key]; ok {
			continue
		}
		s.active[key] = struct{}{}
		added = append(added, i)
	}
	return added
}

// more adds to a parked incremental fetch the session's partitions marked
// changed while it waited (broker.FetchRequest.More). The response's topics
// are rebuilt by finish.
func (sf *sessionFetch) more(req *broker.FetchRequest) {
	if !sf.incremental {
		return // a full fetch reads every partition of the session already
	}
	for _, i := range sf.takeChanged() {
		req.Partitions = append(req.Partitions, sf.s.parts[i].fetchPartition())
	}
}

// reindex rebuilds the session's index of its partitions.
func (sf *sessionFetch) reindex() {
	s := sf.s
	clear(s.index)
	for i, sp := range s.parts {
		s.index[sessionKey{sp.topic, sp.partition}] = i
	}
}

// fillFull records a full request's partitions (already in resp) as the
// new session's.
func (sf *sessionFetch) fillFull(req *kmsg.FetchRequest, resp *fetchResponse) {
	s := sf.s
	for i := range resp.req.Partitions {
		fp := &resp.req.Partitions[i]
		if _, dup := s.index[sessionKey{fp.Topic, fp.Partition}]; dup {
			continue
		}
		s.index[sessionKey{fp.Topic, fp.Partition}] = len(s.parts)
		s.active[sessionKey{fp.Topic, fp.Partition}] = struct{}{}
		s.parts = append(s.parts, sessionPartition{topic: fp.Topic, partition: fp.Partition,
			fetchOffset: fp.FetchOffset, maxBytes: fp.PartitionMaxBytes,
			currentLeaderEpoch: fp.CurrentLeaderEpoch, lastFetchedEpoch: fp.LastFetchedEpoch,
			highWatermark: -2, lastStable: -2, logStart: -2})
	}
	resp.sessionID = s.id
	resp.req.Session = s.watch
	resp.req.More = sf.more
}

// finish records what the answer tells the client and, for an incremental
// fetch, leaves out of resp the partitions with nothing new. The session
// may be used again afterwards.
func (sf *sessionFetch) finish(resp *fetchResponse) {
	s := sf.s
	if s == nil {
		return
	}
	resp.sessionID = s.id
	parts := resp.req.Partitions
	kept := parts[:0]
	var topics []fetchTopic
	rotate := 0
	for i := range parts {
		fp := &parts[i]
		key := sessionKey{fp.Topic, fp.Partition}
		sp := &s.parts[s.index[key]]
		if fp.Watch != nil && fp.Watch != sp.watch {
			// Registered by this read (a partition listed twice in a
			// full fetch registers twice: one is kept).
			sp.watch.Close()
			sp.watch = fp.Watch
		}
		// Quiet: read at the reader's limit with nothing to say, and
		// registered, so that the next change marks it.
		if fp.ErrorCode == 0 && fp.Hint != (broker.ReadHint{}) && sp.watch != nil && sp.watch == fp.Watch {
			delete(s.active, key)
		} else {
			s.active[key] = struct{}{}
		}
		changed := fp.ErrorCode != 0 || fp.Records.Len() > 0 || fp.DivergingEpoch >= 0 ||
			fp.HighWatermark != sp.highWatermark || fp.LastStableOffset != sp.lastStable || fp.LogStartOffset != sp.logStart
		sp.highWatermark, sp.lastStable, sp.logStart = fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset
		sp.hint = fp.Hint
		if fp.Records.Len() > 0 {
			sp.sentRecords = true
			rotate++
		}
		if !sf.incremental || changed {
			if n := len(topics); n == 0 || topics[n-1].name != fp.Topic {
				topics = append(topics, fetchTopic{name: fp.Topic})
			}
			topics[len(topics)-1].partitions++
			kept = append(kept, *fp)
		} else {
			fp.Records.Release()
		}
	}
	if sf.incremental {
		clear(parts[len(kept):])
		resp.req.Partitions = kept
		resp.topics = topics
	}
	// Partitions that returned records go to the end of the session, so
	// that a response budget filled by the first ones does not starve
	// the rest (as Kafka rotates them).
	if rotate > 0 {
		idle := make([]sessionPartition, 0, len(s.parts))
		var busy []sessionPartition
		for _, sp := range s.parts {
			if sp.sentRecords {
				sp.sentRecords = false
				busy = append(busy, sp)
			} else {
				idle = append(idle, sp)
			}
		}
		s.parts = append(idle, busy...)
		sf.reindex()
	}
	sf.c.mu.Lock()
	s.busy = false
	s.lastUsed = sf.c.now()
	sf.c.mu.Unlock()
}

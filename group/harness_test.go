package group

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// harness drives the state machine directly: a fake clock, and appends that
// succeed (kept per partition, like a log) unless appendErr is set.
type harness struct {
	t         *testing.T
	st        *state
	now       time.Time
	logs      map[int32][]byte // concatenated batches appended per partition
	appendErr error
	ids       int
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.NumPartitions = 4
	cfg.InitialRebalanceDelay = 0
	return cfg
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, now: t0, logs: make(map[int32][]byte)}
	h.st = newState(cfg, testLogger(t), t0, func() string { h.ids++; return fmt.Sprintf("id%d", h.ids) })
	for p := int32(0); p < cfg.NumPartitions; p++ {
		h.st.becomeLeader(p, 0)
		h.st.installLoad(p, 0, newLoadResult())
	}
	return h
}

// exists says every partition exists but those in unknown.
func exists(unknown map[topicPartition]bool) func(string, int32) bool {
	return func(topic string, partition int32) bool { return !unknown[topicPartition{topic, partition}] }
}

// commitParts reads req's partitions as the Coordinator does, with the
// partitions in unknown missing.
func (h *harness) commitParts(req *kmsg.OffsetCommitRequest, unknown map[topicPartition]bool) []commitPart {
	return commitParts(req, h.st.cfg.MaxMetadataBytes, exists(unknown))
}

// flush completes every queued append, as the Coordinator's writers do.
func (h *harness) flush() {
	for {
		ops := h.st.takeAppends()
		if len(ops) == 0 {
			return
		}
		for _, op := range ops {
			if h.appendErr != nil {
				op.done(h.appendErr)
				continue
			}
			if _, err := record.ValidateBatch(op.batch); err != nil {
				h.t.Fatalf("coordinator built an invalid batch: %v", err)
			}
			h.logs[op.partition] = append(h.logs[op.partition], op.batch...)
			op.done(nil)
		}
	}
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.st.advance(h.now)
	h.flush()
}

// do runs fn as the Coordinator runs an event: clock set, appends flushed.
func (h *harness) do(fn func()) {
	h.st.now = h.now
	fn()
	h.flush()
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func protocols(meta []byte, names ...string) []kmsg.JoinGroupRequestProtocol {
	var ps []kmsg.JoinGroupRequestProtocol
	for _, n := range names {
		ps = append(ps, kmsg.JoinGroupRequestProtocol{Name: n, Metadata: meta})
	}
	return ps
}

type joinOpts struct {
	version    int16
	memberID   string
	instance   string
	session    time.Duration
	rebalance  time.Duration
	protoType  string
	protocols  []kmsg.JoinGroupRequestProtocol
	clientID   string
	clientHost string
}

// joinSlot receives a JoinGroup answer, maybe later.
type joinSlot struct{ resp *kmsg.JoinGroupResponse }

func (s *joinSlot) done() bool { return s.resp != nil }

func (h *harness) joinReq(group string, o joinOpts) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 7
	if o.version != 0 {
		req.Version = o.version
	}
	req.Group = group
	req.MemberID = o.memberID
	if o.instance != "" {
		req.InstanceID = kmsg.StringPtr(o.instance)
	}
	if o.session == 0 {
		o.session = 10 * time.Second
	}
	if o.rebalance == 0 {
		o.rebalance = 30 * time.Second
	}
	req.SessionTimeoutMillis = int32(o.session / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(o.rebalance / time.Millisecond)
	req.ProtocolType = "consumer"
	if o.protoType != "" {
		req.ProtocolType = o.protoType
	}
	req.Protocols = o.protocols
	if req.Protocols == nil {
		req.Protocols = protocols(consumerMeta("t"), "range")
	}
	return req
}

func (h *harness) join(group string, o joinOpts) *joinSlot {
	s := &joinSlot{}
	if o.clientID == "" {
		o.clientID = "client"
	}
	if o.clientHost == "" {
		o.clientHost = "/127.0.0.1"
	}
	req := h.joinReq(group, o)
	h.do(func() {
		h.st.join(Client{ID: o.clientID, Host: o.clientHost}, req, func(r *kmsg.JoinGroupResponse) {
			if s.resp != nil {
				h.t.Fatalf("join answered twice: %+v then %+v", s.resp, r)
			}
			s.resp = r
		})
	})
	return s
}

// joinFull joins as a v4+ dynamic member does: MEMBER_ID_REQUIRED, then again
// with the id. It returns the parked (or answered) second join.
func (h *harness) joinFull(group string, o joinOpts) *joinSlot {
	h.t.Helper()
	first := h.join(group, o)
	if !first.done() || first.resp.ErrorCode != kerr.MemberIDRequired.Code || first.resp.MemberID == "" {
		h.t.Fatalf("first join: want MEMBER_ID_REQUIRED with an id, got %+v", first.resp)
	}
	o.memberID = first.resp.MemberID
	return h.join(group, o)
}

type syncSlot struct{ resp *kmsg.SyncGroupResponse }

func (h *harness) sync(group, member string, gen int32, instance string, assign map[string][]byte) *syncSlot {
	s := &syncSlot{}
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, gen
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	h.do(func() {
		h.st.sync(req, func(r *kmsg.SyncGroupResponse) {
			if s.resp != nil {
				h.t.Fatalf("sync answered twice")
			}
			s.resp = r
		})
	})
	return s
}

func (h *harness) heartbeat(group, member string, gen int32, instance string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, gen
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	var code int16
	h.do(func() { code = h.st.heartbeat(req).ErrorCode })
	return code
}

// commit commits offsets (topic t, partition -> offset) and returns the codes.
func (h *harness) commit(version int16, group, member string, gen int32, offsets map[int32]int64) map[int32]int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = group, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rp.LeaderEpoch = 7
		rp.Metadata = kmsg.StringPtr(fmt.Sprintf("md%d", p))
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	var resp *kmsg.OffsetCommitResponse
	h.do(func() { h.st.commit(req, h.commitParts(req, nil), func(r *kmsg.OffsetCommitResponse) { resp = r }) })
	if resp == nil {
		h.t.Fatal("commit not answered")
	}
	codes := make(map[int32]int16)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.Partition] = rp.ErrorCode
		}
	}
	return codes
}

// fetch returns the committed offsets of topic t (-1 when none) and the
// top-level error.
func (h *harness) fetch(group string, partitions ...int32) (map[int32]int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = "t"
	t.Partitions = partitions
	req.Topics = append(req.Topics, t)
	var resp *kmsg.OffsetFetchResponse
	h.do(func() { resp = h.st.fetchOffsets(req) })
	out := make(map[int32]int64)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp.Offset
		}
	}
	return out, resp.ErrorCode
}

func (h *harness) group(name string) *group {
	h.t.Helper()
	g, ok := h.st.groups[name]
	if !ok {
		h.t.Fatalf("group %q unknown", name)
	}
	return g
}

// stableGroup brings n dynamic members into a Stable generation of group
// and returns their ids (leader first) and the generation.
func (h *harness) stableGroup(group string, n int, o joinOpts) ([]string, int32) {
	h.t.Helper()
	var slots []*joinSlot
	for i := 0; i < n; i++ {
		o.clientID = fmt.Sprintf("c%d", i)
		slots = append(slots, h.joinFull(group, o))
	}
	// Members answered in an earlier generation (the join completed before
	// the others arrived) rejoin, as a client does when its heartbeat says
	// REBALANCE_IN_PROGRESS.
	for round := 0; h.group(group).state == statePreparingRebalance && round < 5; round++ {
		for i, s := range slots {
			if s.done() {
				o.clientID = fmt.Sprintf("c%d", i)
				o.memberID = s.resp.MemberID
				slots[i] = h.join(group, o)
			}
		}
	}
	for _, s := range slots {
		if !s.done() || s.resp.ErrorCode != 0 || s.resp.Generation != slots[0].resp.Generation {
			h.t.Fatalf("join not complete: %+v", s.resp)
		}
	}
	leader := slots[0].resp.LeaderID
	gen := slots[0].resp.Generation
	ids := []string{leader}
	assign := map[string][]byte{}
	for _, s := range slots {
		assign[s.resp.MemberID] = []byte("assignment-" + s.resp.MemberID)
		if s.resp.MemberID != leader {
			ids = append(ids, s.resp.MemberID)
		}
	}
	var syncs []*syncSlot
	for _, id := range ids[1:] {
		syncs = append(syncs, h.sync(group, id, gen, "", nil))
	}
	syncs = append(syncs, h.sync(group, leader, gen, "", assign))
	for _, s := range syncs {
		if s.resp == nil || s.resp.ErrorCode != 0 {
			h.t.Fatalf("sync: %+v", s.resp)
		}
	}
	if g := h.group(group); g.state != stateStable {
		h.t.Fatalf("group %s is %s, want Stable", group, g.state)
	}
	return ids, gen
}

package group

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncStable(t *testing.T) {
	h := newHarness(t, testConfig())

	// v4+: the first join gets MEMBER_ID_REQUIRED and an id.
	first := h.join("g", joinOpts{clientID: "alpha"})
	if first.resp.ErrorCode != kerr.MemberIDRequired.Code || first.resp.MemberID != "alpha-id1" {
		t.Fatalf("first join: %+v", first.resp)
	}
	a := h.join("g", joinOpts{memberID: first.resp.MemberID, clientID: "alpha", protocols: protocols(consumerMeta("t"), "range", "roundrobin")})
	// Alone and with no initial delay, the member completes the join at once.
	if !a.done() || a.resp.ErrorCode != 0 || a.resp.Generation != 1 || a.resp.LeaderID != "alpha-id1" {
		t.Fatalf("join: %+v", a.resp)
	}
	if *a.resp.Protocol != "range" || *a.resp.ProtocolType != "consumer" || len(a.resp.Members) != 1 {
		t.Fatalf("leader's join answer: %+v", a.resp)
	}
	s := h.sync("g", "alpha-id1", 1, "", map[string][]byte{"alpha-id1": []byte("A")})
	if s.resp == nil || s.resp.ErrorCode != 0 || string(s.resp.MemberAssignment) != "A" {
		t.Fatalf("sync: %+v", s.resp)
	}
	g := h.group("g")
	if g.state != stateStable {
		t.Fatalf("state %s", g.state)
	}
	if len(h.logs[g.partition]) == 0 {
		t.Fatal("no group metadata stored")
	}

	// A second member: the group rebalances; the first member learns it
	// from its heartbeat and rejoins; both get generation 2.
	b := h.joinFull("g", joinOpts{clientID: "beta", protocols: protocols(consumerMeta("t"), "roundrobin", "range")})
	if b.done() {
		t.Fatalf("second member answered before the first rejoined: %+v", b.resp)
	}
	if g.state != statePreparingRebalance {
		t.Fatalf("state %s", g.state)
	}
	if code := h.heartbeat("g", "alpha-id1", 1, ""); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	a2 := h.join("g", joinOpts{memberID: "alpha-id1", clientID: "alpha", protocols: protocols(consumerMeta("t"), "range", "roundrobin")})
	if !a2.done() || !b.done() {
		t.Fatal("joins not answered once all members rejoined")
	}
	if a2.resp.Generation != 2 || b.resp.Generation != 2 {
		t.Fatalf("generations %d %d", a2.resp.Generation, b.resp.Generation)
	}
	// The leader (alpha, the first member) gets every member's metadata;
	// the follower gets none.
	if a2.resp.LeaderID != "alpha-id1" || len(a2.resp.Members) != 2 || len(b.resp.Members) != 0 {
		t.Fatalf("leader %s members %d/%d", a2.resp.LeaderID, len(a2.resp.Members), len(b.resp.Members))
	}
	for _, m := range a2.resp.Members {
		if !bytes.Equal(m.ProtocolMetadata, consumerMeta("t")) {
			t.Fatalf("member %s metadata %q", m.MemberID, m.ProtocolMetadata)
		}
	}
	// One vote each for range and roundrobin: the tie goes to the
	// preference of the first member in id order (alpha: range).
	if *a2.resp.Protocol != "range" {
		t.Fatalf("protocol %s", *a2.resp.Protocol)
	}
	// During CompletingRebalance a follower's sync waits for the leader.
	bs := h.sync("g", b.resp.MemberID, 2, "", nil)
	if bs.resp != nil {
		t.Fatalf("follower sync answered before the leader's: %+v", bs.resp)
	}
	if code := h.heartbeat("g", b.resp.MemberID, 2, ""); code != 0 {
		t.Fatalf("heartbeat in CompletingRebalance: %d", code)
	}
	as := h.sync("g", "alpha-id1", 2, "", map[string][]byte{"alpha-id1": []byte("A2"), b.resp.MemberID: []byte("B2")})
	if as.resp == nil || bs.resp == nil || string(as.resp.MemberAssignment) != "A2" || string(bs.resp.MemberAssignment) != "B2" {
		t.Fatalf("syncs: %+v %+v", as.resp, bs.resp)
	}
	if *bs.resp.Protocol != "range" || *bs.resp.ProtocolType != "consumer" {
		t.Fatalf("sync v5 protocol fields: %+v", bs.resp)
	}
	// A follower rejoining with the same metadata in Stable does not
	// rebalance: it gets the current generation back.
	b2 := h.join("g", joinOpts{memberID: b.resp.MemberID, clientID: "beta", protocols: protocols(consumerMeta("t"), "roundrobin", "range")})
	if !b2.done() || b2.resp.Generation != 2 || g.state != stateStable {
		t.Fatalf("follower rejoin: %+v state %s", b2.resp, g.state)
	}
}

func TestProtocolSelection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"common second choice", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin"}}, "roundrobin"},
		{"majority", [][]string{{"sticky", "range"}, {"sticky", "range"}, {"range", "sticky"}}, "sticky"},
		{"cooperative", [][]string{{"cooperative-sticky", "range"}, {"cooperative-sticky", "range"}}, "cooperative-sticky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroup("g", 0, t0)
			for i, ps := range tc.members {
				id := string(rune('a' + i))
				g.members[id] = &member{id: id, protocols: protocols(nil, ps...)}
			}
			if got := g.selectProtocol(); got != tc.want {
				t.Fatalf("got %s want %s", got, tc.want)
			}
		})
	}
}

func TestJoinBadInput(t *testing.T) {
	h := newHarness(t, testConfig())
	h.stableGroup("g", 1, joinOpts{})

	for _, tc := range []struct {
		name string
		o    joinOpts
		grp  string
		want int16
	}{
		{"other protocol type", joinOpts{protoType: "connect"}, "g", kerr.InconsistentGroupProtocol.Code},
		{"no common protocol", joinOpts{protocols: protocols(nil, "my-assignor")}, "g", kerr.InconsistentGroupProtocol.Code},
		{"empty protocol type", joinOpts{protoType: "", protocols: []kmsg.JoinGroupRequestProtocol{}}, "new", kerr.InconsistentGroupProtocol.Code},
		{"session too short", joinOpts{session: time.Second}, "g", kerr.InvalidSessionTimeout.Code},
		{"session too long", joinOpts{session: time.Hour}, "g", kerr.InvalidSessionTimeout.Code},
		{"unknown member", joinOpts{memberID: "nobody"}, "g", kerr.UnknownMemberID.Code},
		{"unknown member of unknown group", joinOpts{memberID: "nobody"}, "nogroup", kerr.UnknownMemberID.Code},
		{"empty group id", joinOpts{}, "", kerr.InvalidGroupID.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := h.join(tc.grp, tc.o)
			if !s.done() || s.resp.ErrorCode != tc.want {
				t.Fatalf("want %d, got %+v", tc.want, s.resp)
			}
		})
	}
	if _, ok := h.st.groups["nogroup"]; ok {
		t.Fatal("a failed join left a group behind")
	}
	if h.group("g").state != stateStable {
		t.Fatal("bad joins disturbed the group")
	}
}

func TestHeartbeatErrors(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, gen := h.stableGroup("g", 2, joinOpts{})
	for _, tc := range []struct {
		name   string
		group  string
		member string
		gen    int32
		want   int16
	}{
		{"ok", "g", ids[1], gen, 0},
		{"stale generation", "g", ids[1], gen - 1, kerr.IllegalGeneration.Code},
		{"unknown member", "g", "nobody", gen, kerr.UnknownMemberID.Code},
		{"unknown group", "other", ids[1], gen, kerr.UnknownMemberID.Code},
		{"empty group id", "", ids[1], gen, kerr.InvalidGroupID.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.heartbeat(tc.group, tc.member, tc.gen, ""); got != tc.want {
				t.Fatalf("got %d want %d", got, tc.want)
			}
		})
	}
	// Stale syncs and commits are refused the same way.
	if s := h.sync("g", ids[1], gen+5, "", nil); s.resp.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("sync stale generation: %d", s.resp.ErrorCode)
	}
	if c := h.commit(8, "g", "nobody", gen, map[int32]int64{0: 1}); c[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("commit unknown member: %d", c[0])
	}
	if c := h.commit(8, "g", ids[0], gen+1, map[int32]int64{0: 1}); c[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("commit stale generation: %d", c[0])
	}
	if c := h.commit(8, "g", "", -1, map[int32]int64{0: 1}); c[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("simple commit to a group with members: %d", c[0])
	}
}

func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, gen := h.stableGroup("g", 3, joinOpts{session: 10 * time.Second})
	g := h.group("g")
	// Two members heartbeat every 3s; the third stops.
	for i := 0; i < 3; i++ {
		h.advance(3 * time.Second)
		for _, id := range ids[:2] {
			if code := h.heartbeat("g", id, gen, ""); code != 0 {
				t.Fatalf("heartbeat %s: %d", id, code)
			}
		}
	}
	if len(g.members) != 3 || g.state != stateStable {
		t.Fatalf("after 9s: %d members, %s", len(g.members), g.state)
	}
	h.advance(2 * time.Second) // 11s since the third member's last contact
	if _, ok := g.members[ids[2]]; ok {
		t.Fatal("expired member still in the group")
	}
	if g.state != statePreparingRebalance {
		t.Fatalf("state %s", g.state)
	}
	if code := h.heartbeat("g", ids[0], gen, ""); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat: %d", code)
	}
	j0 := h.join("g", joinOpts{memberID: ids[0]})
	j1 := h.join("g", joinOpts{memberID: ids[1]})
	if !j0.done() || !j1.done() || j0.resp.Generation != gen+1 {
		t.Fatalf("rejoin: %+v %+v", j0.resp, j1.resp)
	}
	if code := h.heartbeat("g", ids[2], gen, ""); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member's heartbeat: %d", code)
	}
}

func TestRebalanceTimeoutRemovesLaggards(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, _ := h.stableGroup("g", 2, joinOpts{session: 30 * time.Second, rebalance: 5 * time.Second})
	// A third member joins; only one of the two old members rejoins.
	c := h.joinFull("g", joinOpts{session: 30 * time.Second, rebalance: 5 * time.Second})
	a := h.join("g", joinOpts{memberID: ids[0], session: 30 * time.Second, rebalance: 5 * time.Second})
	if a.done() || c.done() {
		t.Fatal("completed before the rebalance timeout with a member missing")
	}
	h.advance(5 * time.Second)
	if !a.done() || !c.done() || a.resp.ErrorCode != 0 {
		t.Fatalf("not completed at the rebalance timeout: %+v %+v", a.resp, c.resp)
	}
	g := h.group("g")
	if _, ok := g.members[ids[1]]; ok || len(g.members) != 2 {
		t.Fatalf("laggard kept: %v", sortedKeys(g.members))
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 3 * time.Second
	h := newHarness(t, cfg)
	a := h.joinFull("g", joinOpts{rebalance: 20 * time.Second})
	h.advance(2 * time.Second)
	b := h.joinFull("g", joinOpts{rebalance: 20 * time.Second})
	h.advance(time.Second) // first delay over; a member arrived: extended
	if a.done() || b.done() {
		t.Fatal("completed although a member joined during the initial delay")
	}
	h.advance(3 * time.Second) // no newcomer during the extension
	if !a.done() || !b.done() || a.resp.Generation != 1 || b.resp.Generation != 1 {
		t.Fatalf("after the delays: %+v %+v", a.resp, b.resp)
	}
}

func TestSyncTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = time.Second
	h := newHarness(t, cfg)
	a := h.joinFull("g", joinOpts{rebalance: 4 * time.Second})
	b := h.joinFull("g", joinOpts{rebalance: 4 * time.Second})
	h.advance(2 * time.Second)
	if !a.done() || !b.done() {
		t.Fatal("join not complete")
	}
	leader := b.resp.LeaderID
	var follower string
	for _, s := range []*joinSlot{a, b} {
		if s.resp.MemberID != leader {
			follower = s.resp.MemberID
		}
	}
	fs := h.sync("g", follower, 1, "", nil)
	// The leader never syncs (but keeps heartbeating).
	h.advance(2 * time.Second)
	h.heartbeat("g", leader, 1, "")
	h.advance(2 * time.Second)
	if fs.resp == nil || fs.resp.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("follower's sync: %+v", fs.resp)
	}
	g := h.group("g")
	if _, ok := g.members[leader]; ok {
		t.Fatal("leader that never synced kept")
	}
}

func TestStaticMembership(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = time.Second
	h := newHarness(t, cfg)
	o := joinOpts{instance: "i-1", clientID: "s1"}
	s1 := h.join("g", o) // static: no MEMBER_ID_REQUIRED
	o2 := joinOpts{instance: "i-2", clientID: "s2"}
	s2 := h.join("g", o2)
	h.advance(3 * time.Second)
	if !s1.done() || !s2.done() || s1.resp.ErrorCode != 0 || s2.resp.ErrorCode != 0 {
		t.Fatalf("static joins: %+v %+v", s1.resp, s2.resp)
	}
	leader, gen := s1.resp.LeaderID, s1.resp.Generation
	id1, id2 := s1.resp.MemberID, s2.resp.MemberID
	assign := map[string][]byte{id1: []byte("P1"), id2: []byte("P2")}
	h.sync("g", id1, gen, "i-1", assign)
	h.sync("g", id2, gen, "i-2", assign)
	g := h.group("g")
	if g.state != stateStable {
		t.Fatalf("state %s", g.state)
	}

	// Instance i-2 restarts: a new process joins with no member id.
	r := h.join("g", joinOpts{instance: "i-2", clientID: "s2"})
	if !r.done() || r.resp.ErrorCode != 0 || r.resp.Generation != gen || r.resp.MemberID == id2 {
		t.Fatalf("static rejoin: %+v", r.resp)
	}
	if g.state != stateStable {
		t.Fatalf("static rejoin rebalanced: %s", g.state)
	}
	if r.resp.LeaderID != leader && id2 != leader {
		t.Fatalf("leader changed: %s", r.resp.LeaderID)
	}
	rs := h.sync("g", r.resp.MemberID, gen, "i-2", nil)
	if rs.resp.ErrorCode != 0 || string(rs.resp.MemberAssignment) != "P2" {
		t.Fatalf("rejoined member's assignment: %+v", rs.resp)
	}
	// The old incarnation is fenced.
	if code := h.heartbeat("g", id2, gen, "i-2"); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member heartbeat: %d", code)
	}
	if code := h.heartbeat("g", r.resp.MemberID, gen, "i-2"); code != 0 {
		t.Fatalf("new member heartbeat: %d", code)
	}
	// The other member noticed nothing.
	if code := h.heartbeat("g", id1, gen, "i-1"); code != 0 {
		t.Fatalf("other member heartbeat: %d", code)
	}

	// LeaveGroup v3+ by instance id: a wrong member id is fenced, an
	// unknown instance is unknown, the right one leaves.
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 4
	req.Group = "g"
	req.Members = []kmsg.LeaveGroupRequestMember{
		{MemberID: "wrong", InstanceID: kmsg.StringPtr("i-1")},
		{InstanceID: kmsg.StringPtr("i-9")},
		{InstanceID: kmsg.StringPtr("i-2")},
	}
	var resp *kmsg.LeaveGroupResponse
	h.do(func() { resp = h.st.leave(req) })
	want := []int16{kerr.FencedInstanceID.Code, kerr.UnknownMemberID.Code, 0}
	for i, m := range resp.Members {
		if m.ErrorCode != want[i] {
			t.Fatalf("leave member %d: %d want %d", i, m.ErrorCode, want[i])
		}
	}
	if g.state != statePreparingRebalance || len(g.members) != 1 {
		t.Fatalf("after leave: %s, %d members", g.state, len(g.members))
	}
}

func TestLeaveV0(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, _ := h.stableGroup("g", 2, joinOpts{})
	leave := func(member string) int16 {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = 0
		req.Group, req.MemberID = "g", member
		var resp *kmsg.LeaveGroupResponse
		h.do(func() { resp = h.st.leave(req) })
		return resp.ErrorCode
	}
	if code := leave("nobody"); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown: %d", code)
	}
	if code := leave(ids[1]); code != 0 {
		t.Fatalf("leave: %d", code)
	}
	// The remaining member rejoins alone.
	j := h.join("g", joinOpts{memberID: ids[0]})
	if !j.done() || len(j.resp.Members) != 1 {
		t.Fatalf("rejoin: %+v", j.resp)
	}
	if code := leave(ids[0]); code != 0 {
		t.Fatalf("leave: %d", code)
	}
	if g := h.group("g"); g.state != stateEmpty {
		t.Fatalf("state %s", g.state)
	}
}

func TestCommitAndFetch(t *testing.T) {
	h := newHarness(t, testConfig())
	// A simple consumer (generation -1) commits to a group nobody joined.
	if c := h.commit(8, "simple", "", -1, map[int32]int64{0: 10, 1: 20}); c[0] != 0 || c[1] != 0 {
		t.Fatalf("simple commit: %v", c)
	}
	got, code := h.fetch("simple", 0, 1, 2)
	if code != 0 || got[0] != 10 || got[1] != 20 || got[2] != -1 {
		t.Fatalf("fetch: %v %d", got, code)
	}
	// v0 commits have no generation: also simple.
	if c := h.commit(0, "simple", "", 0, map[int32]int64{2: 5}); c[2] != 0 {
		t.Fatalf("v0 commit: %v", c)
	}
	if got, _ := h.fetch("simple", 2); got[2] != 5 {
		t.Fatalf("v0 commit not stored: %v", got)
	}
	// A member group commits in its generation.
	ids, gen := h.stableGroup("g", 2, joinOpts{})
	if c := h.commit(8, "g", ids[1], gen, map[int32]int64{0: 3}); c[0] != 0 {
		t.Fatalf("member commit: %v", c)
	}
	// During CompletingRebalance commits are refused; in
	// PreparingRebalance the old generation still commits.
	h.joinFull("g", joinOpts{})
	if c := h.commit(8, "g", ids[1], gen, map[int32]int64{0: 4}); c[0] != 0 {
		t.Fatalf("commit in PreparingRebalance: %v", c)
	}
	// A commit to a group this coordinator does not know, with a
	// generation: ILLEGAL_GENERATION.
	if c := h.commit(8, "ghost", "m", 3, map[int32]int64{0: 1}); c[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("ghost commit: %v", c)
	}
	if _, ok := h.st.groups["ghost"]; ok {
		t.Fatal("refused commit created a group")
	}

	// Metadata above offset.metadata.max.bytes.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = "simple", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 99, Metadata: kmsg.StringPtr(string(make([]byte, 5000)))},
		{Partition: 1, Offset: 98},
	}}}
	var resp *kmsg.OffsetCommitResponse
	h.do(func() {
		h.st.commit(req, h.commitParts(req, map[topicPartition]bool{{"t", 1}: true}), func(r *kmsg.OffsetCommitResponse) { resp = r })
	})
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetMetadataTooLarge.Code ||
		resp.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("bad partitions: %+v", resp.Topics)
	}
	if got, _ := h.fetch("simple", 0, 1); got[0] != 10 || got[1] != 20 {
		t.Fatalf("refused commits changed offsets: %v", got)
	}

	// A failed append answers the Kafka error and changes nothing.
	h.appendErr = kerr.NotEnoughReplicas
	if c := h.commit(8, "simple", "", -1, map[int32]int64{0: 11}); c[0] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("failed append: %v", c)
	}
	h.appendErr = errors.New("disk on fire")
	if c := h.commit(8, "simple", "", -1, map[int32]int64{0: 11}); c[0] != kerr.NotCoordinator.Code {
		t.Fatalf("failed append: %v", c)
	}
	h.appendErr = nil
	if got, _ := h.fetch("simple", 0); got[0] != 10 {
		t.Fatalf("failed commit changed the offset: %v", got)
	}

	// OffsetFetch v8: several groups; null topics = everything committed.
	freq := kmsg.NewPtrOffsetFetchRequest()
	freq.Version = 8
	freq.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "simple"}, {Group: "nobody"}, {Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 9}}}}}
	var fresp *kmsg.OffsetFetchResponse
	h.do(func() { fresp = h.st.fetchOffsets(freq) })
	if len(fresp.Groups) != 3 {
		t.Fatalf("groups: %+v", fresp.Groups)
	}
	if ps := fresp.Groups[0].Topics[0].Partitions; len(ps) != 3 || ps[0].Offset != 10 || ps[2].Offset != 5 || *ps[0].Metadata != "md0" || ps[0].LeaderEpoch != 7 {
		t.Fatalf("simple: %+v", fresp.Groups[0])
	}
	if len(fresp.Groups[1].Topics) != 0 || fresp.Groups[1].ErrorCode != 0 {
		t.Fatalf("unknown group: %+v", fresp.Groups[1])
	}
	if ps := fresp.Groups[2].Topics[0].Partitions; ps[0].Offset != 4 || ps[1].Offset != -1 {
		t.Fatalf("g: %+v", ps)
	}
}

func TestCoordinatorErrors(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	ids, gen := h.stableGroup("g", 1, joinOpts{})
	p := h.group("g").partition
	parked := h.joinFull("g", joinOpts{}) // parks: the leader has not rejoined
	if parked.done() {
		t.Fatal("join should park")
	}
	h.do(func() { h.st.resign(p, 0) })
	if !parked.done() || parked.resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join on resign: %+v", parked.resp)
	}
	if code := h.heartbeat("g", ids[0], gen, ""); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat after resign: %d", code)
	}
	if _, code := h.fetch("g", 0); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch after resign: %d", code)
	}
	// Leading again, while loading.
	h.do(func() { h.st.becomeLeader(p, 1) })
	if code := h.heartbeat("g", ids[0], gen, ""); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("heartbeat while loading: %d", code)
	}
	var lresp *kmsg.ListGroupsResponse
	h.do(func() { lresp = h.st.list(kmsg.NewPtrListGroupsRequest()) })
	if lresp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %d", lresp.ErrorCode)
	}
	// A stale load result (epoch 0) is ignored.
	h.do(func() { h.st.installLoad(p, 0, newLoadResult()) })
	if code := h.heartbeat("g", ids[0], gen, ""); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("stale load installed: %d", code)
	}
}

func TestDescribeListDelete(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, _ := h.stableGroup("live", 2, joinOpts{})
	h.commit(8, "idle", "", -1, map[int32]int64{0: 1, 1: 2})

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version = 5
	dreq.Groups = []string{"live", "idle", "none"}
	dreq.IncludeAuthorizedOperations = true
	var dresp *kmsg.DescribeGroupsResponse
	h.do(func() { dresp = h.st.describe(dreq) })
	live, idle, none := dresp.Groups[0], dresp.Groups[1], dresp.Groups[2]
	if live.State != "Stable" || live.Protocol != "range" || live.ProtocolType != "consumer" || len(live.Members) != 2 {
		t.Fatalf("live: %+v", live)
	}
	for _, m := range live.Members {
		if string(m.MemberAssignment) != "assignment-"+m.MemberID || len(m.ProtocolMetadata) == 0 || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("member: %+v", m)
		}
	}
	if idle.State != "Empty" || idle.ProtocolType != "" || len(idle.Members) != 0 {
		t.Fatalf("idle: %+v", idle)
	}
	if none.State != "Dead" || none.ErrorCode != 0 {
		t.Fatalf("none: %+v", none)
	}
	if live.AuthorizedOperations == 0 || live.AuthorizedOperations < 0 {
		t.Fatalf("authorized operations: %d", live.AuthorizedOperations)
	}

	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 4
	var lresp *kmsg.ListGroupsResponse
	h.do(func() { lresp = h.st.list(lreq) })
	if len(lresp.Groups) != 2 || lresp.Groups[0].Group != "idle" || lresp.Groups[1].GroupState != "Stable" {
		t.Fatalf("list: %+v", lresp.Groups)
	}
	lreq.StatesFilter = []string{"stable"}
	h.do(func() { lresp = h.st.list(lreq) })
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != "live" {
		t.Fatalf("list stable: %+v", lresp.Groups)
	}

	del := func(names ...string) []int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = names
		var resp *kmsg.DeleteGroupsResponse
		h.do(func() { h.st.deleteGroups(req, func(r *kmsg.DeleteGroupsResponse) { resp = r }) })
		var codes []int16
		for _, g := range resp.Groups {
			codes = append(codes, g.ErrorCode)
		}
		return codes
	}
	codes := del("live", "idle", "none")
	if codes[0] != kerr.NonEmptyGroup.Code || codes[1] != 0 || codes[2] != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete codes %v", codes)
	}
	if got, _ := h.fetch("idle", 0, 1); got[0] != -1 || got[1] != -1 {
		t.Fatalf("deleted group's offsets: %v", got)
	}
	if _, ok := h.st.groups["idle"]; ok {
		t.Fatal("deleted group still known")
	}
	_ = ids
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, gen := h.stableGroup("g", 1, joinOpts{protocols: protocols(consumerMeta("t"), "range")})
	h.commit(8, "g", ids[0], gen, map[int32]int64{0: 5})
	// An offset of a topic the group does not subscribe to.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = "g", ids[0], gen
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "old", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
	h.do(func() { h.st.commit(req, h.commitParts(req, nil), func(*kmsg.OffsetCommitResponse) {}) })

	dreq := kmsg.NewPtrOffsetDeleteRequest()
	dreq.Group = "g"
	dreq.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}
	var resp *kmsg.OffsetDeleteResponse
	h.do(func() { h.st.offsetDelete(dreq, func(r *kmsg.OffsetDeleteResponse) { resp = r }) })
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", resp)
	}
	g := h.group("g")
	if _, ok := g.offsets[topicPartition{"old", 0}]; ok {
		t.Fatal("offset not deleted")
	}
	if _, ok := g.offsets[topicPartition{"t", 0}]; !ok {
		t.Fatal("subscribed offset deleted")
	}
	dreq.Group = "missing"
	h.do(func() { h.st.offsetDelete(dreq, func(r *kmsg.OffsetDeleteResponse) { resp = r }) })
	if resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("missing group: %d", resp.ErrorCode)
	}
}

func TestOffsetRetention(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsRetention = time.Hour
	cfg.OffsetsRetentionCheckInterval = time.Minute
	h := newHarness(t, cfg)
	// t=0: a simple consumer commits p0 (expires by commit time, t=60).
	h.commit(8, "simple", "", -1, map[int32]int64{0: 1})
	// t=0: a consumer group member commits; the member stays until t=30,
	// so the group's offsets expire an hour after it became Empty (t=90).
	ids, gen := h.stableGroup("g", 1, joinOpts{session: 20 * time.Minute})
	h.commit(8, "g", ids[0], gen, map[int32]int64{0: 1})
	h.advance(15 * time.Minute)
	h.heartbeat("g", ids[0], gen, "")
	h.advance(15 * time.Minute)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = "g", ids[0]
	h.do(func() { h.st.leave(req) })
	if h.group("g").state != stateEmpty {
		t.Fatal("group not empty after its only member left")
	}
	h.advance(20 * time.Minute)
	h.commit(8, "simple", "", -1, map[int32]int64{1: 1}) // t=50, expires t=110
	h.advance(11 * time.Minute)                          // t=61
	if got, _ := h.fetch("simple", 0, 1); got[0] != -1 || got[1] != 1 {
		t.Fatalf("simple at t=61: %v", got)
	}
	if got, _ := h.fetch("g", 0); got[0] != 1 {
		t.Fatalf("empty group's offset expired before its retention: %v", got)
	}
	h.advance(30 * time.Minute) // t=91
	if got, _ := h.fetch("g", 0); got[0] != -1 {
		t.Fatalf("empty group's offset at t=91: %v", got)
	}
	if _, ok := h.st.groups["g"]; ok {
		t.Fatal("expired empty group not removed")
	}
	if got, _ := h.fetch("simple", 1); got[1] != 1 {
		t.Fatalf("simple p1 at t=91: %v", got)
	}
	// The tombstones are in the log: a reload agrees.
	lr := newLoadResult()
	for p, b := range h.logs {
		if _, err := lr.applyBatches(b, 0); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	if _, ok := lr.offsets["g"]; ok {
		t.Fatalf("reloaded expired offsets: %v", lr.offsets["g"])
	}
	if _, ok := lr.groups["g"]; ok {
		t.Fatal("reloaded removed group")
	}
	if len(lr.offsets["simple"]) != 1 {
		t.Fatalf("reloaded simple: %v", lr.offsets["simple"])
	}
	h.advance(20 * time.Minute) // t=111: the last offset expires, the group goes
	if _, ok := h.st.groups["simple"]; ok {
		t.Fatal("simple group without offsets kept")
	}
}

// TestLoad: what one coordinator wrote, a new one (after a restart or a
// move) loads: offsets, the generation and members with assignments, who
// must heartbeat within their session timeout.
func TestLoad(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, gen := h.stableGroup("g", 2, joinOpts{session: 10 * time.Second, instance: ""})
	h.commit(8, "g", ids[0], gen, map[int32]int64{0: 42, 1: 43})
	h.commit(8, "simple", "", -1, map[int32]int64{3: 7})

	h2 := newHarness(t, testConfig())
	h2.now = h.now.Add(time.Second)
	for p := range h.logs {
		h2.st.unload(p)
		h2.st.becomeLeader(p, 1)
		lr := newLoadResult()
		if _, err := lr.applyBatches(h.logs[p], 0); err != nil {
			t.Fatal(err)
		}
		h2.do(func() { h2.st.installLoad(p, 1, lr) })
	}
	g := h2.group("g")
	if g.state != stateStable || g.generation != gen || len(g.members) != 2 || g.protocol != "range" || g.leader != ids[0] {
		t.Fatalf("loaded group: state %s gen %d members %d protocol %q leader %q", g.state, g.generation, len(g.members), g.protocol, g.leader)
	}
	if got, _ := h2.fetch("g", 0, 1); got[0] != 42 || got[1] != 43 {
		t.Fatalf("loaded offsets: %v", got)
	}
	if got, _ := h2.fetch("simple", 3); got[3] != 7 {
		t.Fatalf("loaded simple offsets: %v", got)
	}
	// A member carries on: heartbeat and sync give it its assignment.
	if code := h2.heartbeat("g", ids[1], gen, ""); code != 0 {
		t.Fatalf("heartbeat after load: %d", code)
	}
	s := h2.sync("g", ids[1], gen, "", nil)
	if s.resp.ErrorCode != 0 || string(s.resp.MemberAssignment) != "assignment-"+ids[1] {
		t.Fatalf("sync after load: %+v", s.resp)
	}
	// The other never comes back: removed after its session timeout.
	h2.advance(5 * time.Second)
	h2.heartbeat("g", ids[1], gen, "")
	h2.advance(6 * time.Second)
	if _, ok := g.members[ids[0]]; ok {
		t.Fatal("silent member kept after load")
	}
}

func TestGroupMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSize = 2
	h := newHarness(t, cfg)
	h.stableGroup("g", 2, joinOpts{})
	for _, o := range []joinOpts{{}, {version: 3}, {instance: "i"}} {
		if s := h.join("g", o); !s.done() || s.resp.ErrorCode != kerr.GroupMaxSizeReached.Code {
			t.Errorf("join %+v of a full group: %+v", o, s.resp)
		}
	}
}

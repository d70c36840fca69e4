package group_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/testutil"
)

// staticMember is a franz-go consumer with a group.instance.id that counts
// its rebalance callbacks.
type staticMember struct {
	cl       *kgo.Client
	assigned atomic.Int32
	revoked  atomic.Int32
	stop     context.CancelFunc
	done     chan struct{}
}

func startStatic(t *testing.T, n *node, instance string) *staticMember {
	t.Helper()
	m := &staticMember{done: make(chan struct{})}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(n.addr), kgo.ClientID(instance),
		kgo.ConsumerGroup("static"), kgo.ConsumeTopics("st"), kgo.InstanceID(instance),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(8*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { m.assigned.Add(1) }),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) { m.revoked.Add(1) }),
	)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { m.close() })
	return m
}

// close stops the member; a static member does not leave its group.
func (m *staticMember) close() {
	m.stop()
	<-m.done
	m.cl.Close()
}

// TestStaticMembershipRejoin: a static member that restarts with the same
// group.instance.id within its session timeout gets its partitions back
// without a rebalance: the other members see no revocation and the
// generation does not change.
func TestStaticMembershipRejoin(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.createTopic("st", 6)
	adm := n.admin()
	a := startStatic(t, n, "inst-a")
	b := startStatic(t, n, "inst-b")
	c := startStatic(t, n, "inst-c")
	before := waitAssignment(t, adm, "static", 6, "inst-a", "inst-b", "inst-c")
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if a.assigned.Load() == 0 || b.assigned.Load() == 0 || c.assigned.Load() == 0 {
			return fmt.Errorf("not every member saw its assignment")
		}
		return nil
	})
	_, genBefore := a.cl.GroupMetadata()
	oldID, _ := c.cl.GroupMetadata()
	aAssigned, bAssigned := a.assigned.Load(), b.assigned.Load()

	c.close() // no LeaveGroup: static
	c2 := startStatic(t, n, "inst-c")
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if c2.assigned.Load() == 0 {
			return fmt.Errorf("restarted member has no assignment yet")
		}
		return nil
	})
	after := waitAssignment(t, adm, "static", 6, "inst-a", "inst-b", "inst-c")
	if !slices.Equal(before["inst-c"], after["inst-c"]) {
		t.Errorf("restarted member got %v, had %v", after["inst-c"], before["inst-c"])
	}
	newID, genC2 := c2.cl.GroupMetadata()
	if newID == oldID || newID == "" {
		t.Errorf("restarted member id %q (old %q)", newID, oldID)
	}
	time.Sleep(time.Second) // room for a rebalance, if one were coming
	_, genAfter := a.cl.GroupMetadata()
	if genAfter != genBefore || genC2 != genBefore {
		t.Errorf("generation moved: %d -> %d (restarted member %d)", genBefore, genAfter, genC2)
	}
	if a.revoked.Load() != 0 || b.revoked.Load() != 0 || a.assigned.Load() != aAssigned || b.assigned.Load() != bAssigned {
		t.Errorf("other members rebalanced: a revoked %d assigned %d->%d, b revoked %d assigned %d->%d",
			a.revoked.Load(), aAssigned, a.assigned.Load(), b.revoked.Load(), bAssigned, b.assigned.Load())
	}
	dg, err := adm.DescribeGroups(context.Background(), "static")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range dg["static"].Members {
		if m.InstanceID == nil || *m.InstanceID != m.ClientID {
			t.Errorf("member %s instance id %v", m.ClientID, m.InstanceID)
		}
	}

	// The old incarnation's member id is fenced.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "static", oldID, genBefore, kmsg.StringPtr("inst-c")
	resp, err := hb.RequestWith(context.Background(), n.client())
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Errorf("heartbeat of the old incarnation: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestBadInput: requests a broken or stale client sends get Kafka's error
// codes, and the group carries on.
func TestBadInput(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.createTopic("bad", 2)
	member := n.client(kgo.ConsumerGroup("bad"), kgo.ConsumeTopics("bad"), kgo.ClientID("good"), kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	var polls sync.WaitGroup
	pctx, pcancel := context.WithCancel(context.Background())
	polls.Add(1)
	go func() {
		defer polls.Done()
		for pctx.Err() == nil {
			member.PollFetches(pctx)
		}
	}()
	t.Cleanup(func() { pcancel(); polls.Wait() })
	waitAssignment(t, n.admin(), "bad", 2, "good")
	memberID, gen := member.GroupMetadata()
	raw := n.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	join := func(mut func(*kmsg.JoinGroupRequest)) int16 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.ProtocolType = "bad", "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 3000, 3000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
		mut(req)
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	for _, tc := range []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"join with an unknown protocol type", join(func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "no-such-type" }), kerr.InconsistentGroupProtocol},
		{"join with no protocol in common", join(func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Name = "my-own" }), kerr.InconsistentGroupProtocol},
		{"join with no protocols", join(func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }), kerr.InconsistentGroupProtocol},
		{"join with a 1ms session", join(func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1 }), kerr.InvalidSessionTimeout},
		{"join as an unknown member", join(func(r *kmsg.JoinGroupRequest) { r.MemberID = "ghost" }), kerr.UnknownMemberID},
		{"join with no group id", join(func(r *kmsg.JoinGroupRequest) { r.Group = "" }), kerr.InvalidGroupID},
	} {
		if tc.got != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(tc.got), tc.want)
		}
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "bad", memberID, gen-1
	if resp, err := hb.RequestWith(ctx, raw); err != nil || resp.ErrorCode != kerr.IllegalGeneration.Code {
		t.Errorf("heartbeat with a stale generation: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	hb.MemberID, hb.Generation = "ghost", gen
	if resp, err := hb.RequestWith(ctx, raw); err != nil || resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat of an unknown member: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "bad", "ghost", gen
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "bad", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, err := commit.RequestWith(ctx, raw); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("commit of an unknown member: %v %+v", err, resp)
	}
	commit.MemberID, commit.Generation = memberID, gen+7
	if resp, err := commit.RequestWith(ctx, raw); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Errorf("commit of a wrong generation: %v %+v", err, resp)
	}
	commit.Group, commit.MemberID, commit.Generation = "simple-bad", "", -1
	commit.Topics[0].Topic = "no-such-topic"
	if resp, err := commit.RequestWith(ctx, raw); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("commit to a missing topic: %v %+v", err, resp)
	}

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "bad", "ghost", gen
	if resp, err := sync.RequestWith(ctx, raw); err != nil || resp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("sync of an unknown member: %v %v", err, resp)
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "bad"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "ghost"}, {InstanceID: kmsg.StringPtr("nobody")}}
	if resp, err := leave.RequestWith(ctx, raw); err != nil || len(resp.Members) != 2 ||
		resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code || resp.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("leave of unknown members: %v %+v", err, resp)
	}

	// Key type 2 (share groups) is not served; type 1 (transactions) is
	// the transaction coordinator's.
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType = 2
	find.CoordinatorKeys = []string{"some-share-group"}
	if resp, err := find.RequestWith(ctx, raw); err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("find a share coordinator: %v %+v", err, resp)
	}

	// After all that, the member is still in its generation, unbothered.
	if id, g := member.GroupMetadata(); id != memberID || g != gen {
		t.Errorf("member moved from %s/%d to %s/%d", memberID, gen, id, g)
	}
	waitAssignment(t, n.admin(), "bad", 2, "good")
}

// TestOldVersions: a group consumer speaking the lowest versions
// (FindCoordinator v0, JoinGroup v0, SyncGroup v0, Heartbeat v0,
// LeaveGroup v0, OffsetCommit v2, OffsetFetch v1), as old librdkafka and
// sarama builds do, joins, consumes, commits and leaves.
func TestOldVersions(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.createTopic("old", 2)
	produceN(t, n, "old", 2, 5)
	v := kversion.Stable()
	for key, max := range map[int16]int16{8: 2, 9: 1, 10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0} {
		v.SetMaxKeyVersion(key, max)
	}
	got := consumeAll(t, n, "old-group", "old", 10, kgo.MaxVersions(v), kgo.Balancers(kgo.RangeBalancer()))
	if len(got) != 10 {
		t.Fatalf("read %d records", len(got))
	}
	os, err := n.admin().FetchOffsets(context.Background(), "old-group")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := os.Lookup("old", p); !ok || o.At != 5 {
			t.Errorf("old-%d committed %+v", p, o)
		}
	}
	dg, err := n.admin().DescribeGroups(context.Background(), "old-group")
	if err != nil || dg["old-group"].State != "Empty" {
		t.Errorf("after the v0 leave: %+v %v", dg["old-group"], err)
	}
}

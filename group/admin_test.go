package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/lag"
)

// consumeAll runs a group consumer until it has polled n records and
// committed them, then leaves (Close), so the group ends Empty with
// offsets. It returns the records it read, as "partition-offset".
func consumeAll(t *testing.T, n *node, group, topic string, want int, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(n.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(got), want, topic, fs.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d-%d", r.Partition, r.Offset)) })
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return got
}

func produceN(t *testing.T, n *node, topic string, partitions int32, per int) {
	t.Helper()
	p := &producer{cl: n.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), topic: topic, end: map[int32]int64{}}
	p.produce(t, partitions, per)
}

// TestRestartKeepsOffsets: offsets committed by a group consumer and by a
// simple consumer before a broker restart are fetched after it, the groups
// are listed again, and a consumer resumes where its group left off.
func TestRestartKeepsOffsets(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.createTopic("persist", 3)
	produceN(t, n, "persist", 3, 5)
	consumeAll(t, n, "durable", "persist", 15)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := n.admin()
	var simple kadm.Offsets
	simple.AddOffset("persist", 1, 3, 4)
	if err := adm.CommitAllOffsets(ctx, "simple", simple); err != nil {
		t.Fatal(err)
	}
	before := map[string]kadm.Offsets{}
	for _, g := range []string{"durable", "simple"} {
		os, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		before[g] = os.Offsets()
	}
	if got := before["durable"]; len(got["persist"]) != 3 || got["persist"][2].At != 5 {
		t.Fatalf("committed before restart: %+v", got)
	}

	n.restart()
	adm = n.admin()
	for g, want := range before {
		var got kadm.OffsetResponses
		testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			var err error
			got, err = adm.FetchOffsets(ctx, g)
			return err
		})
		for topic, ps := range want {
			for p, o := range ps {
				g2, ok := got.Lookup(topic, p)
				if !ok || g2.At != o.At || g2.LeaderEpoch != o.LeaderEpoch {
					t.Errorf("%s %s-%d after restart: %+v, before %+v", g, topic, p, g2, o)
				}
			}
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed["durable"]; !ok || l.State != "Empty" || l.ProtocolType != "consumer" {
		t.Errorf("durable listed after restart as %+v", l)
	}
	if l, ok := listed["simple"]; !ok || l.State != "Empty" || l.ProtocolType != "" {
		t.Errorf("simple listed after restart as %+v", l)
	}
	// The group resumes after its commits: only the new records.
	produceN(t, n, "persist", 3, 2)
	got := consumeAll(t, n, "durable", "persist", 6)
	slices.Sort(got)
	if want := []string{"0-5", "0-6", "1-5", "1-6", "2-5", "2-6"}; !slices.Equal(got, want) {
		t.Errorf("resumed with %v, want %v", got, want)
	}
}

// TestAdmin: what kadm gives against Sluice — DescribeGroups, ListGroups
// (with a state filter), Lag (and package lag agreeing with it), offset
// reset of an inactive group, DeleteOffsets and DeleteGroups.
func TestAdmin(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.createTopic("adm", 4)
	produceN(t, n, "adm", 4, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	adm := n.admin()

	// An idle group that read everything, then 3 more records per partition.
	consumeAll(t, n, "idle", "adm", 40)
	produceN(t, n, "adm", 4, 3)
	// An active group that reads, does not commit, and stays.
	active := n.client(kgo.ConsumerGroup("active"), kgo.ConsumeTopics("adm"), kgo.ClientID("active-client"),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	waitAssignment(t, adm, "active", 4, "active-client")
	_ = active

	dg, err := adm.DescribeGroups(ctx, "active", "idle", "missing")
	if err != nil {
		t.Fatal(err)
	}
	a := dg["active"]
	if a.State != "Stable" || a.ProtocolType != "consumer" || a.Protocol != "cooperative-sticky" || len(a.Members) != 1 {
		t.Errorf("active: %+v", a)
	}
	if m := a.Members[0]; m.ClientID != "active-client" || m.ClientHost != "/127.0.0.1" || m.MemberID == "" {
		t.Errorf("active member: %+v", m)
	}
	if j, ok := a.Members[0].Join.AsConsumer(); !ok || !slices.Equal(j.Topics, []string{"adm"}) {
		t.Errorf("active member's subscription: %+v", j)
	}
	if dg["idle"].State != "Empty" || len(dg["idle"].Members) != 0 {
		t.Errorf("idle: %+v", dg["idle"])
	}
	if dg["missing"].State != "Dead" || dg["missing"].Err != nil {
		t.Errorf("missing: %+v", dg["missing"])
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Groups(); !slices.Equal(got, []string{"active", "idle"}) {
		t.Errorf("groups %v", got)
	}
	stable, err := adm.ListGroups(ctx, "Stable")
	if err != nil {
		t.Fatal(err)
	}
	if got := stable.Groups(); !slices.Equal(got, []string{"active"}) {
		t.Errorf("stable groups %v", got)
	}

	// Lag: the idle group is 3 behind on each partition; the active one,
	// with no commits, the whole log. Package lag says what kadm says.
	lags, err := adm.Lag(ctx, "idle", "active")
	if err != nil {
		t.Fatal(err)
	}
	if tot := lags["idle"].Lag.Total(); tot != 12 {
		t.Errorf("idle lag %d, want 12", tot)
	}
	if tot := lags["active"].Lag.Total(); tot != 52 {
		t.Errorf("active lag %d, want 52", tot)
	}
	collected, err := lag.NewCollector(n.client()).Collect(ctx, "idle", "active")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range collected {
		if g.Err != nil {
			t.Errorf("lag of %s: %v", g.Group, g.Err)
		}
		if g.TotalLag != lags[g.Group].Lag.Total() {
			t.Errorf("lag of %s: %d, kadm %d", g.Group, g.TotalLag, lags[g.Group].Lag.Total())
		}
		for _, p := range g.Partitions {
			kl, _ := lags[g.Group].Lag.Lookup(p.Topic, p.Partition)
			if p.Lag != kl.Lag || p.LogEnd != kl.End.Offset || p.Committed != kl.Commit.At {
				t.Errorf("%s %s-%d: %+v, kadm lag %d end %d commit %d", g.Group, p.Topic, p.Partition, p, kl.Lag, kl.End.Offset, kl.Commit.At)
			}
			if p.Lag > 0 && (p.EndTimestamp.IsZero() || p.CommittedTimestamp.IsZero() || p.LagTime < 0) {
				t.Errorf("%s %s-%d: no timestamps: %+v", g.Group, p.Topic, p.Partition, p)
			}
			if g.Group == "active" && p.MemberID == "" {
				t.Errorf("active %s-%d has no owner", p.Topic, p.Partition)
			}
		}
	}

	// With fetch limits below a batch's size the timestamps are the same
	// (the batched fetch is retried one partition at a time).
	small, err := lag.NewCollector(n.client(), lag.FetchBytes(1, 1<<20)).Collect(ctx, "idle", "active")
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range small {
		for j, p := range g.Partitions {
			q := collected[i].Partitions[j]
			if p.LagTime != q.LagTime || !p.EndTimestamp.Equal(q.EndTimestamp) || !p.CommittedTimestamp.Equal(q.CommittedTimestamp) {
				t.Errorf("%s %s-%d with small fetches: %+v, with large: %+v", g.Group, p.Topic, p.Partition, p, q)
			}
		}
	}

	// Offset reset (kafka-consumer-groups --reset-offsets --to-earliest):
	// allowed for the inactive group; the active group refuses commits
	// from outside it.
	starts, err := adm.ListStartOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := adm.CommitOffsets(ctx, "idle", starts.Offsets())
	if err != nil || resp.Error() != nil {
		t.Fatalf("reset idle: %v %v", err, resp.Error())
	}
	if l, _ := adm.Lag(ctx, "idle"); l["idle"].Lag.Total() != 52 {
		t.Errorf("idle lag after reset: %d", l["idle"].Lag.Total())
	}
	resp, err = adm.CommitOffsets(ctx, "active", starts.Offsets())
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("reset of an active group: %v, want UNKNOWN_MEMBER_ID", err)
	}

	// DeleteOffsets: an Empty group's offsets go; an active group's
	// subscribed topic is refused.
	dresp, err := adm.DeleteOffsets(ctx, "idle", kadm.TopicsSet{"adm": {0: {}}})
	if err != nil || dresp.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, dresp.Error())
	}
	if os, _ := adm.FetchOffsets(ctx, "idle"); len(os["adm"]) != 3 {
		t.Errorf("offsets after delete: %+v", os)
	}
	dresp, err = adm.DeleteOffsets(ctx, "active", kadm.TopicsSet{"adm": {0: {}}})
	if err == nil {
		err = dresp.Error()
	}
	if !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Errorf("delete offsets of a subscribed topic: %v", err)
	}

	// DeleteGroups: the active group is not empty; the idle one goes; an
	// unknown one is not found.
	del, err := adm.DeleteGroups(ctx, "active", "idle", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if err := del["active"].Err; !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("delete active: %v", err)
	}
	if err := del["idle"].Err; err != nil {
		t.Errorf("delete idle: %v", err)
	}
	if err := del["missing"].Err; !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("delete missing: %v", err)
	}
	if os, _ := adm.FetchOffsets(ctx, "idle"); len(os) != 0 {
		t.Errorf("deleted group still has offsets: %+v", os)
	}
	if dg, _ := adm.DescribeGroups(ctx, "idle"); dg["idle"].State != "Dead" {
		t.Errorf("deleted group described as %s", dg["idle"].State)
	}
}

// TestAppliance: the appliance wires the coordinator (a consumer group
// works against appliance.App, with its offsets.* and group.* settings)
// and its offsets survive an App restart.
func TestAppliance(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Settings(
		"offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=1000", // consumeAll asks for 3s
	))
	n := &node{t: t, addr: c.Addr(), c: c}
	n.createTopic("app", 2)
	produceN(t, n, "app", 2, 3)
	consumeAll(t, n, "app-group", "app", 6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := n.admin().Metadata(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(md.Topics["__consumer_offsets"].Partitions); got != 5 {
		t.Errorf("__consumer_offsets has %d partitions, want offsets.topic.num.partitions=5", got)
	}
	n.restart()
	var os kadm.OffsetResponses
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		os, err = n.admin().FetchOffsets(ctx, "app-group")
		return err
	})
	for p := int32(0); p < 2; p++ {
		if o, ok := os.Lookup("app", p); !ok || o.At != 3 {
			t.Errorf("app-%d after restart: %+v", p, o)
		}
	}
}

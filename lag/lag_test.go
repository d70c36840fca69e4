package lag

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// base is the timestamp of the first record produced by the tests; record i
// of a partition is stamped base + i seconds.
var base = time.UnixMilli(1_700_000_000_000)

func newFake(t *testing.T, opts ...kfake.Opt) (*kgo.Client, *kadm.Client, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl), c.ListenAddrs()
}

// produce writes n records to topic/partition, stamped base + i seconds
// (continuing from first), with compression codec.
func produce(t *testing.T, addrs []string, topic string, partition int32, first, n int, codec kgo.CompressionCodec) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, 0, n)
	for i := first; i < first+n; i++ {
		recs = append(recs, &kgo.Record{
			Topic:     topic,
			Partition: partition,
			Value:     fmt.Appendf(nil, "record %d", i),
			Timestamp: base.Add(time.Duration(i) * time.Second),
		})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, gs []Group, name string) Group {
	t.Helper()
	for _, g := range gs {
		if g.Group == name {
			return g
		}
	}
	t.Fatalf("group %q not in %+v", name, gs)
	return Group{}
}

func findPart(t *testing.T, g Group, topic string, p int32) Partition {
	t.Helper()
	for _, lp := range g.Partitions {
		if lp.Topic == topic && lp.Partition == p {
			return lp
		}
	}
	t.Fatalf("%s-%d not in group %s: %+v", topic, p, g.Group, g.Partitions)
	return Partition{}
}

// sameAsKadm asserts that every partition's lag in records equals kadm's.
func sameAsKadm(t *testing.T, adm *kadm.Client, gs []Group) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.Group
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		kl := lags[g.Group]
		var n int
		for _, ml := range kl.Lag.Sorted() {
			n++
			p := findPart(t, g, ml.Topic, ml.Partition)
			if ml.Err != nil {
				if p.Err == nil {
					t.Errorf("%s %s-%d: kadm error %v, ours none", g.Group, ml.Topic, ml.Partition, ml.Err)
				}
				continue
			}
			if p.Lag != ml.Lag || p.LogEnd != ml.End.Offset {
				t.Errorf("%s %s-%d: lag %d end %d, kadm lag %d end %d", g.Group, ml.Topic, ml.Partition, p.Lag, p.LogEnd, ml.Lag, ml.End.Offset)
			}
		}
		if n != len(g.Partitions) {
			t.Errorf("%s: %d partitions, kadm %d", g.Group, len(g.Partitions), n)
		}
		if kl.Lag.Total() != g.TotalLag {
			t.Errorf("%s: total lag %d, kadm %d", g.Group, g.TotalLag, kl.Lag.Total())
		}
	}
}

func TestCollectCommitted(t *testing.T) {
	cl, adm, addrs := newFake(t, kfake.SeedTopics(3, "orders"), kfake.SeedTopics(1, "zipped"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	produce(t, addrs, "orders", 0, 0, 10, kgo.NoCompression())
	produce(t, addrs, "orders", 1, 0, 5, kgo.NoCompression())
	// partition 2 stays empty
	// Compressed batches, produced in two batches so the end is in another
	// batch than the commit.
	produce(t, addrs, "zipped", 0, 0, 50, kgo.ZstdCompression())
	produce(t, addrs, "zipped", 0, 50, 50, kgo.GzipCompression())

	// A simple consumer's commits (generation -1): orders-0 at 3, orders-1
	// caught up at 5, zipped-0 at 20.
	var os kadm.Offsets
	os.AddOffset("orders", 0, 3, -1)
	os.AddOffset("orders", 1, 5, -1)
	os.AddOffset("orders", 2, 0, -1)
	os.AddOffset("zipped", 0, 20, -1)
	if err := adm.CommitAllOffsets(ctx, "g1", os); err != nil {
		t.Fatal(err)
	}

	c := NewCollector(cl)
	gs, err := c.Collect(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 {
		t.Fatalf("want 1 group, got %+v", gs)
	}
	g := gs[0]
	if g.Err != nil || g.State != "Empty" {
		t.Fatalf("group %+v", g)
	}
	p0 := findPart(t, g, "orders", 0)
	if p0.Committed != 3 || p0.LogEnd != 10 || p0.Lag != 7 {
		t.Errorf("orders-0: %+v", p0)
	}
	if p0.LagTime != 6*time.Second {
		t.Errorf("orders-0 lag time %v, want 6s (record 9 at +9s minus record 3 at +3s)", p0.LagTime)
	}
	if !p0.CommittedTimestamp.Equal(base.Add(3*time.Second)) || !p0.EndTimestamp.Equal(base.Add(9*time.Second)) {
		t.Errorf("orders-0 timestamps %v %v", p0.CommittedTimestamp, p0.EndTimestamp)
	}
	p1 := findPart(t, g, "orders", 1)
	if p1.Lag != 0 || p1.LagTime != 0 || p1.Committed != 5 {
		t.Errorf("orders-1 caught up: %+v", p1)
	}
	p2 := findPart(t, g, "orders", 2)
	if p2.Lag != 0 || p2.LagTime != 0 || p2.LogEnd != 0 || p2.Committed != 0 {
		t.Errorf("orders-2 (empty partition): %+v", p2)
	}
	z := findPart(t, g, "zipped", 0)
	if z.Lag != 80 || z.LagTime != 79*time.Second {
		t.Errorf("zipped-0 (compressed): lag %d time %v, want 80 and 79s", z.Lag, z.LagTime)
	}
	if g.TotalLag != 87 || g.MaxLagTime != 79*time.Second {
		t.Errorf("totals: %d %v", g.TotalLag, g.MaxLagTime)
	}
	sameAsKadm(t, adm, gs)

	// The timestamps are cached: the second collection answers the same.
	c.mu.Lock()
	cached := len(c.cache)
	c.mu.Unlock()
	if cached != 4 {
		t.Errorf("cache holds %d timestamps, want 4", cached)
	}
	gs2, err := c.Collect(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if z2 := findPart(t, gs2[0], "zipped", 0); z2.LagTime != z.LagTime {
		t.Errorf("second collection: %v, first %v", z2.LagTime, z.LagTime)
	}

	// More records move the end; the lag grows by their count and time.
	produce(t, addrs, "orders", 0, 10, 5, kgo.NoCompression())
	gs3, err := c.Collect(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if p := findPart(t, gs3[0], "orders", 0); p.Lag != 12 || p.LagTime != 11*time.Second {
		t.Errorf("after more records: %+v", p)
	}
	sameAsKadm(t, adm, gs3)
}

// TestCollectSmallFetches gives the batched timestamp fetches a limit smaller
// than any batch. Kafka then answers a partial batch for all but the first
// partition, and those lookups go through the one-partition retry (kfake
// returns whole batches anyway); either way the answers must not change.
func TestCollectSmallFetches(t *testing.T) {
	cl, adm, addrs := newFake(t, kfake.SeedTopics(2, "t"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce(t, addrs, "t", 0, 0, 30, kgo.NoCompression())
	produce(t, addrs, "t", 1, 0, 30, kgo.SnappyCompression())
	var os kadm.Offsets
	os.AddOffset("t", 0, 10, -1)
	os.AddOffset("t", 1, 29, -1)
	if err := adm.CommitAllOffsets(ctx, "small", os); err != nil {
		t.Fatal(err)
	}
	gs, err := NewCollector(cl, FetchBytes(1, 1<<20)).Collect(ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	g := find(t, gs, "small")
	if g.Err != nil {
		t.Fatal(g.Err)
	}
	if p := findPart(t, g, "t", 0); p.Lag != 20 || p.LagTime != 19*time.Second {
		t.Errorf("t-0: %+v", p)
	}
	if p := findPart(t, g, "t", 1); p.Lag != 1 || p.LagTime != 0 || p.EndTimestamp.IsZero() {
		// one record behind: the record at the commit is the last one
		t.Errorf("t-1: %+v", p)
	}
	sameAsKadm(t, adm, gs)
}

// TestCollectNoCommits: a group whose members consume but never commit lags
// by the whole log, and its time lag spans the log; the owner is reported.
func TestCollectNoCommits(t *testing.T) {
	cl, adm, addrs := newFake(t, kfake.SeedTopics(2, "events"), kfake.SeedTopics(1, "empty"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce(t, addrs, "events", 0, 0, 4, kgo.NoCompression())
	produce(t, addrs, "events", 1, 0, 8, kgo.NoCompression())

	member, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ClientID("lagtest-client"),
		kgo.ConsumerGroup("nocommit"), kgo.ConsumeTopics("events", "empty"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	// Wait until the member owns its partitions.
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer pcancel()
		member.PollFetches(pctx)
		dg, err := adm.DescribeGroups(ctx, "nocommit")
		if err != nil {
			return err
		}
		if g := dg["nocommit"]; g.State != "Stable" || len(g.AssignedPartitions()["events"]) != 2 {
			return fmt.Errorf("group not stable yet: %s", g.State)
		}
		return nil
	})

	c := NewCollector(cl)
	gs, err := c.Collect(ctx) // every group
	if err != nil {
		t.Fatal(err)
	}
	g := find(t, gs, "nocommit")
	if g.Err != nil || g.State != "Stable" || g.Members != 1 || g.Protocol == "" {
		t.Fatalf("group %+v", g)
	}
	p0, p1 := findPart(t, g, "events", 0), findPart(t, g, "events", 1)
	if p0.Committed != -1 || p0.Lag != 4 || p0.LagTime != 3*time.Second {
		t.Errorf("events-0: %+v", p0)
	}
	if p1.Committed != -1 || p1.Lag != 8 || p1.LagTime != 7*time.Second {
		t.Errorf("events-1: %+v", p1)
	}
	if p0.MemberID == "" || p0.ClientID != "lagtest-client" || p0.Host == "" {
		t.Errorf("owner missing: %+v", p0)
	}
	e := findPart(t, g, "empty", 0)
	if e.Lag != 0 || e.LagTime != 0 || e.LogEnd != 0 || e.Committed != -1 {
		t.Errorf("empty topic: %+v", e)
	}
	if g.TotalLag != 12 || g.MaxLagTime != 7*time.Second {
		t.Errorf("totals %d %v", g.TotalLag, g.MaxLagTime)
	}
	sameAsKadm(t, adm, []Group{g})
}

// TestCollectSorted: groups come back sorted by name, partitions by topic and
// partition; an unknown group is reported Dead without partitions.
func TestCollectSorted(t *testing.T) {
	cl, adm, addrs := newFake(t, kfake.SeedTopics(3, "b"), kfake.SeedTopics(2, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce(t, addrs, "a", 1, 0, 3, kgo.NoCompression())
	for _, name := range []string{"zeta", "alpha", "mid"} {
		var os kadm.Offsets
		os.AddOffset("b", 2, 0, -1)
		os.AddOffset("a", 1, 1, -1)
		os.AddOffset("b", 0, 0, -1)
		if err := adm.CommitAllOffsets(ctx, name, os); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := NewCollector(cl).Collect(ctx, "zeta", "mid", "alpha", "nosuchgroup")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gs {
		names = append(names, g.Group)
	}
	if fmt.Sprint(names) != "[alpha mid nosuchgroup zeta]" {
		t.Fatalf("order %v", names)
	}
	var order []string
	for _, p := range gs[0].Partitions {
		order = append(order, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	// kadm lists every partition of a committed-to topic.
	if fmt.Sprint(order) != "[a-0 a-1 b-0 b-1 b-2]" {
		t.Errorf("partition order %v", order)
	}
	if n := find(t, gs, "nosuchgroup"); n.State != "Dead" || len(n.Partitions) != 0 || n.TotalLag != 0 {
		t.Errorf("unknown group: %+v", n)
	}
	if a := find(t, gs, "alpha"); a.TotalLag != 2 || a.MaxLagTime != time.Second {
		t.Errorf("alpha: %d %v", a.TotalLag, a.MaxLagTime)
	}
	sameAsKadm(t, adm, gs)
}

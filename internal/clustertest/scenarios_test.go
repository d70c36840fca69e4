package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
)

// TestPausedFollowerLeavesAndRejoinsISR: a follower stopped with SIGSTOP
// falls out of the ISR after replica.lag.time.max.ms (the leader shrinks
// it, acks=all producing goes on with min.insync.replicas=2) and comes back
// into it after SIGCONT.
func TestPausedFollowerLeavesAndRejoinsISR(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	createTopic(t, c, "paused", [][]int32{{1, 2, 3}}, map[string]*string{"min.insync.replicas": strp("2")})
	p := startProducer(t, c, "paused")
	p.waitAcks(t, 200, 60*time.Second)

	c.broker(3).pause()
	paused := time.Now()
	// Out of the ISR after about lagMax, well before its ZooKeeper session
	// (6 s) could expire: the leader's doing, not the controller's.
	// The paused follower leaves the ISR.
	testutil.CheckFor(t, 2*lagMax, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ps, err := partitionsFrom(ctx, c.broker(1), "paused")
		if err != nil {
			return err
		}
		if slices.Contains(ps[0].ISR, 3) {
			return fmt.Errorf("ISR %v", ps[0].ISR)
		}
		return nil
	})
	t.Logf("left the ISR %v after the pause", time.Since(paused).Round(time.Millisecond))
	p.waitAcks(t, 200, 30*time.Second) // acks=all goes on with two in-sync replicas
	c.broker(3).resume()
	p.waitAcks(t, 100, 30*time.Second)
	waitISR(t, c, "paused", func(_ int32, pi partitionInfo) error {
		if len(pi.ISR) != 3 {
			return fmt.Errorf("ISR %v", pi.ISR)
		}
		return nil
	})
	p.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "paused", 0), p.snapshot())
}

// TestDivergentLogTruncated: the leader writes records (acks=1) that its
// followers never get — they are paused — and is killed. A follower becomes
// leader and takes new records at the same offsets. When the old leader
// returns it truncates its divergent tail (OffsetForLeaderEpoch) and
// fetches the new records: made leader again, it serves exactly the new
// leader's log.
func TestDivergentLogTruncated(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	createTopic(t, c, "diverge", [][]int32{{1, 2, 3}}, map[string]*string{"min.insync.replicas": strp("1")})
	ctx := ctxFor(t, 120*time.Second)
	all := c.client(t, kgo.DefaultProduceTopic("diverge"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < 100; i++ {
		if err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("committed-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitISR(t, c, "diverge", func(_ int32, pi partitionInfo) error {
		if len(pi.ISR) != 3 || pi.Leader != 1 {
			return fmt.Errorf("%+v", pi)
		}
		return nil
	})

	// Only the leader gets these: its followers are paused. Then it dies
	// before the ISR shrinks (replica.lag.time.max.ms is 3 s).
	one := c.client(t, kgo.SeedBrokers(c.broker(1).addr), kgo.DefaultProduceTopic("diverge"),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	c.broker(2).pause()
	c.broker(3).pause()
	for i := 0; i < 50; i++ {
		if err := one.ProduceSync(ctx, &kgo.Record{Value: []byte("divergent-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	one.Close()
	c.broker(1).kill()
	c.broker(2).resume()
	c.broker(3).resume()

	// Broker 2 (first of the ISR in assignment order) takes over at a new
	// epoch and takes new records at offsets 100 and up.
	// Broker 2 leads.
	testutil.CheckFor(t, 40*time.Second, 100*time.Millisecond, func() error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		ps, err := partitionsFrom(cctx, c.broker(2), "diverge")
		if err != nil {
			return err
		}
		if ps[0].Leader != 2 {
			return fmt.Errorf("%+v", ps[0])
		}
		return nil
	})
	for i := 0; i < 30; i++ {
		if err := all.ProduceSync(ctx, &kgo.Record{Value: []byte("new-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The new leader's log: the committed records, whatever divergent
	// records reached a follower before the pause took hold (a fetch
	// response already in its socket), then the new ones.
	want := readAll(t, c, "diverge", 0)
	if len(want) < 130 || len(want) > 150 || want[len(want)-1] != "new-29" || want[99] != "committed-99" {
		t.Fatalf("new leader's log: %d records, last %q", len(want), want[len(want)-1])
	}
	dropped := 150 - (len(want) - 30)
	t.Logf("the new leader has %d of the 50 divergent records; the old leader must drop %d", 50-dropped, dropped)

	// The old leader returns, truncates and catches up.
	if err := c.broker(1).start(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c, "diverge", func(_ int32, pi partitionInfo) error {
		if len(pi.ISR) != 3 {
			return fmt.Errorf("ISR %v", pi.ISR)
		}
		return nil
	})
	electPreferred(t, c, "diverge", 0)
	// Broker 1 leads again.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if l := leaderOf(t, c, "diverge", 0); l != 1 {
			return fmt.Errorf("leader %d", l)
		}
		return nil
	})
	got := readAll(t, c, "diverge", 0)
	if !slices.Equal(got, want) {
		t.Fatalf("the old leader's log after its return: %d records, want %d; first differences: %v",
			len(got), len(want), firstDiff(got, want))
	}
	if !containsLine(c.broker(1).tail(), "follower truncating divergent log") {
		t.Fatal("the old leader did not log a truncation")
	}
}

func firstDiff(a, b []string) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %q vs %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
}

func containsLine(s, sub string) bool {
	return len(s) > 0 && (len(sub) == 0 || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestZooKeeperRestart: ZooKeeper stops under a running cluster and comes
// back on the same port and data: leaders keep serving meanwhile; once
// ZooKeeper answers again the brokers resume their sessions (ZooKeeper gives
// the sessions it restores a new session timeout, so a broker that
// reconnects within it keeps its registration and, for the controller, its
// role: no election), metadata changes work at once, and no acknowledged
// record is lost.
//
// (A broker's ZooKeeper client could sit on a connection made while
// ZooKeeper was starting — accepted, never answered — for ten times its
// receive timeout, 40 s: every session expired, the controller role went,
// and CreateTopics failed with UNKNOWN_SERVER_ERROR. zkcoord now bounds the
// handshake; see zkcoord.handshakeTimeout.)
func TestZooKeeperRestart(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	createTopic(t, c, "zk-restart", [][]int32{{2, 3, 1}}, map[string]*string{"min.insync.replicas": strp("2")})
	p := startProducer(t, c, "zk-restart")
	p.waitAcks(t, 200, 60*time.Second)
	zc := c.zkConn(t)
	before := c.registrations(t, zc)
	ctlBefore := c.zkController(t, zc)
	zc.Close()
	marks := make([]int, len(c.brokers))
	for i, b := range c.brokers {
		marks[i] = b.outLen()
	}
	c.zk.Stop()
	stopped := time.Now()
	p.waitAcks(t, 200, 30*time.Second) // leaders serve without ZooKeeper
	time.Sleep(max(0, 3*time.Second-time.Since(stopped)))
	if err := c.zk.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("zookeeper was down %v", back.Sub(stopped).Round(time.Millisecond))
	// Every broker resumes the session it had: each reconnects within the
	// session timeout of ZooKeeper answering again.
	// Every broker resumes its zookeeper session.
	testutil.CheckFor(t, sessionTimeout+2*time.Second, 100*time.Millisecond, func() error {
		for i, b := range c.brokers {
			out := b.outSince(marks[i])
			if indexOf(out, "zookeeper session expired") >= 0 || indexOf(out, "new zookeeper session") >= 0 {
				t.Fatalf("broker %d lost its zookeeper session:\n%s", b.id, out)
			}
			if indexOf(out, "reconnected to zookeeper; session kept") < 0 {
				return fmt.Errorf("broker %d has not reconnected", b.id)
			}
		}
		return nil
	})
	t.Logf("sessions resumed %v after zookeeper answered", time.Since(back).Round(time.Millisecond))
	zc = c.zkConn(t)
	after := c.registrations(t, zc)
	for id, sid := range before {
		if after[id] != sid {
			t.Fatalf("broker %d: registered by session %#x after the restart, %#x before", id, after[id], sid)
		}
	}
	if ctl := c.zkController(t, zc); ctl != ctlBefore {
		t.Fatalf("controller %+v after the restart, before %+v: an election happened", ctl, ctlBefore)
	}
	// Metadata changes work again, at the first request.
	createTopic(t, c, "after-zk-restart", [][]int32{{1, 2, 3}}, nil)
	p.waitAcks(t, 200, 30*time.Second)
	p.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "zk-restart", 0), p.snapshot())
	for _, b := range c.brokers {
		if indexOf(b.tail(), "panic") >= 0 {
			t.Fatalf("broker %d panicked", b.id)
		}
	}
}

// TestReassignmentWhileProducing: through kadm, a partition on broker 1
// alone moves to brokers 2 and 3 (raising its replication factor to 2)
// while a producer writes; the new replicas catch up, leadership moves,
// broker 1 drops its copy, and every acknowledged record is there once, in
// order.
func TestReassignmentWhileProducing(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	t.Parallel() // with the other tests that stop no broker, after the ones that do
	c := healthy(t)
	restoreAfter(t, c)
	createTopic(t, c, "moving", [][]int32{{1}}, nil)
	p := startProducer(t, c, "moving")
	p.waitAcks(t, 500, 60*time.Second)
	ctx := ctxFor(t, 120*time.Second)
	adm := c.admin(t)
	rs, err := adm.AlterPartitionAssignments(ctx, alterReq("moving", 0, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Error(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c, "moving", func(_ int32, pi partitionInfo) error {
		if !slices.Equal(pi.Replicas, []int32{2, 3}) || len(pi.ISR) != 2 || (pi.Leader != 2 && pi.Leader != 3) {
			return fmt.Errorf("%+v", pi)
		}
		return nil
	})
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moving": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr["moving"]) != 0 {
		t.Fatalf("reassignment still listed: %+v", lr)
	}
	p.waitAcks(t, 300, 30*time.Second)
	p.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "moving", 0), p.snapshot())
	// Broker 1 deletes its copy.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if _, err := os.Stat(filepath.Join(c.broker(1).dir, "data", "moving-0")); err == nil {
			return errors.New("moving-0 still on broker 1")
		}
		return nil
	})
}

// TestControlledShutdown: SIGTERM a leader; it hands leadership to another
// in-sync replica before it stops, so the producer hardly pauses (no
// session timeout to wait for).
func TestControlledShutdown(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	createTopic(t, c, "graceful", [][]int32{{3, 1, 2}}, map[string]*string{"min.insync.replicas": strp("2")})
	p := startProducer(t, c, "graceful")
	p.waitAcks(t, 300, 60*time.Second)
	t0 := time.Now()
	c.broker(3).term()
	t.Logf("broker 3 stopped in %v", time.Since(t0).Round(time.Millisecond))
	p.waitAcks(t, 300, 30*time.Second)
	gap := p.gapAfter(t0)
	t.Logf("longest pause in acknowledgements: %v", gap)
	if gap >= sessionTimeout {
		t.Fatalf("producing paused %v: leadership did not move before the broker stopped", gap)
	}
	if l := leaderOf(t, c, "graceful", 0); l == 3 {
		t.Fatal("broker 3 still leads")
	}
	if indexOf(c.broker(3).tail(), "controlled shutdown done") < 0 {
		t.Fatalf("no controlled shutdown in broker 3's log")
	}
	p.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "graceful", 0), p.snapshot())
}

// TestClientsSteered: a follower answers produce and fetch with
// NOT_LEADER_OR_FOLLOWER, an old leader epoch gets FENCED_LEADER_EPOCH, and
// Metadata lists every live broker and each partition's leader, replicas and
// ISR.
func TestClientsSteered(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	t.Parallel() // with the other tests that stop no broker, after the ones that do
	c := healthy(t)
	createTopic(t, c, "steer", [][]int32{{1, 2, 3}}, nil)
	ctx := ctxFor(t, 60*time.Second)
	// Move the leadership to broker 2 (a new leader epoch): reorder the
	// replicas and run a preferred election.
	if _, err := c.admin(t).AlterPartitionAssignments(ctx, alterReq("steer", 0, 2, 1, 3)); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c, "steer", func(_ int32, pi partitionInfo) error {
		if pi.Replicas[0] != 2 {
			return fmt.Errorf("%+v", pi)
		}
		return nil
	})
	electPreferred(t, c, "steer", 0)
	waitISR(t, c, "steer", func(_ int32, pi partitionInfo) error {
		if pi.Leader != 2 || pi.LeaderEpoch < 1 {
			return fmt.Errorf("%+v", pi)
		}
		return nil
	})
	md, err := metadataFrom(ctx, c.broker(1), "steer")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	mp := md.Topics[0].Partitions[0]
	if !slices.Equal(ids, []int32{1, 2, 3}) || mp.Leader != 2 || !slices.Equal(mp.Replicas, []int32{2, 1, 3}) || len(mp.ISR) != 3 || md.ControllerID < 1 {
		t.Fatalf("metadata: brokers %v, partition %+v, controller %d", ids, mp, md.ControllerID)
	}
	epoch := mp.LeaderEpoch

	// Produce to a follower (acks=1: kgo writes its RequiredAcks into the
	// request).
	follower := kgoBroker(t, c, 1, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "steer"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = recordBatch(t, "x")
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp, err := follower.Request(ctx, preq)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a follower: error %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
	// Fetch from the leader with an older epoch.
	leader := kgoBroker(t, c, 2)
	freq := kmsg.NewPtrFetchRequest()
	freq.Version = 12
	freq.ReplicaID, freq.MaxWaitMillis, freq.MaxBytes, freq.SessionEpoch = -1, 0, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "steer"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.CurrentLeaderEpoch, fp.PartitionMaxBytes, fp.LastFetchedEpoch = epoch-1, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := leader.Request(ctx, freq)
	if err != nil {
		t.Fatal(err)
	}
	if code := fresp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("fetch with an old epoch: error %d, want FENCED_LEADER_EPOCH", code)
	}
	// Fetch from the follower: NOT_LEADER_OR_FOLLOWER with the leader (v12).
	freq.Topics[0].Partitions[0].CurrentLeaderEpoch = -1
	fresp, err = follower.Request(ctx, freq)
	if err != nil {
		t.Fatal(err)
	}
	fpr := fresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fpr.ErrorCode != kerr.NotLeaderForPartition.Code || fpr.CurrentLeader.LeaderID != 2 {
		t.Fatalf("fetch from a follower: %+v", fpr)
	}
}

// kgoBroker returns a direct connection to one broker.
func kgoBroker(t *testing.T, c *testCluster, id int32, opts ...kgo.Opt) *kgo.Broker {
	cl := c.client(t, append([]kgo.Opt{kgo.SeedBrokers(c.broker(id).addr)}, opts...)...)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
	return cl.Broker(int(id))
}

// recordBatch is one record in a v2 batch, as a producer sends it.
func recordBatch(t *testing.T, v string) []byte {
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		[]record.Record{{Value: []byte(v)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// describeController asks DescribeCluster for the controller.
func describeController(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if resp.ErrorCode != 0 {
		return -1, kerr.ErrorForCode(resp.ErrorCode)
	}
	return resp.ControllerID, nil
}

// TestNotEnoughReplicas: with min.insync.replicas=2 and one of the two
// replicas out of the ISR (paused), acks=all is refused with
// NOT_ENOUGH_REPLICAS, acks=1 is still taken, and acks=all works again once
// the follower is back in the ISR.
func TestNotEnoughReplicas(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	c := healthy(t)
	restoreAfter(t, c)
	createTopic(t, c, "min-isr", [][]int32{{1, 2}}, map[string]*string{"min.insync.replicas": strp("2")})
	ctx := ctxFor(t, 60*time.Second)
	// kgo writes its own RequiredAcks into produce requests: one client
	// per acks setting.
	leaderAll := kgoBroker(t, c, 1)
	leaderOne := kgoBroker(t, c, 1, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	produce := func(acks int16) int16 {
		t.Helper()
		leader := leaderAll
		if acks == 1 {
			leader = leaderOne
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = acks, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "min-isr"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordBatch(t, "x")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := leader.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(-1); code != 0 {
		t.Fatalf("acks=all with a full ISR: error %d", code)
	}
	c.broker(2).pause()
	waitISR(t, c, "min-isr", func(_ int32, pi partitionInfo) error {
		if len(pi.ISR) != 1 {
			return fmt.Errorf("ISR %v", pi.ISR)
		}
		return nil
	})
	if code := produce(-1); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with the ISR below min.insync.replicas: error %d, want NOT_ENOUGH_REPLICAS", code)
	}
	if code := produce(1); code != 0 {
		t.Fatalf("acks=1 with a short ISR: error %d", code)
	}
	c.broker(2).resume()
	waitISR(t, c, "min-isr", func(_ int32, pi partitionInfo) error {
		if len(pi.ISR) != 2 {
			return fmt.Errorf("ISR %v", pi.ISR)
		}
		return nil
	})
	if code := produce(-1); code != 0 {
		t.Fatalf("acks=all after the follower returned: error %d", code)
	}
}

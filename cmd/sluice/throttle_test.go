package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

func TestThrottleFlag(t *testing.T) {
	code, _, stderr := runCLI(t, "127.0.0.1:1", "", "broker", "drain", "3", "--throttle", "-5")
	if code == 0 || !strings.Contains(stderr, "--throttle -5") {
		t.Fatalf("--throttle -5: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "127.0.0.1:1", "", "reassign", "verify")
	if code == 0 || !strings.Contains(stderr, "give --file or --topics") {
		t.Fatalf("verify without a plan: exit %d, %s", code, stderr)
	}
}

// TestThrottledDrain: `sluice broker drain --throttle 1048576 --wait` on
// three brokers moves a replica of 12 MiB at 1 MiB/s (±20 %: Kafka's quota
// lets the first ten seconds' worth through at once, then holds the rest
// until those windows age out), reports the bytes left on the broker
// receiving it, leaves a partition moved at the same time on the same
// brokers without a throttle unaffected, and removes every throttle config
// once done. Then the follower's throttle alone holds a move to the rate,
// and `reassign verify` removes the throttle of a move started without
// --wait once it completed; `reassign cancel` removes that of a move it
// cancels.
func TestThrottledDrain(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three brokers, 15 s of throttled copying")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()+"/throttle"),
		testcluster.LogLevel(slog.LevelInfo), testcluster.Settings("auto.create.topics.enable=false"))
	addrs := strings.Join(c.Addrs(), ",")
	cl := c.Client(kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// slow on 1,2 (led by 1) loses its replica on 2 to 3, throttled;
	// fast, on 1 alone, gains one on 3 at the same time, unthrottled.
	const leader, drained, target = 1, 2, 3
	createAssigned(ctx, t, cl, "slow", []int32{leader, drained})
	createAssigned(ctx, t, cl, "fast", []int32{leader})
	const recordBytes = 64 << 10
	const slowBytes, fastBytes = 12 << 20, 4 << 20
	produceBytes(ctx, t, cl, "slow", slowBytes/recordBytes, recordBytes)
	produceBytes(ctx, t, cl, "fast", fastBytes/recordBytes, recordBytes)
	waitInSync(ctx, t, adm, "slow", 2)

	type result struct {
		code        int
		out, stderr string
		took        time.Duration
	}
	drainDone := make(chan result, 1)
	start := time.Now()
	go func() {
		code, out, stderr := runCLI(t, addrs, "", "broker", "drain", strconv.Itoa(drained), "--topics", "slow",
			"--throttle", "1048576", "--wait", "--timeout", "2m")
		drainDone <- result{code, out, stderr, time.Since(start)}
	}()

	// The first ten seconds' worth passes at once; then the target holds
	// slow back, and counts what it still has to copy.
	tgt := c.Node(target - 1)
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		p, err := tgt.Broker().Partition("slow", 0)
		if err != nil {
			return err
		}
		if leo := p.LogEndOffset(); leo < (slowBytes/recordBytes)*3/4 {
			return fmt.Errorf("slow on broker %d at offset %d", target, leo)
		}
		return nil
	})
	if rem := gaugeOf(t, tgt, "sluice_broker_reassignment_bytes_remaining"); rem <= 0 || rem > slowBytes/2 {
		t.Errorf("broker %d: reassignment bytes remaining %v while holding back about 1 MiB", target, rem)
	}
	if code, out, stderr := runCLI(t, addrs, "", "reassign", "list"); code != 0 || !strings.Contains(out, "slow") {
		t.Errorf("reassign list during the drain: exit %d\n%s%s", code, out, stderr)
	}

	// An unthrottled move between the same brokers is not held back.
	fastStart := time.Now()
	code, out, stderr := runCLI(t, addrs, "", "reassign", "execute", "--topic", "fast", "--partition", "0",
		"--replicas", fmt.Sprintf("%d,%d", leader, target), "--wait", "--timeout", "1m")
	if code != 0 {
		t.Fatalf("reassign fast: exit %d\n%s%s", code, out, stderr)
	}
	fastTook := time.Since(fastStart)
	select {
	case r := <-drainDone:
		t.Fatalf("the throttled drain ended (after %v) before the unthrottled move did (%v): exit %d\n%s%s",
			r.took, fastTook, r.code, r.out, r.stderr)
	default:
	}

	var r result
	select {
	case r = <-drainDone:
	case <-ctx.Done():
		t.Fatal("the drain did not end")
	}
	if r.code != 0 || !strings.Contains(r.out, "completed") || !strings.Contains(r.out, "throttle: removed from the topics slow and the brokers 1,2,3") {
		t.Fatalf("drain: exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	rate := float64(slowBytes) / r.took.Seconds()
	t.Logf("throttled drain: %d B in %v = %.0f B/s; unthrottled move of %d B: %v", slowBytes, r.took.Round(time.Millisecond), rate, fastBytes, fastTook.Round(time.Millisecond))
	if rate < 0.8*(1<<20) || rate > 1.2*(1<<20) {
		t.Errorf("the drain moved %.0f B/s, want 1 MiB/s ±20%%", rate)
	}

	// The throttle is gone: the brokers' rates and the topic's lists.
	bc, err := adm.DescribeBrokerConfigs(ctx, leader, drained, target)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range bc {
		for _, cfg := range rc.Configs {
			if (cfg.Key == config.LeaderThrottledRate || cfg.Key == config.FollowerThrottledRate) && cfg.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("broker %s: %s=%v from %v after the drain", rc.Name, cfg.Key, cfg.MaybeValue(), cfg.Source)
			}
		}
	}
	tc, err := adm.DescribeTopicConfigs(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range tc {
		for _, cfg := range rc.Configs {
			if (cfg.Key == config.LeaderThrottledReplicas || cfg.Key == config.FollowerThrottledReplicas) && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("topic slow keeps %s=%v", cfg.Key, cfg.MaybeValue())
			}
		}
	}
	if v := counterOf(t, tgt, "sluice_broker_replication_throttled_bytes_total", "follower"); v < slowBytes {
		t.Errorf("broker %d counted %v throttled bytes fetched, want at least %d", target, v, slowBytes)
	}
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if rem := gaugeOf(t, tgt, "sluice_broker_reassignment_bytes_remaining"); rem != 0 {
			return fmt.Errorf("bytes remaining %v after the drain", rem)
		}
		return nil
	})

	// The follower's throttle alone (no leader rate, no leader list), set
	// with Kafka's configs: broker 2 copying slow back is held to its rate.
	alters := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: config.FollowerThrottledRate, Value: ptr("1048576")}}
	if _, err := adm.AlterBrokerConfigs(ctx, alters, drained); err != nil {
		t.Fatal(err)
	}
	alters = []kadm.AlterConfig{{Op: kadm.SetConfig, Name: config.FollowerThrottledReplicas, Value: ptr(fmt.Sprintf("0:%d", drained))}}
	if _, err := adm.AlterTopicConfigs(ctx, alters, "slow"); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	code, out, stderr = runCLI(t, addrs, "", "reassign", "execute", "--topic", "slow", "--partition", "0",
		"--replicas", fmt.Sprintf("%d,%d,%d", leader, target, drained), "--wait", "--timeout", "1m")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("reassign slow onto %d: exit %d\n%s%s", drained, code, out, stderr)
	}
	rate = float64(slowBytes) / took.Seconds()
	t.Logf("follower throttle alone: %d B in %v = %.0f B/s", slowBytes, took.Round(time.Millisecond), rate)
	if rate < 0.8*(1<<20) || rate > 1.2*(1<<20) {
		t.Errorf("with the follower's throttle alone, the move ran at %.0f B/s, want 1 MiB/s ±20%%", rate)
	}
	if v := counterOf(t, c.Node(leader-1), "sluice_broker_replication_throttled_bytes_total", "leader"); v < slowBytes {
		t.Errorf("the leader counted %v throttled bytes served during the drain, want at least %d", v, slowBytes)
	}

	// Without --wait the throttle stays until `reassign verify` finds the
	// moves done; then it goes, from the topics and from every broker.
	code, out, stderr = runCLI(t, addrs, "", "reassign", "execute", "--topic", "fast", "--partition", "0",
		"--replicas", fmt.Sprintf("%d,%d", target, drained), "--throttle", "1048576")
	if code != 0 || !strings.Contains(out, "sluice reassign verify --topics fast") {
		t.Fatalf("reassign fast --throttle: exit %d\n%s%s", code, out, stderr)
	}
	if got := topicConfig(ctx, t, adm, "fast", config.FollowerThrottledReplicas); got != fmt.Sprintf("0:%d", drained) {
		t.Errorf("fast's follower list while it moves: %q", got)
	}
	// (broker 2's quota is still full of slow's bytes: fast waits for it)
	testutil.CheckFor(t, time.Minute, 250*time.Millisecond, func() error {
		code, out, stderr := runCLI(t, addrs, "", "reassign", "verify", "--topics", "fast")
		if code != 0 {
			return fmt.Errorf("verify: exit %d\n%s%s", code, out, stderr)
		}
		if !strings.Contains(out, "throttle: removed from the topics fast and the brokers 1,2,3") {
			return fmt.Errorf("verify:\n%s", out)
		}
		return nil
	})
	// A topic's configs are described from ZooKeeper: gone at once.
	for _, k := range []string{config.LeaderThrottledReplicas, config.FollowerThrottledReplicas} {
		if got := topicConfig(ctx, t, adm, "fast", k); got != "" {
			t.Errorf("fast keeps %s=%q after verify", k, got)
		}
	}
	// A broker describes its dynamic configs as it applied them (as Kafka
	// does): it learns of the change from ZooKeeper.
	testutil.CheckFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		bc, err := adm.DescribeBrokerConfigs(ctx, drained)
		if err != nil {
			return err
		}
		for _, cfg := range bc[0].Configs {
			if cfg.Key == config.FollowerThrottledRate && cfg.Source != kmsg.ConfigSourceDefaultConfig {
				return fmt.Errorf("broker %d keeps %s=%v after verify", drained, cfg.Key, cfg.MaybeValue())
			}
		}
		return nil
	})

	// `reassign cancel` removes the throttle of the moves it cancels: fast
	// gains a replica on the leader's broker at 1 KiB/s (it would take an
	// hour), then is cancelled.
	code, out, stderr = runCLI(t, addrs, "", "reassign", "execute", "--topic", "fast", "--partition", "0",
		"--replicas", fmt.Sprintf("%d,%d,%d", target, drained, leader), "--throttle", "1024")
	if code != 0 {
		t.Fatalf("reassign fast onto %d: exit %d\n%s%s", leader, code, out, stderr)
	}
	if got := topicConfig(ctx, t, adm, "fast", config.FollowerThrottledReplicas); got != fmt.Sprintf("0:%d", leader) {
		t.Errorf("fast's follower list while it moves: %q", got)
	}
	code, out, stderr = runCLI(t, addrs, "", "reassign", "cancel", "--topic", "fast", "--partition", "0")
	if code != 0 || !strings.Contains(out, "cancelled 1 of 1") || !strings.Contains(out, "throttle: removed from the topics fast and the brokers 1,2,3") {
		t.Fatalf("reassign cancel: exit %d\n%s%s", code, out, stderr)
	}
	// A topic's configs are described from ZooKeeper: gone at once.
	for _, k := range []string{config.LeaderThrottledReplicas, config.FollowerThrottledReplicas} {
		if got := topicConfig(ctx, t, adm, "fast", k); got != "" {
			t.Errorf("fast keeps %s=%q after cancel", k, got)
		}
	}
	// A broker describes its dynamic configs as it applied them (as Kafka
	// does): it learns of the change from ZooKeeper.
	testutil.CheckFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		bc, err := adm.DescribeBrokerConfigs(ctx, leader)
		if err != nil {
			return err
		}
		for _, cfg := range bc[0].Configs {
			if cfg.Key == config.FollowerThrottledRate && cfg.Source != kmsg.ConfigSourceDefaultConfig {
				return fmt.Errorf("broker %d keeps %s=%v after cancel", leader, cfg.Key, cfg.MaybeValue())
			}
		}
		return nil
	})
}

// topicConfig is a topic's own value of a config ("" when not set on it).
func topicConfig(ctx context.Context, t *testing.T, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Key == key && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				return cfg.MaybeValue()
			}
		}
	}
	return ""
}

// createAssigned creates a one-partition topic on the given replicas.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, replicas []int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: error %d", topic, code)
	}
}

// produceBytes writes n records of size bytes each.
func produceBytes(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n, size int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	rs := make([]*kgo.Record, n)
	for i := range rs {
		value := make([]byte, size) // random: the log holds n*size bytes whatever the codec
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		rs[i] = &kgo.Record{Topic: topic, Value: value}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

func waitInSync(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, n int) {
	t.Helper()
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		if p := md.Topics[topic].Partitions[0]; len(p.ISR) != n {
			return fmt.Errorf("%s: ISR %v", topic, p.ISR)
		}
		return nil
	})
}

// gaugeOf reads a metric of the node's broker (summed over its series).
func gaugeOf(t *testing.T, n *testcluster.Node, name string) float64 {
	return counterOf(t, n, name, "")
}

// counterOf sums a metric's series of the node's broker whose side label
// is side ("" for any).
func counterOf(t *testing.T, n *testcluster.Node, name, side string) float64 {
	t.Helper()
	mfs, err := n.App().Metrics().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.Itoa(int(n.ID()))
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "broker" && l.GetValue() != id || l.GetName() == "side" && side != "" && l.GetValue() != side {
					continue metrics
				}
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

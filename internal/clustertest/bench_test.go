package clustertest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// BenchmarkClusterProduce measures produce throughput on the three-broker
// cluster (benchCluster: brokers alone) with `sluice perf produce`
// (franz-go), for replication factor 1 and 3 and acks=1 and acks=all, and
// the brokers' CPU and minor page faults per record. Run:
//
//	go test -run '^$' -bench ClusterProduce -benchtime 1x ./internal/clustertest/
func BenchmarkClusterProduce(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	for _, rf := range []int{1, 3} {
		for _, acks := range []string{"1", "all"} {
			b.Run(fmt.Sprintf("rf=%d/acks=%s", rf, acks), func(b *testing.B) {
				for i := range b.N {
					topic := fmt.Sprintf("bench-rf%d-acks%s-%d-%d", rf, acks, i, time.Now().UnixNano())
					records := "2000000"
					if n := os.Getenv("SLUICE_BENCH_RECORDS"); n != "" {
						records = n
					}
					createBenchTopic(b, c, topic, 6, rf)
					before, faultsBefore := c.brokerCPU(), c.brokerFaults()
					stop := c.profileBrokersWhile(b, benchName(b))
					res := c.perfRun(b, "produce", "--topic", topic, "--acks", acks,
						"--num-records", records, "--record-size", "100")
					cpu, faults := c.cpuSince(before), c.faultsSince(faultsBefore)
					stop()
					b.ReportMetric(res.RecordsPerSec, "records/s")
					b.ReportMetric(cpu.Seconds()/float64(res.Records)*1e6, "broker-cpu-µs/record")
					b.ReportMetric(float64(faults)/float64(res.Records)*1e3, "broker-faults/krecord")
					b.ReportMetric(res.MiBPerSec, "MiB/s")
					b.ReportMetric(res.Latency.P50, "p50-ms")
					b.ReportMetric(res.Latency.P99, "p99-ms")
				}
			})
		}
	}
}

// BenchmarkTenThousandPartitions: 10,000 partitions with replication
// factor 3 on the three brokers (10,000 replicas each). It measures how long
// until every partition has a leader and a full ISR, then kills a broker
// with kill -9 and measures how long until every partition it led has a new
// leader (the session timeout is 6 s of it), then restarts it and measures
// until the ISRs are full again. Run:
//
//	go test -run '^$' -bench TenThousand -benchtime 1x -timeout 30m ./internal/clustertest/
func BenchmarkTenThousandPartitions(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := sharedCluster(b)
	topics, perTopic := 100, 100
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_PARTITIONS")); err == nil && n >= 100 {
		topics = n / perTopic
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	waitLiveBrokers(b, c)
	cl := c.benchClient(b)
	prefix := fmt.Sprintf("tenk-%d-", time.Now().UnixNano())
	start := time.Now()
	// At most 10,000 metadata records a request (Kafka's limit): 50
	// topics of 100 partitions and 2 configs each make 5,150.
	const topicsPerRequest = 50
	for first := 0; first < topics; first += topicsPerRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 1 // hardly wait for leaders here
		for i := first; i < min(first+topicsPerRequest, topics); i++ {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = fmt.Sprintf("%s%03d", prefix, i)
			rt.NumPartitions, rt.ReplicationFactor = int32(perTopic), 3
			for k, v := range map[string]string{"segment.index.bytes": "65536", "segment.bytes": "1048576"} {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
				rt.Configs = append(rt.Configs, cfg)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range resp.Topics {
			// A retried request finds its topics created by the first try;
			// REQUEST_TIMED_OUT: created, leaders not there yet.
			if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code && t.ErrorCode != kerr.RequestTimedOut.Code {
				msg := ""
				if t.ErrorMessage != nil {
					msg = *t.ErrorMessage
				}
				b.Fatalf("create %s: %v %s", t.Topic, kerr.ErrorForCode(t.ErrorCode), msg)
			}
		}
	}
	created := time.Since(start)
	full := func(states map[string]map[int32]partitionInfo, dead int32) (leaderless, underReplicated int) {
		for _, ps := range states {
			for _, pi := range ps {
				if pi.Leader < 0 || pi.Leader == dead {
					leaderless++
				}
				if len(pi.ISR) != 3 {
					underReplicated++
				}
			}
		}
		return
	}
	waitAll := func(what string, from *brokerProc, dead int32, needISR bool) time.Duration {
		t0 := time.Now()
		for {
			states, err := allPartitions(ctx, from, prefix)
			if err == nil {
				n := 0
				for _, ps := range states {
					n += len(ps)
				}
				leaderless, under := full(states, dead)
				if n == topics*perTopic && leaderless == 0 && (!needISR || under == 0) {
					return time.Since(t0)
				}
			}
			if ctx.Err() != nil {
				b.Fatalf("%s: %v", what, ctx.Err())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	b.Logf("CreateTopics answered after %v", created.Round(time.Millisecond))
	led := waitAll("leaders", c.broker(1), -1, false)
	b.Logf("every partition led %v later", led.Round(time.Millisecond))
	// Replicated: a record with acks=all to every partition, then every
	// ISR full (a follower still creating its logs can have dropped out).
	t0 := time.Now()
	pc := c.benchClient(b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var mu sync.Mutex
	var firstErr error
	for i := range topics {
		for p := range perTopic {
			pc.Produce(ctx, &kgo.Record{Topic: fmt.Sprintf("%s%03d", prefix, i), Partition: int32(p), Value: []byte("x")}, func(r *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err))
					mu.Unlock()
				}
			})
		}
	}
	if err := pc.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	acked := time.Since(t0)
	b.Logf("one acks=all record to each partition written in %v", acked.Round(time.Millisecond))
	settled := waitAll("full ISRs", c.broker(1), -1, true)
	b.Logf("%d partitions (RF 3): created in %v; every partition led %v later; one acks=all record to each written in %v; every ISR full %v later",
		topics*perTopic, created.Round(time.Millisecond), led.Round(time.Millisecond), acked.Round(time.Millisecond), settled.Round(time.Millisecond))
	online := led + acked + settled

	victim := c.broker(3)
	victim.kill()
	failover := waitAll("new leaders", c.broker(1), 3, false)
	b.Logf("broker 3 killed: every partition it led had a new leader after %v (session timeout %v)", failover.Round(time.Millisecond), sessionTimeout)
	restart := time.Now()
	if err := victim.start(); err != nil {
		b.Fatal(err)
	}
	waitAll("full ISRs again", c.broker(1), -1, true)
	b.Logf("broker 3 restarted: every ISR full again %v after the restart began", time.Since(restart).Round(time.Millisecond))

	// The whole cluster restarts (SIGTERM, controlled shutdowns) with its
	// 30,000 replicas on disk.
	stop := time.Now()
	for _, br := range c.brokers {
		br.term()
	}
	stopped := time.Since(stop)
	restart = time.Now()
	errs := make(chan error, len(c.brokers))
	for _, br := range c.brokers {
		go func() { errs <- br.start() }()
	}
	for range c.brokers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	listening := time.Since(restart)
	waitAll("everything online after a full restart", c.broker(1), -1, true)
	b.Logf("whole cluster stopped in %v; restarted: listening after %v, every partition led with a full ISR after %v",
		stopped.Round(time.Millisecond), listening.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
	for _, br := range c.brokers {
		out, _ := os.ReadFile(br.logPath())
		b.Logf("broker %d: %d ISR changes, %d leaderships taken (%s)", br.id,
			strings.Count(string(out), "ISR changed"), strings.Count(string(out), "leading partition"), br.logPath())
	}
	b.ReportMetric(float64((created + online).Milliseconds()), "ms/online")
	b.ReportMetric(float64(failover.Milliseconds()), "ms/failover")
}

// benchClient is a kgo client for benchmarks.
func (c *testCluster) benchClient(b *testing.B, opts ...kgo.Opt) *kgo.Client {
	base := append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RequestTimeoutOverhead(2 * time.Minute)}, c.clientOpts()...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// allPartitions returns every partition of the topics named with prefix, as
// broker b's Metadata shows them.
func allPartitions(ctx context.Context, b *brokerProc, prefix string) (map[string]map[int32]partitionInfo, error) {
	md, err := metadataFrom(ctx, b)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]partitionInfo{}
	for _, t := range md.Topics {
		if t.Topic == nil || !strings.HasPrefix(*t.Topic, prefix) {
			continue
		}
		ps := map[int32]partitionInfo{}
		for _, p := range t.Partitions {
			ps[p.Partition] = partitionInfo{p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas, p.ErrorCode}
		}
		out[*t.Topic] = ps
	}
	return out, nil
}

// BenchmarkClusterE2E measures end-to-end latency on the three-broker
// cluster (benchCluster: brokers alone) with `sluice perf e2e`: 10,000
// records/s of 100 B for 10 s (linger 0: every record a produce request)
// into one partition, read back by a consumer; replication factor 1 with
// acks=1 and replication factor 3 with acks=all (idempotent, min.insync.replicas
// 2). It reports the latency percentiles and the brokers' CPU per record.
// $SLUICE_BENCH_E2E_SECONDS and $SLUICE_BENCH_E2E_RATE change the run;
// $SLUICE_CLUSTER_PROFILE=dir takes a CPU profile of every broker over the
// middle of each run. Run:
//
//	go test -run '^$' -bench ClusterE2E -benchtime 1x ./internal/clustertest/
func BenchmarkClusterE2E(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	secs, rate := 10, 10000
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_E2E_SECONDS")); err == nil && n > 0 {
		secs = n
	}
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_E2E_RATE")); err == nil && n > 0 {
		rate = n
	}
	for _, tc := range []struct {
		rf   int
		acks string
	}{{1, "1"}, {1, "all"}, {3, "all"}} {
		b.Run(fmt.Sprintf("rf=%d/acks=%s", tc.rf, tc.acks), func(b *testing.B) {
			for i := range b.N {
				topic := fmt.Sprintf("e2e-rf%d-%s-%d-%d", tc.rf, tc.acks, i, time.Now().UnixNano())
				createBenchTopic(b, c, topic, 1, tc.rf)
				before := c.brokerCPU()
				wait := c.profileBrokers(b, benchName(b), time.Duration(secs)*time.Second*6/10)
				res := c.perfRun(b, "e2e", "--topic", topic, "--throughput", strconv.Itoa(rate),
					"--duration", fmt.Sprintf("%ds", secs), "--record-size", "100", "--acks", tc.acks)
				cpu := c.cpuSince(before)
				wait()
				l := res.Latency
				b.ReportMetric(l.P50, "p50-ms")
				b.ReportMetric(l.P99, "p99-ms")
				b.ReportMetric(l.P999, "p99.9-ms")
				b.ReportMetric(l.Max, "max-ms")
				b.ReportMetric(cpu.Seconds()/float64(res.Records)*1e6, "broker-cpu-µs/record")
				b.Logf("%s: %d records, e2e %s; produce %s; brokers' CPU %v", topic, res.Records, l, res.ProduceLatency, cpu.Round(time.Millisecond))
			}
		})
	}
}

// createBenchTopic creates a topic with partitions spread over the brokers
// (min.insync.replicas 2 with rf 3) and waits until each has a leader and a
// full ISR.
func createBenchTopic(tb testing.TB, c *testCluster, topic string, partitions, rf int) {
	tb.Helper()
	waitLiveBrokers(tb, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...)}, c.clientOpts()...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), int16(rf)
	if rf >= 3 {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		tb.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		tb.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
	for {
		states, err := allPartitions(ctx, c.brokers[0], topic)
		if err == nil && len(states[topic]) == partitions {
			ok := true
			for _, pi := range states[topic] {
				ok = ok && pi.Leader >= 0 && len(pi.ISR) == rf
			}
			if ok {
				return
			}
		}
		if ctx.Err() != nil {
			tb.Fatalf("topic %s: no full ISR in time: %v %v", topic, states, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkIdleCluster measures what an idle cluster of many partitions
// costs: $SLUICE_BENCH_PARTITIONS partitions (default 2,000: 20 topics of
// 100) with replication factor 3 on the three brokers (benchCluster), one
// record in each, then the brokers' CPU over 20 s with no client, as a
// percentage of one core (the three brokers summed): the followers' fetches
// and the brokers' background work. Run:
//
//	go test -run '^$' -bench IdleCluster -benchtime 1x -timeout 30m ./internal/clustertest/
func BenchmarkIdleCluster(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	partitions := 2000
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_PARTITIONS")); err == nil && n >= 100 {
		partitions = n
	}
	const perTopic = 100
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	waitLiveBrokers(b, c)
	prefix := fmt.Sprintf("idle-%d-", time.Now().UnixNano())
	cl := c.benchClient(b)
	for first := 0; first < partitions/perTopic; first += 50 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 1
		for i := first; i < min(first+50, partitions/perTopic); i++ {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("%s%03d", prefix, i), perTopic, 3
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 && t.ErrorCode != kerr.RequestTimedOut.Code {
				b.Fatalf("create %s: %v", t.Topic, kerr.ErrorForCode(t.ErrorCode))
			}
		}
	}
	pc := c.benchClient(b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range partitions / perTopic {
		for p := range perTopic {
			pc.Produce(ctx, &kgo.Record{Topic: fmt.Sprintf("%s%03d", prefix, i), Partition: int32(p), Value: []byte("x")}, nil)
		}
	}
	if err := pc.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	waitFullISRs(ctx, b, c, prefix, partitions)
	time.Sleep(5 * time.Second) // let the last fetches and checkpoints settle
	for range b.N {
		const window = 20 * time.Second
		before := c.brokerCPU()
		wait := c.profileBrokers(b, benchName(b), window)
		time.Sleep(window)
		after := c.brokerCPU()
		cpu := c.cpuSince(before)
		wait()
		pct := cpu.Seconds() / window.Seconds() * 100
		b.ReportMetric(pct, "idle-cpu-%-of-a-core")
		var each []string
		for _, br := range c.brokers {
			each = append(each, fmt.Sprintf("broker %d %v", br.id, (after[br.id]-before[br.id]).Round(time.Millisecond)))
		}
		b.Logf("%d partitions (RF 3) idle: the three brokers used %v of CPU in %v (%.1f %% of one core; %s)", partitions, cpu.Round(time.Millisecond), window, pct, strings.Join(each, ", "))
	}
	// The idle followers must still be in sync: the window is several
	// replica.lag.time.max.ms long.
	states, err := allPartitions(ctx, c.brokers[0], prefix)
	full := 0
	for _, ps := range states {
		for _, pi := range ps {
			if len(pi.ISR) == 3 {
				full++
			}
		}
	}
	b.Logf("after the idle window: %d of %d partitions with a full ISR (err %v)", full, partitions, err)
	if err != nil || full != partitions {
		b.Fatalf("idle followers left the ISR: %d of %d partitions with a full ISR", full, partitions)
	}
}

// waitFullISRs waits until Metadata from broker 1 shows every one of the
// partitions named with prefix led and with an ISR of 3. While it waits it
// logs, every 30 s, how many are full and, for a few that are not, what
// broker 1 and the partition's leader each answer, so that a wait that does
// not end tells a stale Metadata from a leader that does not expand.
func waitFullISRs(ctx context.Context, b *testing.B, c *testCluster, prefix string, partitions int) {
	b.Helper()
	start, report := time.Now(), time.Now().Add(30*time.Second)
	for {
		states, err := allPartitions(ctx, c.brokers[0], prefix)
		n, full := 0, 0
		type tp struct {
			topic string
			p     int32
		}
		var short []tp
		for t, ps := range states {
			for p, pi := range ps {
				n++
				if pi.Leader >= 0 && len(pi.ISR) == 3 {
					full++
				} else if len(short) < 5 {
					short = append(short, tp{t, p})
				}
			}
		}
		if err == nil && n == partitions && full == n {
			b.Logf("every ISR full %v after the produce", time.Since(start).Round(time.Millisecond))
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%d of %d partitions with a full ISR", full, partitions)
		}
		if time.Now().After(report) {
			report = time.Now().Add(30 * time.Second)
			b.Logf("%v: broker 1 lists %d of %d partitions, %d with a full ISR (err %v)", time.Since(start).Round(time.Second), n, partitions, full, err)
			for _, s := range short {
				pi := states[s.topic][s.p]
				line := fmt.Sprintf("  %s-%d: broker 1 says leader %d epoch %d isr %v", s.topic, s.p, pi.Leader, pi.LeaderEpoch, pi.ISR)
				if pi.Leader > 0 && int(pi.Leader) <= len(c.brokers) {
					if ps, err := partitionsFrom(ctx, c.broker(pi.Leader), s.topic); err == nil {
						l := ps[s.p]
						line += fmt.Sprintf("; its leader says leader %d epoch %d isr %v", l.Leader, l.LeaderEpoch, l.ISR)
					}
				}
				b.Log(line)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitLiveBrokers waits (up to 2 minutes) until Metadata lists every broker
// of the cluster: on a loaded machine the last one may register after the
// cluster is up, and topics of replication factor 3 need all three.
func waitLiveBrokers(tb testing.TB, c *testCluster) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		md, err := metadataFrom(ctx, c.brokers[0])
		if err == nil && len(md.Brokers) == len(c.brokers) {
			return
		}
		if ctx.Err() != nil {
			tb.Fatalf("not every broker is live: %v %v", md, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

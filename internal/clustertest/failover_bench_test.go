package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
)

// Failover at scale (issue 21, item 3): on the benchmark cluster (three
// brokers alone, zookeeper.session.timeout.ms 6 s), $SLUICE_BENCH_PARTITIONS
// partitions (default 3,000: 30 topics of 100) with replication factor 3 and
// min.insync.replicas 2, assigned so that each broker is the preferred
// leader of a third of them (1,000). Before each measurement every
// partition is back on its preferred leader with a full ISR.
//
// "Moved" means, for every partition the broker led: a surviving broker's
// Metadata names a live leader, and that leader accepts a Produce with
// acks=all (sent straight to it, one record per partition, spread over
// several connections so that one slow partition does not hold up the
// others' answers). Run all three with:
//
//	SLUICE_BROKER_LOG_LEVEL=info go test -run '^$' -bench 'Failover|ControlledShutdownScale' -benchtime 1x -timeout 30m ./internal/clustertest/

// failoverTopics is the set of topics the failover benchmarks share,
// created on first use in the benchmark cluster.
var failoverTopics struct {
	mu     sync.Mutex
	prefix string
	n      int
}

const failoverPerTopic = 100

type topicPartition struct {
	topic     string
	partition int32
}

// failoverSetup returns the shared topics (prefix, partition count),
// creating them on first use, with every partition on its preferred leader
// and a full ISR.
func failoverSetup(b *testing.B, c *testCluster) (string, int) {
	b.Helper()
	failoverTopics.mu.Lock()
	defer failoverTopics.mu.Unlock()
	if failoverTopics.prefix != "" {
		balancedAndWritable(b, c, failoverTopics.prefix, failoverTopics.n)
		return failoverTopics.prefix, failoverTopics.n
	}
	defer func() {
		if failoverTopics.prefix != "" {
			// Every leader in place (Metadata is published before a broker
			// has taken up its leaderships) and every follower fetching.
			balancedAndWritable(b, c, failoverTopics.prefix, failoverTopics.n)
		}
	}()
	n := 3000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_PARTITIONS")); err == nil && v >= failoverPerTopic {
		n = v / failoverPerTopic * failoverPerTopic
	}
	waitLiveBrokers(b, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("fo-%d-", time.Now().UnixNano())
	cl := c.benchClient(b)
	topics := n / failoverPerTopic
	start := time.Now()
	for first := 0; first < topics; first += 10 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 1
		for i := first; i < min(first+10, topics); i++ {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = fmt.Sprintf("%s%03d", prefix, i)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			for p := range int32(failoverPerTopic) {
				// Partition k of the cluster is led by broker k%3+1; the
				// followers rotate so that each pair shares the load.
				k := int32(i*failoverPerTopic) + p
				l := k%3 + 1
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = p, []int32{l, l%3 + 1, (l+1)%3 + 1}
				if k/3%2 == 1 {
					a.Replicas[1], a.Replicas[2] = a.Replicas[2], a.Replicas[1]
				}
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
			rt.Configs = append(rt.Configs, cfg)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code && t.ErrorCode != kerr.RequestTimedOut.Code {
				b.Fatalf("create %s: %v", t.Topic, kerr.ErrorForCode(t.ErrorCode))
			}
		}
	}
	// Every partition led with a full ISR in every broker's Metadata (a
	// producer told UNKNOWN_TOPIC_OR_PARTITION a few times gives up), then
	// one acks=all record in each: every replica's log exists and has
	// caught up.
	balanced(b, c, prefix, n)
	pc := c.benchClient(b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.UnknownTopicRetries(-1), kgo.RecordDeliveryTimeout(2*time.Minute))
	var mu sync.Mutex
	var firstErr error
	for i := range topics {
		for p := range int32(failoverPerTopic) {
			pc.Produce(ctx, &kgo.Record{Topic: fmt.Sprintf("%s%03d", prefix, i), Partition: p, Value: []byte("x")}, func(r *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err)
					}
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
	balanced(b, c, prefix, n)
	b.Logf("%d partitions (RF 3, min.insync.replicas 2, 1/3 led by each broker) created, written and in sync in %v",
		n, time.Since(start).Round(time.Millisecond))
	failoverTopics.prefix, failoverTopics.n = prefix, n
	return prefix, n
}

// balancedAndWritable is balanced, then an acks=all record accepted by
// every partition's leader.
func balancedAndWritable(b *testing.B, c *testCluster, prefix string, n int) {
	b.Helper()
	balanced(b, c, prefix, n)
	var all []topicPartition
	for i := range n / failoverPerTopic {
		for p := range int32(failoverPerTopic) {
			all = append(all, topicPartition{fmt.Sprintf("%s%03d", prefix, i), p})
		}
	}
	t0 := time.Now()
	res := newMoveWatch(b, c, c.brokers[0], -1, all).run(b, t0, 2*time.Minute)
	b.Logf("before the measurement: every partition on its preferred leader, in sync, and accepting acks=all (%v)", res.lastAccept.Round(time.Millisecond))
}

// balanced starts any stopped broker and waits (up to 5 minutes) until every
// running broker's Metadata shows each of the n partitions led by its
// preferred replica with a full ISR, asking for preferred elections where a
// full ISR has another leader.
func balanced(b *testing.B, c *testCluster, prefix string, n int) {
	b.Helper()
	for _, br := range c.brokers {
		if !br.running() {
			if err := br.start(); err != nil {
				b.Fatal(err)
			}
		}
	}
	waitLiveBrokers(b, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.benchClient(b))
	var lastElect time.Time
	for {
		var problem error
		elect := kadm.TopicsSet{}
		for _, br := range c.brokers {
			states, err := allPartitions(ctx, br, prefix)
			if err != nil {
				problem = err
				break
			}
			count := 0
			for topic, ps := range states {
				for p, pi := range ps {
					count++
					switch {
					case len(pi.ISR) != 3:
						problem = cmpOr(problem, fmt.Errorf("broker %d: %s-%d ISR %v", br.id, topic, p, pi.ISR))
					case len(pi.Replicas) == 0 || pi.Leader != pi.Replicas[0]:
						problem = cmpOr(problem, fmt.Errorf("broker %d: %s-%d led by %d, preferred %v", br.id, topic, p, pi.Leader, pi.Replicas))
						elect.Add(topic, p)
					}
				}
			}
			if count != n {
				problem = cmpOr(problem, fmt.Errorf("broker %d lists %d partitions of %d", br.id, count, n))
			}
		}
		if problem == nil {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("the cluster did not return to preferred leaders with full ISRs within 5 minutes: %v", problem)
		}
		if len(elect) > 0 && time.Since(lastElect) > 5*time.Second {
			lastElect = time.Now()
			if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, elect); err != nil {
				b.Logf("preferred election: %v (retried)", err)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// ledBy lists the partitions broker id leads, as broker from's Metadata shows.
func ledBy(b *testing.B, from *brokerProc, prefix string, id int32) []topicPartition {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	states, err := allPartitions(ctx, from, prefix)
	if err != nil {
		b.Fatal(err)
	}
	var out []topicPartition
	for topic, ps := range states {
		for p, pi := range ps {
			if pi.Leader == id {
				out = append(out, topicPartition{topic, p})
			}
		}
	}
	slices.SortFunc(out, func(a, b topicPartition) int {
		if a.topic != b.topic {
			return strings.Compare(a.topic, b.topic)
		}
		return int(a.partition - b.partition)
	})
	return out
}

// moveWatch follows partitions that a broker led until each has a new
// leader that accepts an acks=all produce.
type moveWatch struct {
	c      *testCluster
	from   *brokerProc // the broker whose Metadata is read
	victim int32
	parts  []topicPartition
	shards []*kgo.Client
	batch  []byte
}

// moveResult is what moveWatch.run measured, from t0.
type moveResult struct {
	firstMeta, lastMeta       time.Duration // a live leader in Metadata: first and last partition
	firstAccept, lastAccept   time.Duration // acks=all accepted: first and last partition
	medianAccept              time.Duration // acks=all accepted: half of the partitions
	rounds, requests, refused int
	errs                      map[string]int // refused partitions by error
}

func (r moveResult) String() string {
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(r.errs)) {
		errs = append(errs, fmt.Sprintf("%s×%d", k, r.errs[k]))
	}
	return fmt.Sprintf("Metadata named a live leader: first %v, all %v; acks=all produce accepted: first %v, half %v, all %v (%d rounds, %d requests, refusals: %s)",
		r.firstMeta.Round(time.Millisecond), r.lastMeta.Round(time.Millisecond),
		r.firstAccept.Round(time.Millisecond), r.medianAccept.Round(time.Millisecond), r.lastAccept.Round(time.Millisecond),
		r.rounds, r.requests, strings.Join(cmpSlice(errs, []string{"none"}), ", "))
}

func cmpSlice(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// newMoveWatch prepares the clients (each has read the cluster's metadata,
// so it can reach every broker by id without asking the victim).
func newMoveWatch(b *testing.B, c *testCluster, from *brokerProc, victim int32, parts []topicPartition) *moveWatch {
	b.Helper()
	var seeds []string
	for _, br := range c.brokers {
		if br.id != victim {
			seeds = append(seeds, br.addr)
		}
	}
	batch, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()},
		[]record.Record{{Value: []byte("moved")}})
	if err != nil {
		b.Fatal(err)
	}
	w := &moveWatch{c: c, from: from, victim: victim, parts: parts, batch: batch}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 32 {
		cl := c.benchClient(b, kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(10*time.Second))
		if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			b.Fatal(err)
		}
		w.shards = append(w.shards, cl)
	}
	return w
}

// run polls from's Metadata (every 25 ms) and, on each shard's own
// connection, sends an acks=all Produce (1 s timeout) to the new leader of
// each of the shard's partitions that has not accepted one yet, until every
// partition accepted one, or limit after t0 (then it fails the benchmark,
// naming what is missing). A partition's time is when the answer that
// accepted it arrived: a request is answered when all its partitions are
// replicated or at its timeout, so a partition can be counted up to 1 s
// late when another partition of its request was not ready.
func (w *moveWatch) run(b *testing.B, t0 time.Time, limit time.Duration) moveResult {
	b.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(limit))
	defer cancel()
	res := moveResult{errs: map[string]int{}}
	shardOf := map[topicPartition]int{}
	for i, tp := range w.parts {
		shardOf[tp] = i % len(w.shards)
	}
	var mu sync.Mutex // guards what follows and res
	metaAt := map[topicPartition]time.Duration{}
	okAt := map[topicPartition]time.Duration{}
	leaders := map[topicPartition]int32{} // live leaders named by Metadata
	done := make(chan struct{})
	var wg sync.WaitGroup
	// The Metadata poller.
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			default:
			}
			mctx, mcancel := context.WithTimeout(ctx, 5*time.Second)
			md, err := metadataFrom(mctx, w.from)
			mcancel()
			if err == nil {
				now := time.Since(t0)
				mu.Lock()
				res.rounds++
				for _, t := range md.Topics {
					if t.Topic == nil {
						continue
					}
					for _, p := range t.Partitions {
						tp := topicPartition{*t.Topic, p.Partition}
						if _, ok := shardOf[tp]; !ok {
							continue
						}
						if p.Leader < 0 || p.Leader == w.victim {
							delete(leaders, tp)
							continue
						}
						leaders[tp] = p.Leader
						if _, seen := metaAt[tp]; !seen {
							metaAt[tp] = now
						}
					}
				}
				mu.Unlock()
			}
			time.Sleep(25 * time.Millisecond)
		}
	})
	// The shards.
	for shard, cl := range w.shards {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				if len(okAt) == len(w.parts) {
					mu.Unlock()
					return
				}
				groups := map[int32][]topicPartition{}
				for _, tp := range w.parts {
					if shardOf[tp] != shard {
						continue
					}
					if _, ok := okAt[tp]; ok {
						continue
					}
					if l, ok := leaders[tp]; ok {
						groups[l] = append(groups[l], tp)
					}
				}
				mu.Unlock()
				if len(groups) == 0 {
					time.Sleep(25 * time.Millisecond)
					continue
				}
				var gw sync.WaitGroup
				for leader, tps := range groups {
					gw.Go(func() { w.produce(ctx, cl, leader, tps, t0, &mu, okAt, &res) })
				}
				gw.Wait()
			}
		})
	}
	for {
		mu.Lock()
		complete := len(okAt) == len(w.parts)
		mu.Unlock()
		if complete || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	cancel()
	wg.Wait()
	if len(okAt) < len(w.parts) {
		var missing []string
		for _, tp := range w.parts {
			if _, ok := okAt[tp]; !ok {
				missing = append(missing, fmt.Sprintf("%s-%d", tp.topic, tp.partition))
			}
		}
		b.Fatalf("%d of %d partitions led by broker %d had no new leader accepting acks=all produce %v after the event (first: %v); so far: %v",
			len(missing), len(w.parts), w.victim, limit, missing[:min(5, len(missing))], res)
	}
	res.firstMeta, res.lastMeta = spread(metaAt)
	res.firstAccept, res.lastAccept = spread(okAt)
	accepted := slices.Sorted(maps.Values(okAt))
	res.medianAccept = accepted[len(accepted)/2]
	return res
}

// produce sends one acks=all Produce of a record to each of tps to broker
// leader and records, under mu, when each was accepted.
func (w *moveWatch) produce(ctx context.Context, cl *kgo.Client, leader int32, tps []topicPartition, t0 time.Time,
	mu *sync.Mutex, okAt map[topicPartition]time.Duration, res *moveResult) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 1000
	byTopic := map[string]int{}
	for _, tp := range tps {
		ti, ok := byTopic[tp.topic]
		if !ok {
			ti = len(req.Topics)
			byTopic[tp.topic] = ti
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = tp.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = tp.partition, w.batch
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	kresp, err := cl.Broker(int(leader)).Request(rctx, req)
	at := time.Since(t0)
	if err != nil {
		if ctx.Err() == nil {
			msg := err.Error()
			if len(msg) > 80 {
				msg = msg[:80]
			}
			mu.Lock()
			res.requests++
			res.errs[fmt.Sprintf("request to broker %d: %s", leader, msg)]++
			res.refused += len(tps)
			mu.Unlock()
			time.Sleep(25 * time.Millisecond)
		}
		return
	}
	mu.Lock()
	defer mu.Unlock()
	res.requests++
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if p.ErrorCode != 0 {
				res.errs[kerr.ErrorForCode(p.ErrorCode).Error()]++
				res.refused++
				continue
			}
			if _, done := okAt[tp]; !done {
				okAt[tp] = at
			}
		}
	}
}

func spread(m map[topicPartition]time.Duration) (first, last time.Duration) {
	first = -1
	for _, d := range m {
		if first < 0 || d < first {
			first = d
		}
		last = max(last, d)
	}
	return max(first, 0), last
}

// logEvent is a line of a broker's log at or after a time.
type logEvent struct {
	at   time.Time
	line string
}

// logLines returns the lines of broker br's log written at or after t0
// whose message contains one of msgs, in order.
func logLines(b *testing.B, br *brokerProc, t0 time.Time, msgs ...string) []logEvent {
	b.Helper()
	f, err := os.Open(br.logPath())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out []logEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		ts, ok := strings.CutPrefix(line, "time=")
		if !ok {
			continue
		}
		ts, _, _ = strings.Cut(ts, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(t0.Truncate(time.Millisecond)) {
			continue
		}
		for _, m := range msgs {
			if strings.Contains(line, `msg="`+m) || strings.Contains(line, "msg="+m) {
				out = append(out, logEvent{at, line})
				break
			}
		}
	}
	return out
}

// logSteps logs, for each broker, when after t0 its log first and last
// showed each message (and how often).
func logSteps(b *testing.B, c *testCluster, t0 time.Time, msgs ...string) {
	b.Helper()
	for _, br := range c.brokers {
		evs := logLines(b, br, t0, msgs...)
		for _, m := range msgs {
			var first, last time.Time
			n := 0
			for _, e := range evs {
				if strings.Contains(e.line, `msg="`+m) || strings.Contains(e.line, "msg="+m) {
					if n == 0 {
						first = e.at
					}
					last = e.at
					n++
				}
			}
			if n == 0 {
				continue
			}
			if n == 1 {
				b.Logf("  broker %d: %q at +%v", br.id, m, first.Sub(t0).Round(time.Millisecond))
			} else {
				b.Logf("  broker %d: %q ×%d, first +%v, last +%v", br.id, m, n, first.Sub(t0).Round(time.Millisecond), last.Sub(t0).Round(time.Millisecond))
			}
		}
	}
}

// znodeGone returns a channel that receives the time at which ZooKeeper
// reported path (under the chroot) deleted (watched from a client of its
// own); it is closed without a value if ctx ends first.
func znodeGone(b *testing.B, c *testCluster, ctx context.Context, path string) <-chan time.Time {
	b.Helper()
	conn, _, err := zk.Connect([]string{c.zk.Addr()}, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		b.Fatal(err)
	}
	ready := make(chan error, 1)
	out := make(chan time.Time, 1)
	go func() {
		defer conn.Close()
		defer close(out)
		armed := false
		for ctx.Err() == nil {
			ok, _, ev, err := conn.ExistsW(zkChroot + path)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if !armed {
				armed = true
				if !ok {
					ready <- fmt.Errorf("%s does not exist", path)
					return
				}
				ready <- nil
			}
			if !ok {
				out <- time.Now()
				return
			}
			select {
			case <-ev:
			case <-ctx.Done():
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		b.Fatalf("no watch on %s within 30 s", path)
	}
	return out
}

// controllerNamed polls broker br's Metadata (every 20 ms) until it names a
// controller other than old (and not -1) and returns when, after t0.
func controllerNamed(ctx context.Context, br *brokerProc, old int32, t0 time.Time) (int32, time.Duration, error) {
	for {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := metadataFrom(mctx, br)
		cancel()
		if err == nil && md.ControllerID >= 0 && md.ControllerID != old {
			return md.ControllerID, time.Since(t0), nil
		}
		if ctx.Err() != nil {
			return -1, 0, fmt.Errorf("broker %d: Metadata did not name a new controller: last %v %v", br.id, md, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// currentController is the controller every running broker's Metadata
// names (waiting up to a minute for them to agree).
func currentController(b *testing.B, c *testCluster) int32 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		id := int32(-2)
		agree := true
		for _, br := range c.brokers {
			md, err := metadataFrom(ctx, br)
			if err != nil || md.ControllerID < 0 || (id != -2 && md.ControllerID != id) {
				agree = false
				break
			}
			id = md.ControllerID
		}
		if agree {
			return id
		}
		if ctx.Err() != nil {
			b.Fatal("the brokers do not agree on a controller")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sampleStacks, with $SLUICE_BENCH_STACKS=dir, saves the goroutine
// profile (debug=1: stacks with counts) of every running broker at each of
// the offsets after t0, into dir/<name>-broker<id>-<offset>.txt, in the
// background; the returned function waits for it. Without the variable it
// does nothing.
func (c *testCluster) sampleStacks(b *testing.B, name string, t0 time.Time, offsets ...time.Duration) (wait func()) {
	dir := os.Getenv("SLUICE_BENCH_STACKS")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, off := range offsets {
			time.Sleep(time.Until(t0.Add(off)))
			for _, br := range c.brokers {
				if br.pprof == "" || !br.running() {
					continue
				}
				url := fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", br.pprof)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					path := filepath.Join(dir, fmt.Sprintf("%s-broker%d-%v.txt", name, br.id, off))
					if err := os.WriteFile(path, body, 0o644); err == nil {
						b.Logf("goroutines of broker %d at +%v: %s", br.id, off, path)
					}
				}
				cancel()
			}
		}
	})
	return wg.Wait
}

// The log messages that mark the steps of a leadership move.
var failoverSteps = []string{
	"zookeeper session expired",
	"controlled shutdown requested",
	"elected controller",
	"acting as controller",
	"partition states written",
	"leading partition",
	"applied metadata",
	"controlled shutdown done",
	"controlled shutdown incomplete",
	"stopped",
}

// BenchmarkControlledShutdownScale: SIGTERM to a broker (not the
// controller) that leads 1,000 of the 3,000 partitions. It reports the time
// from the signal until every partition it led has a new leader accepting
// acks=all (target: < 5 s) and until the process exited.
func BenchmarkControlledShutdownScale(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	for range b.N {
		prefix, n := failoverSetup(b, c)
		ctl := currentController(b, c)
		victim := c.brokers[0]
		for _, br := range slices.Backward(c.brokers) {
			if br.id != ctl {
				victim = br
				break
			}
		}
		from := c.broker(ctl)
		parts := ledBy(b, from, prefix, victim.id)
		w := newMoveWatch(b, c, from, victim.id, parts)
		t0 := time.Now()
		exited := make(chan time.Duration, 1)
		stacks := c.sampleStacks(b, benchName(b), t0, time.Second, 2*time.Second, 4*time.Second, 6*time.Second, 10*time.Second)
		go func() { victim.term(); exited <- time.Since(t0) }()
		res := w.run(b, t0, 2*time.Minute)
		stacks()
		var exit time.Duration
		select {
		case exit = <-exited:
		case <-time.After(2 * time.Minute):
			b.Fatalf("broker %d did not exit within 2 minutes of SIGTERM", victim.id)
		}
		b.Logf("SIGTERM to broker %d (leader of %d of %d partitions; controller %d; session timeout %v): %v; process exited after %v",
			victim.id, len(parts), n, ctl, sessionTimeout, res, exit.Round(time.Millisecond))
		logSteps(b, c, t0, failoverSteps...)
		b.ReportMetric(float64(res.lastAccept.Milliseconds()), "ms/moved")
		b.ReportMetric(float64(res.lastMeta.Milliseconds()), "ms/metadata")
		b.ReportMetric(float64(exit.Milliseconds()), "ms/exit")
		if res.lastAccept >= 5*time.Second {
			b.Logf("target missed: leadership moved away in %v, target < 5 s", res.lastAccept.Round(time.Millisecond))
		}
	}
}

// BenchmarkLeaderFailover: kill -9 of a broker (not the controller) that
// leads 1,000 of the 3,000 partitions. It reports when ZooKeeper ended its
// session (its registration gone) and when every partition it led had a new
// leader accepting acks=all (target: session timeout + 2 s).
func BenchmarkLeaderFailover(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	for range b.N {
		prefix, n := failoverSetup(b, c)
		ctl := currentController(b, c)
		victim := c.brokers[0]
		for _, br := range slices.Backward(c.brokers) {
			if br.id != ctl {
				victim = br
				break
			}
		}
		from := c.broker(ctl)
		parts := ledBy(b, from, prefix, victim.id)
		w := newMoveWatch(b, c, from, victim.id, parts)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		gone := znodeGone(b, c, ctx, "/brokers/ids/"+strconv.Itoa(int(victim.id)))
		t0 := time.Now()
		victim.kill()
		stacks := c.sampleStacks(b, benchName(b), t0, 6*time.Second, 7*time.Second, 9*time.Second, 12*time.Second)
		res := w.run(b, t0, 2*time.Minute)
		stacks()
		expired := (<-gone).Sub(t0)
		cancel()
		b.Logf("kill -9 of broker %d (leader of %d of %d partitions; controller %d; session timeout %v): registration gone after %v; %v",
			victim.id, len(parts), n, ctl, sessionTimeout, expired.Round(time.Millisecond), res)
		logSteps(b, c, t0, failoverSteps...)
		b.ReportMetric(float64(expired.Milliseconds()), "ms/session-expired")
		b.ReportMetric(float64(res.lastAccept.Milliseconds()), "ms/moved")
		b.ReportMetric(float64(res.lastMeta.Milliseconds()), "ms/metadata")
		if res.lastAccept > sessionTimeout+2*time.Second {
			b.Logf("target missed: failover took %v, target session timeout + 2 s = %v", res.lastAccept.Round(time.Millisecond), sessionTimeout+2*time.Second)
		}
	}
}

// BenchmarkControllerFailover: kill -9 of the controller broker (which also
// leads 1,000 of the 3,000 partitions). It reports, from the kill: when
// ZooKeeper deleted /controller (the dead session's expiry), when each
// surviving broker's Metadata named the new controller (target: session
// timeout + 1 s), and when the dead controller's partitions had new leaders
// accepting acks=all; and the steps in the survivors' logs.
func BenchmarkControllerFailover(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	for range b.N {
		prefix, n := failoverSetup(b, c)
		ctl := currentController(b, c)
		victim := c.broker(ctl)
		var survivors []*brokerProc
		for _, br := range c.brokers {
			if br.id != ctl {
				survivors = append(survivors, br)
			}
		}
		parts := ledBy(b, survivors[0], prefix, ctl)
		w := newMoveWatch(b, c, survivors[0], ctl, parts)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		gone := znodeGone(b, c, ctx, "/controller")
		type named struct {
			id    int32
			after time.Duration
			err   error
		}
		results := make([]chan named, len(survivors))
		t0 := time.Now()
		victim.kill()
		for i, br := range survivors {
			results[i] = make(chan named, 1)
			go func() {
				id, d, err := controllerNamed(ctx, br, ctl, t0)
				results[i] <- named{id, d, err}
			}()
		}
		res := w.run(b, t0, 2*time.Minute)
		var last time.Duration
		var next int32 = -1
		var lines []string
		for i, ch := range results {
			r := <-ch
			if r.err != nil {
				b.Fatal(r.err)
			}
			if next >= 0 && r.id != next {
				b.Fatalf("brokers name different controllers: %d and %d", next, r.id)
			}
			next = r.id
			last = max(last, r.after)
			lines = append(lines, fmt.Sprintf("broker %d's Metadata named controller %d after %v", survivors[i].id, r.id, r.after.Round(time.Millisecond)))
		}
		deleted := (<-gone).Sub(t0)
		cancel()
		b.Logf("kill -9 of controller %d (leader of %d of %d partitions; session timeout %v): /controller deleted by ZooKeeper after %v; %s; its partitions: %v",
			ctl, len(parts), n, sessionTimeout, deleted.Round(time.Millisecond), strings.Join(lines, ", "), res)
		logSteps(b, c, t0, failoverSteps...)
		b.ReportMetric(float64(deleted.Milliseconds()), "ms/session-expired")
		b.ReportMetric(float64(last.Milliseconds()), "ms/new-controller")
		b.ReportMetric(float64(res.lastAccept.Milliseconds()), "ms/moved")
		if last > sessionTimeout+time.Second {
			b.Logf("target missed: Metadata named the new controller after %v, target session timeout + 1 s = %v", last.Round(time.Millisecond), sessionTimeout+time.Second)
		}
	}
}

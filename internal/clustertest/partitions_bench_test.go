package clustertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// BenchmarkManyPartitions measures what many partitions cost one broker
// (every replica of the run's topics on broker 1 of benchCluster, the
// others idle):
//
//   - produce: $SLUICE_BENCH_RECORDS records (default 2,000,000) of 100 B,
//     each with its own 8-byte key, from one franz-go producer with the
//     client's defaults (linger 10 ms, the default partitioner: the key's
//     hash picks the partition), to a topic of 1 and of 1,000 partitions,
//     with acks=1 and acks=all: records/s and broker 1's CPU per record.
//     With 1,000 partitions every produce request carries batches for
//     hundreds of partitions, a few records each.
//   - consume: the same number of records spread evenly over 10 and over
//     1,000 partitions, in batches of the same size in both topics
//     ($SLUICE_BENCH_CONSUME_BATCH records, default 500: each batch is
//     produced on its own, to one partition), read from the start by
//     `sluice perf consume` (franz-go, partitions assigned, fetch sessions
//     on: the client's default): broker 1's CPU per record consumed and
//     records/s, and the batches per partition found in its log.
//     $SLUICE_BENCH_FETCH_PARTITION_BYTES sets the consumer's most bytes per
//     partition per fetch (the client's default is 1 MiB): set to a little
//     over a 1,000-partition topic's partition, both reads make about as
//     many partition reads of the same size, and what is left between them
//     is the cost of the partition count itself.
//
// $SLUICE_BENCH_LINGER_MS and $SLUICE_BENCH_MAX_BUFFERED set the
// producer's linger and buffered records instead of the client's defaults. Each figure is logged with the load average. $SLUICE_CLUSTER_PROFILE=dir
// takes CPU profiles of the brokers during each run. Run:
//
//	go test -run '^$' -bench ManyPartitions -benchtime 1x -timeout 30m ./internal/clustertest/
func BenchmarkManyPartitions(b *testing.B) {
	testutil.Heavy(b, "ZooKeeper and three sluice serve processes")
	c := benchCluster(b)
	records := 2_000_000
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_RECORDS")); err == nil && n > 0 {
		records = n
	}
	const recordSize = 100
	for _, partitions := range []int{1, 1000} {
		for _, acks := range []string{"1", "all"} {
			b.Run(fmt.Sprintf("produce/partitions=%d/acks=%s", partitions, acks), func(b *testing.B) {
				for i := range b.N {
					topic := fmt.Sprintf("manyp-produce-%d-%s-%d-%d", partitions, acks, i, time.Now().UnixNano())
					createOnBroker1(b, c, topic, partitions)
					load := loadAvg()
					before, client0 := brokerCPUOf(b, c, 1), selfCPU(b)
					wait := c.profileBrokersAfter(b, benchName(b), time.Second, 5*time.Second)
					elapsed := produceKeyed(b, c, topic, records, recordSize, acks, 0)
					cpu, client := brokerCPUOf(b, c, 1)-before, selfCPU(b)-client0
					wait()
					rate := float64(records) / elapsed.Seconds()
					perRecord := cpu.Seconds() / float64(records) * 1e6
					b.ReportMetric(rate, "records/s")
					b.ReportMetric(perRecord, "broker-cpu-µs/record")
					b.ReportMetric(client.Seconds()/float64(records)*1e6, "client-cpu-µs/record")
					b.Logf("produce %d records of %d B to %d partitions, acks=%s: %.0f records/s (%v), broker 1 CPU %v (%.3f µs/record), the producer's process %v; load average %s -> %s",
						records, recordSize, partitions, acks, rate, elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond), perRecord,
						client.Round(time.Millisecond), load, loadAvg())
				}
			})
		}
	}
	batch := 500
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_CONSUME_BATCH")); err == nil && n > 0 {
		batch = n
	}
	for _, partitions := range []int{10, 1000} {
		b.Run(fmt.Sprintf("consume/partitions=%d", partitions), func(b *testing.B) {
			for i := range b.N {
				topic := fmt.Sprintf("manyp-consume-%d-%d-%d", partitions, i, time.Now().UnixNano())
				createOnBroker1(b, c, topic, partitions)
				produceBatches(b, c, topic, records, recordSize, partitions, batch)
				batches, inBatches := countBatches(b, c.brokers[0], topic, 0)
				// Broker 1's idle CPU (its background work for every
				// partition it holds), to tell the fetches' cost apart
				// from a run that is merely long.
				const idleWindow = 10 * time.Second
				idle0 := brokerCPUOf(b, c, 1)
				time.Sleep(idleWindow)
				idleRate := float64(brokerCPUOf(b, c, 1)-idle0) / float64(idleWindow)
				load := loadAvg()
				before, t0 := brokerCPUOf(b, c, 1), time.Now()
				wait := c.profileBrokersAfter(b, benchName(b), 0, 5*time.Second) // the read takes seconds
				args := []string{"consume", "--topic", topic, "--num-records", strconv.Itoa(records), "--idle-timeout", "60s"}
				if n := os.Getenv("SLUICE_BENCH_FETCH_PARTITION_BYTES"); n != "" {
					args = append(args, "--fetch-max-partition-bytes", n)
				}
				res := c.perfRun(b, args...)
				cpu, took := brokerCPUOf(b, c, 1)-before, time.Since(t0)
				wait()
				perRecord := cpu.Seconds() / float64(res.Records) * 1e6
				net := (cpu.Seconds() - idleRate*took.Seconds()) / float64(res.Records) * 1e6
				b.ReportMetric(res.RecordsPerSec, "records/s")
				b.ReportMetric(perRecord, "broker-cpu-µs/record")
				b.ReportMetric(net, "broker-cpu-net-of-idle-µs/record")
				b.Logf("consume %d records spread over %d partitions (partition 0: %d records in %d batches): %.0f records/s, broker 1 CPU %v in %v (%.3f µs/record; idle it uses %.2f %% of a core, %.3f µs/record net of that); load average %s -> %s",
					res.Records, partitions, inBatches, batches, res.RecordsPerSec, cpu.Round(time.Millisecond), took.Round(time.Millisecond), perRecord,
					idleRate*100, net, load, loadAvg())
			}
		})
	}
}

// selfCPU is the CPU time (user + system) this process has used: the
// load generator's, which runs here.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// brokerCPUOf is the CPU time broker id has used so far.
func brokerCPUOf(tb testing.TB, c *testCluster, id int32) time.Duration {
	tb.Helper()
	d, ok := c.brokerCPU()[id]
	if !ok {
		tb.Fatalf("broker %d is not running", id)
	}
	return d
}

// createOnBroker1 creates topic with partitions partitions, every one's
// only replica on broker 1, waits (up to 2 minutes) until each has broker 1
// as its leader, and writes one record to each: the run that follows finds
// every log created and every partition ready.
func createOnBroker1(tb testing.TB, c *testCluster, topic string, partitions int) {
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
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p := range partitions {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		tb.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.RequestTimedOut.Code {
		tb.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
	for {
		states, err := allPartitions(ctx, c.brokers[0], topic)
		led := 0
		for _, pi := range states[topic] {
			if pi.Leader == 1 {
				led++
			}
		}
		if err == nil && led == partitions {
			produceKeyed(tb, c, topic, partitions, 1, "1", partitions)
			return
		}
		if ctx.Err() != nil {
			tb.Fatalf("topic %s: %d of %d partitions led by broker 1: %v", topic, led, partitions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// profileBrokersAfter is profileBrokers started after delay: the middle of
// a run rather than its start.
func (c *testCluster) profileBrokersAfter(tb testing.TB, name string, delay, d time.Duration) (wait func()) {
	if profileDir() == "" {
		return func() {}
	}
	started := make(chan func(), 1)
	go func() {
		time.Sleep(delay)
		started <- c.profileBrokers(tb, name, d)
	}()
	return func() { (<-started)() }
}

// produceKeyed writes records records of size bytes to topic from one
// franz-go producer with the client's defaults but acks, each record
// keyed by its index (8 bytes, big-endian): the default partitioner
// hashes the key, so the records spread over every partition at once.
// With spread > 0 record n goes to partition n % spread instead (an even
// spread for the consume runs). It returns the time from the first
// record to the last acknowledgement and fails on any error.
func produceKeyed(tb testing.TB, c *testCluster, topic string, records, size int, acks string, spread int) time.Duration {
	tb.Helper()
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(2 * time.Minute)}, c.clientOpts()...)
	switch acks {
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	default:
		tb.Fatalf("acks %q", acks)
	}
	if spread > 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if ms, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_LINGER_MS")); err == nil && ms >= 0 {
		opts = append(opts, kgo.ProducerLinger(time.Duration(ms)*time.Millisecond))
	}
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_MAX_BUFFERED")); err == nil && n > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(n))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	// Records are recycled once acknowledged; each owns its key.
	pool := sync.Pool{New: func() any { return &kgo.Record{Key: make([]byte, 8)} }}
	var (
		mu       sync.Mutex
		firstErr error
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
		pool.Put(r)
	}
	start := time.Now()
	for n := range records {
		r := pool.Get().(*kgo.Record)
		key := r.Key[:8]
		binary.BigEndian.PutUint64(key, uint64(n))
		*r = kgo.Record{Key: key, Value: value}
		if spread > 0 {
			r.Partition = int32(n % spread)
		}
		cl.Produce(ctx, r, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		tb.Fatalf("flush: %v", err)
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		tb.Fatalf("produce to %s: %v", topic, firstErr)
	}
	return elapsed
}

// produceBatches writes records of size bytes to topic's partitions in
// turn, perBatch records at a time: each group is produced on its own
// (buffered whole under a long linger, then flushed) so that it lands as
// one batch, and the batches are the same size however many partitions
// the topic has.
func produceBatches(tb testing.TB, c *testCluster, topic string, records, size, partitions, perBatch int) {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(time.Second),
		kgo.MaxBufferedRecords(perBatch + 1), kgo.ProducerBatchMaxBytes(16 << 20)}, c.clientOpts()...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, size)
	group := make([]*kgo.Record, 0, perBatch)
	for n, i := 0, 0; n < records; i++ {
		group = group[:0]
		for ; len(group) < perBatch && n < records; n++ {
			key := binary.BigEndian.AppendUint64(nil, uint64(n))
			group = append(group, &kgo.Record{Key: key, Value: value, Partition: int32(i % partitions)})
		}
		var firstErr error
		var mu sync.Mutex
		for _, r := range group {
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			})
		}
		// Flush sends the group at once, as one batch, without
		// waiting for the linger.
		if err := cl.Flush(ctx); err != nil {
			tb.Fatalf("flush: %v", err)
		}
		mu.Lock()
		err := firstErr
		mu.Unlock()
		if err != nil {
			tb.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

// countBatches walks the batch headers of every segment of topic's
// partition in broker's log directory: the number of batches and of
// records in them.
func countBatches(tb testing.TB, broker *brokerProc, topic string, partition int) (batches, records int) {
	tb.Helper()
	segs, err := filepath.Glob(filepath.Join(broker.dir, "data", fmt.Sprintf("%s-%d", topic, partition), "*.log"))
	if err != nil || len(segs) == 0 {
		tb.Fatalf("segments of %s-%d: %v (%d found)", topic, partition, err, len(segs))
	}
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			tb.Fatal(err)
		}
		// A batch: base offset (8), length (4), then length bytes; the
		// record count is the last 4 bytes of the 61-byte header.
		for len(data) >= 61 {
			n := int(binary.BigEndian.Uint32(data[8:12])) + 12
			if n < 61 || n > len(data) {
				break
			}
			batches++
			records += int(binary.BigEndian.Uint32(data[57:61]))
			data = data[n:]
		}
	}
	return batches, records
}

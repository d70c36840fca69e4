package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// expectedRecord is what one produced record must look like when consumed.
type expectedRecord struct {
	key, value []byte
	header     string
	ts         time.Time
}

func makeRecords(n, partitions int, base time.Time, seed uint64) [][]expectedRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([][]expectedRecord, partitions)
	for i := range n {
		v := make([]byte, 20+rng.IntN(180))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		out[i%partitions] = append(out[i%partitions], expectedRecord{
			key:    fmt.Appendf(nil, "key-%06d", i),
			value:  v,
			header: fmt.Sprintf("h-%d", i),
			ts:     base.Add(time.Duration(i) * time.Millisecond),
		})
	}
	return out
}

// produceAll produces want[p] to partition p of topic, in order, with an
// idempotent acks=all producer, and fails on any error.
func produceAll(t *testing.T, cl *kgo.Client, topic string, want [][]expectedRecord, fromPartition int) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	var failed atomic.Value
	n := 0
	for p, recs := range want {
		for _, r := range recs {
			rec := &kgo.Record{
				Topic: topic, Partition: int32(fromPartition + p), Key: r.key, Value: r.value, Timestamp: r.ts,
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(r.header)}},
			}
			cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
			})
			n++
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads partitions [0, len(want)) of topic from the start and
// checks every record, byte for byte, in order.
func consumeAll(t *testing.T, n *node, topic string, want [][]expectedRecord) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	total := 0
	for p := range want {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
		total += len(want[p])
	}
	cl := n.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(500*time.Millisecond))
	ctx := ctxFor(t, 60*time.Second)
	next := make([]int, len(want))
	got := 0
	for got < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline; per partition %v", got, total, next)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch errors: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			p := int(r.Partition)
			if p >= len(want) {
				t.Fatalf("record from unexpected partition %d", p)
			}
			i := next[p]
			if i >= len(want[p]) {
				t.Fatalf("partition %d: more records than produced (offset %d)", p, r.Offset)
			}
			w := want[p][i]
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d", p, i, r.Offset)
			}
			if !bytes.Equal(r.Key, w.key) || !bytes.Equal(r.Value, w.value) {
				t.Fatalf("partition %d offset %d: key/value differ", p, r.Offset)
			}
			if len(r.Headers) != 1 || string(r.Headers[0].Value) != w.header || !r.Timestamp.Equal(w.ts) {
				t.Fatalf("partition %d offset %d: headers %v timestamp %v, want %s %v", p, r.Offset, r.Headers, r.Timestamp, w.header, w.ts)
			}
			next[p]++
			got++
		})
	}
}

// TestFranzGoEndToEnd is the broker's main acceptance test with franz-go:
// several partitions, 100,000 idempotent records consumed back in order
// byte for byte, offsets by timestamp, configs, more partitions, topic
// deletion, and a restart after which everything reads again.
func TestFranzGoEndToEnd(t *testing.T) {
	// Small segments so the records span several segment files.
	n := startNode(t, "log.segment.bytes=1048576", "num.partitions=3")
	adm := n.Admin()
	ctx := ctxFor(t, 120*time.Second)

	const topic, parts, total = "orders", 4, 100_000
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	want := makeRecords(total, parts, base, 1)
	producer := n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	start := time.Now()
	produceAll(t, producer, topic, want, 0)
	t.Logf("produced %d records in %v", total, time.Since(start))
	consumeAll(t, n, topic, want)

	// Offsets: start, end, and by timestamp.
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		if s.Offset != 0 || e.Offset != total/parts {
			t.Fatalf("partition %d: start %d end %d", p, s.Offset, e.Offset)
		}
	}
	// Record i has timestamp base+i ms and lives in partition i%4 at
	// offset i/4: the first record at or after base+50001ms is i=50001
	// (partition 1, offset 12500); partition 2's is i=50002, partition 0's
	// i=50004 (offset 12501).
	byTS, err := adm.ListOffsetsAfterMilli(ctx, base.UnixMilli()+50_001, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, wantOff := range map[int32]int64{0: 12501, 1: 12500, 2: 12500, 3: 12500} {
		o, ok := byTS.Lookup(topic, p)
		if !ok || o.Err != nil || o.Offset != wantOff {
			t.Fatalf("partition %d offset after timestamp: %+v, want %d", p, o, wantOff)
		}
		if o.Timestamp != base.UnixMilli()+int64(wantOff)*parts+int64(p) {
			t.Fatalf("partition %d: timestamp %d", p, o.Timestamp)
		}
	}
	// A timestamp after every record: -1 (no such offset) for Kafka; kadm
	// reports it as the end offset.
	late, err := adm.ListOffsetsAfterMilli(ctx, time.Now().Add(time.Hour).UnixMilli(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := late.Lookup(topic, 0); o.Offset != -1 && o.Offset != total/parts {
		t.Fatalf("offset after the last timestamp: %+v", o)
	}

	// Configs: sources and alteration.
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, rc, "retention.ms", "604800000", kmsg.ConfigSource(5)) // DEFAULT_CONFIG
	checkConfig(t, rc, "segment.bytes", "1048576", kmsg.ConfigSource(4))  // STATIC_BROKER_CONFIG
	checkConfig(t, rc, "cleanup.policy", "delete", kmsg.ConfigSource(5))
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")},
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000000")},
	}, topic)
	if err != nil || alt[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, alt)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, topic)
	rc, _ = rcs.On(topic, nil)
	checkConfig(t, rc, "retention.ms", "3600000", kmsg.ConfigSource(1)) // DYNAMIC_TOPIC_CONFIG
	checkConfig(t, rc, "max.message.bytes", "2000000", kmsg.ConfigSource(1))
	// Delete returns a config to its default.
	alt, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.message.bytes"}}, topic)
	if err != nil || alt[0].Err != nil {
		t.Fatalf("delete config: %v %+v", err, alt)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, topic)
	rc, _ = rcs.On(topic, nil)
	checkConfig(t, rc, "max.message.bytes", "1048588", kmsg.ConfigSource(5))
	// Unknown names and unparsable values are INVALID_CONFIG; values out of
	// range are POLICY_VIOLATION.
	for _, tc := range []struct {
		name, value string
		err         error
	}{
		{"no.such.config", "1", kerr.InvalidConfig},
		{"retention.ms", "soon", kerr.InvalidConfig},
		{"segment.bytes", "1", kerr.PolicyViolation},
		{"min.insync.replicas", "2", kerr.PolicyViolation}, // above the replication factor
	} {
		alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.name, Value: kadm.StringPtr(tc.value)}}, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(alt[0].Err, tc.err) {
			t.Fatalf("%s=%s: %v, want %v", tc.name, tc.value, alt[0].Err, tc.err)
		}
	}
	// Creating a topic with a bad config fails the same way.
	ct, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("shred")}, "badcfg")
	if !errors.Is(err, kerr.InvalidConfig) && !errors.Is(ct.Err, kerr.InvalidConfig) {
		t.Fatalf("create with bad config: %v %+v", err, ct)
	}

	// More partitions: 4 -> 6, then produce to the new ones.
	cp, err := adm.CreatePartitions(ctx, 2, topic)
	if err != nil || cp[topic].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cp)
	}
	if cp2, _ := adm.CreatePartitions(ctx, 0, topic); cp2[topic].Err == nil {
		t.Fatal("adding zero partitions should fail with INVALID_PARTITIONS")
	}
	extra := makeRecords(1000, 2, base.Add(200*time.Second), 2)
	producer.Close()
	producer = n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, producer, topic, extra, 4)
	all := append(append([][]expectedRecord{}, want...), extra...)
	consumeAll(t, n, topic, all)

	// Delete a topic.
	const doomed = "doomed"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, doomed); err != nil {
		t.Fatal(err)
	}
	produceAll(t, producer, doomed, makeRecords(10, 2, base, 3), 0)
	dr, err := adm.DeleteTopics(ctx, doomed)
	if err != nil || dr[doomed].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md.Topics[doomed]; ok {
		t.Fatal("deleted topic still in metadata")
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, p := range []string{"doomed-0", "doomed-1"} {
			if _, err := os.Stat(filepath.Join(n.Dir(), "kafka", p)); err == nil {
				return fmt.Errorf("%s still on disk", p)
			}
		}
		return nil
	})
	if dr, _ := adm.DeleteTopics(ctx, doomed); !errors.Is(dr[doomed].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting a missing topic: %+v", dr[doomed])
	}

	// Restart: everything reads again, and producing continues.
	producer.Close()
	n.Restart()
	consumeAll(t, n, topic, all)
	ends2, err := n.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 6; p++ {
		e1, _ := ends.Lookup(topic, p)
		e2, _ := ends2.Lookup(topic, p)
		if p < parts && e2.Offset != e1.Offset {
			t.Fatalf("partition %d end offset %d after restart, %d before", p, e2.Offset, e1.Offset)
		}
	}
	rcs, _ = n.Admin().DescribeTopicConfigs(ctx, topic)
	rc, _ = rcs.On(topic, nil)
	checkConfig(t, rc, "retention.ms", "3600000", kmsg.ConfigSource(1))
	more := makeRecords(100, 1, base.Add(300*time.Second), 4)
	p2 := n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, p2, topic, more, 0)
	all[0] = append(all[0], more[0]...)
	consumeAll(t, n, topic, all)
}

func checkConfig(t *testing.T, rc kadm.ResourceConfig, name, value string, source kmsg.ConfigSource) {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key != name {
			continue
		}
		if c.Value == nil || *c.Value != value || c.Source != source {
			t.Fatalf("%s = %v (source %v), want %s (source %v)", name, c.MaybeValue(), c.Source, value, source)
		}
		return
	}
	t.Fatalf("config %s not described", name)
}

// TestMetadataAutoCreate checks auto-creation through Metadata and that it
// can be turned off.
func TestMetadataAutoCreate(t *testing.T) {
	n := startNode(t, "num.partitions=3")
	cl := n.Client(kgo.AllowAutoTopicCreation())
	ctx := ctxFor(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics["auto"].Partitions) != 3 {
		t.Fatalf("auto-created topic has %d partitions, num.partitions is 3", len(md.Topics["auto"].Partitions))
	}

	off := startNode(t, "auto.create.topics.enable=false")
	ocl := off.Client(kgo.AllowAutoTopicCreation(), kgo.RecordRetries(2))
	md, err = kadm.NewClient(ocl).Metadata(ctx, "nope")
	if err != nil {
		t.Fatal(err)
	}
	if err := md.Topics["nope"].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("metadata for an unknown topic without auto-create: %v", err)
	}
	// With auto-creation on, a name Kafka would refuse is
	// INVALID_TOPIC_EXCEPTION (with it off, Kafka says unknown, as above).
	md, _ = kadm.NewClient(cl).Metadata(ctx, "bad name!")
	if err := md.Topics["bad name!"].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("metadata for an invalid name: %v", err)
	}
}

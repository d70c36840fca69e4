package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *Client) {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	c, err := New(cluster.ListenAddrs(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return cluster, c
}

func produceN(t *testing.T, c *Client, topic string, n int, mk func(i int) *kgo.Record) {
	t.Helper()
	ctx := context.Background()
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		r := mk(i)
		r.Topic = topic
		r.Context = withPartition(ctx, r.Partition)
		recs = append(recs, r)
	}
	if err := c.Kgo().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestTopicLifecycleAndConfigs(t *testing.T) {
	ctx := context.Background()
	_, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "orders", Partitions: 3, Replication: 1, Configs: map[string]string{"retention.ms": "3600000"}}, false); err != nil {
		t.Fatal(err)
	}
	var ke *KafkaError
	if err := c.CreateTopic(ctx, NewTopic{Name: "orders", Partitions: 1, Replication: 1}, false); !errors.As(err, &ke) {
		t.Fatalf("duplicate create: %v", err)
	}
	snap, err := c.Metadata(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	tm, ok := snap.Topic("orders")
	if !ok || len(tm.Partitions) != 3 || tm.Replication != 1 {
		t.Fatalf("metadata: %+v", tm)
	}
	d, err := c.Topic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var ret ConfigEntry
	for _, e := range d.Configs {
		if e.Name == "retention.ms" {
			ret = e
		}
	}
	if ret.Value != "3600000" || ret.IsDefault || ret.Default == "" || ret.Default == ret.Value {
		t.Fatalf("retention.ms entry: %+v", ret)
	}
	if err := c.AlterTopicConfigs(ctx, "orders", []ConfigChange{{Name: "retention.ms", Reset: true}, {Name: "cleanup.policy", Value: "compact"}}); err != nil {
		t.Fatal(err)
	}
	cfgs, _ := c.TopicConfigs(ctx, "orders")
	for _, e := range cfgs {
		if e.Name == "retention.ms" && !e.IsDefault {
			t.Fatalf("retention.ms not reset: %+v", e)
		}
		if e.Name == "cleanup.policy" && (e.Value != "compact" || e.IsDefault) {
			t.Fatalf("cleanup.policy: %+v", e)
		}
	}
	if err := c.SetPartitionCount(ctx, "orders", 5); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPartitionCount(ctx, "orders", 2); err == nil {
		t.Fatal("shrinking partitions was accepted")
	}
	tm, _ = c.TopicMetadata(ctx, "orders")
	if len(tm.Partitions) != 5 {
		t.Fatalf("partitions after grow: %d", len(tm.Partitions))
	}
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TopicMetadata(ctx, "orders"); err == nil {
		t.Fatal("deleted topic still described")
	}
}

func TestReadPagesSearchAndTimestamps(t *testing.T) {
	ctx := context.Background()
	_, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "ev", Partitions: 2, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	produceN(t, c, "ev", 200, func(i int) *kgo.Record {
		r := &kgo.Record{Partition: int32(i % 2), Key: []byte("k" + strconv.Itoa(i)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if i == 150 {
			r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte("abc-150")}}
		}
		return r
	})
	st, err := c.Stats(ctx, []string{"ev"})
	if err != nil || st["ev"].Messages != 200 || st["ev"].Size <= 0 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	d, err := c.Topic(ctx, "ev")
	if err != nil || d.Size != st["ev"].Size || d.Partitions[1].Size <= 0 || d.Messages != 200 {
		t.Fatalf("topic detail sizes: %+v %v", d, err)
	}
	ends, bytes, err := c.Totals(ctx)
	if err != nil || ends != 200 || bytes != d.Size {
		t.Fatalf("totals: %d %d %v", ends, bytes, err)
	}
	res, err := c.Read(ctx, Query{Topic: "ev", Partition: -1, From: FromEarliest, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 50 || res.InRange != 200 || !res.More {
		t.Fatalf("first page: %d records, in range %d, more %v", len(res.Records), res.InRange, res.More)
	}
	if string(res.Records[0].Key) != "k0" {
		t.Fatalf("earliest first record key %q", res.Records[0].Key)
	}
	seen := map[string]bool{}
	for _, r := range res.Records {
		seen[string(r.Key)] = true
	}
	// Page through everything with the cursor; every record once.
	pages := 1
	for res.More {
		res, err = c.Read(ctx, Query{Topic: "ev", Partition: -1, Cursor: res.Next, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Records {
			if seen[string(r.Key)] {
				t.Fatalf("record %s seen twice", r.Key)
			}
			seen[string(r.Key)] = true
		}
		if pages++; pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 200 {
		t.Fatalf("paged %d distinct records, want 200", len(seen))
	}

	latest, err := c.Read(ctx, Query{Topic: "ev", Partition: -1, From: FromLatest, Limit: 10})
	if err != nil || len(latest.Records) != 10 || string(latest.Records[0].Key) != "k199" || !latest.Newest {
		t.Fatalf("latest: %v %+v", err, latest)
	}
	at, err := c.Read(ctx, Query{Topic: "ev", Partition: -1, From: FromTimestamp, Time: base.Add(100 * time.Second), Limit: 5})
	if err != nil || len(at.Records) != 5 || string(at.Records[0].Key) != "k100" {
		t.Fatalf("from timestamp: %v %+v", err, at.Records)
	}
	byKey, err := c.Read(ctx, Query{Topic: "ev", Partition: -1, From: FromEarliest, Filter: Filter{Field: FieldKey, Text: "k42", Exact: true}})
	if err != nil || len(byKey.Records) != 1 || string(byKey.Records[0].Value) != `{"n":42}` || byKey.Scanned != 200 {
		t.Fatalf("key search: %v %+v", err, byKey)
	}
	byHeader, err := c.Read(ctx, Query{Topic: "ev", Partition: -1, From: FromEarliest, Filter: Filter{Field: FieldHeader, Header: "trace", Text: "150"}})
	if err != nil || len(byHeader.Records) != 1 || string(byHeader.Records[0].Key) != "k150" {
		t.Fatalf("header search: %v %+v", err, byHeader)
	}
	bounded, err := c.Read(ctx, Query{Topic: "ev", Partition: -1, From: FromEarliest, MaxScan: 20, Filter: Filter{Field: FieldValue, Text: "nope"}})
	if err != nil || bounded.Stopped != "scan limit" || bounded.Scanned < 20 || bounded.Scanned >= 200 || !bounded.More {
		t.Fatalf("bounded search: %v %+v", err, bounded)
	}
	if _, err := c.Read(ctx, Query{Topic: "missing", Partition: -1}); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("missing topic: %v", err)
	}
}

func TestProduceToChosenPartitionAndTail(t *testing.T) {
	ctx := context.Background()
	_, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "t", Partitions: 4, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan Record, 10)
	tailDone := make(chan error, 1)
	go func() {
		tailDone <- c.Tail(tctx, "t", -1, Filter{}, 100, func(recs []Record, dropped int64) error {
			for _, r := range recs {
				got <- r
			}
			return nil
		})
	}()
	time.Sleep(300 * time.Millisecond) // let the tail take its end offsets
	r, err := c.Produce(ctx, NewRecord{Topic: "t", Partition: 3, Key: []byte("a"), Value: []byte("b"), Headers: []Header{{Key: "h", Value: []byte("v")}}})
	if err != nil || r.Partition != 3 {
		t.Fatalf("produce: %+v %v", r, err)
	}
	select {
	case tr := <-got:
		if tr.Partition != 3 || string(tr.Key) != "a" || len(tr.Headers) != 1 {
			t.Fatalf("tailed %+v", tr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tail did not deliver the produced record")
	}
	cancel()
	if err := <-tailDone; err != nil {
		t.Fatal(err)
	}
}

func TestGroupLagAndReset(t *testing.T) {
	ctx := context.Background()
	cluster, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "in", Partitions: 2, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, c, "in", 100, func(i int) *kgo.Record { return &kgo.Record{Partition: int32(i % 2), Value: []byte("v")} })
	// A real consumer reads 30 records and commits.
	cons, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("in"),
		kgo.DisableAutoCommit(), kgo.MaxConcurrentFetches(1), kgo.FetchMaxBytes(1<<10))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for read < 30 {
		fs := cons.PollRecords(ctx, 30-read)
		read += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := c.Group(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Lag.State != "Stable" || len(d.Members) != 1 || d.Lag.TotalLag != 70 {
		t.Fatalf("group: state %s members %d lag %d", d.Lag.State, len(d.Members), d.Lag.TotalLag)
	}
	if _, _, err := c.PlanReset(ctx, ResetSpec{Group: "g1", Mode: ResetEarliest, Partition: -1}); err != nil {
		t.Fatal(err)
	}
	rows, _, _ := c.PlanReset(ctx, ResetSpec{Group: "g1", Mode: ResetEarliest, Partition: -1})
	if err := c.ApplyReset(ctx, "g1", rows); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("reset of an active group: %v", err)
	}
	cons.Close()
	rows, state, err := c.PlanReset(ctx, ResetSpec{Group: "g1", Mode: ResetOffset, Offset: 10, Partition: -1})
	if err != nil || state != "Empty" || len(rows) != 2 {
		t.Fatalf("plan: %v %s %+v", err, state, rows)
	}
	for _, r := range rows {
		if r.New != 10 || r.LagAfter() != 40 {
			t.Fatalf("row %+v", r)
		}
	}
	if err := c.ApplyReset(ctx, "g1", rows); err != nil {
		t.Fatal(err)
	}
	lags, err := c.Lag(ctx, "g1")
	if err != nil || len(lags) != 1 || lags[0].TotalLag != 80 {
		t.Fatalf("lag after reset: %v %+v", err, lags)
	}
	if _, err := c.Group(ctx, "nope"); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("unknown group: %v", err)
	}
}

// TestPagingToOlderRecords: the Latest view pages back through older
// records with Result.Older, newest first, every record once, until none
// is left.
func TestPagingToOlderRecords(t *testing.T) {
	ctx := context.Background()
	_, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "orders", Partitions: 3, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	produceN(t, c, "orders", 95, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
	})
	seen := map[string]bool{}
	var prev time.Time
	q := Query{Topic: "orders", Partition: -1, From: FromLatest, Limit: 20}
	pages := 0
	for {
		res, err := c.Read(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Newest {
			t.Fatal("not newest first")
		}
		pages++
		for _, r := range res.Records {
			if seen[string(r.Value)] {
				t.Fatalf("record %s twice", r.Value)
			}
			seen[string(r.Value)] = true
			if !prev.IsZero() && r.Timestamp.After(prev) {
				t.Fatalf("page %d: %s is newer than the record before it", pages, r.Value)
			}
			prev = r.Timestamp
		}
		if !res.HasOlder {
			break
		}
		if pages > 10 {
			t.Fatal("paging never ends")
		}
		q.Before = res.Older
	}
	if len(seen) != 95 || pages != 5 {
		t.Fatalf("%d records in %d pages", len(seen), pages)
	}
}

// TestRecordOrderWithinPartition: a partition's records show in offset
// order even when their timestamps go back; partitions interleave by time.
func TestRecordOrderWithinPartition(t *testing.T) {
	ctx := context.Background()
	_, c := newCluster(t)
	if err := c.CreateTopic(ctx, NewTopic{Name: "t", Partitions: 2, Replication: 1}, false); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	ts := []int{10, 5, 20, 15} // producer clocks that go back
	produceN(t, c, "t", 4, func(i int) *kgo.Record {
		return &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(ts[i]) * time.Second)}
	})
	produceN(t, c, "t", 2, func(i int) *kgo.Record {
		return &kgo.Record{Partition: 1, Value: []byte("p1-" + strconv.Itoa(i)), Timestamp: base.Add(time.Duration(7+10*i) * time.Second)}
	})
	res, err := c.Read(ctx, Query{Topic: "t", Partition: 0, From: FromEarliest, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Records {
		got = append(got, string(r.Value))
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("partition 0 read as %v, want offset order", got)
	}
	res, _ = c.Read(ctx, Query{Topic: "t", Partition: -1, From: FromEarliest, Limit: 10})
	got = got[:0]
	for _, r := range res.Records {
		got = append(got, string(r.Value))
	}
	if fmt.Sprint(got) != "[p1-0 0 1 p1-1 2 3]" { // by head timestamps: 7, 10, 5 (after 10 in its partition), 17, 20, 15
		t.Errorf("both partitions read as %v", got)
	}
}

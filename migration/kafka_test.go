package migration

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBrokers returns the brokers the Kafka tests run against:
// SLUICE_TEST_BROKERS (comma-separated host:port) when set, so the same
// tests can run against a real Sluice broker, otherwise an in-process kfake
// cluster on a loopback port, stopped when the test ends.
func testBrokers(t testing.TB) []string {
	t.Helper()
	if s := os.Getenv("SLUICE_TEST_BROKERS"); s != "" {
		return strings.Split(s, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

var topicSeq atomic.Int64

// uniqueTopic returns a topic name no other test uses, so tests can share an
// external broker.
func uniqueTopic(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

func newClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopics(t testing.TB, brokers []string, partitions int32, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
}

// partitionOf is the test's partitioner: both services partition by key.
func partitionOf(key []byte, n int32) int32 {
	if n == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// produce writes recs to topic in order, each to partitionOf(key).
func produce(t testing.TB, brokers []string, topic string, partitions int32, recs []genRecord) {
	t.Helper()
	cl := newClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1<<20),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const chunk = 20000
	for i := 0; i < len(recs); i += chunk {
		batch := make([]*kgo.Record, 0, chunk)
		for _, r := range recs[i:min(i+chunk, len(recs))] {
			key := r.key
			if key == nil {
				key = orderIDOf(r)
			}
			batch = append(batch, &kgo.Record{Topic: topic, Partition: partitionOf(key, partitions), Key: r.key, Value: r.value, Timestamp: r.ts, Headers: r.headers})
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

func runComparison(t testing.TB, spec Spec, opts Options) Snapshot {
	t.Helper()
	cmp, err := New(spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	snap, err := cmp.Run(ctx)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !snap.Done {
		t.Fatal("bounded comparison returned before its end")
	}
	return snap
}

// The acceptance test: ORDER and ORDERNEW from the same input with
// known injected differences; the counts equal the injected ones exactly,
// for key pairing and for JSON-path pairing.
func TestCompareGeneratedTopics(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for _, keyed := range []bool{true, false} {
		name := "json-path"
		if keyed {
			name = "record-key"
		}
		t.Run(name, func(t *testing.T) {
			left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
			createTopics(t, brokers, 1, left, right)
			g := generate(1000, base, keyed)
			produce(t, brokers, left, 1, g.left)
			produce(t, brokers, right, 1, g.right)

			spec := genSpec(left, right, keyed)
			snap := runComparison(t, spec, Options{Brokers: brokers})
			if got := outcome(snap.Counters); got != g.want {
				t.Fatalf("counts\n got %+v\nwant %+v", got, g.want)
			}
			if snap.Skew.Max != g.wantSkewMax || snap.Skew.Min != g.wantSkewMin || snap.Skew.P50 != 0 {
				t.Fatalf("skew %+v", snap.Skew)
			}
			if mm := snap.Examples[KindMismatch]; len(mm) != 1 || mm[0].Fields[0].Path != "order.total" {
				t.Fatalf("mismatch examples %+v", mm)
			}
			v := Evaluate(spec.Criteria, snap)
			if v.Ready || len(v.Failed) != 3 || v.Failed[0] != RuleMismatch || v.Failed[1] != RuleMissing || v.Failed[2] != RuleDuplicates {
				t.Fatalf("verdict %+v", v)
			}
		})
	}
}

// Several partitions per topic, keyed: watermarks are per partition and
// out-of-order is judged per left partition.
func TestCompareMultiPartition(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 4, left, right)
	g := generate(2000, base, true)
	produce(t, brokers, left, 4, g.left)
	produce(t, brokers, right, 4, g.right)
	snap := runComparison(t, genSpec(left, right, true), Options{Brokers: brokers})
	// Per partition, the swapped #400/#401 and the late #500 only disorder
	// pairs when their neighbours share their partitions, so compare
	// everything but OutOfOrder exactly, and OutOfOrder with what the core
	// computes for the same partitioned streams.
	want := g.want
	got := outcome(snap.Counters)
	gotOOO := got.OutOfOrder
	got.OutOfOrder, want.OutOfOrder = 0, 0
	if got != want {
		t.Fatalf("counts\n got %+v\nwant %+v", got, want)
	}
	cs, _ := compile(genSpec("L", "R", true))
	e := newCore(cs, Limits{}, [2][]int64{{0, 0, 0, 0}, {0, 0, 0, 0}}, [2][]int64{{-1, -1, -1, -1}, {-1, -1, -1, -1}}, [2][]int64{{0, 0, 0, 0}, {0, 0, 0, 0}})
	var offs [2][4]int64
	for s, recs := range [2][]genRecord{g.left, g.right} {
		for _, r := range recs {
			p := partitionOf(r.key, 4)
			e.add(s, p, offs[s][p], r.ts.UnixMilli(), r.key, r.value, nil)
			offs[s][p]++
		}
	}
	for s := range 2 {
		for p := range 4 {
			e.sides[s].parts[p].end = offs[s][p]
		}
	}
	e.expire()
	if e.c.OutOfOrder != gotOOO || gotOOO == 0 {
		t.Fatalf("out of order %d, the core alone says %d", gotOOO, e.c.OutOfOrder)
	}
	checkIdentity(t, snap.Counters)
}

func openTestStore(t testing.TB) *Store {
	t.Helper()
	db, err := consoledb.Open(context.Background(), filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := OpenStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// crashingCheckpointer passes saves through until told to "crash", after
// which saves are silently lost, like a process killed after its last save.
type crashingCheckpointer struct {
	Checkpointer
	crashed atomic.Bool
	saves   atomic.Int64
}

func (c *crashingCheckpointer) SaveCheckpoint(ctx context.Context, cp *Checkpoint) error {
	if c.crashed.Load() {
		return nil
	}
	c.saves.Add(1)
	return c.Checkpointer.SaveCheckpoint(ctx, cp)
}

// Restart mid-comparison: stop (gracefully, or by losing everything after
// a checkpoint) part-way, resume from the SQLite checkpoint: the final
// counts and the stored differences are the same as without the restart.
func TestCompareRestartResumes(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	g := generate(3000, base, false)
	produce(t, brokers, left, 1, g.left)
	produce(t, brokers, right, 1, g.right)
	spec := genSpec(left, right, false)
	store := openTestStore(t)

	// The reference: one uninterrupted run.
	refID, err := store.Create(context.Background(), "ref", spec, "test")
	if err != nil {
		t.Fatal(err)
	}
	ref := runComparison(t, spec, Options{Brokers: brokers, Checkpointer: store.Checkpointer(refID, 1)})
	refDiffs, refTotal, err := store.Differences(context.Background(), refID, DiffQuery{Limit: 1000})
	if err != nil || refTotal != 8 { // 1 mismatch, 2+2 missing, 1 duplicate, 2 out of order
		t.Fatalf("reference differences: %d, %v", refTotal, err)
	}

	for _, crash := range []bool{false, true} {
		id, err := store.Create(context.Background(), "restarted", spec, "test")
		if err != nil {
			t.Fatal(err)
		}
		ck := &crashingCheckpointer{Checkpointer: store.Checkpointer(id, 1)}
		cmp, err := New(spec, Options{Brokers: brokers, Checkpointer: ck, CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cmp.pollRecords = 100
		ctx, cancel := context.WithCancel(context.Background())
		// Save once about a tenth of the way, stop about a third of the
		// way. In the crash case nothing after that save survives, so
		// the second run redoes the records between the two.
		var savedAt int64
		cmp.testAfterBatch = func(e *core) {
			c := e.counters()
			if savedAt == 0 && c.Compared() > 300 {
				if err := cmp.save(context.Background(), e, false); err != nil {
					t.Error(err)
				}
				savedAt = c.Compared()
			}
			if c.Compared() > 900 && savedAt > 0 {
				if crash {
					ck.crashed.Store(true)
				}
				cancel()
			}
		}
		snap, err := cmp.Run(ctx)
		cancel()
		if err == nil || snap.Done || savedAt == 0 {
			t.Fatalf("crash=%v: first run was not interrupted (err %v, saved at %d)", crash, err, savedAt)
		}
		if st, _ := store.Get(context.Background(), id); crash && st.Snapshot.Counters.Compared() != savedAt {
			t.Fatalf("crash=%v: the surviving checkpoint has %d pairs, want the one saved at %d", crash, st.Snapshot.Counters.Compared(), savedAt)
		}
		if snap.Counters.Compared() >= int64(len(g.left))-10 {
			t.Fatalf("crash=%v: interrupted too late: %+v", crash, snap.Counters)
		}
		// Resume with a fresh Comparison and the same store.
		final := runComparison(t, spec, Options{Brokers: brokers, Checkpointer: store.Checkpointer(id, 1)})
		if outcome(final.Counters) != outcome(ref.Counters) || outcome(final.Counters) != g.want {
			t.Fatalf("crash=%v: after restart\n got %+v\nwant %+v", crash, final.Counters, ref.Counters)
		}
		if final.Skew != ref.Skew {
			t.Fatalf("crash=%v: skew %+v, want %+v", crash, final.Skew, ref.Skew)
		}
		diffs, total, err := store.Differences(context.Background(), id, DiffQuery{Limit: 1000})
		if err != nil || total != refTotal {
			t.Fatalf("crash=%v: %d stored differences, want %d (%v)", crash, total, refTotal, err)
		}
		// Discovery order across kinds depends on how reads interleave;
		// within a kind it does not.
		bySeq := func(ds []Difference) {
			sort.Slice(ds, func(a, b int) bool {
				if ds[a].Kind != ds[b].Kind {
					return ds[a].Kind < ds[b].Kind
				}
				return ds[a].Seq < ds[b].Seq
			})
		}
		bySeq(diffs)
		bySeq(refDiffs)
		for i := range diffs {
			if diffs[i].Kind != refDiffs[i].Kind || diffs[i].Key != refDiffs[i].Key || diffs[i].Seq != refDiffs[i].Seq {
				t.Fatalf("crash=%v: difference %d is %s %s #%d, want %s %s #%d", crash, i,
					diffs[i].Kind, diffs[i].Key, diffs[i].Seq, refDiffs[i].Kind, refDiffs[i].Key, refDiffs[i].Seq)
			}
		}
		st, err := store.Get(context.Background(), id)
		if err != nil || st.State != StateFinished || st.Snapshot == nil || outcome(st.Snapshot.Counters) != g.want {
			t.Fatalf("crash=%v: stored %+v %v", crash, st, err)
		}
	}
}

// A continuous comparison follows records as they are produced and
// expires partners by the wall clock once both sides are idle.
func TestCompareContinuous(t *testing.T) {
	testutil.Heavy(t, "a comparison running over time, 3 s")
	brokers := testBrokers(t)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	spec := DefaultSpec()
	spec.Left, spec.Right = left, right
	spec.Bounded = false
	spec.Start = "latest"
	spec.Window = Duration(300 * time.Millisecond)
	cmp, err := New(spec, Options{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := cmp.Run(ctx); done <- err }()
	// Wait until the comparison has resolved its start offsets.
	deadline := time.Now().Add(15 * time.Second)
	for cmp.Snapshot().Taken.IsZero() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	now := time.Now()
	var l, r []genRecord
	for i := 0; i < 50; i++ {
		v := []byte(fmt.Sprintf(`{"n":%d}`, i))
		l = append(l, genRecord{key: []byte(orderID(i)), value: v, ts: now})
		if i != 7 {
			r = append(r, genRecord{key: []byte(orderID(i)), value: v, ts: now})
		}
	}
	produce(t, brokers, left, 1, l)
	produce(t, brokers, right, 1, r)
	for {
		c := cmp.Snapshot().Counters
		if c.Matched == 49 && c.MissingRight == 1 && c.PendingLeft == 0 {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("continuous comparison stuck at %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("continuous run ended by itself")
	}
}

func TestPreview(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	g := generate(300, base, true)
	produce(t, brokers, left, 1, g.left)
	produce(t, brokers, right, 1, g.right)
	spec := genSpec(left, right, true)
	res, err := Preview(context.Background(), Options{Brokers: brokers}, spec, 150)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pairs) != 150 {
		t.Fatalf("%d pairs", len(res.Pairs))
	}
	// The pair that differs comes first (#100's total differs), then the
	// equal pairs in order; the missing record #200 is listed.
	for i, p := range res.Pairs {
		want, key := true, i-1
		if i == 0 {
			want, key = false, 100
		} else if key >= 100 {
			key++
		}
		if p.Equal != want || p.Key != orderID(key) || p.Left == nil || p.Right == nil {
			t.Fatalf("pair %d: %+v", i, p)
		}
	}
	if f := res.Pairs[0].Fields; len(f) != 1 || f[0].Path != "order.total" {
		t.Fatalf("pair 100 fields %+v", f)
	}
	if len(res.Missing) == 0 || res.Missing[0].Kind != KindMissingRight || res.Missing[0].Key != orderID(200) {
		t.Fatalf("missing %+v", res.Missing)
	}
	if len(res.Paths) != 1 || res.Paths[0].Path != "processed_at" || res.Paths[0].Unmatched() || res.Paths[0].Matched != [2]int64{300, 300} {
		t.Fatalf("paths %+v", res.Paths)
	}
	// An ignore line one level off ("total" for order.total) matches no
	// value: the preview says so and suggests the differing path it most
	// likely meant.
	off := spec
	off.Ignore = []string{"processed_at", "total"}
	res2, err := Preview(context.Background(), Options{Brokers: brokers}, off, 20)
	if err != nil {
		t.Fatal(err)
	}
	if u := res2.UnmatchedPaths(); len(u) != 1 || u[0].Path != "total" || u[0].Role != "ignore" || len(u[0].Suggest) != 1 || u[0].Suggest[0] != "order.total" {
		t.Fatalf("unmatched paths %+v", res2.Paths)
	}
	// Twenty pairs: the difference, the 101st pair, is still the first.
	res, err = Preview(context.Background(), Options{Brokers: brokers}, spec, 20)
	if err != nil || len(res.Pairs) != 20 || res.Pairs[0].Key != orderID(100) || res.Pairs[0].Equal || res.Differing() != 1 {
		t.Fatalf("preview of 20: %v %+v", err, res.Pairs[:min(len(res.Pairs), 2)])
	}
	if _, err := Preview(context.Background(), Options{Brokers: brokers}, Spec{Left: left, Right: "nope-" + right}, 5); err == nil {
		t.Fatal("preview of a missing topic succeeded")
	}
}

// Start at a time: only records at or after it are read, on both sides.
func TestCompareStartAtTime(t *testing.T) {
	brokers := testBrokers(t)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var l, r []genRecord
	for i := 0; i < 10; i++ {
		ts := base.Add(time.Duration(i) * time.Second)
		l = append(l, genRecord{key: []byte(orderID(i)), value: []byte("same"), ts: ts})
		v := []byte("same")
		if i < 5 {
			v = []byte("different, but before the start")
		}
		r = append(r, genRecord{key: []byte(orderID(i)), value: v, ts: ts})
	}
	produce(t, brokers, left, 1, l)
	produce(t, brokers, right, 1, r)
	spec := DefaultSpec()
	spec.Left, spec.Right = left, right
	spec.Start = base.Add(5 * time.Second).Format(time.RFC3339Nano)
	snap := runComparison(t, spec, Options{Brokers: brokers})
	if c := snap.Counters; c.LeftRecords != 5 || c.RightRecords != 5 || c.Matched != 5 || c.Mismatched != 0 {
		t.Fatalf("%+v", c)
	}
	if !Evaluate(spec.Criteria, snap).Ready {
		t.Fatal("not ready")
	}
	// A start after every record: nothing to compare, not ready.
	spec.Start = strconv.FormatInt(base.Add(time.Minute).UnixMilli(), 10)
	snap = runComparison(t, spec, Options{Brokers: brokers})
	if c := snap.Counters; c.LeftRecords != 0 || Evaluate(spec.Criteria, snap).Ready {
		t.Fatalf("%+v", c)
	}
}

// A comparison reads read_committed: records of an aborted transaction on
// one side are not compared (a service that retried its transaction wrote
// them once for good), and the markers move the position past them.
func TestCompareReadsCommitted(t *testing.T) {
	brokers := testBrokers(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	left, right := uniqueTopic("ORDER"), uniqueTopic("ORDERNEW")
	createTopics(t, brokers, 1, left, right)
	g := generate(1000, base, true)
	produce(t, brokers, right, 1, g.right)

	// The left side: each of the first 50 records is first written in a
	// transaction that aborts, then all of them in one that commits.
	cl := newClient(t, brokers, kgo.TransactionalID(uniqueTopic("txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	write := func(recs []genRecord, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		batch := make([]*kgo.Record, 0, len(recs))
		for _, r := range recs {
			batch = append(batch, &kgo.Record{Topic: left, Partition: 0, Key: r.key, Value: r.value, Timestamp: r.ts, Headers: r.headers})
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	write(g.left[:50], kgo.TryAbort)
	write(g.left, kgo.TryCommit)

	snap := runComparison(t, genSpec(left, right, true), Options{Brokers: brokers})
	if got := outcome(snap.Counters); got != g.want {
		t.Fatalf("counts with an aborted transaction on the left\n got %+v\nwant %+v", got, g.want)
	}
}

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// txnSettings are the broker settings of the transaction tests: a small
// __transaction_state and __consumer_offsets, and a quick timeout sweep.
var txnSettings = []string{
	"transaction.state.log.num.partitions=3",
	"offsets.topic.num.partitions=3",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
}

func txnProducer(t *testing.T, n *node, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return n.Client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(20 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceTxn produces n records (values prefix-i) to partitions 0..parts-1
// in one transaction and ends it.
func produceTxn(t *testing.T, ctx context.Context, cl *kgo.Client, topic, prefix string, n, parts int, commit kgo.TransactionEndTry) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s-%d: %v", prefix, i, err)
		}
	}
	if err := cl.EndTransaction(ctx, commit); err != nil {
		t.Fatalf("end transaction %s: %v", prefix, err)
	}
}

// readAll consumes topic from the start until every partition reached
// the end offsets that ListOffsets gives for the isolation level.
func readAll(t *testing.T, ctx context.Context, n *node, topic string, committed bool) []string {
	t.Helper()
	return readAllWith(t, ctx, n.Client, topic, committed)
}

// readAllWith is readAll with the clients newClient makes (seeded with the
// broker to read from).
func readAllWith(t *testing.T, ctx context.Context, newClient func(...kgo.Opt) *kgo.Client, topic string, committed bool) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	adm := kadm.NewClient(newClient())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list offsets: %v %v", err, ends.Error())
	}
	if committed {
		// EndTxn answers once the commit is decided; the markers follow
		// (as in Kafka), and the last stable offset reaches the log's end
		// once they are written.
		testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			logEnds, err := adm.ListEndOffsets(ctx, topic)
			if err != nil || logEnds.Error() != nil {
				return fmt.Errorf("list offsets: %v %v", err, logEnds.Error())
			}
			stable, err := adm.ListCommittedOffsets(ctx, topic)
			if err != nil || stable.Error() != nil {
				return fmt.Errorf("list offsets: %v %v", err, stable.Error())
			}
			for _, o := range logEnds[topic] {
				if so, _ := stable.Lookup(topic, o.Partition); so.Offset != o.Offset {
					return fmt.Errorf("partition %d: last stable offset %d, log end %d", o.Partition, so.Offset, o.Offset)
				}
			}
			ends = stable
			return nil
		})
	}
	// Control records are kept so that the position passes the markers
	// (an aborted transaction's last offset is its marker); they are not
	// part of the answer.
	cl := newClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	pos := map[int32]int64{}
	done := func() bool {
		for _, o := range ends[topic] {
			if pos[o.Partition] < o.Offset {
				return false
			}
		}
		return true
	}
	var out []string
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s (committed %v): got %d records, positions %v, ends %v", topic, committed, len(out), pos, ends)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = max(pos[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, string(r.Value))
			}
		})
	}
	return out
}

func count(vals []string, prefix string) int {
	n := 0
	for _, v := range vals {
		if len(v) > len(prefix) && v[:len(prefix)+1] == prefix+"-" {
			n++
		}
	}
	return n
}

// A committed transaction is visible to read_committed consumers, an aborted
// one only to read_uncommitted ones; the log holds the markers.
func TestTxnCommitAndAbort(t *testing.T) {
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 3, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(t, n, "t1")
	produceTxn(t, ctx, p, "tx", "c1", 30, 3, kgo.TryCommit)
	produceTxn(t, ctx, p, "tx", "a1", 12, 3, kgo.TryAbort)
	produceTxn(t, ctx, p, "tx", "c2", 9, 3, kgo.TryCommit)

	committed := readAll(t, ctx, n, "tx", true)
	if len(committed) != 39 || count(committed, "c1") != 30 || count(committed, "c2") != 9 || count(committed, "a1") != 0 {
		t.Fatalf("read_committed saw %d records: c1 %d, c2 %d, a1 %d", len(committed), count(committed, "c1"), count(committed, "c2"), count(committed, "a1"))
	}
	all := readAll(t, ctx, n, "tx", false)
	if count(all, "a1") != 12 || count(all, "c1") != 30 || count(all, "c2") != 9 {
		t.Fatalf("read_uncommitted saw c1 %d a1 %d c2 %d", count(all, "c1"), count(all, "a1"), count(all, "c2"))
	}
	// Each partition: 10+4+3 records and 3 markers; the LSO is the end.
	ends, _ := n.Admin().ListEndOffsets(ctx, "tx")
	lsos, _ := n.Admin().ListCommittedOffsets(ctx, "tx")
	for _, o := range ends["tx"] {
		if o.Offset != 20 || lsos["tx"][o.Partition].Offset != 20 {
			t.Fatalf("partition %d: end %d, LSO %d, want 20 and 20", o.Partition, o.Offset, lsos["tx"][o.Partition].Offset)
		}
	}
	// The coordinator's view.
	dt, err := n.Admin().DescribeTransactions(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if d := dt["t1"]; d.State != "CompleteCommit" || d.Err != nil {
		t.Fatalf("describe: %+v", d)
	}
}

// A read_committed consumer is held at the LSO behind an open transaction;
// ListOffsets latest answers the LSO; the commit releases both.
func TestTxnReadCommittedHeldAtLSO(t *testing.T) {
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 60*time.Second)
	adm := n.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "held"); err != nil {
		t.Fatal(err)
	}
	plain := n.Client(kgo.DefaultProduceTopic("held"))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(t, n, "held-1")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "held", Value: fmt.Appendf(nil, "in-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Plain records after the open transaction are held back too.
	if err := plain.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lso, _ := adm.ListCommittedOffsets(ctx, "held")
	hw, _ := adm.ListEndOffsets(ctx, "held")
	if lso["held"][0].Offset != 1 || hw["held"][0].Offset != 5 {
		t.Fatalf("LSO %d, HW %d; want 1 and 5", lso["held"][0].Offset, hw["held"][0].Offset)
	}
	c := n.Client(kgo.ConsumeTopics("held"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var got []string
	pollFor := func(d time.Duration) {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		for pctx.Err() == nil {
			fs := c.PollFetches(pctx)
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
	}
	pollFor(time.Second)
	if len(got) != 1 || got[0] != "before" {
		t.Fatalf("read_committed behind an open transaction saw %q, want [before]", got)
	}
	// The coordinator's metrics show the open transaction's age.
	if age := txnMetric(t, n, "sluice_broker_transaction_oldest_open_seconds"); age < 1 {
		t.Fatalf("oldest open transaction %v s old after a second's poll", age)
	}
	if open := txnMetric(t, n, "sluice_broker_transactions_open"); open != 1 {
		t.Fatalf("%v transactions open", open)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if c := txnMetric(t, n, "sluice_broker_transactions_committed_total"); c != 1 {
			return fmt.Errorf("%v transactions committed", c)
		}
		if age := txnMetric(t, n, "sluice_broker_transaction_oldest_open_seconds"); age != 0 {
			return fmt.Errorf("oldest open transaction %v s old after the commit", age)
		}
		return nil
	})
	testutil.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		pollFor(200 * time.Millisecond)
		if len(got) != 5 {
			return fmt.Errorf("saw %q", got)
		}
		return nil
	})
	if want := []string{"before", "in-0", "in-1", "in-2", "after"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("saw %q, want %q", got, want)
	}
}

// A second producer with the same transactional id fences the first: its
// produce and its commit are refused, and nothing it sent after the fence
// becomes visible.
func TestTxnZombieFencing(t *testing.T) {
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "z"); err != nil {
		t.Fatal(err)
	}
	old := txnProducer(t, n, "zombie")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "z", Value: []byte("old-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The new producer's InitProducerId aborts old's transaction and bumps
	// the epoch.
	nw := txnProducer(t, n, "zombie")
	produceTxn(t, ctx, nw, "z", "new", 2, 1, kgo.TryCommit)

	err := old.ProduceSync(ctx, &kgo.Record{Topic: "z", Value: []byte("old-2")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer got %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	got := readAll(t, ctx, n, "z", true)
	if fmt.Sprint(got) != "[new-0 new-1]" {
		t.Fatalf("read_committed saw %q", got)
	}
}

// A transaction left open past its transaction.timeout.ms is aborted by the
// coordinator: the LSO moves on and its records stay invisible.
func TestTxnTimeoutAborts(t *testing.T) {
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 60*time.Second)
	adm := n.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "to"); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(t, n, "slow", kgo.TransactionTimeout(500*time.Millisecond))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "to", Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		lso, err := adm.ListCommittedOffsets(ctx, "to")
		if err != nil {
			return err
		}
		if lso["to"][0].Offset != 2 { // the record and the abort marker
			return fmt.Errorf("LSO %d", lso["to"][0].Offset)
		}
		return nil
	})
	dt, err := adm.DescribeTransactions(ctx, "slow")
	if err != nil || dt["slow"].State != "CompleteAbort" {
		t.Fatalf("describe: %+v %v", dt["slow"], err)
	}
	if got := readAll(t, ctx, n, "to", true); len(got) != 0 {
		t.Fatalf("read_committed saw %q", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("committing a transaction aborted by its timeout succeeded")
	}
	// The abort is counted once CompleteAbort is stored.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		for name, want := range map[string]float64{
			"sluice_broker_transactions_timed_out_total":    1,
			"sluice_broker_transactions_aborted_total":      1,
			"sluice_broker_transactions_committed_total":    0,
			"sluice_broker_transaction_oldest_open_seconds": 0,
		} {
			if got := txnMetric(t, n, name); got != want {
				return fmt.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		return nil
	})
}

// txnMetric is the value of a transaction coordinator metric of node n
// (label broker = its id), read as a scrape would.
func txnMetric(t *testing.T, n *node, name string) float64 {
	t.Helper()
	fams, err := n.App().Metrics().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	v, ok := testutil.MetricSum(byName, name, map[string]string{"broker": fmt.Sprint(n.ID())})
	if !ok {
		t.Fatalf("no series %s{broker=%d}", name, n.ID())
	}
	return v
}

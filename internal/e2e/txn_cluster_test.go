package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// Three brokers on ZooKeeper, __transaction_state replicated on all
// three. The broker coordinating a transactional id is stopped in the
// middle of a transaction over three partitions; the producer then ends
// the transaction against the broker that took over the id's
// __transaction_state partition (it loads the Ongoing transaction from the
// replicated log): a commit makes every record visible to read_committed
// consumers, an abort none of them.
func TestTxnCoordinatorFailoverZooKeeper(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three brokers")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings(append([]string{
			"transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
			"offsets.topic.replication.factor=3", "default.replication.factor=3", "min.insync.replicas=2",
		}, txnSettings...)...))
	ctx := ctxFor(t, 3*time.Minute)
	c.CreateTopic("cf", 3, 3, nil)
	byID := map[int32]*testcluster.Node{}
	for _, n := range c.Nodes() {
		byID[n.ID()] = n
	}

	for _, tc := range []struct {
		id     string
		commit kgo.TransactionEndTry
	}{
		{"cf-commit", kgo.TryCommit},
		{"cf-abort", kgo.TryAbort},
	} {
		adm := kadm.NewClient(c.Client())
		p := c.Client(kgo.TransactionalID(tc.id), kgo.TransactionTimeout(time.Minute),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(time.Minute))
		produceTxn(t, ctx, p, "cf", tc.id+"-before", 3, 3, kgo.TryCommit)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			r := &kgo.Record{Topic: "cf", Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s-in-%d", tc.id, i)}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		dt, err := adm.DescribeTransactions(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		d := dt[tc.id]
		if d.State != "Ongoing" || len(d.Topics["cf"]) != 3 {
			t.Fatalf("%s before the failover: %+v", tc.id, d)
		}
		old := byID[d.Coordinator]
		if old == nil {
			t.Fatalf("%s: coordinator %d is not a broker of the cluster", tc.id, d.Coordinator)
		}
		t.Logf("%s: stopping its coordinator, broker %d", tc.id, d.Coordinator)
		old.Stop()

		adm = kadm.NewClient(c.Client())
		testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			dt, err := adm.DescribeTransactions(ctx, tc.id)
			if err != nil {
				return err
			}
			if d := dt[tc.id]; d.Err != nil || d.Coordinator == old.ID() || d.State != "Ongoing" {
				return fmt.Errorf("%s after the failover: %+v, want Ongoing on another coordinator", tc.id, d)
			}
			return nil
		})
		if err := p.EndTransaction(ctx, tc.commit); err != nil {
			t.Fatalf("%s: ending the transaction on the new coordinator: %v", tc.id, err)
		}
		want := "CompleteAbort"
		if tc.commit == kgo.TryCommit {
			want = "CompleteCommit"
		}
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			dt, err := adm.DescribeTransactions(ctx, tc.id)
			if err != nil {
				return err
			}
			if s := dt[tc.id].State; s != want {
				return fmt.Errorf("%s: state %q, want %q", tc.id, s, want)
			}
			return nil
		})
		committed := readAllWith(t, ctx, c.Client, "cf", true)
		wantN := 0
		if tc.commit == kgo.TryCommit {
			wantN = 6
		}
		if got := count(committed, tc.id+"-in"); got != wantN || count(committed, tc.id+"-before") != 3 {
			t.Fatalf("%s: read_committed saw %d of the transaction's 6 records, want %d: %q", tc.id, got, wantN, committed)
		}
		if all := readAllWith(t, ctx, c.Client, "cf", false); count(all, tc.id+"-in") != 6 {
			t.Fatalf("%s: read_uncommitted saw %q", tc.id, all)
		}
		old.Start()
	}
}

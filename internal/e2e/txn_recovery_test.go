package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/storage"
)

// procClient returns a franz-go client of the broker at addr, closed when
// the test ends.
func procClient(t *testing.T, addr string) func(...kgo.Opt) *kgo.Client {
	return func(opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
}

// procTxnSettings are txnSettings as `sluice serve` overrides.
func procTxnSettings(extra ...string) []string {
	return append(slices.Clone(txnSettings), extra...)
}

// lsoAndEnd returns the last stable offset and the log end offset of
// topic's partition 0.
func lsoAndEnd(ctx context.Context, adm *kadm.Client, topic string) (int64, int64, error) {
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return 0, 0, err
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return 0, 0, err
	}
	l, _ := lso.Lookup(topic, 0)
	e, _ := end.Lookup(topic, 0)
	return l.Offset, e.Offset, nil
}

// readToLSO reads partition 0 of topic read_committed from the start up to
// its last stable offset, which an open transaction may hold below the log
// end, and returns the values of the records (control records left out).
func readToLSO(t *testing.T, ctx context.Context, newClient func(...kgo.Opt) *kgo.Client, topic string) []string {
	t.Helper()
	lso, _, err := lsoAndEnd(ctx, kadm.NewClient(newClient()), topic)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	var out []string
	for pos := int64(0); pos < lso; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed %s-0 to %d: at %d, %q", topic, lso, pos, out)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, string(r.Value))
			}
		})
	}
	// Nothing past the LSO comes while the transaction stays open.
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			out = append(out, string(r.Value))
		}
	})
	return out
}

// The broker process is killed with SIGKILL while a transaction is open
// and started again on the same data. After the restart the coordinator
// has reloaded __transaction_state and the partition its producer state:
//   - "timeout": the transaction outlives its transaction.timeout.ms and
//     the coordinator aborts it;
//   - "fenced": the transaction is still open (Ongoing, the LSO held at
//     its first offset), and a new producer with the same transactional.id
//     fences the old one, which aborts it, and commits a transaction of
//     its own.
//
// Either way read_committed consumers never see the open transaction's
// records (read_uncommitted ones do), and the old producer's commit fails.
func TestTxnKill9MidTransaction(t *testing.T) {
	testutil.Heavy(t, "sluice serve killed with SIGKILL")
	for _, mode := range []string{"timeout", "fenced"} {
		t.Run(mode, func(t *testing.T) {
			dir, addr := t.TempDir(), testutil.FreeAddr(t)
			settings := procTxnSettings()
			p := startProc(t, dir, addr, settings...)
			newClient := procClient(t, addr)
			ctx := ctxFor(t, 2*time.Minute)
			adm := kadm.NewClient(newClient())
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "k9"); err != nil {
				t.Fatal(err)
			}
			timeout := time.Minute
			if mode == "timeout" {
				timeout = 3 * time.Second
			}
			old := newClient(kgo.TransactionalID("k9-writer"), kgo.TransactionTimeout(timeout),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(20*time.Second))
			produceTxn(t, ctx, old, "k9", "first", 2, 1, kgo.TryCommit) // offsets 0, 1, the marker at 2
			if err := old.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for i := range 3 { // offsets 3, 4, 5
				if err := old.ProduceSync(ctx, &kgo.Record{Topic: "k9", Value: fmt.Appendf(nil, "open-%d", i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if code, _ := p.signal(syscall.SIGKILL, 10*time.Second); code != -1 {
				t.Fatalf("exit code %d after SIGKILL", code)
			}
			startProc(t, dir, addr, settings...)

			switch mode {
			case "timeout":
				testutil.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
					dt, err := adm.DescribeTransactions(ctx, "k9-writer")
					if err != nil {
						return err
					}
					if s := dt["k9-writer"].State; s != "CompleteAbort" {
						return fmt.Errorf("state %q, want CompleteAbort (aborted by its timeout)", s)
					}
					return nil
				})
			case "fenced":
				testutil.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
					dt, err := adm.DescribeTransactions(ctx, "k9-writer")
					if err != nil {
						return err
					}
					if d := dt["k9-writer"]; d.State != "Ongoing" || !d.Topics.Lookup("k9", 0) {
						return fmt.Errorf("after the restart: %+v, want Ongoing on k9-0", d)
					}
					return nil
				})
				if lso, end, err := lsoAndEnd(ctx, adm, "k9"); err != nil || lso != 3 || end != 6 {
					t.Fatalf("after the restart: LSO %d, log end %d (%v); want 3 and 6", lso, end, err)
				}
				if got := readToLSO(t, ctx, newClient, "k9"); len(got) != 2 {
					t.Fatalf("read_committed saw %q while the transaction is open", got)
				}
				fresh := newClient(kgo.TransactionalID("k9-writer"), kgo.TransactionTimeout(time.Minute),
					kgo.RecordPartitioner(kgo.ManualPartitioner()))
				produceTxn(t, ctx, fresh, "k9", "second", 1, 1, kgo.TryCommit)
			}
			// The open transaction ended with an abort marker.
			testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
				lso, end, err := lsoAndEnd(ctx, adm, "k9")
				if err != nil {
					return err
				}
				if want := int64(7); mode == "fenced" {
					want = 9 // the new producer's record and commit marker
					if lso != want || end != want {
						return fmt.Errorf("LSO %d, log end %d; want %d", lso, end, want)
					}
				} else if lso != want || end != want {
					return fmt.Errorf("LSO %d, log end %d; want %d", lso, end, want)
				}
				return nil
			})
			if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
				t.Fatal("the old producer committed the transaction the crash left open")
			}
			committed := readAllWith(t, ctx, newClient, "k9", true)
			all := readAllWith(t, ctx, newClient, "k9", false)
			if count(committed, "open") != 0 || count(committed, "first") != 2 || count(all, "open") != 3 {
				t.Fatalf("read_committed saw %q, read_uncommitted %q", committed, all)
			}
			if mode == "fenced" && count(committed, "second") != 1 {
				t.Fatalf("read_committed saw %q, without the new producer's record", committed)
			}
		})
	}
}

// A partition's .txnindex deleted, or overwritten with bytes that are not
// Kafka's entries, while the broker is stopped is rebuilt from the log's
// abort markers when it starts: read_committed consumers still drop the
// aborted transactions, and the file holds Kafka's 34-byte entries again.
func TestTxnIndexRebuiltOnRestart(t *testing.T) {
	testutil.Heavy(t, "broker restarts")
	n := startNode(t, txnSettings...)
	ctx := ctxFor(t, 90*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "ti"); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(t, n, "ti-writer")
	produceTxn(t, ctx, p, "ti", "kept", 3, 1, kgo.TryCommit)
	produceTxn(t, ctx, p, "ti", "dropped", 2, 1, kgo.TryAbort)
	produceTxn(t, ctx, p, "ti", "kept2", 1, 1, kgo.TryCommit)
	produceTxn(t, ctx, p, "ti", "dropped2", 2, 1, kgo.TryAbort)
	check := func(when string) {
		t.Helper()
		got := readAll(t, ctx, n, "ti", true)
		if count(got, "dropped") != 0 || count(got, "dropped2") != 0 || count(got, "kept") != 3 || count(got, "kept2") != 1 {
			t.Fatalf("%s: read_committed saw %q", when, got)
		}
		if all := readAll(t, ctx, n, "ti", false); count(all, "dropped")+count(all, "dropped2") != 4 {
			t.Fatalf("%s: read_uncommitted saw %q", when, all)
		}
	}
	check("before the restarts")
	dir := filepath.Join(n.LogDir(), "ti-0")
	indexes := func() []string {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "*.txnindex"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no .txnindex in %s (%v)", dir, err)
		}
		return files
	}
	want, err := os.ReadFile(indexes()[0])
	if err != nil {
		t.Fatal(err)
	}
	if es, err := storage.DecodeTxnIndex(want); err != nil || len(es) != 2 {
		t.Fatalf("the .txnindex before the restarts: %v %v", es, err)
	}
	for _, damage := range []string{"deleted", "corrupted", "wrong version"} {
		n.Stop()
		for _, f := range indexes() {
			var err error
			switch damage {
			case "deleted":
				err = os.Remove(f)
			case "corrupted":
				err = os.WriteFile(f, []byte("not a transaction index"), 0o644)
			case "wrong version":
				b := slices.Clone(want)
				b[0], b[1] = 0x7f, 0x7f
				err = os.WriteFile(f, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		n.Start()
		check("after a restart with the .txnindex " + damage)
		got, err := os.ReadFile(indexes()[0])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			es, err := storage.DecodeTxnIndex(got)
			t.Fatalf("the .txnindex rebuilt after it was %s: %d bytes, %v %v; want the %d bytes written before", damage, len(got), es, err, len(want))
		}
	}
}

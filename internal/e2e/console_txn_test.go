package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

// TestConsoleTransactionsAndLastStableOffset: the console (package web;
// the test lives here because an in-process broker links the appliance,
// whose registrations change package web's own tests) over real franz-go
// transactional producers against an in-process Sluice broker: one
// transaction left open on partition 0, another committed on partition 1. The Transactions page
// (reached from the navigation by a viewer) lists both ids with their
// state, producer id and epoch, the open one's age, timeout and partition,
// filters by state and refuses an unknown state; the topic page shows
// partition 0's last stable offset behind its high watermark with the
// records held in the open transaction, and both meet once it commits.
func TestConsoleTransactionsAndLastStableOffset(t *testing.T) {
	consoledb.BcryptCost = bcrypt.MinCost
	c := testcluster.New(t)
	c.CreateTopic("payments", 2, 1, nil)
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Brokers: c.Addrs(), Logger: webtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	producer := func(id string) *kgo.Client {
		cl := c.Client(kgo.TransactionalID(id), kgo.TransactionTimeout(90*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("payments"))
		t.Cleanup(cl.Close)
		return cl
	}
	send := func(cl *kgo.Client, partition int32, n int) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: partition, Value: []byte(fmt.Sprintf("pay %d", i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	open := producer("pay-open")
	send(open, 0, 3)
	done := producer("pay-done")
	send(done, 1, 2)
	if err := done.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	v := webtest.NewClient(t, srv.App())
	if _, err := srv.Store().CreateUser(context.Background(), "vic", web.RoleViewer, "password-1"); err != nil {
		t.Fatal(err)
	}
	v.SignIn("vic", "password-1")
	webtest.ExpectContains(t, v.Get("/topics"), `href="/transactions"`)

	var r webtest.Response
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		r = v.Get("/transactions")
		if !strings.Contains(r.Text, "CompleteCommit") {
			return fmt.Errorf("the committed transaction is not complete yet: %s", webtest.Snippet(r.Text))
		}
		return nil
	})
	webtest.ExpectStatus(t, r, http.StatusOK)
	webtest.ExpectContains(t, r, "1 open transaction", "pay-open", "pay-done", "Ongoing", `href="/topics/payments"`, "/0", "1 min 30 s")
	row := txnRow(t, r.Text, "pay-open")
	if !strings.Contains(row, "Ongoing") || !strings.Contains(row, "payments") || !strings.Contains(row, "since") || strings.Contains(row, "hanging") {
		t.Fatalf("open transaction's row: %s", row)
	}
	if strings.Contains(txnRow(t, r.Text, "pay-done"), "since") {
		t.Fatalf("the committed transaction shows an age: %s", txnRow(t, r.Text, "pay-done"))
	}

	// JSON: producer ids and epochs as the coordinator gave them.
	var js struct {
		Transactions []struct {
			ID         string `json:"transactional_id"`
			State      string `json:"state"`
			ProducerID int64  `json:"producer_id"`
			Epoch      int16  `json:"producer_epoch"`
			TimeoutMS  int64  `json:"timeout_ms"`
			Hanging    bool   `json:"hanging"`
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
			} `json:"partitions"`
		} `json:"transactions"`
		Open int `json:"open"`
	}
	webtest.ExpectStatus(t, v.GetJSON("/transactions", &js), http.StatusOK)
	if js.Open != 1 || len(js.Transactions) != 2 {
		t.Fatalf("transactions JSON: %+v", js)
	}
	first := js.Transactions[0] // the open one first
	if first.ID != "pay-open" || first.State != "Ongoing" || first.ProducerID < 0 || first.Epoch < 0 || first.TimeoutMS != 90000 || first.Hanging ||
		len(first.Partitions) != 1 || first.Partitions[0].Topic != "payments" || first.Partitions[0].Partition != 0 {
		t.Fatalf("open transaction JSON: %+v", first)
	}
	if pid, ok := producerIDs(open); ok && pid != first.ProducerID {
		t.Fatalf("page's producer id %d, the producer's %d", first.ProducerID, pid)
	}

	// The state filter.
	r = v.Get("/transactions?state=Ongoing")
	if !strings.Contains(r.Text, "pay-open") || strings.Contains(r.Text, "pay-done") {
		t.Fatalf("Ongoing filter: %s", webtest.Snippet(r.Text))
	}
	r = v.Get("/transactions?state=CompleteCommit")
	if strings.Contains(r.Text, "pay-open") || !strings.Contains(r.Text, "pay-done") {
		t.Fatalf("CompleteCommit filter: %s", webtest.Snippet(r.Text))
	}
	webtest.ExpectContains(t, v.Get("/transactions?hanging=1"), "No transaction matches")
	r = v.Get("/transactions?state=Bogus")
	webtest.ExpectStatus(t, r, http.StatusBadRequest)
	webtest.ExpectContains(t, r, "state must be one of")

	// The topic page: partition 0's last stable offset is held at the open
	// transaction's first record.
	r = v.Get("/topics/payments")
	webtest.ExpectContains(t, r, "Last stable offset", "3 records in open transactions", `id="lso-explained"`, "read_committed")
	var topic struct {
		Partitions []struct {
			Partition int32 `json:"partition"`
			End       int64 `json:"end_offset"`
			Stable    int64 `json:"last_stable_offset"`
		} `json:"partitions"`
	}
	v.GetJSON("/topics/payments", &topic)
	got := fmt.Sprint(topic.Partitions)
	if got != "[{0 3 0} {1 3 3}]" { // partition 1: two records and the commit marker
		t.Fatalf("partitions (partition, end, last stable): %s", got)
	}

	// It commits: the last stable offset meets the high watermark.
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		v.GetJSON("/topics/payments", &topic)
		if got := fmt.Sprint(topic.Partitions); got != "[{0 4 4} {1 3 3}]" {
			return fmt.Errorf("partitions after the commit: %s", got)
		}
		return nil
	})
	r = v.Get("/topics/payments")
	if strings.Contains(r.Text, "in open transactions") {
		t.Fatalf("the topic page still speaks of open transactions: %s", webtest.Snippet(r.Text))
	}
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		r = v.Get("/transactions")
		if !strings.Contains(r.Text, "0 open transactions") || strings.Contains(r.Text, "Ongoing</span>") {
			return fmt.Errorf("after the commit: %s", webtest.Snippet(r.Text))
		}
		return nil
	})
}

// txnRow is the transactions table's row of id.
func txnRow(t *testing.T, html, id string) string {
	t.Helper()
	i := strings.Index(html, `data-txn="`+id+`"`)
	if i < 0 {
		t.Fatalf("no row for %s: %s", id, webtest.Snippet(html))
	}
	j := strings.Index(html[i:], "</tr>")
	return html[i : i+j]
}

// producerIDs is the transactional producer's id, when the client reports
// it.
func producerIDs(cl *kgo.Client) (int64, bool) {
	id, _, err := cl.ProducerID(context.Background())
	return id, err == nil
}

// TestConsoleMessagesIsolation: the messages viewer over real franz-go
// transactional producers against an in-process Sluice broker. On one
// partition, interleaved: a transaction that commits (c0, c1), one that
// aborts (a0, a1), then one left open (o0). The default view reads
// read_committed: the committed records only. read_uncommitted shows every
// record and both markers, marking the aborted records, the open one and
// the control records (not decoded as values), on a full page, on a page
// that ends before the markers and on the newest-first page; a search
// marks what it finds; a bad isolation is refused.
func TestConsoleMessagesIsolation(t *testing.T) {
	consoledb.BcryptCost = bcrypt.MinCost
	c := testcluster.New(t)
	c.CreateTopic("ledger", 1, 1, nil)
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Brokers: c.Addrs(), Logger: webtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	producer := func(id string) *kgo.Client {
		cl := c.Client(kgo.TransactionalID(id), kgo.TransactionTimeout(90*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("ledger"))
		t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	send := func(cl *kgo.Client, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	committer, aborter := producer("ledger-commit"), producer("ledger-abort")
	send(committer, "c0")
	send(aborter, "a0")
	send(committer, "c1")
	send(aborter, "a1")
	// EndTxn answers before the coordinator's marker lands: wait for each
	// marker (the high watermark passes it), so the log's order is fixed.
	adm := kadm.NewClient(committer)
	markerAt := func(end int64) {
		t.Helper()
		testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			ends, err := adm.ListEndOffsets(ctx, "ledger")
			if err != nil {
				return err
			}
			if o, _ := ends.Lookup("ledger", 0); o.Offset != end {
				return fmt.Errorf("ledger-0 ends at %d, want %d", o.Offset, end)
			}
			return nil
		})
	}
	if err := committer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	markerAt(5)
	if err := aborter.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	markerAt(6)
	open := producer("ledger-open")
	send(open, "o0")

	v := webtest.NewClient(t, srv.App())
	if _, err := srv.Store().CreateUser(context.Background(), "vic", web.RoleViewer, "password-1"); err != nil {
		t.Fatal(err)
	}
	v.SignIn("vic", "password-1")
	type rec struct {
		Offset  int64   `json:"offset"`
		Value   *string `json:"value"`
		Control string  `json:"control"`
		Txn     string  `json:"transaction"`
	}
	read := func(query string) string {
		t.Helper()
		var js struct {
			Records []rec `json:"records"`
		}
		webtest.ExpectStatus(t, v.GetJSON("/topics/ledger/messages?"+query, &js), http.StatusOK)
		var out []string
		for _, r := range js.Records {
			s := fmt.Sprint(r.Offset, ":")
			switch {
			case r.Control != "":
				s += r.Control
				if r.Value != nil {
					t.Fatalf("a control record with a value: %+v", r)
				}
			case r.Value != nil:
				s += *r.Value
			}
			if r.Txn != "" {
				s += "(" + r.Txn + ")"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	full := "0:c0 1:a0(aborted) 2:c1 3:a1(aborted) 4:COMMIT 5:ABORT 6:o0(not yet committed)"
	if got := read("from=earliest&isolation=read_uncommitted"); got != full {
		t.Fatalf("read_uncommitted from earliest:\n got %s\nwant %s", got, full)
	}
	for q, want := range map[string]string{"from=earliest": "0:c0 2:c1", "from=latest": "2:c1 0:c0", "from=earliest&isolation=read_committed": "0:c0 2:c1"} {
		if got := read(q); got != want {
			t.Fatalf("%s: %s", q, got)
		}
	}
	for q, want := range map[string]string{
		// A page that ends before the markers: the read goes on to find them.
		"from=earliest&limit=2&isolation=read_uncommitted": "0:c0 1:a0(aborted)",
		// Newest first.
		"from=latest&limit=3&isolation=read_uncommitted":          "6:o0(not yet committed) 5:ABORT 4:COMMIT",
		"from=offset&offset=3&limit=1&isolation=read_uncommitted": "3:a1(aborted)",
		// A search shows matching records only, marked.
		"field=value&q=a&isolation=read_uncommitted": "1:a0(aborted) 3:a1(aborted)",
		"field=value&q=a": "",
	} {
		if got := read(q); got != want {
			t.Fatalf("%s:\n got %s\nwant %s", q, got, want)
		}
	}

	r := v.Get("/topics/ledger/messages?from=earliest&isolation=read_uncommitted")
	webtest.ExpectContains(t, r, `data-txn="aborted"`, `data-txn="not yet committed"`, `data-txn="commit-marker"`, `data-txn="abort-marker"`,
		">commit marker<", ">abort marker<", "Control record: ABORT marker of producer", `<option value="read_uncommitted" selected`)
	if n := strings.Count(r.Text, ">aborted<"); n != 2 {
		t.Fatalf("%d aborted badges, want 2", n)
	}
	r = v.Get("/topics/ledger/messages?from=earliest")
	webtest.ExpectLacks(t, r, ">a0<", ">o0<", "marker<", `data-txn="aborted"`)
	webtest.ExpectContains(t, r, ">c1<")
	r = v.Get("/topics/ledger/messages?isolation=dirty")
	webtest.ExpectContains(t, r, "isolation must be read_committed or read_uncommitted")
}

// TestConsoleAbortHangingTransaction: a franz-go transactional producer
// leaves a transaction open on two partitions past its timeout (the
// coordinator's abort sweep is slowed so that it hangs). The Transactions
// page shows each partition's LSO lag; an operator aborts the transaction
// from the page behind a confirmation that says what happens: ABORT
// markers land on both partitions, the last stable offset meets the high
// watermark, read_committed browsing never shows its records, and the
// abort is audited. A form for another producer epoch aborts nothing; a
// viewer is refused the page and the action and sees no Abort link.
func TestConsoleAbortHangingTransaction(t *testing.T) {
	testutil.Heavy(t, "waits for a transaction to hang, 2 s")
	consoledb.BcryptCost = bcrypt.MinCost
	c := testcluster.New(t, testcluster.Settings("transaction.abort.timed.out.transaction.cleanup.interval.ms=3600000"))
	c.CreateTopic("escrow", 2, 1, nil)
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Brokers: c.Addrs(), Logger: webtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stuck := c.Client(kgo.TransactionalID("escrow-stuck"), kgo.TransactionTimeout(1500*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("escrow"))
	t.Cleanup(stuck.Close)
	if err := stuck.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*kgo.Record{{Partition: 0, Value: []byte("held-0")}, {Partition: 0, Value: []byte("held-1")}, {Partition: 1, Value: []byte("held-2")}} {
		if err := stuck.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	plain := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("escrow"))
	t.Cleanup(plain.Close)
	if err := plain.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for _, u := range []struct {
		name string
		role web.Role
	}{{"vic", web.RoleViewer}, {"olga", web.RoleOperator}} {
		if _, err := srv.Store().CreateUser(context.Background(), u.name, u.role, "password-1"); err != nil {
			t.Fatal(err)
		}
	}
	o := webtest.NewClient(t, srv.App())
	o.SignIn("olga", "password-1")
	var r webtest.Response
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		r = o.Get("/transactions")
		if !strings.Contains(txnRow(t, r.Text, "escrow-stuck"), ">hanging<") {
			return fmt.Errorf("not hanging yet: %s", webtest.Snippet(r.Text))
		}
		return nil
	})
	row := txnRow(t, r.Text, "escrow-stuck")
	for _, want := range []string{`href="/transactions/escrow-stuck/abort"`, "escrow</a>/0 (LSO lag 3)", "escrow</a>/1 (LSO lag 1)"} {
		if !strings.Contains(row, want) {
			t.Fatalf("row lacks %q: %s", want, row)
		}
	}
	var js struct {
		Transactions []struct {
			ID         string `json:"transactional_id"`
			ProducerID int64  `json:"producer_id"`
			Epoch      int16  `json:"producer_epoch"`
			Partitions []struct {
				Partition int32  `json:"partition"`
				Lag       *int64 `json:"lso_lag"`
			} `json:"partitions"`
		} `json:"transactions"`
	}
	o.GetJSON("/transactions", &js)
	if len(js.Transactions) != 1 || len(js.Transactions[0].Partitions) != 2 || js.Transactions[0].Partitions[0].Lag == nil || *js.Transactions[0].Partitions[0].Lag != 3 {
		t.Fatalf("transactions JSON: %+v", js)
	}
	tx := js.Transactions[0]

	// A viewer: no Abort link, and refused the page and the action.
	v := webtest.NewClient(t, srv.App())
	v.SignIn("vic", "password-1")
	webtest.ExpectLacks(t, v.Get("/transactions"), "/transactions/escrow-stuck/abort")
	webtest.ExpectStatus(t, v.Get("/transactions/escrow-stuck/abort"), http.StatusForbidden)
	webtest.ExpectStatus(t, v.Post("/transactions", "/transactions/escrow-stuck/abort",
		url.Values{"producer_id": {fmt.Sprint(tx.ProducerID)}, "producer_epoch": {fmt.Sprint(tx.Epoch)}}), http.StatusForbidden)

	lso := func() string {
		var topic struct {
			Partitions []struct {
				Partition int32 `json:"partition"`
				End       int64 `json:"end_offset"`
				Stable    int64 `json:"last_stable_offset"`
			} `json:"partitions"`
		}
		o.GetJSON("/topics/escrow", &topic)
		return fmt.Sprint(topic.Partitions)
	}
	if got := lso(); got != "[{0 3 0} {1 1 0}]" {
		t.Fatalf("before the abort (partition, end, last stable): %s", got)
	}

	// The confirmation page says what happens.
	r = o.Get("/transactions/escrow-stuck/abort")
	webtest.ExpectStatus(t, r, http.StatusOK)
	webtest.ExpectContains(t, r, "invisible to read_committed consumers for good", "ABORT marker", "escrow</a>/0 (LSO lag 3)", `name="producer_epoch"`, "Abort transaction escrow-stuck")

	// A form for another epoch aborts nothing.
	r = o.Post("/transactions/escrow-stuck/abort", "/transactions/escrow-stuck/abort",
		url.Values{"producer_id": {fmt.Sprint(tx.ProducerID)}, "producer_epoch": {fmt.Sprint(tx.Epoch + 1)}})
	webtest.ExpectStatus(t, r, http.StatusConflict)
	webtest.ExpectContains(t, r, "nothing was aborted")
	if got := lso(); got != "[{0 3 0} {1 1 0}]" {
		t.Fatalf("after a refused abort: %s", got)
	}

	r = o.Post("/transactions/escrow-stuck/abort", "/transactions/escrow-stuck/abort",
		url.Values{"producer_id": {fmt.Sprint(tx.ProducerID)}, "producer_epoch": {fmt.Sprint(tx.Epoch)}})
	webtest.ExpectStatus(t, r, http.StatusSeeOther)
	webtest.ExpectContains(t, o.Get("/transactions"), "ABORT markers written on escrow-0, escrow-1")
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		if got := lso(); got != "[{0 4 4} {1 2 2}]" { // the markers moved both ends
			return fmt.Errorf("after the abort (partition, end, last stable): %s", got)
		}
		return nil
	})
	var msgs struct {
		Records []struct {
			Value string `json:"value"`
		} `json:"records"`
	}
	o.GetJSON("/topics/escrow/messages?from=earliest", &msgs)
	if len(msgs.Records) != 1 || msgs.Records[0].Value != "after" {
		t.Fatalf("read_committed after the abort: %+v", msgs.Records)
	}
	es, _, err := srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "transaction.abort", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].User != "olga" || es[0].Target != "escrow-stuck" || es[0].Outcome != "ok" ||
		!strings.Contains(es[0].Detail, "aborted=escrow-0,escrow-1") {
		t.Fatalf("audit: %+v", es)
	}
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

// The console's operations that need a real Sluice cluster, in Chromium
// (here, not in package web: see TestLeaderElections).

// browserConsole starts a console on brokers with the users root (admin),
// olga (operator) and vic (viewer), all with password-1, and Chromium on
// it.
func browserConsole(t *testing.T, brokers []string) (*web.Server, *browsertest.Browser) {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Brokers: brokers, Logger: webtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]web.Role{"root": web.RoleAdmin, "olga": web.RoleOperator, "vic": web.RoleViewer} {
		if _, err := srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
			t.Fatal(err)
		}
	}
	return srv, browsertest.New(t, srv.URL())
}

// auditOf is the console's audit entries of action, newest first.
func auditOf(t *testing.T, srv *web.Server, action string) []consoledb.AuditEntry {
	t.Helper()
	es, _, err := srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: action, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// visitUntil opens path until its text contains want, for up to within.
func visitUntil(t *testing.T, b *browsertest.Browser, path, want string, within time.Duration) {
	t.Helper()
	testutil.CheckFor(t, within, 200*time.Millisecond, func() error {
		b.Visit(path)
		if !strings.Contains(b.PageText(), want) {
			return fmt.Errorf("%s does not show %q", path, want)
		}
		return nil
	})
}

// TestBrowserAbortTransaction: a transaction left open past its timeout
// (the coordinator's abort sweep slowed so that it hangs) is aborted by an
// operator from the Transactions page in Chromium, behind the page that
// says what aborting does: the last stable offsets meet the high
// watermarks on the broker and the abort is audited. Before that a viewer
// sees no Abort link, is refused the page, and its forged post (with its
// session's valid CSRF token) gets 403 and aborts nothing.
func TestBrowserAbortTransaction(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	c := testcluster.New(t, testcluster.Settings("transaction.abort.timed.out.transaction.cleanup.interval.ms=3600000"))
	c.CreateTopic("escrow", 2, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	adm := c.Admin()
	// offsets is each partition's high watermark and last stable offset.
	offsets := func() string {
		t.Helper()
		end, err := adm.ListEndOffsets(ctx, "escrow")
		if err != nil {
			t.Fatal(err)
		}
		stable, err := adm.ListCommittedOffsets(ctx, "escrow")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for p := int32(0); p < 2; p++ {
			e, _ := end.Lookup("escrow", p)
			s, _ := stable.Lookup("escrow", p)
			out = append(out, fmt.Sprintf("%d: end %d stable %d", p, e.Offset, s.Offset))
		}
		return strings.Join(out, ", ")
	}
	const held = "0: end 2 stable 0, 1: end 1 stable 0"
	if got := offsets(); got != held {
		t.Fatalf("with the transaction open: %s", got)
	}
	d, err := adm.DescribeTransactions(ctx, "escrow-stuck")
	if err != nil {
		t.Fatal(err)
	}
	txn := d["escrow-stuck"]
	srv, b := browserConsole(t, c.Addrs())
	defer b.PublishScreenshots()

	b.SignIn("vic", "password-1")
	visitUntil(t, b, "/transactions", "hanging", 20*time.Second)
	if n := b.Count(`a[href="/transactions/escrow-stuck/abort"]`); n != 0 {
		t.Fatalf("a viewer is offered %d Abort links", n)
	}
	if st := b.ForgedPost("/transactions/escrow-stuck/abort", map[string]string{
		"producer_id": fmt.Sprint(txn.ProducerID), "producer_epoch": fmt.Sprint(txn.ProducerEpoch),
	}); st != http.StatusForbidden {
		t.Fatalf("a viewer's abort: status %d, want 403", st)
	}
	b.Visit("/transactions/escrow-stuck/abort")
	b.WaitText("this needs operator")
	if got := offsets(); got != held {
		t.Fatalf("after the viewer's post: %s", got)
	}
	if es := auditOf(t, srv, "transaction.abort"); len(es) != 0 {
		t.Fatalf("the viewer's post was audited as an abort: %+v", es)
	}
	b.SignOut()

	b.SignIn("olga", "password-1")
	visitUntil(t, b, "/transactions", "hanging", 20*time.Second)
	b.Do("open the abort page", chromedp.Click(chromedp.CSS(`a[href="/transactions/escrow-stuck/abort"]`)))
	b.WaitText("invisible to read_committed consumers for good")
	b.Screenshot("transaction-abort")
	b.Do("abort", chromedp.Click(chromedp.CSS(`form[action="/transactions/escrow-stuck/abort"] button.danger`)))
	b.WaitText("ABORT markers written on escrow-0, escrow-1")
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		if got := offsets(); got != "0: end 3 stable 3, 1: end 2 stable 2" { // the markers moved both ends
			return fmt.Errorf("after the abort: %s", got)
		}
		return nil
	})
	if es := auditOf(t, srv, "transaction.abort"); len(es) != 1 || es[0].User != "olga" || es[0].Target != "escrow-stuck" || es[0].Outcome != "ok" ||
		!strings.Contains(es[0].Detail, "aborted=escrow-0,escrow-1") {
		t.Fatalf("audit: %+v", es)
	}
}

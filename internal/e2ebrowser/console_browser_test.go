package e2ebrowser

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
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

// TestBrowserLeaderElections runs both leader elections from a topic's
// elections page in Chromium on two brokers. A preferred election moves
// the leadership of a partition led by its second replica back to its
// first; an unclean election, for a partition whose leader is down and
// whose only live replica is out of sync, is offered behind a notice that
// says which records are lost and a box to tick (the form cannot be sent
// without it), and makes that replica the leader. Each is checked on the
// brokers and in the audit log. A viewer has no link to the page, is
// refused it, and its forged posts of either election (with its session's
// valid CSRF token) get 403 and move no leader.
func TestBrowserLeaderElections(t *testing.T) {
	testutil.Heavy(t, "Chromium, ZooKeeper and two brokers, brokers stopped and started")
	zk := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(2), testcluster.ZooKeeper(zk.Addr()+"/belect"),
		testcluster.Settings("auto.leader.rebalance.enable=false", "auto.create.topics.enable=false", "replica.lag.time.max.ms=2000"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := c.Admin()
	partition := func(topic string) kadm.PartitionDetail {
		t.Helper()
		var pd kadm.PartitionDetail
		testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			p, ok := td[topic].Partitions[0]
			if !ok {
				return fmt.Errorf("no partition 0 of %s", topic)
			}
			pd = p
			return nil
		})
		return pd
	}
	// waitFor polls partition 0 of topic until ok holds.
	waitFor := func(topic, what string, ok func(kadm.PartitionDetail) bool) {
		t.Helper()
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if p := partition(topic); !ok(p) {
				return fmt.Errorf("%s/0 (%s): leader %d, replicas %v, ISR %v", topic, what, p.Leader, p.Replicas, p.ISR)
			}
			return nil
		})
	}
	createAssigned := func(topic string, replicas ...int32) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = 0, replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 30000
		if resp, err := req.RequestWith(ctx, c.Client()); err != nil || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", topic, err, resp)
		}
		waitFor(topic, "both in sync", func(p kadm.PartitionDetail) bool { return len(p.ISR) == 2 })
	}
	first, second := c.Node(0), c.Node(1)
	a, bID := first.ID(), second.ID()

	// orders/0 is led by a, its second replica: reorder its replicas.
	createAssigned("orders", a, bID)
	createAssigned("split", a, bID)
	ra := kadm.AlterPartitionAssignmentsReq{}
	ra.Assign("orders", 0, []int32{bID, a})
	if res, err := adm.AlterPartitionAssignments(ctx, ra); err != nil || res.Error() != nil {
		t.Fatalf("reorder the replicas of orders: %v %v", err, res.Error())
	}
	waitFor("orders", "led by its second replica", func(p kadm.PartitionDetail) bool {
		return p.Leader == a && fmt.Sprint(p.Replicas) == fmt.Sprint([]int32{bID, a})
	})

	srv, b := browserConsole(t, c.Addrs())
	defer b.PublishScreenshots()

	// A viewer.
	b.SignIn("vic", "password-1")
	b.Visit("/topics/orders")
	b.WaitText("Partitions")
	if n := b.Count(`a[href="/topics/orders/elect"]`); n != 0 {
		t.Fatalf("a viewer is offered %d links to the elections page", n)
	}
	for _, f := range []map[string]string{{"type": "preferred"}, {"type": "unclean", "partition": "0", "confirm": "lose-records"}} {
		if st := b.ForgedPost("/topics/orders/elect", f); st != http.StatusForbidden {
			t.Fatalf("a viewer's %s election: status %d, want 403", f["type"], st)
		}
	}
	b.Visit("/topics/orders/elect")
	b.WaitText("this needs operator")
	if p := partition("orders"); p.Leader != a {
		t.Fatalf("orders/0 is led by %d after the viewer's posts, want %d", p.Leader, a)
	}
	b.SignOut()

	// Preferred election.
	b.SignIn("olga", "password-1")
	b.Visit("/topics/orders")
	b.Do("open the elections page", chromedp.Click(chromedp.CSS(`a[href="/topics/orders/elect"]`)))
	b.WaitText("1 partition is not led by their preferred replica")
	b.Screenshot("elect-preferred-preview")
	b.Do("elect", chromedp.Click(chromedp.CSS(`section[aria-labelledby="elect-preferred"] button[type="submit"]`)))
	b.WaitText("Its preferred replica leads it now.")
	waitFor("orders", "led by its preferred replica", func(p kadm.PartitionDetail) bool { return p.Leader == bID })

	// split/0: its follower stops and drops out of the ISR, its leader
	// stops, the follower comes back: no leader, one live replica that is
	// not in sync.
	second.Stop()
	waitFor("split", "follower out of sync", func(p kadm.PartitionDetail) bool { return len(p.ISR) == 1 })
	first.Stop()
	second.Start()
	waitFor("split", "no leader", func(p kadm.PartitionDetail) bool {
		return p.Leader < 0 && fmt.Sprint(p.ISR) == fmt.Sprint([]int32{a})
	})
	visitUntil(t, b, "/topics/split/elect", "Unclean election for partition 0", 30*time.Second)
	if notice := b.Text(`section[aria-labelledby="unclean-0"] .note`); !strings.Contains(notice, "Records that replica never received are lost for good") ||
		!strings.Contains(notice, fmt.Sprintf("in-sync replicas (%d)", a)) {
		t.Fatalf("the unclean election's notice says %q", notice)
	}
	b.Screenshot("elect-unclean-confirm")
	const uncleanForm = `section[aria-labelledby="unclean-0"] form`
	if browsertest.Eval[bool](b, `document.querySelector('`+uncleanForm+`').checkValidity()`) {
		t.Fatal("the unclean election's form can be sent without ticking the box")
	}
	b.Do("accept the loss and elect",
		chromedp.Click(chromedp.CSS(uncleanForm+` input[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(uncleanForm+` button[type="submit"]`)),
	)
	b.WaitText("A new leader was elected.")
	waitFor("split", "led by the replica that was out of sync", func(p kadm.PartitionDetail) bool { return p.Leader == bID })

	var got []string
	for _, e := range auditOf(t, srv, "topic.") {
		if !strings.HasPrefix(e.Action, "topic.elect-") {
			continue
		}
		got = append(got, e.Action+" "+e.Target+" "+e.Detail+" "+e.Outcome+" "+e.User)
	}
	want := []string{
		"topic.elect-unclean split/0 elected=1 not-needed=0 failed=0 ok olga",
		"topic.elect-preferred orders elected=1 not-needed=0 failed=0 ok olga",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit entries\n%q\nwant\n%q", got, want)
	}
}

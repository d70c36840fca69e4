package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestInterBrokerSASLSSL runs the core of the cluster tests on a cluster of
// its own whose only listener, the inter-broker one, is SASL_SSL
// (SCRAM-SHA-512, the authorizer on, User:broker a super user; see
// security_test.go), whatever $SLUICE_CLUSTER_SECURITY says, so that the
// mode is checked by every `make test` (the whole suite in the mode is
// SLUICE_CLUSTER_SECURITY=sasl_ssl): replication with acks=all, a
// controlled shutdown that moves leadership, a follower that catches up
// after a restart, and a reassignment while producing.
func TestInterBrokerSASLSSL(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three sluice serve processes")
	if _, err := sluiceBinary(); err != nil { // built once for the package, not timed here
		t.Fatal(err)
	}
	start := time.Now()
	c, err := startCluster(clusterOptions{security: securitySASLSSL})
	if c != nil {
		t.Cleanup(c.close)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, b := range c.brokers {
				t.Logf("---- broker %d output (tail) ----\n%s", b.id, b.tail())
			}
		}
	})
	waitLive(t, c, 3, 60*time.Second)
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))

	// Replication: acks=all with min.insync.replicas=2 needs the
	// followers' fetches, which go over SASL_SSL as User:broker.
	createTopic(t, c, "sec-replicated", [][]int32{{1, 2, 3}}, map[string]*string{"min.insync.replicas": strp("2")})
	p := startProducer(t, c, "sec-replicated")
	p.waitAcks(t, 300, 60*time.Second)

	// Controlled shutdown of the leader: it asks the controller over the
	// inter-broker listener to move its leaderships first.
	createTopic(t, c, "sec-graceful", [][]int32{{3, 1, 2}}, map[string]*string{"min.insync.replicas": strp("2")})
	g := startProducer(t, c, "sec-graceful")
	g.waitAcks(t, 300, 60*time.Second)
	t0 := time.Now()
	c.broker(3).term()
	g.waitAcks(t, 300, 30*time.Second)
	if gap := g.gapAfter(t0); gap >= sessionTimeout {
		t.Fatalf("producing paused %v: leadership did not move before broker 3 stopped", gap)
	}
	if l := leaderOf(t, c, "sec-graceful", 0); l == 3 {
		t.Fatal("broker 3 still leads")
	}
	if indexOf(c.broker(3).tail(), "controlled shutdown done") < 0 {
		t.Fatal("no controlled shutdown in broker 3's log")
	}
	t.Logf("controlled shutdown after %v", time.Since(start).Round(time.Millisecond))

	// The follower catches up: broker 3, restarted, fetches what it missed
	// and rejoins the ISR of both topics; made leader of sec-graceful, it
	// serves every acknowledged record.
	if err := c.broker(3).start(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"sec-replicated", "sec-graceful"} {
		waitISR(t, c, topic, func(_ int32, pi partitionInfo) error {
			if len(pi.ISR) != 3 {
				return fmt.Errorf("ISR %v", pi.ISR)
			}
			return nil
		})
	}
	g.halt()
	electPreferred(t, c, "sec-graceful", 0)
	waitISR(t, c, "sec-graceful", func(_ int32, pi partitionInfo) error {
		if pi.Leader != 3 {
			return fmt.Errorf("leader %d, want 3", pi.Leader)
		}
		return nil
	})
	checkExactlyOnceInOrder(t, readAll(t, c, "sec-graceful", 0), g.snapshot())
	t.Logf("follower caught up after %v", time.Since(start).Round(time.Millisecond))

	// A reassignment while producing: the new replica copies the
	// partition over SASL_SSL, and leadership moves to it.
	createTopic(t, c, "sec-moving", [][]int32{{1}}, nil)
	m := startProducer(t, c, "sec-moving")
	m.waitAcks(t, 300, 60*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	adm := c.admin(t)
	rs, err := adm.AlterPartitionAssignments(ctx, alterReq("sec-moving", 0, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Error(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c, "sec-moving", func(_ int32, pi partitionInfo) error {
		if !slices.Equal(pi.Replicas, []int32{2, 3}) || len(pi.ISR) != 2 || (pi.Leader != 2 && pi.Leader != 3) {
			return fmt.Errorf("%+v", pi)
		}
		return nil
	})
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"sec-moving": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr["sec-moving"]) != 0 {
		t.Fatalf("reassignment still listed: %+v", lr)
	}
	m.waitAcks(t, 200, 30*time.Second)
	m.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "sec-moving", 0), m.snapshot())

	p.waitAcks(t, 100, 30*time.Second)
	p.halt()
	checkExactlyOnceInOrder(t, readAll(t, c, "sec-replicated", 0), p.snapshot())

	// The followers logged in as User:broker (logged at debug level, the
	// cluster tests' default).
	if lvl := os.Getenv("SLUICE_BROKER_LOG_LEVEL"); lvl == "" || strings.EqualFold(lvl, "debug") {
		for _, b := range c.brokers {
			if !strings.Contains(b.out.String(), "principal=User:broker mechanism=SCRAM-SHA-512") {
				t.Errorf("broker %d logged no authentication of User:broker", b.id)
			}
		}
	}
	// The listener admits nobody without TLS and a password (checked last:
	// failed logins slow later ones from the same address down).
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = plain.Ping(pctx)
	cancel()
	plain.Close()
	if err == nil {
		t.Fatal("a PLAINTEXT client without credentials was answered")
	}
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

package securitytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// TestClusterOverSASLSSL: three brokers on ZooKeeper whose only listener
// is SASL_SSL (SCRAM-SHA-512), also the inter-broker one: followers fetch
// as User:broker, a user created through one broker can log in on every
// broker within seconds (the /config/changes notification), a replicated
// topic gets all its replicas in sync, and after its leader stops the
// acknowledged records are still read.
func TestClusterOverSASLSSL(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	zk := zktest.Start(t, zktest.Options{})
	ca := testutil.NewCA(t, "")
	srv := ca.Server(t, "broker")
	addrs := []string{testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)}
	opts := []testcluster.Option{testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings(
			"listener.security.protocol.map=SASL_SSL:SASL_SSL",
			"security.inter.broker.protocol=SASL_SSL",
			"sasl.enabled.mechanisms=SCRAM-SHA-512",
			"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
			`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="${env:SLUICE_TEST_BROKER_PASSWORD}";`,
			"ssl.keystore.location="+srv.KeystorePath,
			"ssl.truststore.location="+ca.TrustPath,
			"connection.failed.authentication.delay.ms=0",
			"group.initial.rebalance.delay.ms=0",
			"replica.fetch.backoff.ms=200",
			// Sessions of 3 s: followers re-authenticate on their open
			// connections (KIP-368) while they fetch.
			"connections.max.reauth.ms=3000",
		), testcluster.LogLevel(slog.LevelDebug)}
	for i, a := range addrs {
		opts = append(opts, testcluster.BrokerSettings(i, "listeners=SASL_SSL://"+a))
	}
	t.Setenv("SLUICE_TEST_BROKER_PASSWORD", "broker-secret")
	c := testcluster.New(t, opts...)

	// The brokers' own user, and alice, created through broker 0.
	addUser(t, c.Node(0).App().Coordinator(), "broker", "broker-secret", "SCRAM-SHA-512")
	addUser(t, c.Node(0).App().Coordinator(), "alice", "alice-secret", "SCRAM-SHA-512")
	s := &secured{ca: ca}
	auth := []kgo.Opt{kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("alice", "alice-secret"))}
	// Every broker knows alice within seconds.
	for _, a := range addrs {
		testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a), kgo.RequestRetries(0)}, auth...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return cl.Ping(ctx)
		})
	}

	ctx := ctxFor(t, 120*time.Second)
	adm := kadm.NewClient(client(t, addrs[0], auth...))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "replicated"); err != nil {
		t.Fatal(err)
	}
	p := client(t, addrs[0], append(auth, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("replicated"))...)
	const n = 50
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	// The followers fetch over SASL_SSL: every replica joins the ISR.
	var leader int32
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		td, err := adm.ListTopics(ctx, "replicated")
		if err != nil {
			return err
		}
		pd := td["replicated"].Partitions[0]
		if len(pd.ISR) != 3 {
			return fmt.Errorf("ISR %v, want all three replicas", pd.ISR)
		}
		leader = pd.Leader
		return nil
	})

	// The followers' sessions are renewed on their connections, and they
	// stay in sync.
	testutil.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if !strings.Contains(c.Log(), "principal=User:broker mechanism=SCRAM-SHA-512 reauthentication=true") {
			return errors.New("no follower re-authenticated")
		}
		return nil
	})
	if td, err := adm.ListTopics(ctx, "replicated"); err != nil || len(td["replicated"].Partitions[0].ISR) != 3 {
		t.Fatalf("ISR after re-authentications: %v %+v", err, td["replicated"].Partitions[0])
	}

	// The leader stops (a controlled shutdown over the inter-broker
	// listener); another broker leads and serves every acknowledged record.
	var stopped *testcluster.Node
	for _, nd := range c.Nodes() {
		if nd.ID() == leader {
			stopped = nd
		}
	}
	if stopped == nil {
		t.Fatalf("leader %d is not a node", leader)
	}
	stopped.Stop()
	var other string
	for i, nd := range c.Nodes() {
		if nd != stopped {
			other = addrs[i]
		}
	}
	cons := client(t, other, append(auth, kgo.ConsumeTopics("replicated"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d after the leader stopped: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch: %v", err)
			}
		})
		got += fs.NumRecords()
	}
	if got != n {
		t.Fatalf("read %d records, want %d", got, n)
	}
}

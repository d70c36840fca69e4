package securitytest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// TestClusterACLsFollowChanges: three brokers on ZooKeeper with Kafka's
// AclAuthorizer. An ACL created through one broker (CreateAcls writes
// /kafka-acl and an /kafka-acl-changes notification) is enforced by every
// broker: each lets alice describe the topic and the leader serves her
// fetch; after it is deleted through another broker, every broker refuses
// her again, and the denials are counted on each.
func TestClusterACLsFollowChanges(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper and three brokers")
	zk := zktest.Start(t, zktest.Options{})
	internal := []string{testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)}
	saslAddrs := []string{testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)}
	opts := []testcluster.Option{testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()),
		testcluster.Settings(
			"listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
			"inter.broker.listener.name=INTERNAL",
			"sasl.enabled.mechanisms=SCRAM-SHA-512",
			"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
			// The brokers reach each other as ANONYMOUS on the internal
			// listener; admin manages the ACLs over SASL.
			"super.users=User:ANONYMOUS;User:admin",
			"connection.failed.authentication.delay.ms=0",
			"replica.fetch.backoff.ms=200",
		)}
	for i := range internal {
		opts = append(opts, testcluster.BrokerSettings(i, fmt.Sprintf("listeners=INTERNAL://%s,SASL_PLAINTEXT://%s", internal[i], saslAddrs[i])))
	}
	c := testcluster.New(t, opts...)
	addUser(t, c.Node(0).App().Coordinator(), "admin", "admin-secret", "SCRAM-SHA-512")
	addUser(t, c.Node(0).App().Coordinator(), "alice", "alice-secret", "SCRAM-SHA-512")
	ctx := ctxFor(t, 120*time.Second)

	// Every broker knows both users.
	clientAt := func(i int, user, pass string) *kgo.Client {
		return client(t, saslAddrs[i], kgo.SASL(scramSHA512(user, pass)), kgo.RequestRetries(0))
	}
	for i := range saslAddrs {
		testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			for _, u := range [][2]string{{"admin", "admin-secret"}, {"alice", "alice-secret"}} {
				cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddrs[i]), kgo.SASL(scramSHA512(u[0], u[1])), kgo.RequestRetries(0))
				if err != nil {
					return err
				}
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err = cl.Ping(pctx)
				cancel()
				cl.Close()
				if err != nil {
					return fmt.Errorf("%s on broker %d: %w", u[0], i, err)
				}
			}
			return nil
		})
	}

	admin := func(i int) *kadm.Client { return kadm.NewClient(clientAt(i, "admin", "admin-secret")) }
	if _, err := admin(0).CreateTopic(ctx, 1, 3, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	p := client(t, saslAddrs[0], kgo.SASL(scramSHA512("admin", "admin-secret")), kgo.DefaultProduceTopic("orders"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 5 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	// describeCode is the error code broker i answers alice's Metadata
	// naming orders with (each broker decides for itself: the request
	// goes to that broker).
	alice := client(t, saslAddrs[0], kgo.SASL(scramSHA512("alice", "alice-secret")), kgo.RequestRetries(0))
	describeCode := func(i int) (int16, error) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("orders")
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		kr, err := alice.Broker(int(c.Node(i).ID())).Request(rctx, req)
		if err != nil {
			return 0, err
		}
		return kr.(*kmsg.MetadataResponse).Topics[0].ErrorCode, nil
	}
	expectEvery := func(want int16) {
		t.Helper()
		for i := range saslAddrs {
			testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
				code, err := describeCode(i)
				if err != nil || code != want {
					return fmt.Errorf("broker %d answers alice's metadata with %d (%v), want %d", i, code, err, want)
				}
				return nil
			})
		}
	}
	expectEvery(kerr.TopicAuthorizationFailed.Code)

	// Created through broker 1: Read on orders (which allows Describe).
	acl := kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).
		Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead)
	res, err := admin(1).CreateACLs(ctx, acl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL: %v", r.Err)
		}
	}
	expectEvery(0)

	// The leader serves alice's fetch.
	cons := client(t, saslAddrs[2], kgo.SASL(scramSHA512("alice", "alice-secret")), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 5 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("alice read %d of 5: %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		got += fs.NumRecords()
	}

	// Deleted through broker 2: every broker refuses again.
	del, err := admin(2).DeleteACLs(ctx, kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).
		Allow("User:alice").AllowHosts().Operations())
	if err != nil {
		t.Fatal(err)
	}
	if len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 {
		t.Fatalf("delete ACL: %+v", del)
	}
	expectEvery(kerr.TopicAuthorizationFailed.Code)

	// Each broker counted its own refusals of alice.
	for i, nd := range c.Nodes() {
		mfs, err := nd.App().Metrics().Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, mf := range mfs {
			if mf.GetName() != "sluice_broker_authorization_denials_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				if l["operation"] == "Describe" && l["resource_type"] == "Topic" {
					n += m.GetCounter().GetValue()
				}
			}
		}
		if n < 2 {
			t.Errorf("broker %d counted %v Describe/Topic denials, want at least 2 (before the ACL and after its removal)", i, n)
		}
	}
}

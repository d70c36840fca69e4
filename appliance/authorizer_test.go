package appliance

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
)

// TestAuthorizerOverKafkaClient: with authorizer.class.name set to Kafka's
// AclAuthorizer and no ACLs, a franz-go client (User:ANONYMOUS on a
// PLAINTEXT listener) may neither produce nor auto-create a topic
// (TOPIC_AUTHORIZATION_FAILED); ACLs written to the cluster's store take
// effect without a restart, after which it produces and consumes in a
// group; the topic it may not describe stays out of its metadata.
func TestAuthorizerOverKafkaClient(t *testing.T) {
	app := startAppliance(t,
		"console.listen=", "schema.registry.listen=",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"auto.create.topics.enable=true")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.AllowAutoTopicCreation(), kgo.RequestRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(topic string) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, ok := app.Broker().Image().Topics["orders"]; ok {
		t.Fatal("a principal without Create auto-created the topic")
	}

	anon := security.Anonymous.String()
	acl := func(rt security.ResourceType, name string, op security.Operation) security.ACL {
		return security.ACL{Resource: security.Resource{Type: rt, Name: name, Pattern: security.PatternLiteral},
			Entry: security.Entry{Principal: anon, Host: "*", Operation: op, Permission: security.Allow}}
	}
	for i, err := range cluster.CreateACLs(ctx, app.Coordinator(), []security.ACL{
		acl(security.ResourceTopic, "orders", security.OpCreate),
		acl(security.ResourceTopic, "orders", security.OpWrite),
		acl(security.ResourceTopic, "orders", security.OpRead),
		acl(security.ResourceGroup, "g", security.OpRead),
	}) {
		if err != nil {
			t.Fatalf("ACL %d: %v", i, err)
		}
	}
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error { return produce("orders") })

	// A topic ANONYMOUS may not describe is not in its metadata.
	if err := app.Coordinator().CreateTopic(ctx, cluster.Topic{Name: "secret", ID: cluster.NewUUID(), Replicas: [][]int32{{app.BrokerID()}}}, nil); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if _, ok := app.Broker().Image().Topics["secret"]; !ok {
			return errors.New("secret not in the image yet")
		}
		return nil
	})
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = nil // every topic
	resp, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, *tp.Topic)
	}
	if strings.Join(names, ",") != "orders" {
		t.Fatalf("metadata lists %v, want orders only", names)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	fs := cons.PollFetches(fctx)
	if err := fs.Err(); err != nil {
		t.Fatalf("consume in group g: %v", err)
	}
	if fs.NumRecords() == 0 {
		t.Fatal("consumed nothing")
	}
	if err := cons.CommitUncommittedOffsets(fctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// TestAuthorizerConfigRefused: an authorizer Sluice does not have, or a
// malformed super.users, stops the start with the key named.
func TestAuthorizerConfigRefused(t *testing.T) {
	for _, c := range []struct{ setting, want string }{
		{"authorizer.class.name=org.example.Custom", "authorizer.class.name"},
		{"super.users=alice", "super.users"},
	} {
		dir := t.TempDir()
		settings := []string{"listeners=PLAINTEXT://" + testutil.FreeAddr(t), "log.dirs=" + filepath.Join(dir, "kafka"),
			"console.data.dir=" + filepath.Join(dir, "console"), "console.listen=", "schema.registry.listen=",
			"authorizer.class.name=kafka.security.authorizer.AclAuthorizer", c.setting}
		cfg, err := Load("", settings)
		if err != nil {
			t.Fatal(err)
		}
		app, err := New(cfg, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = app.Start(ctx)
		cancel()
		app.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: start: %v, want an error naming %s", c.setting, err, c.want)
		}
	}
}

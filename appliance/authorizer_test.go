package appliance

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
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

// TestAuthorizerConfigRefused: an authorizer Sluice does not have, a
// malformed super.users, zookeeper.set.acl without a client identity or a
// ZooKeeper truststore that cannot be read stop the start with the key
// named.
func TestAuthorizerConfigRefused(t *testing.T) {
	for _, c := range []struct{ setting, want string }{
		{"authorizer.class.name=org.example.Custom", "authorizer.class.name"},
		{"super.users=alice", "super.users"},
		// Checked before ZooKeeper is dialled (nothing listens on port 1).
		{"zookeeper.connect=127.0.0.1:1\nzookeeper.set.acl=true", "zookeeper.ssl.keystore.location"},
		{"zookeeper.connect=127.0.0.1:1\nzookeeper.ssl.client.enable=true\nzookeeper.ssl.truststore.location=/nonexistent/ca.pem", "zookeeper.ssl.truststore.location"},
	} {
		dir := t.TempDir()
		settings := []string{"listeners=PLAINTEXT://" + testutil.FreeAddr(t), "log.dirs=" + filepath.Join(dir, "kafka"),
			"console.data.dir=" + filepath.Join(dir, "console"), "console.listen=", "schema.registry.listen=",
			"authorizer.class.name=kafka.security.authorizer.AclAuthorizer"}
		settings = append(settings, strings.Split(c.setting, "\n")...)
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

// TestACLAPIsWithKadm: CreateAcls, DescribeAcls and DeleteAcls through
// kadm as Kafka answers them: bindings stored and listed with Kafka's
// filters (a literal name, any pattern of a name, every pattern that
// applies to a name), removed by a filter, their effect on the next
// request at once; a broker without an authorizer answers
// SECURITY_DISABLED.
func TestACLAPIsWithKadm(t *testing.T) {
	app := startAppliance(t, "console.listen=", "schema.registry.listen=",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"super.users=User:ANONYMOUS;User:CN=broker,O=example")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders-").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpDescribe))
	if err != nil {
		t.Fatal(err)
	}
	more, err := adm.CreateACLs(ctx, kadm.NewACLs().Deny("User:alice").Topics("orders-secret").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(created, more...) {
		if r.Err != nil {
			t.Fatalf("create %s %s %s: %v %s", r.Principal, r.Name, r.Operation, r.Err, r.ErrMessage)
		}
	}
	// A cluster resource must be called kafka-cluster.
	bad := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
	bad.Creations = append(bad.Creations, c)
	badResp, err := bad.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := badResp.Results[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("a cluster resource named other: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}

	describe := func(b *kadm.ACLBuilder) []string {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe: %v", r.Err)
			}
			for _, d := range r.Described {
				out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s", d.Name, d.Pattern, d.Principal, d.Operation, d.Permission))
			}
		}
		slices.Sort(out)
		return out
	}
	every := kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	if got := describe(every); len(got) != 3 {
		t.Fatalf("every ACL: %v", got)
	}
	// MATCH: the ACLs that apply to orders-secret: the prefix and the literal.
	match := kadm.NewACLs().Topics("orders-secret").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch)
	if got := describe(match); len(got) != 3 {
		t.Fatalf("ACLs that apply to orders-secret: %v", got)
	}
	// A literal filter on orders- does not see the prefixed ACLs.
	lit := kadm.NewACLs().Topics("orders-").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral)
	if got := describe(lit); len(got) != 0 {
		t.Fatalf("literal orders-: %v", got)
	}
	anyPattern := kadm.NewACLs().Topics("orders-").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	if got := describe(anyPattern); len(got) != 2 {
		t.Fatalf("any pattern of orders-: %v", got)
	}

	// The authorizer reads its own writes: alice may read orders-a now.
	az := app.authz
	alice := security.Principal{Type: "User", Name: "alice"}
	if !az.Authorize(alice, "10.0.0.1", security.OpRead, security.ResourceTopic, "orders-a") {
		t.Fatal("alice may not read orders-a after CreateAcls")
	}
	if az.Authorize(alice, "10.0.0.1", security.OpRead, security.ResourceTopic, "orders-secret") {
		t.Fatal("the Deny on orders-secret does not deny")
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").AllowHosts().Operations(kadm.OpRead))
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 || deleted[0].Deleted[0].Operation != kadm.OpRead {
		t.Fatalf("delete: %+v", deleted)
	}
	if got := describe(every); len(got) != 2 {
		t.Fatalf("after the delete: %v", got)
	}
	if az.Authorize(alice, "10.0.0.1", security.OpRead, security.ResourceTopic, "orders-a") {
		t.Fatal("alice may still read orders-a after DeleteAcls")
	}
}

// TestACLAPIsWithoutAuthorizer: the ACL APIs answer SECURITY_DISABLED.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	app := startAppliance(t, "console.listen=", "schema.registry.listen=")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("create without an authorizer: %+v", res)
	}
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := d.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dr.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("describe without an authorizer: %v", kerr.ErrorForCode(dr.ErrorCode))
	}
}

// TestAuthorizationDenialsMetric: a broker with an authorizer exports
// sluice_broker_authorization_denials_total{broker,operation,resource_type}
// with every supported pair at zero; an all-topics Metadata that leaves a
// topic out counts nothing, a Metadata naming it counts one Describe/Topic
// denial, a produce to it one Write/Topic denial.
func TestAuthorizationDenialsMetric(t *testing.T) {
	app := startAppliance(t, "console.listen=", "schema.registry.listen=",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := app.Coordinator().CreateTopic(ctx, cluster.Topic{Name: "secret", ID: cluster.NewUUID(), Replicas: [][]int32{{app.BrokerID()}}}, nil); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if _, ok := app.Broker().Image().Topics["secret"]; !ok {
			return errors.New("secret not in the image yet")
		}
		return nil
	})
	denials := func(op, rt string) float64 {
		t.Helper()
		mfs, err := app.Metrics().Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "sluice_broker_authorization_denials_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				if l["broker"] == fmt.Sprint(app.BrokerID()) && l["operation"] == op && l["resource_type"] == rt {
					return m.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	if got := denials("Describe", "Topic"); got != 0 {
		t.Fatalf("Describe/Topic before any request: %v, want a series at 0", got)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	all := kmsg.NewPtrMetadataRequest()
	if resp, err := all.RequestWith(ctx, cl); err != nil || len(resp.Topics) != 0 {
		t.Fatalf("all-topics metadata: %v %+v", err, resp)
	}
	if got := denials("Describe", "Topic"); got != 0 {
		t.Fatalf("Describe/Topic after an all-topics Metadata: %v, want 0 (a topic left out is not a denial)", got)
	}
	named := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("secret")
	named.Topics = append(named.Topics, rt)
	resp, err := named.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("metadata naming secret: %v %+v", err, resp)
	}
	if got := denials("Describe", "Topic"); got != 1 {
		t.Fatalf("Describe/Topic after a Metadata naming the topic: %v, want 1", got)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "secret"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = recordtest.Batch(t, 1, 10, time.Now().UnixMilli(), record.CompressionNone)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	presp, err := pr.RequestWith(ctx, cl)
	if err != nil || presp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("produce to secret: %v %+v", err, presp)
	}
	if got := denials("Write", "Topic"); got != 1 {
		t.Fatalf("Write/Topic after a denied produce: %v, want 1", got)
	}
}

package zkcoord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/coordtest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
	"github.com/sluice-io/sluice/security"
)

func TestACLConformance(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	coordtest.RunACLs(t, func(t *testing.T) coordtest.Store { return zkStore{newChroot()} })
}

func TestACLChangeFormats(t *testing.T) {
	for _, r := range []security.Resource{
		{Type: security.ResourceTopic, Name: "orders", Pattern: security.PatternLiteral},
		{Type: security.ResourceTransactionalID, Name: "tx:1", Pattern: security.PatternLiteral},
		{Type: security.ResourceGroup, Name: "app-", Pattern: security.PatternPrefixed},
	} {
		log := 0
		if r.Pattern == security.PatternPrefixed {
			log = 1
		}
		got, err := decodeACLChange(log, encodeACLChange(r))
		if err != nil || got != r {
			t.Errorf("%v: round trip gave %v, %v", r, got, err)
		}
	}
	if b := encodeACLChange(security.Resource{Type: security.ResourceTopic, Name: "orders", Pattern: security.PatternLiteral}); string(b) != "TOPIC:orders" {
		t.Errorf("literal change = %s", b)
	}
	if b := encodeACLChange(security.Resource{Type: security.ResourceGroup, Name: "app-", Pattern: security.PatternPrefixed}); string(b) != `{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}` {
		t.Errorf("extended change = %s", b)
	}
	// Kafka parses the literal form's type case-insensitively.
	if r, err := decodeACLChange(0, []byte("Topic:a:b")); err != nil || r.Name != "a:b" || r.Type != security.ResourceTopic {
		t.Errorf("Topic:a:b = %v, %v", r, err)
	}
	for _, bad := range []string{"orders", "NOPE:x"} {
		if _, err := decodeACLChange(0, []byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// TestACLKafkaLayout: the nodes are where and what Kafka's AclAuthorizer
// writes, and ACLs a Kafka tool writes (kafka-acls.sh
// --authorizer-properties zookeeper.connect=...) reach every broker.
func TestACLKafkaLayout(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	co := open(t, zkServer.Addr(), chroot)
	cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := security.ACL{Resource: security.Resource{Type: security.ResourceTopic, Name: "orders-", Pattern: security.PatternPrefixed},
		Entry: security.Entry{Principal: "User:alice", Host: "*", Operation: security.OpRead, Permission: security.Allow}}
	desc := security.ACL{Resource: security.Resource{Type: security.ResourceCluster, Name: "kafka-cluster", Pattern: security.PatternLiteral},
		Entry: security.Entry{Principal: "User:ops", Host: "*", Operation: security.OpDescribe, Permission: security.Allow}}
	for _, err := range cluster.CreateACLs(cx, co, []security.ACL{read, desc}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	raw := rawConn(t, zkServer.Addr())
	b, _, err := raw.Get(chroot + "/kafka-acl-extended/prefixed/Topic/orders-")
	if err != nil || string(b) != `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}` {
		t.Fatalf("prefixed node: %s, %v", b, err)
	}
	if _, _, err := raw.Get(chroot + "/kafka-acl/Cluster/kafka-cluster"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"/kafka-acl-changes", "CLUSTER:kafka-cluster"},
		{"/kafka-acl-extended-changes", `{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}`},
	} {
		names, _, err := raw.Children(chroot + c.path)
		if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], "acl_changes_") {
			t.Fatalf("%s: %v %v", c.path, names, err)
		}
		b, _, _ := raw.Get(chroot + c.path + "/" + names[0])
		if string(b) != c.want {
			t.Fatalf("%s/%s = %s, want %s", c.path, names[0], b, c.want)
		}
	}
	for _, typ := range []string{"Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"} {
		for _, root := range []string{"/kafka-acl/", "/kafka-acl-extended/prefixed/"} {
			if ok, _, _ := raw.Exists(chroot + root + typ); !ok {
				t.Errorf("%s%s was not created", root, typ)
			}
		}
	}

	// A Kafka tool adds an ACL: the node, then its notification.
	node := `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Deny","operation":"Write","host":"10.0.0.1"}]}`
	if _, err := raw.Create(chroot+"/kafka-acl/Topic/payments", []byte(node), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(chroot+"/kafka-acl-changes/acl_changes_", []byte("Topic:payments"), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	want := security.ACL{Resource: security.Resource{Type: security.ResourceTopic, Name: "payments", Pattern: security.PatternLiteral},
		Entry: security.Entry{Principal: "User:bob", Host: "10.0.0.1", Operation: security.OpWrite, Permission: security.Deny}}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		got, err := co.ACLs(cx)
		if err == nil && !slices.Contains(got, want) {
			err = fmt.Errorf("the ACL written by another tool has not reached the broker: %v", got)
		}
		return err
	})
}

// TestACLsNewSession: a broker whose session expired reloads the ACLs
// (changes made meanwhile included).
func TestACLsNewSession(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	proxy := zktest.NewProxy(t, zkServer.Addr())
	a := open(t, zkServer.Addr(), chroot)
	b := open(t, proxy.Addr(), chroot, func(c *Config) { c.SessionTimeout = 2 * time.Second })
	cx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.ACLs(cx); err != nil {
		t.Fatal(err)
	}
	oldSession := b.SessionID()
	x := security.ACL{Resource: security.Resource{Type: security.ResourceGroup, Name: "g", Pattern: security.PatternLiteral},
		Entry: security.Entry{Principal: "User:x", Host: "*", Operation: security.OpRead, Permission: security.Allow}}
	proxy.Block()
	if err := cluster.CreateACLs(cx, a, []security.ACL{x})[0]; err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past b's session timeout: ZooKeeper expires it
	proxy.Unblock()
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		got, err := b.ACLs(cx)
		if err == nil && (!slices.Contains(got, x) || b.SessionID() == oldSession) {
			err = fmt.Errorf("session %#x, ACLs %v", b.SessionID(), got)
		}
		return err
	})
}

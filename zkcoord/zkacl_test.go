package zkcoord

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

func TestDefaultACL(t *testing.T) {
	if a := defaultACL(false, "/config/users"); len(a) != 1 || a[0].Scheme != "world" || a[0].Perms != zk.PermAll {
		t.Errorf("open: %v", a)
	}
	if a := defaultACL(true, "/brokers/ids/1"); len(a) != 2 || a[0].Scheme != "auth" || a[1].Scheme != "world" || a[1].Perms != zk.PermRead {
		t.Errorf("secure: %v", a)
	}
	for _, p := range []string{"/config/users", "/config/users/alice", "/config/brokers/1", "/delegation_token/tokens", ConsoleKeyPath, SchemaRegistryKeyPath} {
		if a := defaultACL(true, p); len(a) != 1 || a[0].Scheme != "auth" {
			t.Errorf("sensitive %s: %v", p, a)
		}
	}
	if a := defaultACL(true, "/config/usersx"); len(a) != 2 {
		t.Errorf("/config/usersx: %v", a)
	}
	if err := (&Config{SetACL: true}).checkIdentity(); err == nil || !strings.Contains(err.Error(), "zookeeper.ssl.keystore.location") {
		t.Errorf("set.acl without an identity: %v", err)
	}
	if err := (&Config{SetACL: true, Digest: "nouser"}).checkIdentity(); err == nil {
		t.Error("digest without a colon accepted")
	}
}

// writesRefused checks that a client without the brokers' identity can
// read the cluster's znodes but change none of them.
func writesRefused(t *testing.T, raw *zk.Conn, chroot string) {
	t.Helper()
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/brokers/ids/99", "/brokers/topics/evil", "/config/topics/evil", "/config/changes/config_change_", "/admin/delete_topics/t", "/controller", "/kafka-acl/Topic/evil"} {
		if _, err := raw.Create(chroot+p, []byte("{}"), 0, open); !errors.Is(err, zk.ErrNoAuth) && !errors.Is(err, zk.ErrNodeExists) {
			t.Errorf("create %s: %v, want ErrNoAuth", p, err)
		}
	}
	for _, p := range []string{"/brokers/topics/t", "/config/topics/t", "/brokers/topics/t/partitions/0/state", "/brokers/ids/1"} {
		if _, err := raw.Set(chroot+p, []byte("{}"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("set %s: %v, want ErrNoAuth", p, err)
		}
	}
	if err := raw.Delete(chroot+"/brokers/topics/t/partitions/0/state", -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("delete a partition state: %v, want ErrNoAuth", err)
	}
	if _, err := raw.SetACL(chroot+"/brokers", open, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("setAcl /brokers: %v, want ErrNoAuth", err)
	}
	// Reading stays open (Kafka's tools and monitoring read), but not the
	// credentials.
	if _, _, err := raw.Get(chroot + "/brokers/topics/t"); err != nil {
		t.Errorf("read /brokers/topics/t: %v", err)
	}
	if _, _, err := raw.Children(chroot + "/config/users"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("list /config/users: %v, want ErrNoAuth", err)
	}
}

func setupTopic(t *testing.T, c *Coordinator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustOK(t, c.RegisterBroker(ctx, cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}))
	mustOK(t, c.CreateTopic(ctx, cluster.Topic{Name: "t", ID: cluster.NewUUID(), Replicas: [][]int32{{1}}}, map[string]string{"retention.ms": "1000"}))
	_, err := c.CreatePartitionState(ctx, "t", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1}})
	mustOK(t, err)
	_, err = c.Campaign(ctx, 1)
	mustOK(t, err)
	_, err = c.ACLs(ctx) // creates the ACL directories
	mustOK(t, err)
}

// TestSetACL: with zookeeper.set.acl a ZooKeeper client that did not
// authenticate as the brokers cannot change /brokers or /config (or
// anything else of the cluster), while brokers with the credentials work
// together, and a broker with other credentials is refused at start.
func TestSetACL(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	secure := func(c *Config) { c.SetACL, c.Digest = true, "sluice:s3cret" }
	a := open(t, zkServer.Addr(), chroot, secure)
	setupTopic(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustOK(t, a.SetTopicConfig(ctx, "t", map[string]string{"retention.ms": "2000"}))

	writesRefused(t, rawConn(t, zkServer.Addr()), chroot)

	// Another broker with the same credentials changes what the first made.
	b := open(t, zkServer.Addr(), chroot, secure)
	mustOK(t, b.SetTopicConfig(ctx, "t", map[string]string{"retention.ms": "3000"}))
	st, err := b.PartitionState(ctx, "t", 0)
	mustOK(t, err)
	st.LeaderEpoch++
	if _, err := b.SetPartitionState(ctx, "t", 0, st); err != nil {
		t.Fatalf("a peer with the same credentials: %v", err)
	}

	// Other credentials: refused at start, with the reason.
	cfg := Config{Connect: zkServer.Addr() + chroot, SessionTimeout: 5 * time.Second, Logger: testLogger(t), SetACL: true, Digest: "sluice:wrong"}
	if c, err := Open(ctx, cfg); err == nil {
		c.Close()
		t.Fatal("a broker with other digest credentials started")
	} else if !strings.Contains(err.Error(), "same digest user") {
		t.Fatalf("other credentials: %v", err)
	}
}

// TestSetACLSecuresExistingZnodes: turning zookeeper.set.acl on for a
// cluster that ran without it secures the znodes made before.
func TestSetACLSecuresExistingZnodes(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	a := open(t, zkServer.Addr(), chroot)
	setupTopic(t, a)
	raw := rawConn(t, zkServer.Addr())
	if _, err := raw.Set(chroot+"/brokers/topics/t", nil, -1); err == nil {
		// Writable before: that is the point. Put it back.
		a.Close()
	} else {
		t.Fatalf("before set.acl: %v", err)
	}
	a = open(t, zkServer.Addr(), chroot, func(c *Config) { c.SetACL, c.Digest = true, "sluice:s3cret" })
	setupTopicAgain(t, a)
	writesRefused(t, raw, chroot)
}

// setupTopicAgain rewrites the topic znode the test emptied and registers
// the broker in the new session.
func setupTopicAgain(t *testing.T, c *Coordinator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustOK(t, c.RegisterBroker(ctx, cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}))
	_, err := c.Campaign(ctx, 1)
	mustOK(t, err)
}

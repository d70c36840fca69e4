package zkcoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestClientQuotaZNodes: quotas written as kafka-configs.sh --zookeeper
// writes them (the node, then the notification) reach another broker's
// cache and its Watch; a user+client-id quota is created with its parent
// nodes; a quota change keeps the user's credentials; removing the last
// quota of an entity takes it out of the cache.
func TestClientQuotaZNodes(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	a := open(t, zkServer.Addr(), chroot)
	b := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())
	ctx := context.Background()
	watch := b.Watch(ctx)

	raw.Create(chroot+"/config/clients/app%2F1", []byte(`{"version":1,"config":{"consumer_byte_rate":"2048"}}`), 0, zk.WorldACL(zk.PermAll))
	raw.Create(chroot+"/config/changes/config_change_", []byte(`{"version":2,"entity_path":"clients/app%2F1"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll))
	want := func(co *Coordinator, e cluster.QuotaEntity, key string, v float64) {
		t.Helper()
		testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			q, err := co.ClientQuotas(ctx)
			if err != nil {
				return err
			}
			got, ok := q[e][key]
			if v == 0 && !ok || v != 0 && got == v {
				return nil
			}
			return fmt.Errorf("%v %s = %v (%v), want %v", e, key, got, ok, v)
		})
	}
	want(b, cluster.QuotaEntity{ClientID: "app/1"}, cluster.QuotaConsumerByteRate, 2048)
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		select {
		case ch := <-watch:
			if ch&cluster.ChangeClientQuotas != 0 {
				return nil
			}
		default:
		}
		return fmt.Errorf("no ChangeClientQuotas from Watch")
	})

	// User + client id, through a: parents created, b follows.
	e := cluster.QuotaEntity{User: "svc@corp", ClientID: cluster.DefaultQuotaName}
	if err := a.AlterClientQuotas(ctx, e, []cluster.QuotaOp{{Key: cluster.QuotaProducerByteRate, Value: 4096}}); err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(chroot + "/config/users/svc%40corp/clients/<default>")
	if err != nil || string(data) != `{"version":1,"config":{"producer_byte_rate":"4096"}}` {
		t.Fatalf("user+client znode: %s %v", data, err)
	}
	want(b, e, cluster.QuotaProducerByteRate, 4096)

	// A user's quota beside its credential (written by Kafka's tool).
	raw.Create(chroot+"/config/users/bob", []byte(`{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=c3Q=,server_key=c2s=,iterations=4096"}}`), 0, zk.WorldACL(zk.PermAll))
	if err := a.AlterClientQuotas(ctx, cluster.QuotaEntity{User: "bob"}, []cluster.QuotaOp{{Key: cluster.QuotaRequestPercentage, Value: 50}}); err != nil {
		t.Fatal(err)
	}
	data, _, _ = raw.Get(chroot + "/config/users/bob")
	if string(data) != `{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=c3Q=,server_key=c2s=,iterations=4096","request_percentage":"50"}}` {
		t.Fatalf("bob's znode: %s", data)
	}
	want(b, cluster.QuotaEntity{User: "bob"}, cluster.QuotaRequestPercentage, 50)
	if err := a.AlterClientQuotas(ctx, cluster.QuotaEntity{User: "bob"}, []cluster.QuotaOp{{Key: cluster.QuotaRequestPercentage, Remove: true}}); err != nil {
		t.Fatal(err)
	}
	want(b, cluster.QuotaEntity{User: "bob"}, cluster.QuotaRequestPercentage, 0)
	if q, _ := b.ClientQuotas(ctx); q[cluster.QuotaEntity{User: "bob"}] != nil {
		t.Fatalf("bob still has quotas: %v", q)
	}
	// A new coordinator loads them all at start.
	c := open(t, zkServer.Addr(), chroot)
	q, err := c.ClientQuotas(ctx)
	if err != nil || len(q) != 2 || q[e][cluster.QuotaProducerByteRate] != 4096 || q[cluster.QuotaEntity{ClientID: "app/1"}][cluster.QuotaConsumerByteRate] != 2048 {
		t.Fatalf("loaded at start: %v %v", q, err)
	}
}

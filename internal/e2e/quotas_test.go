package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// throttleHook records the brokers that returned a throttle time.
type throttleHook struct {
	mu  sync.Mutex
	ids map[int32]bool
}

func (h *throttleHook) OnBrokerThrottle(meta kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d <= 0 {
		return
	}
	h.mu.Lock()
	h.ids[meta.NodeID] = true
	h.mu.Unlock()
}

func (h *throttleHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

func (h *throttleHook) has(id int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// TestClientQuotasZooKeeper: on three brokers sharing a ZooKeeper, quotas
// set through one broker are written as Kafka writes them
// (/config/clients/<id>, /config/users/<user> beside the user's SCRAM
// credential, a /config/changes notification each) and every broker
// throttles a client over its quota.
func TestClientQuotasZooKeeper(t *testing.T) {
	srv := zktest.Start(t, zktest.Options{})
	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(srv.Addr()+"/quotas"))
	ctx := ctxFor(t, 120*time.Second)
	adm := c.Node(0).Admin()

	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}}); err != nil {
		t.Fatal(err)
	}
	limited, alice := "limited", "alice"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &limited}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 2048}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}

	// Kafka's znodes.
	raw, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	config := func(p string) map[string]string {
		t.Helper()
		b, _, err := raw.Get("/quotas/config/" + p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var z struct {
			Version int               `json:"version"`
			Config  map[string]string `json:"config"`
		}
		if err := json.Unmarshal(b, &z); err != nil || z.Version != 1 {
			t.Fatalf("%s: %s %v", p, b, err)
		}
		return z.Config
	}
	if cfg := config("clients/limited"); len(cfg) != 1 || cfg["producer_byte_rate"] != "2048" {
		t.Errorf("/config/clients/limited: %v", cfg)
	}
	if cfg := config("users/alice"); cfg["consumer_byte_rate"] != "4096" || !strings.HasPrefix(cfg["SCRAM-SHA-256"], "salt=") {
		t.Errorf("/config/users/alice: %v (want the quota beside the credential)", cfg)
	}
	changes, _, err := raw.Children("/quotas/config/changes")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ch := range changes {
		b, _, err := raw.Get("/quotas/config/changes/" + ch)
		if err != nil {
			continue
		}
		var z struct {
			EntityPath string `json:"entity_path"`
		}
		json.Unmarshal(b, &z)
		seen[z.EntityPath] = true
	}
	if !seen["clients/limited"] || !seen["users/alice"] {
		t.Errorf("change notifications: %v", seen)
	}

	// Every broker throttles "limited": one partition led by each.
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "quota-zk"); err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int32{} // partition -> leader
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx, "quota-zk")
		if err != nil {
			return err
		}
		for _, p := range md.Topics["quota-zk"].Partitions {
			if p.Leader < 0 {
				return context.DeadlineExceeded
			}
			leaders[p.Partition] = p.Leader
		}
		return nil
	})
	hook := &throttleHook{ids: map[int32]bool{}}
	cl := c.Client(kgo.ClientID(limited), kgo.WithHooks(hook), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("quota-zk"))
	defer cl.Close()
	value := make([]byte, 8<<10)
	testutil.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		for p, leader := range leaders {
			if hook.has(leader) {
				continue
			}
			// 8 KiB at a time: 10 s worth of the quota passes, then
			// the broker throttles.
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: value}).FirstErr(); err != nil {
				return err
			}
			if !hook.has(leader) {
				return context.DeadlineExceeded
			}
		}
		return nil
	})
	// Another client id is not throttled.
	other := &throttleHook{ids: map[int32]bool{}}
	ocl := c.Client(kgo.ClientID("unlimited"), kgo.WithHooks(other), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("quota-zk"))
	defer ocl.Close()
	for i := 0; i < 20; i++ {
		if err := ocl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if n := other.count(); n != 0 {
		t.Errorf("a client id without a quota was throttled by %d brokers", n)
	}

	// A restarted broker reads the quotas at start.
	n1 := c.Node(1)
	id1 := n1.ID()
	var part int32 = -1
	for p, l := range leaders {
		if l == id1 {
			part = p
		}
	}
	if part < 0 {
		t.Fatalf("no partition led by broker %d: %v", id1, leaders)
	}
	n1.Restart()
	after := &throttleHook{ids: map[int32]bool{}}
	acl := c.Client(kgo.ClientID(limited), kgo.WithHooks(after), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("quota-zk"), kgo.RecordRetries(50))
	defer acl.Close()
	testutil.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		if err := acl.ProduceSync(ctx, &kgo.Record{Partition: part, Value: value}).FirstErr(); err != nil {
			return err
		}
		if !after.has(id1) {
			return context.DeadlineExceeded
		}
		return nil
	})
}

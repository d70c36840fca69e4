package zkcoord

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"

	"github.com/sluice-io/sluice/internal/coordtest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestCredentialsConformance runs the credentials contract on ZooKeeper.
func TestCredentialsConformance(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	coordtest.RunCredentials(t, func(t *testing.T) coordtest.Store { return zkStore{newChroot()} })
}

// The znodes are Kafka's: /config/users/<sanitized> with the credential
// text, a config_change notification naming users/<sanitized>; and a
// credential written the way kafka-configs.sh --zookeeper writes it is
// picked up from its notification.
func TestCredentialZNodes(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	co := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())
	cred, _ := security.ScramSHA512.NewCredential("pw", 8192)
	if errs := co.AlterScramCredentials(context.Background(), []cluster.ScramChange{{User: "svc@corp", Mechanism: "SCRAM-SHA-512", Credential: &cred}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	data, _, err := raw.Get(chroot + "/config/users/svc%40corp")
	if err != nil {
		t.Fatal(err)
	}
	var z struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}
	if err := json.Unmarshal(data, &z); err != nil || z.Version != 1 || z.Config["SCRAM-SHA-512"] != cred.String() {
		t.Fatalf("znode %s: %v", data, err)
	}
	names, _, _ := raw.Children(chroot + "/config/changes")
	found := false
	for _, n := range names {
		d, _, _ := raw.Get(chroot + "/config/changes/" + n)
		if string(d) == `{"version":2,"entity_path":"users/svc%40corp"}` {
			found = true
		}
	}
	if !found {
		t.Fatalf("no notification for users/svc%%40corp among %v", names)
	}
	// Kafka's own tooling: the node, then the notification.
	other, _ := security.ScramSHA256.NewCredential("kafka", 4096)
	raw.Create(chroot+"/config/users/bob", []byte(`{"version":1,"config":{"SCRAM-SHA-256":"`+other.String()+`","producer_byte_rate":"1024"}}`), 0, zk.WorldACL(zk.PermAll))
	raw.Create(chroot+"/config/changes/config_change_", []byte(`{"version":2,"entity_path":"users/bob"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll))
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if c, ok := co.ScramCredential("bob", "SCRAM-SHA-256"); !ok || !c.VerifyPassword("kafka") {
			return errors.New("kafka-written credential not picked up")
		}
		return nil
	})
	// A change keeps the quota keys beside the credentials.
	if errs := co.AlterScramCredentials(context.Background(), []cluster.ScramChange{{User: "bob", Mechanism: "SCRAM-SHA-256"}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	data, _, _ = raw.Get(chroot + "/config/users/bob")
	if string(data) != `{"version":1,"config":{"producer_byte_rate":"1024"}}` {
		t.Fatalf("bob's znode after the deletion: %s", data)
	}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/storage"
)

// unreachable is a coordinator whose metadata writes fail as zkcoord's do
// while the broker has no ZooKeeper session, when down is set.
type unreachable struct {
	cluster.Coordinator
	down atomic.Bool
}

var errNoSession = fmt.Errorf("%w: no zookeeper session", cluster.ErrUnavailable)

func (u *unreachable) CreateTopic(ctx context.Context, t cluster.Topic, cfg map[string]string) error {
	if u.down.Load() {
		return errNoSession
	}
	return u.Coordinator.CreateTopic(ctx, t, cfg)
}

func (u *unreachable) MarkTopicForDeletion(ctx context.Context, name string) error {
	if u.down.Load() {
		return errNoSession
	}
	return u.Coordinator.MarkTopicForDeletion(ctx, name)
}

func (u *unreachable) SetTopicAssignment(ctx context.Context, t cluster.Topic) (int32, error) {
	if u.down.Load() {
		return 0, errNoSession
	}
	return u.Coordinator.SetTopicAssignment(ctx, t)
}

// TestTopicAdminWithoutStore: while the metadata store is out of reach,
// CreateTopics, DeleteTopics and CreatePartitions answer NOT_CONTROLLER (a
// transient error Kafka clients retry after looking the controller up
// again), never UNKNOWN_SERVER_ERROR; once it is back they work.
func TestTopicAdminWithoutStore(t *testing.T) {
	ctx := context.Background()
	st, err := cluster.OpenStandalone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	co := &unreachable{Coordinator: st}
	logs, err := storage.OpenManager(storage.ManagerConfig{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{BrokerID: 1, Logs: logs, Coordinator: co, DeleteTopicEnable: true, NumPartitions: 1, DefaultReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: st, BrokerID: 1})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { ctl.Run(cctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		b.Close()
		logs.Close()
		st.Close()
	})
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "kept", Partitions: 1, ReplicationFactor: 1}, false, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	co.down.Store(true)
	notController := func(what string, err error) {
		t.Helper()
		code, msg := ErrorCode(err)
		if code != kerr.NotController.Code || !errors.Is(err, kerr.NotController) {
			t.Fatalf("%s without the store: code %d (%v), want NOT_CONTROLLER", what, code, msg)
		}
	}
	_, err = b.CreateTopic(ctx, TopicSpec{Name: "new", Partitions: 1, ReplicationFactor: 1}, false, 5*time.Second)
	notController("CreateTopics", err)
	notController("DeleteTopics", b.DeleteTopic(ctx, "kept", time.Second))
	notController("CreatePartitions", b.CreatePartitions(ctx, "kept", 2, nil, false, time.Second))

	co.down.Store(false)
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "new", Partitions: 1, ReplicationFactor: 1}, false, 10*time.Second); err != nil {
		t.Fatalf("CreateTopics with the store back: %v", err)
	}
	if err := b.CreatePartitions(ctx, "kept", 2, nil, false, 10*time.Second); err != nil {
		t.Fatalf("CreatePartitions with the store back: %v", err)
	}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
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

// TestDeleteTopicWithLongName: a topic whose name is near Kafka's limit of
// 249 characters is deleted for good: created again under the name it is
// empty. Its log directory's delete name used
// to exceed 255 bytes, the rename failed after the partition had left the
// broker, and the old records came back with the new topic.
func TestDeleteTopicWithLongName(t *testing.T) {
	b, co := newTestBroker(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: co, BrokerID: 1})
	ctlDone := make(chan struct{})
	cctx, stopCtl := context.WithCancel(ctx)
	go func() { ctl.Run(cctx); close(ctlDone) }()
	defer func() { stopCtl(); <-ctlDone }()

	name := strings.Repeat("long.", 49) + "name" // 249 characters
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}, false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := b.LeaderPartition(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendRecords(batchOf(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic(ctx, name, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.cfg.Logs.Log(storage.TopicPartition{Topic: name, Partition: 0}); ok {
		t.Fatal("the deleted topic's log is still open")
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}, false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err = b.LeaderPartition(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := p.LogEndOffset(); end != 0 {
		t.Fatalf("topic created again under the name has log end %d: the old records came back", end)
	}
}

// TestLogDeletionRetried: when a deleted partition's directory cannot be
// renamed, the partition stays in the broker's map, resigned (it serves
// nothing), its log stays listed, and a topic created again under the name
// waits for it rather than getting a log next to (or over) the old one;
// once the rename works (tried again after deleteRetry), the old log goes
// and the new topic's partition is created, empty.
func TestLogDeletionRetried(t *testing.T) {
	testutil.Heavy(t, "slow by design: waits for retried log deletions, 5 s")
	b, co := newTestBroker(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: co, BrokerID: 1})
	ctlDone := make(chan struct{})
	cctx, stopCtl := context.WithCancel(ctx)
	go func() { ctl.Run(cctx); close(ctlDone) }()
	defer func() { stopCtl(); <-ctlDone }()

	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "stuck", Partitions: 1, ReplicationFactor: 1}, false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	old, err := b.LeaderPartition("stuck", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.AppendRecords(batchOf(t, 5), 1); err != nil {
		t.Fatal(err)
	}
	// The directory is not where the log left it: renaming it fails.
	dir := old.Log().Dir()
	if err := os.Rename(dir, dir+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic(ctx, "stuck", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	tp := storage.TopicPartition{Topic: "stuck", Partition: 0}
	if p, err := b.Partition("stuck", 0); err != nil || p != old {
		t.Fatalf("the partition whose log could not be deleted left the broker: %v", err)
	}
	if _, ok := b.cfg.Logs.Log(tp); !ok {
		t.Fatal("the log whose directory could not be renamed left the storage manager")
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "stuck", Partitions: 1, ReplicationFactor: 1}, false, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if p, err := b.LeaderPartition("stuck", 0); err == nil {
		t.Fatalf("the new topic is served (log end %d) while the old log is still there", p.LogEndOffset())
	}

	if err := os.Rename(dir+".aside", dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * deleteRetry)
	for {
		p, err := b.LeaderPartition("stuck", 0)
		if err == nil && p != old {
			if end := p.LogEndOffset(); end != 0 {
				t.Fatalf("the new topic's partition has log end %d: the old records came back", end)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new topic's partition is not served %v after the rename could work: %v", 3*deleteRetry, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(dir + ".aside"); !os.IsNotExist(err) {
		t.Fatalf("moved-aside directory: %v", err)
	}
}

// slowStore is a coordinator whose topic writes take delay (a loaded
// ZooKeeper), giving up when their context ends as zkcoord's do.
type slowStore struct {
	cluster.Coordinator
	delay time.Duration
}

func (s *slowStore) CreateTopic(ctx context.Context, t cluster.Topic, cfg map[string]string) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", cluster.ErrUnavailable, ctx.Err())
	}
	return s.Coordinator.CreateTopic(ctx, t, cfg)
}

// TestCreateTopicShortTimeout: CreateTopics' timeout_ms bounds the wait for
// the new topic's leaders, not its creation (as in Kafka, whose znodes are
// written before the wait): with timeout_ms 1 and a store that takes longer
// to write, the topic answered REQUEST_TIMED_OUT exists. It used to be
// answered REQUEST_TIMED_OUT and not created (a benchmark of 100 topics
// created with timeout_ms 1 then waited forever for one of them).
func TestCreateTopicShortTimeout(t *testing.T) {
	ctx := context.Background()
	st, err := cluster.OpenStandalone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs, err := storage.OpenManager(storage.ManagerConfig{Dirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{BrokerID: 1, Logs: logs, Coordinator: &slowStore{Coordinator: st, delay: 50 * time.Millisecond}, NumPartitions: 1, DefaultReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		logs.Close()
		st.Close()
	})
	_, answer := b.CreateTopic(ctx, TopicSpec{Name: "hurried", Partitions: 3, ReplicationFactor: 1}, false, time.Millisecond)
	if answer != nil && !errors.Is(answer, kerr.RequestTimedOut) {
		t.Fatalf("CreateTopics with timeout_ms 1: %v", answer)
	}
	topic, err := st.Topic(ctx, "hurried")
	if err != nil {
		t.Fatalf("the topic answered %v does not exist: %v", answer, err)
	}
	if len(topic.Replicas) != 3 {
		t.Fatalf("created with %d partitions, want 3", len(topic.Replicas))
	}
}

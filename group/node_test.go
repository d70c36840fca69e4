package group_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/storage"
)

// node is one in-process single-node broker with the group coordinator,
// assembled as the appliance does (standalone coordinator, storage, broker,
// controller, protocol server), on a free loopback port. Its data
// directory and port survive restart.
type node struct {
	t    testing.TB
	dir  string
	addr string
	gcfg group.Config
	log  *slog.Logger

	coord   *cluster.Standalone
	logs    *storage.Manager
	brk     *broker.Broker
	srv     *protocol.Server
	groups  *group.ForBroker
	ctlStop context.CancelFunc
	ctlDone chan struct{}
}

// testGroupConfig is the coordinator config of the tests: sessions may be
// as short as 1.5s so a killed member is noticed quickly, and the first
// rebalance of a group waits 200ms (not 3s).
func testGroupConfig() group.Config {
	cfg := group.DefaultConfig()
	cfg.NumPartitions = 10
	cfg.MinSessionTimeout = 1500 * time.Millisecond
	cfg.InitialRebalanceDelay = 200 * time.Millisecond
	return cfg
}

func startNode(t testing.TB, gcfg group.Config) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), addr: testutil.FreeAddr(t), gcfg: gcfg}
	var mu sync.Mutex
	buf := &bytes.Buffer{}
	n.log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("broker log:\n%s", buf.String())
			mu.Unlock()
		}
	})
	n.start()
	t.Cleanup(n.stop)
	return n
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (n *node) start() {
	t := n.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	if n.coord, err = cluster.OpenStandalone(n.dir); err != nil {
		t.Fatal(err)
	}
	coord := n.coord
	n.logs, err = storage.OpenManager(storage.ManagerConfig{
		Dirs:   []string{filepath.Join(n.dir, "kafka")},
		Logger: n.log,
		DefaultConfig: func(topic string) storage.LogConfig {
			overrides, _ := coord.TopicConfig(ctx, topic)
			return broker.TopicLogConfig(nil, overrides)
		},
		CleanerEnabled: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	bound, err := protocol.Bind(protocol.Config{
		Listeners: []protocol.Listener{{Name: "PLAINTEXT", Addr: n.addr}},
		Logger:    n.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(n.addr)
	port, _ := strconv.Atoi(portStr)
	n.brk, err = broker.New(broker.Config{
		BrokerID:                      1,
		Endpoints:                     []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: host, Port: int32(port)}},
		Logs:                          n.logs,
		Coordinator:                   n.coord,
		Logger:                        n.log,
		AutoCreateTopics:              true,
		DeleteTopicEnable:             true,
		OffsetsTopicPartitions:        n.gcfg.NumPartitions,
		OffsetsTopicReplicationFactor: n.gcfg.ReplicationFactor,
		OffsetsTopicSegmentBytes:      n.gcfg.SegmentBytes,
		AdoptStrayLogs:                true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.brk.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: n.coord, BrokerID: 1, Logger: n.log})
	ctlCtx, ctlStop := context.WithCancel(context.Background())
	n.ctlStop, n.ctlDone = ctlStop, make(chan struct{})
	go func() {
		defer close(n.ctlDone)
		ctl.Run(ctlCtx)
	}()
	if n.groups, err = group.NewForBroker(n.brk, n.gcfg, n.log); err != nil {
		t.Fatal(err)
	}
	bound.SetGroups(n.groups)
	if n.srv, err = bound.Serve(n.brk); err != nil {
		t.Fatal(err)
	}
}

func (n *node) stop() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.srv.Shutdown(ctx); err != nil {
		n.t.Errorf("shutdown: %v", err)
	}
	n.srv = nil
	if err := n.groups.Close(); err != nil {
		n.t.Errorf("groups: %v", err)
	}
	n.ctlStop()
	<-n.ctlDone
	if err := n.brk.Close(); err != nil {
		n.t.Errorf("broker: %v", err)
	}
	if err := n.logs.Close(); err != nil {
		n.t.Errorf("storage: %v", err)
	}
	if err := n.coord.Close(); err != nil {
		n.t.Errorf("coordinator: %v", err)
	}
}

func (n *node) restart() {
	n.t.Helper()
	n.stop()
	n.start()
}

// client returns a franz-go client for the node, closed with the test.
func (n *node) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr)}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

func (n *node) admin() *kadm.Client { return kadm.NewClient(n.client()) }

func (n *node) createTopic(name string, partitions int32) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.admin().CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		n.t.Fatalf("create topic %s: %v", name, err)
	}
}

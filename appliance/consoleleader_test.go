package appliance

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
	"github.com/sluice-io/sluice/zkcoord"
)

// TestConsoleLeaderSingleNode: without ZooKeeper the console always leads
// (the factory says so by returning no leadership).
func TestConsoleLeaderSingleNode(t *testing.T) {
	co, err := cluster.OpenStandalone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	l, err := newConsoleLeader(&App{cfg: DefaultConfig(), coord: co, brokerID: 1})
	if err != nil || l != nil {
		t.Fatalf("single node: leadership %v, err %v; want none (always lead)", l, err)
	}
}

// TestConsoleLeaderZooKeeper: two hosts' consoles on one ZooKeeper. Exactly
// one leads and /console_leader names its broker; when its host stops the
// console (Close), the other takes over at once.
func TestConsoleLeaderZooKeeper(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	srv := zktest.Start(t, zktest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	app := func(id int32) *App {
		zc, err := zkcoord.Open(ctx, zkcoord.Config{Connect: srv.Addr() + "/sluice", SessionTimeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { zc.Close() })
		cfg := DefaultConfig()
		cfg.ConsoleListen = "127.0.0.1:8080"
		return &App{cfg: cfg, coord: zc, brokerID: id}
	}
	l1, err := newConsoleLeader(app(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := newConsoleLeader(app(2))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if !l1.IsLeader() || l2.IsLeader() {
		t.Fatalf("first console leads %v, second %v; want the first only", l1.IsLeader(), l2.IsLeader())
	}
	raw, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	holder := func() (consoleLeaderNode, error) {
		var n consoleLeaderNode
		b, _, err := raw.Get("/sluice" + zkcoord.ConsoleLeaderPath)
		if err != nil {
			return n, err
		}
		return n, json.Unmarshal(b, &n)
	}
	if n, err := holder(); err != nil || n.BrokerID != 1 || n.Console != "127.0.0.1:8080" || n.Version != 1 {
		t.Fatalf("/console_leader %+v %v", n, err)
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !l2.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the second console did not take over after the first closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := holder(); err != nil || n.BrokerID != 2 {
		t.Fatalf("/console_leader after the handover %+v %v", n, err)
	}
	if l1.IsLeader() {
		t.Fatal("the closed console still leads")
	}
}

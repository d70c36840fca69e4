package zkcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func jsonOf(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("znode %q is not a JSON object: %v", b, err)
	}
	return m
}

func TestParseConnect(t *testing.T) {
	for _, tc := range []struct {
		in      string
		servers []string
		chroot  string
		bad     bool
	}{
		{in: "localhost:2181", servers: []string{"localhost:2181"}},
		{in: "zk1:2181,zk2:2182/sluice", servers: []string{"zk1:2181", "zk2:2182"}, chroot: "/sluice"},
		{in: " zk1 , zk2:3000/a/b/ ", servers: []string{"zk1:2181", "zk2:3000"}, chroot: "/a/b"},
		{in: "[::1]:2181,10.0.0.1/kafka", servers: []string{"[::1]:2181", "10.0.0.1:2181"}, chroot: "/kafka"},
		{in: "zk:2181/", servers: []string{"zk:2181"}},
		{in: "", bad: true},
		{in: "zk:2181,,zk2:2181", bad: true},
		{in: "zk:notaport", bad: true},
		{in: "zk:0", bad: true},
		{in: "zk:2181/a//b", bad: true},
		{in: "zk:2181/a/../b", bad: true},
		{in: ":2181", bad: true},
	} {
		cs, err := ParseConnect(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseConnect(%q) = %+v, want an error", tc.in, cs)
			}
			continue
		}
		if err != nil || !slices.Equal(cs.Servers, tc.servers) || cs.Chroot != tc.chroot {
			t.Errorf("ParseConnect(%q) = %+v, %v; want %v %q", tc.in, cs, err, tc.servers, tc.chroot)
		}
	}
}

// TestKafkaZnodeLayout checks every znode the coordinator writes against
// Kafka's paths and JSON formats, inside a chroot it creates.
func TestKafkaZnodeLayout(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := "/layout/nested"
	c := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())
	ctx := bg(t)
	get := func(p string) ([]byte, *zk.Stat) {
		t.Helper()
		b, st, err := raw.Get(chroot + p)
		if err != nil {
			t.Fatalf("get %s%s: %v", chroot, p, err)
		}
		return b, st
	}

	id, err := c.ClusterID(ctx)
	mustOK(t, err)
	b, _ := get("/cluster/id")
	if m := jsonOf(t, b); m["version"] != "1" || m["id"] != id {
		t.Fatalf("/cluster/id %s", b)
	}

	mustOK(t, c.RegisterBroker(ctx, cluster.Broker{ID: 3, Rack: "eu-1a", Timestamp: 1700000000123, Endpoints: []cluster.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "10.1.2.3", Port: 9092},
		{Listener: "REPLICATION", SecurityProtocol: "PLAINTEXT", Host: "::1", Port: 9093},
	}}))
	b, st := get("/brokers/ids/3")
	if st.EphemeralOwner != c.SessionID() {
		t.Fatal("/brokers/ids/3 is not ephemeral to the coordinator's session")
	}
	want := map[string]any{
		"version": 5.0, "host": "10.1.2.3", "port": 9092.0, "jmx_port": -1.0, "timestamp": "1700000000123", "rack": "eu-1a",
		"endpoints":                      []any{"PLAINTEXT://10.1.2.3:9092", "REPLICATION://[::1]:9093"},
		"listener_security_protocol_map": map[string]any{"PLAINTEXT": "PLAINTEXT", "REPLICATION": "PLAINTEXT"},
		"features":                       map[string]any{},
	}
	if m := jsonOf(t, b); !reflect.DeepEqual(m, want) {
		t.Fatalf("/brokers/ids/3\n got %v\nwant %v", m, want)
	}

	mustOK(t, c.CreateTopic(ctx, cluster.Topic{Name: "orders", ID: cluster.NewUUID(), Replicas: [][]int32{{3, 1, 2}, {1, 2, 3}}}, map[string]string{"retention.ms": "60000"}))
	tp, _ := c.Topic(ctx, "orders")
	b, _ = get("/brokers/topics/orders")
	want = map[string]any{"version": 3.0, "topic_id": tp.ID.String(),
		"partitions":        map[string]any{"0": []any{3.0, 1.0, 2.0}, "1": []any{1.0, 2.0, 3.0}},
		"adding_replicas":   map[string]any{},
		"removing_replicas": map[string]any{}}
	if m := jsonOf(t, b); !reflect.DeepEqual(m, want) {
		t.Fatalf("/brokers/topics/orders\n got %v\nwant %v", m, want)
	}
	b, _ = get("/config/topics/orders")
	if m := jsonOf(t, b); !reflect.DeepEqual(m, map[string]any{"version": 1.0, "config": map[string]any{"retention.ms": "60000"}}) {
		t.Fatalf("/config/topics/orders %s", b)
	}

	ci, err := c.Campaign(ctx, 3)
	mustOK(t, err)
	b, st = get("/controller")
	if m := jsonOf(t, b); m["version"] != 2.0 || m["brokerid"] != 3.0 || m["kraftControllerEpoch"] != -1.0 || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("/controller %s", b)
	}
	if _, ok := jsonOf(t, b)["timestamp"].(string); !ok {
		t.Fatalf("/controller timestamp must be a string: %s", b)
	}
	b, _ = get("/controller_epoch")
	if string(b) != fmt.Sprint(ci.Epoch) {
		t.Fatalf("/controller_epoch %q, epoch %d", b, ci.Epoch)
	}

	v, err := c.CreatePartitionState(ctx, "orders", 1, cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}, ControllerEpoch: ci.Epoch})
	mustOK(t, err)
	b, st = get("/brokers/topics/orders/partitions/1/state")
	want = map[string]any{"version": 1.0, "leader": 1.0, "leader_epoch": 0.0, "isr": []any{1.0, 2.0, 3.0}, "controller_epoch": float64(ci.Epoch)}
	if m := jsonOf(t, b); !reflect.DeepEqual(m, want) || st.Version != v {
		t.Fatalf("state\n got %v (znode version %d, returned %d)\nwant %v", m, st.Version, v, want)
	}
	_, err = c.SetPartitionState(ctx, "orders", 1, cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}, ControllerEpoch: ci.Epoch, Version: v})
	mustOK(t, err)
	if _, st = get("/brokers/topics/orders/partitions/1/state"); st.Version != v+1 {
		t.Fatalf("state znode version %d after one CAS from %d", st.Version, v)
	}
	kids, _, _ := raw.Children(chroot + "/state_change_notification")
	if len(kids) != 2 || !strings.HasPrefix(kids[0], "state_change_") {
		t.Fatalf("state change notifications %v", kids)
	}

	mustOK(t, c.SetTopicConfig(ctx, "orders", map[string]string{"cleanup.policy": "compact"}))
	kids, _, _ = raw.Children(chroot + "/config/changes")
	if len(kids) != 1 || !strings.HasPrefix(kids[0], "config_change_") {
		t.Fatalf("/config/changes %v", kids)
	}
	b, _ = get("/config/changes/" + kids[0])
	if m := jsonOf(t, b); m["version"] != 2.0 || m["entity_path"] != "topics/orders" {
		t.Fatalf("config change %s", b)
	}

	mustOK(t, c.MarkTopicForDeletion(ctx, "orders"))
	get("/admin/delete_topics/orders")

	blk, err := c.AllocateProducerIDs(ctx, 3, 1000)
	mustOK(t, err)
	b, _ = get("/latest_producer_id_block")
	if m := jsonOf(t, b); m["version"] != 1.0 || m["broker"] != 3.0 || m["block_start"] != "0" || m["block_end"] != "999" || blk.End != 999 {
		t.Fatalf("/latest_producer_id_block %s (%+v)", b, blk)
	}
	gen, err := c.NextBrokerID(ctx)
	mustOK(t, err)
	if _, st = get("/brokers/seqid"); gen != 1000+st.Version {
		t.Fatalf("generated id %d, /brokers/seqid version %d", gen, st.Version)
	}

	mustOK(t, c.SetReassignments(ctx, []cluster.Reassignment{{Topic: "orders", Partition: 0, Replicas: []int32{1, 2}}}))
	b, _ = get("/admin/reassign_partitions")
	if m := jsonOf(t, b); !reflect.DeepEqual(m, map[string]any{"version": 1.0, "partitions": []any{map[string]any{"topic": "orders", "partition": 0.0, "replicas": []any{1.0, 2.0}}}}) {
		t.Fatalf("/admin/reassign_partitions %s", b)
	}

	// Kafka's top-level znodes exist; nothing was written outside the chroot.
	for _, p := range []string{"/brokers/ids", "/brokers/topics", "/config/topics", "/config/changes", "/admin/delete_topics", "/isr_change_notification"} {
		get(p)
	}
	if ok, _, _ := raw.Exists("/brokers"); ok {
		t.Fatal("/brokers exists outside the chroot")
	}
}

// TestReadsKafkaZnodes reads znodes as Kafka itself writes them (older
// versions too) and checks the coordinator understands them.
func TestReadsKafkaZnodes(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	raw := rawConn(t, zkServer.Addr())
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{chroot, chroot + "/brokers", chroot + "/brokers/ids", chroot + "/brokers/topics",
		chroot + "/brokers/topics/legacy", chroot + "/brokers/topics/legacy/partitions", chroot + "/brokers/topics/legacy/partitions/0",
		chroot + "/config", chroot + "/config/topics"} {
		data := []byte(nil)
		if p == chroot+"/brokers/topics/legacy" {
			data = []byte(`{"version":3,"partitions":{"1":[2,1],"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"topic_id":"p1-_aGdQRsmX7kcMaVkNqw"}`)
		}
		if _, err := raw.Create(p, data, 0, acl); err != nil {
			t.Fatal(p, err)
		}
	}
	// Kafka 3.x with two listeners, SASL_SSL on one.
	_, err := raw.Create(chroot+"/brokers/ids/1", []byte(`{"features":{},"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SASL_SSL"},"endpoints":["INTERNAL://kafka-1:19092","EXTERNAL://kafka-1.example.com:9094"],"jmx_port":9999,"port":19092,"host":"kafka-1","version":5,"timestamp":"1690000000000","rack":"r1"}`), zk.FlagEphemeral, acl)
	mustOK(t, err)
	// Kafka 0.10 style (version 2, no listener map).
	_, err = raw.Create(chroot+"/brokers/ids/2", []byte(`{"jmx_port":-1,"timestamp":"1500000000000","endpoints":["PLAINTEXT://old:9092"],"host":"old","version":2,"port":9092}`), zk.FlagEphemeral, acl)
	mustOK(t, err)
	_, err = raw.Create(chroot+"/brokers/topics/legacy/partitions/0/state", []byte(`{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":12,"isr":[2,1],"leader_recovery_state":0}`), 0, acl)
	mustOK(t, err)
	_, err = raw.Create(chroot+"/config/topics/legacy", []byte(`{"version":1,"config":{"min.insync.replicas":"2"}}`), 0, acl)
	mustOK(t, err)

	c := open(t, zkServer.Addr(), chroot)
	ctx := bg(t)
	bs, err := c.Brokers(ctx)
	mustOK(t, err)
	if len(bs) != 2 {
		t.Fatalf("brokers %+v", bs)
	}
	if b := bs[0]; b.Rack != "r1" || b.Timestamp != 1690000000000 || len(b.Endpoints) != 2 ||
		b.Endpoints[1] != (cluster.Endpoint{Listener: "EXTERNAL", SecurityProtocol: "SASL_SSL", Host: "kafka-1.example.com", Port: 9094}) {
		t.Fatalf("kafka 3 broker %+v", b)
	}
	if b := bs[1]; len(b.Endpoints) != 1 || b.Endpoints[0] != (cluster.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "old", Port: 9092}) {
		t.Fatalf("kafka 0.10 broker %+v", b)
	}
	tp, err := c.Topic(ctx, "legacy")
	mustOK(t, err)
	if tp.ID.String() != "p1-_aGdQRsmX7kcMaVkNqw" || !slices.Equal(tp.Replicas[0], []int32{1, 2}) || !slices.Equal(tp.Replicas[1], []int32{2, 1}) {
		t.Fatalf("topic %+v", tp)
	}
	st, err := c.PartitionState(ctx, "legacy", 0)
	mustOK(t, err)
	if st.Leader != 2 || st.LeaderEpoch != 12 || st.ControllerEpoch != 7 || !slices.Equal(st.ISR, []int32{2, 1}) {
		t.Fatalf("state %+v", st)
	}
	if cfg, _ := c.TopicConfig(ctx, "legacy"); cfg["min.insync.replicas"] != "2" {
		t.Fatalf("config %v", cfg)
	}
	// A broker writing a state after Kafka keeps the format readable both ways.
	st.LeaderEpoch++
	_, err = c.SetPartitionState(ctx, "legacy", 0, st)
	mustOK(t, err)
	b, _, _ := raw.Get(chroot + "/brokers/topics/legacy/partitions/0/state")
	if m := jsonOf(t, b); m["leader_epoch"] != 13.0 {
		t.Fatalf("state after write %s", b)
	}
}

// TestOpenUnreachable: with nothing listening, Open gives up after
// zookeeper.connection.timeout.ms with an error, not a hang.
func TestOpenUnreachable(t *testing.T) {
	p := zktest.NewProxy(t, "127.0.0.1:1")
	p.Block()
	start := time.Now()
	_, err := Open(context.Background(), Config{Connect: p.Addr(), SessionTimeout: 2 * time.Second, ConnectionTimeout: 1500 * time.Millisecond, Logger: testLogger(t)})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open against nothing: %v", err)
	}
	if d := time.Since(start); d < 1400*time.Millisecond || d > 10*time.Second {
		t.Fatalf("Open gave up after %v, want about the 1.5s connection timeout", d)
	}
	if _, err := Open(context.Background(), Config{Connect: "bad:host:port"}); err == nil {
		t.Fatal("a malformed zookeeper.connect was accepted")
	}
}

// TestSessionExpiry cuts one coordinator off from ZooKeeper for longer than
// its session timeout. The others see its broker and controllership go; when
// it gets back it registers again, reloads what changed meanwhile and tells
// its watchers everything changed; its old controllership cannot write.
func TestSessionExpiry(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	proxy := zktest.NewProxy(t, zkServer.Addr())
	a := open(t, proxy.Addr(), chroot, func(c *Config) { c.SessionTimeout = 2 * time.Second })
	peer := open(t, zkServer.Addr(), chroot)
	ctx := bg(t)
	mustOK(t, a.RegisterBroker(ctx, cluster.Broker{ID: 1, Endpoints: []cluster.Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}))
	mustOK(t, peer.RegisterBroker(ctx, cluster.Broker{ID: 2}))
	ci, err := a.Campaign(ctx, 1)
	mustOK(t, err)
	mustOK(t, a.CreateTopic(ctx, cluster.Topic{Name: "t", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}, nil))
	_, err = a.CreatePartitionState(ctx, "t", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1, 2}, ControllerEpoch: ci.Epoch})
	mustOK(t, err)
	oldSession := a.SessionID()
	watch := a.Watch(ctx)

	proxy.Block()
	// While cut off, a still answers reads from what it knows and its
	// writes fail with errors; nothing panics.
	if st, err := a.PartitionState(ctx, "t", 0); err != nil || st.Leader != 1 {
		t.Fatalf("read while disconnected: %+v %v", st, err)
	}
	// Peer sees broker 1 and the controller go.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		bs, _ := peer.Brokers(ctx)
		ctl, _ := peer.Controller(ctx)
		if len(bs) != 1 || ctl.ID != -1 {
			return fmt.Errorf("brokers %v controller %+v", bs, ctl)
		}
		return nil
	})
	start := time.Now()
	err = a.SetTopicConfig(ctx, "t", map[string]string{"retention.ms": "1"})
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > 10*time.Second {
		t.Fatalf("write while cut off: %v after %v", err, time.Since(start))
	}
	// The peer becomes controller and moves the leader meanwhile.
	pci, err := peer.Campaign(ctx, 2)
	mustOK(t, err)
	if pci.ID != 2 || pci.Epoch != ci.Epoch+1 {
		t.Fatalf("peer campaign %+v", pci)
	}
	st, _ := peer.PartitionState(ctx, "t", 0)
	_, err = peer.SetPartitionState(ctx, "t", 0, cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}, ControllerEpoch: pci.Epoch, Version: st.Version})
	mustOK(t, err)
	mustOK(t, peer.CreateTopic(ctx, cluster.Topic{Name: "made-meanwhile", ID: cluster.NewUUID(), Replicas: [][]int32{{2}}}, nil))

	proxy.Unblock()
	// A re-registers in a new session.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if a.SessionID() == oldSession || a.SessionID() == 0 {
			return errors.New("same session")
		}
		bs, _ := peer.Brokers(ctx)
		if len(bs) != 2 {
			return fmt.Errorf("peer sees brokers %v", bs)
		}
		return nil
	})
	var got cluster.Change
	// ChangeAll delivered.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		select {
		case c := <-watch:
			got |= c
		default:
		}
		if got != cluster.ChangeAll {
			return fmt.Errorf("changes %b", got)
		}
		return nil
	})
	st, err = a.PartitionState(ctx, "t", 0)
	if err != nil || st.Leader != 2 || st.LeaderEpoch != 1 {
		t.Fatalf("a after the new session: %+v %v", st, err)
	}
	if _, err := a.Topic(ctx, "made-meanwhile"); err != nil {
		t.Fatalf("topic created while a was away: %v", err)
	}
	if ctl, _ := a.Controller(ctx); ctl.ID != 2 {
		t.Fatalf("a's view of the controller %+v", ctl)
	}
	// A's old controllership is gone: writes stamped with its epoch are
	// ordinary (unfenced) writes now, and its Campaign reports the peer.
	if again, err := a.Campaign(ctx, 1); err != nil || again.ID != 2 {
		t.Fatalf("a's campaign after expiry: %+v %v", again, err)
	}
}

// TestZombieControllerFenced: a controller that lost the role without
// noticing cannot write partition states stamped with its epoch.
func TestZombieControllerFenced(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	a := open(t, zkServer.Addr(), chroot)
	b := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())
	ctx := bg(t)
	mustOK(t, a.RegisterBroker(ctx, cluster.Broker{ID: 1}))
	mustOK(t, b.RegisterBroker(ctx, cluster.Broker{ID: 2}))
	ca, err := a.Campaign(ctx, 1)
	mustOK(t, err)
	mustOK(t, a.CreateTopic(ctx, cluster.Topic{Name: "z", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}, {1, 2}}}, nil))
	_, err = a.CreatePartitionState(ctx, "z", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1, 2}, ControllerEpoch: ca.Epoch})
	mustOK(t, err)

	// An operator deletes /controller; b wins the next election at once,
	// before a's watch fires and a notices.
	mustOK(t, raw.Delete(chroot+"/controller", -1))
	cb, err := b.Campaign(ctx, 2)
	mustOK(t, err)
	if cb.ID != 2 || cb.Epoch != ca.Epoch+1 {
		t.Fatalf("b's campaign %+v", cb)
	}
	// Let a notice, then put its old controllership back, as if it had
	// been paused (a GC pause, SIGSTOP) and not noticed.
	zkVersion := a.won0()
	// A notices the new controller.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if ctl, _ := a.Controller(ctx); ctl.ID != 2 {
			return fmt.Errorf("%+v", ctl)
		}
		return nil
	})
	a.mu.Lock()
	a.won = &controllership{epoch: ca.Epoch, zkVersion: zkVersion, session: a.SessionID()}
	a.mu.Unlock()

	actx := cluster.WithControllerEpoch(ctx, ca.Epoch)
	st, _ := a.PartitionState(ctx, "z", 0)
	st.Leader, st.LeaderEpoch = 2, st.LeaderEpoch+1
	_, err = a.SetPartitionState(actx, "z", 0, st)
	if !errors.Is(err, cluster.ErrNotController) {
		t.Fatalf("zombie controller's write: %v", err)
	}
	_, err = a.CreatePartitionState(actx, "z", 1, cluster.PartitionState{Leader: 1, ISR: []int32{1}, ControllerEpoch: ca.Epoch})
	if !errors.Is(err, cluster.ErrNotController) {
		t.Fatalf("zombie controller's create: %v", err)
	}
	if _, _, err := raw.Get(chroot + "/brokers/topics/z/partitions/1/state"); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("the refused create left a state behind: %v", err)
	}
	// The new controller writes; a leader's ordinary ISR write (carrying
	// the state's controller epoch) is not fenced.
	st, _ = b.PartitionState(ctx, "z", 0)
	st.ControllerEpoch = cb.Epoch
	st.LeaderEpoch++
	_, err = b.SetPartitionState(cluster.WithControllerEpoch(ctx, cb.Epoch), "z", 0, st)
	mustOK(t, err)
	// A sees b's write.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		got, _ := a.PartitionState(ctx, "z", 0)
		if got.Version != st.Version+1 {
			return fmt.Errorf("%+v", got)
		}
		return nil
	})
	got, _ := a.PartitionState(ctx, "z", 0)
	got.ISR = []int32{1}
	_, err = a.SetPartitionState(ctx, "z", 0, got)
	mustOK(t, err)
}

// won0 is the znode version of /controller_epoch that a's won epoch was
// stored at (the epoch before b's election).
func (c *Coordinator) won0() int32 {
	if c.won != nil {
		return c.won.zkVersion
	}
	_, st, err := c.conn.Get(c.path(controllerEpochPath))
	if err != nil {
		return -1
	}
	return st.Version - 1
}

// TestZooKeeperRestart stops ZooKeeper under running coordinators: reads keep
// answering, writes fail with ErrUnavailable within bounded time, and after
// ZooKeeper is back (same port, same data) the sessions continue — the
// broker stays registered, the metadata is intact, and writes and watches
// work again.
func TestZooKeeperRestart(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	srv := zktest.Start(t, zktest.Options{})
	chroot := "/sluice"
	a := open(t, srv.Addr(), chroot, func(c *Config) { c.SessionTimeout = 6 * time.Second })
	b := open(t, srv.Addr(), chroot, func(c *Config) { c.SessionTimeout = 6 * time.Second })
	ctx := bg(t)
	mustOK(t, a.RegisterBroker(ctx, cluster.Broker{ID: 1}))
	mustOK(t, b.RegisterBroker(ctx, cluster.Broker{ID: 2}))
	_, err := a.Campaign(ctx, 1)
	mustOK(t, err)
	tp := cluster.Topic{Name: "kept", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}
	mustOK(t, a.CreateTopic(ctx, tp, nil))
	_, err = a.CreatePartitionState(ctx, "kept", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1, 2}})
	mustOK(t, err)
	sa, sb := a.SessionID(), b.SessionID()
	// B sees the state.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		_, err := b.PartitionState(ctx, "kept", 0)
		return err
	})

	srv.Stop()
	if st, err := b.PartitionState(ctx, "kept", 0); err != nil || st.Leader != 1 {
		t.Fatalf("read while zookeeper is down: %+v %v", st, err)
	}
	start := time.Now()
	err = a.SetTopicConfig(ctx, "kept", map[string]string{"retention.ms": "1"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write while zookeeper is down: %v", err)
	}
	if d := time.Since(start); d > 12*time.Second {
		t.Fatalf("failing write took %v", d)
	}
	_, errs := a.WritePartitionStates(ctx, []cluster.StateWrite{{Topic: "kept", Partition: 0, State: cluster.PartitionState{Leader: 2, Version: 0}}})
	if !errors.Is(errs[0], ErrUnavailable) {
		t.Fatalf("state write while zookeeper is down: %v", errs[0])
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// Sessions resume.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if !a.Connected() || !b.Connected() {
			return errors.New("not connected")
		}
		return nil
	})
	if a.SessionID() != sa || b.SessionID() != sb {
		t.Fatalf("sessions changed across a short zookeeper restart: %x->%x %x->%x", sa, a.SessionID(), sb, b.SessionID())
	}
	if bs, _ := b.Brokers(ctx); len(bs) != 2 {
		t.Fatalf("brokers after the restart %v", bs)
	}
	if ctl, _ := b.Controller(ctx); ctl.ID != 1 {
		t.Fatalf("controller after the restart %+v", ctl)
	}
	// Writes and watches work again.
	st, _ := a.PartitionState(ctx, "kept", 0)
	st.LeaderEpoch++
	_, err = a.SetPartitionState(ctx, "kept", 0, st)
	mustOK(t, err)
	// B sees a's write after the restart.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		got, _ := b.PartitionState(ctx, "kept", 0)
		if got.LeaderEpoch != st.LeaderEpoch {
			return fmt.Errorf("%+v", got)
		}
		return nil
	})
	got, _ := b.Topic(ctx, "kept")
	if got.ID != tp.ID {
		t.Fatalf("topic after the restart %+v", got)
	}
}

// TestSilentServerKeepsSession: the connection to ZooKeeper breaks and the
// next connection reaches a server that accepts it but never answers (a
// ZooKeeper restarting binds its port seconds before it answers, and
// connections made in between are never served). The client gives up on the
// silent connection within the handshake bound, reconnects once the server
// answers again, and keeps its session, its registration and its
// controllership; a write issued meanwhile waits for the session and
// succeeds. (With the ZooKeeper client's own bound — ten times its receive
// timeout, 40 s for a 6 s session — the session expired.)
func TestSilentServerKeepsSession(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	proxy := zktest.NewProxy(t, zkServer.Addr())
	const session = 6 * time.Second
	a := open(t, proxy.Addr(), chroot, func(c *Config) { c.SessionTimeout = session })
	ctx := bg(t)
	mustOK(t, a.RegisterBroker(ctx, cluster.Broker{ID: 1}))
	ci, err := a.Campaign(ctx, 1)
	mustOK(t, err)
	mustOK(t, a.CreateTopic(ctx, cluster.Topic{Name: "s", ID: cluster.NewUUID(), Replicas: [][]int32{{1}}}, nil))
	sid := a.SessionID()

	proxy.Stall()
	// The client notices the broken connection.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if a.Connected() {
			return errors.New("still connected")
		}
		return nil
	})
	// Let the client connect to the silent server and wait on it.
	time.Sleep(500 * time.Millisecond)
	written := make(chan error, 1)
	go func() {
		_, err := a.CreatePartitionState(cluster.WithControllerEpoch(ctx, ci.Epoch), "s", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1}, ControllerEpoch: ci.Epoch})
		written <- err
	}()
	time.Sleep(500 * time.Millisecond)
	proxy.Unblock()
	start := time.Now()
	// A session again.
	testutil.CheckFor(t, session, 20*time.Millisecond, func() error {
		if !a.Connected() {
			return errors.New("no session")
		}
		return nil
	})
	t.Logf("session back %v after the server answered again", time.Since(start).Round(time.Millisecond))
	if a.SessionID() != sid {
		t.Fatalf("session lost: %#x -> %#x", sid, a.SessionID())
	}
	select {
	case err := <-written:
		mustOK(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the write made during the outage did not finish")
	}
	raw := rawConn(t, zkServer.Addr())
	if ok, _, err := raw.Exists(chroot + "/brokers/ids/1"); err != nil || !ok {
		t.Fatalf("registration after the outage: %v %v", ok, err)
	}
	if ctl, _ := a.Controller(ctx); ctl.ID != 1 || ctl.Epoch != ci.Epoch {
		t.Fatalf("controller after the outage %+v, want broker 1 at epoch %d", ctl, ci.Epoch)
	}
}

// TestCampaignRecoversLostAnswer: a Campaign whose transaction went through
// but whose answer was lost (the connection broke) leaves this session
// holding /controller without knowing it. The next Campaign finds its own
// /controller and takes the role up at that epoch, so the controller's
// fenced writes work, instead of the cluster keeping a controller that
// cannot write (no other broker campaigns while /controller exists).
func TestCampaignRecoversLostAnswer(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	a := open(t, zkServer.Addr(), chroot)
	b := open(t, zkServer.Addr(), chroot)
	ctx := bg(t)
	mustOK(t, a.RegisterBroker(ctx, cluster.Broker{ID: 1}))
	mustOK(t, b.RegisterBroker(ctx, cluster.Broker{ID: 2}))
	ci, err := a.Campaign(ctx, 1)
	mustOK(t, err)
	mustOK(t, a.CreateTopic(ctx, cluster.Topic{Name: "l", ID: cluster.NewUUID(), Replicas: [][]int32{{1, 2}}}, nil))
	// Forget the win, as a lost answer does.
	a.mu.Lock()
	a.won = nil
	a.mu.Unlock()
	again, err := a.Campaign(ctx, 1)
	mustOK(t, err)
	if again.ID != 1 || again.Epoch != ci.Epoch {
		t.Fatalf("campaign after the lost answer %+v, want broker 1 at epoch %d", again, ci.Epoch)
	}
	_, err = a.CreatePartitionState(cluster.WithControllerEpoch(ctx, again.Epoch), "l", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1, 2}, ControllerEpoch: again.Epoch})
	mustOK(t, err)
	// Another broker's campaign still sees broker 1, at the same epoch.
	if other, err := b.Campaign(ctx, 2); err != nil || other.ID != 1 || other.Epoch != ci.Epoch {
		t.Fatalf("b's campaign %+v %v", other, err)
	}
}

// TestBatchWrites: many states in few transactions, with per-write results.
func TestBatchWrites(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	a := open(t, zkServer.Addr(), chroot)
	b := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())
	ctx := bg(t)
	const n = 1500
	replicas := make([][]int32, n)
	for i := range replicas {
		replicas[i] = []int32{1, 2, 3}
	}
	mustOK(t, a.CreateTopic(ctx, cluster.Topic{Name: "big", ID: cluster.NewUUID(), Replicas: replicas}, nil))
	mustOK(t, a.CreateTopic(ctx, cluster.Topic{Name: "small", ID: cluster.NewUUID(), Replicas: [][]int32{{1}}}, nil))
	// A partition znode left without a state by an interrupted write.
	mustOK(t, a.ensurePath(partitionsPath("big")))
	_, err := raw.Create(chroot+"/brokers/topics/big/partitions/7", nil, 0, zk.WorldACL(zk.PermAll))
	mustOK(t, err)
	before, _, _ := raw.Children(chroot + stateChangesPath)

	var writes []cluster.StateWrite
	for p := int32(0); p < n; p++ {
		writes = append(writes, cluster.StateWrite{Topic: "big", Partition: p, Create: true, State: cluster.PartitionState{Leader: 1 + p%3, ISR: []int32{1, 2, 3}}})
	}
	writes = append(writes, cluster.StateWrite{Topic: "small", Partition: 0, Create: true, State: cluster.PartitionState{Leader: 1, ISR: []int32{1}}})
	writes = append(writes, cluster.StateWrite{Topic: "missing", Partition: 0, Create: true, State: cluster.PartitionState{Leader: 1}})
	vs, errs := a.WritePartitionStates(ctx, writes)
	for i := range n + 1 {
		if errs[i] != nil || vs[i] != 0 {
			t.Fatalf("write %d: %d %v", i, vs[i], errs[i])
		}
	}
	if !errors.Is(errs[n+1], cluster.ErrNoTopic) {
		t.Fatalf("write to a missing topic: %v", errs[n+1])
	}
	after, _, _ := raw.Children(chroot + stateChangesPath)
	if added := len(after) - len(before); added < 2 || added > 4 {
		t.Fatalf("%d state writes made %d notifications; want a handful", n+1, added)
	}
	// Peer sees every state.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		sts, err := b.PartitionStates(ctx, "big")
		if err != nil || len(sts) != n {
			return fmt.Errorf("%d states %v", len(sts), err)
		}
		return nil
	})

	// Updates: one stale version fails alone.
	writes = writes[:0]
	for p := int32(0); p < n; p++ {
		writes = append(writes, cluster.StateWrite{Topic: "big", Partition: p, State: cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}, Version: 0}})
	}
	writes[100].State.Version = 5
	writes = append(writes, cluster.StateWrite{Topic: "small", Partition: 0, Create: true, State: cluster.PartitionState{Leader: 1}})
	vs, errs = a.WritePartitionStates(ctx, writes)
	for i := range n {
		if i == 100 {
			if !errors.Is(errs[i], cluster.ErrBadVersion) {
				t.Fatalf("stale write: %v", errs[i])
			}
			continue
		}
		if errs[i] != nil || vs[i] != 1 {
			t.Fatalf("update %d: %d %v", i, vs[i], errs[i])
		}
	}
	if !errors.Is(errs[n], cluster.ErrStateExists) {
		t.Fatalf("second create: %v", errs[n])
	}
	// Peer sees the updates.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		sts, _ := b.PartitionStates(ctx, "big")
		for p, st := range sts {
			if p != 100 && (st.Leader != 2 || st.Version != 1) {
				return fmt.Errorf("big-%d %+v", p, st)
			}
		}
		if sts[100].Version != 0 {
			return fmt.Errorf("big-100 %+v", sts[100])
		}
		return nil
	})
}

// TestNotificationPurgeAndGap: the controller purges old notifications but
// keeps the newest; a coordinator that finds entries it never read were
// purged reads every state again and ends up right.
func TestNotificationPurgeAndGap(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	if got, gap := newEntries([]logEntry{{"a", 5}, {"b", 6}, {"c", 9}}, 6); len(got) != 1 || got[0].seq != 9 || gap {
		t.Fatalf("newEntries after 6: %v %v", got, gap)
	}
	if got, gap := newEntries([]logEntry{{"c", 9}}, 6); len(got) != 1 || !gap {
		t.Fatalf("newEntries with 7, 8 purged: %v %v", got, gap)
	}
	if got, gap := newEntries(nil, 6); len(got) != 0 || gap {
		t.Fatalf("newEntries of nothing: %v %v", got, gap)
	}
	if _, gap := newEntries([]logEntry{{"c", 9}}, -1); gap {
		t.Fatal("a coordinator that never saw an entry cannot have a gap")
	}

	chroot := newChroot()
	proxy := zktest.NewProxy(t, zkServer.Addr())
	ctl := open(t, zkServer.Addr(), chroot, func(c *Config) { c.ChangeRetention = 300 * time.Millisecond })
	b := open(t, proxy.Addr(), chroot, func(c *Config) { c.SessionTimeout = 10 * time.Second })
	raw := rawConn(t, zkServer.Addr())
	ctx := bg(t)
	mustOK(t, ctl.RegisterBroker(ctx, cluster.Broker{ID: 1}))
	ci, err := ctl.Campaign(ctx, 1)
	mustOK(t, err)
	mustOK(t, ctl.CreateTopic(ctx, cluster.Topic{Name: "g", ID: cluster.NewUUID(), Replicas: [][]int32{{1}, {1}}}, nil))
	for p := int32(0); p < 2; p++ {
		_, err := ctl.CreatePartitionState(ctx, "g", p, cluster.PartitionState{Leader: 1, ISR: []int32{1}, ControllerEpoch: ci.Epoch})
		mustOK(t, err)
	}
	// B sees the states.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		sts, _ := b.PartitionStates(ctx, "g")
		if len(sts) != 2 {
			return fmt.Errorf("%v", sts)
		}
		return nil
	})
	// The controller's purge keeps only the newest entry.
	// Purge.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		kids, _, err := raw.Children(chroot + stateChangesPath)
		if err != nil || len(kids) != 1 {
			return fmt.Errorf("%d notifications left %v", len(kids), err)
		}
		return nil
	})

	// Cut b off (its session lives on), write twice, purge everything but
	// the newest behind b's back.
	proxy.Block()
	for i := 0; i < 2; i++ {
		st, _ := ctl.PartitionState(ctx, "g", 0)
		st.LeaderEpoch++
		_, err := ctl.SetPartitionState(ctx, "g", 0, st)
		mustOK(t, err)
	}
	st1, _ := ctl.PartitionState(ctx, "g", 1)
	st1.LeaderEpoch = 40
	_, err = ctl.SetPartitionState(ctx, "g", 1, st1)
	mustOK(t, err)
	kids, _, _ := raw.Children(chroot + stateChangesPath)
	slices.Sort(kids)
	for _, k := range kids[:len(kids)-1] {
		mustOK(t, raw.Delete(chroot+stateChangesPath+"/"+k, -1))
	}
	proxy.Unblock()
	// B catches up through a full reload.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		sts, _ := b.PartitionStates(ctx, "g")
		if sts[0].LeaderEpoch != 2 || sts[1].LeaderEpoch != 40 {
			return fmt.Errorf("%+v", sts)
		}
		return nil
	})
	if !maps.EqualFunc(mustStates(t, b, "g"), mustStates(t, ctl, "g"), func(x, y cluster.PartitionState) bool {
		return x.Version == y.Version && x.LeaderEpoch == y.LeaderEpoch
	}) {
		t.Fatal("b and the controller disagree")
	}
}

func mustStates(t *testing.T, c *Coordinator, topic string) map[int32]cluster.PartitionState {
	sts, err := c.PartitionStates(bg(t), topic)
	mustOK(t, err)
	return sts
}

// TestLeadership: two processes campaign for one role through an ephemeral
// znode. Exactly one leads; when it gives the role up the other takes it at
// once; when the leader is cut off from ZooKeeper it stops leading at once
// (its session is in doubt) and the other takes over when ZooKeeper expires
// its session; back in a new session the first does not lead while the
// second holds the node. An operator deleting the node makes the holder
// create it again.
func TestLeadership(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	proxy := zktest.NewProxy(t, zkServer.Addr())
	const session = 2 * time.Second
	a := open(t, proxy.Addr(), chroot, func(c *Config) { c.SessionTimeout = session })
	b := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())

	la, err := a.Lead(ConsoleLeaderPath, []byte(`{"broker":1}`))
	mustOK(t, err)
	// A leads.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !la.IsLeader() {
			return errors.New("a does not lead")
		}
		return nil
	})
	lb, err := b.Lead(ConsoleLeaderPath, []byte(`{"broker":2}`))
	mustOK(t, err)
	t.Cleanup(func() { lb.Close() })
	// B sees a hold the role.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if lb.Holder() != `{"broker":1}` {
			return fmt.Errorf("holder %q", lb.Holder())
		}
		return nil
	})
	if lb.IsLeader() || !la.IsLeader() {
		t.Fatalf("a leads %v, b leads %v", la.IsLeader(), lb.IsLeader())
	}

	// a gives the role up: b takes it at once.
	mustOK(t, la.Close())
	if la.IsLeader() {
		t.Fatal("a still leads after Close")
	}
	// B takes over after a's Close.
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if !lb.IsLeader() {
			return errors.New("b does not lead")
		}
		return nil
	})
	b1, st, err := raw.Get(chroot + ConsoleLeaderPath)
	mustOK(t, err)
	if string(b1) != `{"broker":2}` || st.EphemeralOwner != b.SessionID() {
		t.Fatalf("node %q owned by %#x, want b's %#x", b1, st.EphemeralOwner, b.SessionID())
	}

	// An operator deletes the node: its holder creates it again.
	mustOK(t, raw.Delete(chroot+ConsoleLeaderPath, -1))
	// B holds the node again.
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		_, st, err := raw.Get(chroot + ConsoleLeaderPath)
		if err != nil {
			return err
		}
		if st.EphemeralOwner != b.SessionID() || !lb.IsLeader() {
			return fmt.Errorf("owner %#x, b leads %v", st.EphemeralOwner, lb.IsLeader())
		}
		return nil
	})

	// Hand the role back to a: b gives it up, a campaigns again.
	la, err = a.Lead(ConsoleLeaderPath, []byte(`{"broker":1}`))
	mustOK(t, err)
	t.Cleanup(func() { la.Close() })
	mustOK(t, lb.Close())
	// A leads again.
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if !la.IsLeader() {
			return errors.New("a does not lead")
		}
		return nil
	})
	lb, err = b.Lead(ConsoleLeaderPath, []byte(`{"broker":2}`))
	mustOK(t, err)

	// a is cut off: it stops leading at once; b leads once a's session
	// has expired, within about the session timeout.
	proxy.Block()
	// A stops leading when cut off.
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if la.IsLeader() {
			return errors.New("a still leads")
		}
		return nil
	})
	cut := time.Now()
	// B takes over when a's session expires.
	testutil.CheckFor(t, session+5*time.Second, 20*time.Millisecond, func() error {
		if !lb.IsLeader() {
			return errors.New("b does not lead")
		}
		return nil
	})
	t.Logf("b took over %v after a was cut off (session timeout %v)", time.Since(cut).Round(time.Millisecond), session)
	proxy.Unblock()
	// A in a new session.
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if !a.Connected() {
			return errors.New("not connected")
		}
		if la.Holder() != `{"broker":2}` {
			return fmt.Errorf("a sees holder %q", la.Holder())
		}
		return nil
	})
	if la.IsLeader() || !lb.IsLeader() {
		t.Fatalf("after a's return: a leads %v, b leads %v", la.IsLeader(), lb.IsLeader())
	}
	mustOK(t, lb.Close())
	// A takes over in its new session.
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if !la.IsLeader() {
			return errors.New("a does not lead")
		}
		return nil
	})
}

// Package coordtest is the behavioural contract of cluster.Coordinator as a
// test suite: every implementation (the standalone file coordinator, the
// ZooKeeper coordinator) runs the same Run, so the broker can rely on the
// same semantics whichever is configured.
package coordtest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// Store is one empty metadata store for a subtest.
type Store interface {
	// Open starts a coordinator (a session) on the store. Coordinators
	// opened one after another (the previous one closed) see the same
	// persistent data.
	Open(t *testing.T) cluster.Coordinator
	// MultiSession reports whether several coordinators may be open on the
	// store at once, sharing it live (ZooKeeper: yes; a file: no).
	MultiSession() bool
}

// Run runs the whole suite. newStore returns a fresh, empty store.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name  string
		multi bool
		fn    func(t *testing.T, s Store)
	}{
		{"ClusterID", false, testClusterID},
		{"Brokers", false, testBrokers},
		{"NextBrokerID", false, testNextBrokerID},
		{"Campaign", false, testCampaign},
		{"Topics", false, testTopics},
		{"Deletion", false, testDeletion},
		{"PartitionStates", false, testPartitionStates},
		{"ConcurrentCAS", false, testConcurrentCAS},
		{"Configs", false, testConfigs},
		{"ProducerIDs", false, testProducerIDs},
		{"Watch", false, testWatch},
		{"Closed", false, testClosed},
		{"Persistence", false, testPersistence},
		{"ControllerReconcile", false, testControllerReconcile},
		{"SharedClusterID", true, testSharedClusterID},
		{"PeerSeesWrites", true, testPeerSeesWrites},
		{"PeerBrokerExists", true, testPeerBrokerExists},
		{"ControllerHandover", true, testControllerHandover},
		{"PeerCAS", true, testPeerCAS},
		{"PeerProducerIDs", true, testPeerProducerIDs},
		{"FailoverReconcile", true, testFailoverReconcile},
		{"BrokerConfigs", false, testBrokerConfigs},
		{"PeerBrokerConfigs", true, testPeerBrokerConfigs},
		{"ConfigCAS", false, testConfigCAS},
		{"PeerConfigRead", true, testPeerConfigRead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if tc.multi && !s.MultiSession() {
				t.Skip("the store holds one session at a time")
			}
			tc.fn(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

func broker(id int32, rack string) cluster.Broker {
	return cluster.Broker{ID: id, Rack: rack, Timestamp: 1700000000000 + int64(id), Endpoints: []cluster.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: fmt.Sprintf("127.0.0.%d", id), Port: 9092},
		{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.1", Port: 19092 + id},
	}}
}

func topic(name string, replicas ...[]int32) cluster.Topic {
	return cluster.Topic{Name: name, ID: cluster.NewUUID(), Replicas: replicas}
}

func testClusterID(t *testing.T, s Store) {
	c := s.Open(t)
	id, err := c.ClusterID(ctx(t))
	must(t, err)
	if b, err := base64.RawURLEncoding.DecodeString(id); len(id) != 22 || err != nil || len(b) != 16 {
		t.Fatalf("cluster id %q is not a 22-character base64 uuid", id)
	}
	id2, err := c.ClusterID(ctx(t))
	if err != nil || id2 != id {
		t.Fatalf("second ClusterID %q %v, want %q", id2, err, id)
	}
}

func testBrokers(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	if bs, err := c.Brokers(cx); err != nil || len(bs) != 0 {
		t.Fatalf("brokers of an empty store: %v %v", bs, err)
	}
	in := []cluster.Broker{broker(3, "rack-b"), broker(1, "rack-a"), broker(2, "")}
	for _, b := range in {
		must(t, c.RegisterBroker(cx, b))
	}
	wantErr(t, c.RegisterBroker(cx, broker(2, "")), cluster.ErrBrokerExists, "second registration of broker 2")
	bs, err := c.Brokers(cx)
	must(t, err)
	if len(bs) != 3 {
		t.Fatalf("brokers %v", bs)
	}
	for i, b := range bs {
		want := in[[]int{1, 2, 0}[i]]
		if b.ID != int32(i+1) || b.Rack != want.Rack || b.Timestamp != want.Timestamp || !slices.Equal(b.Endpoints, want.Endpoints) {
			t.Fatalf("broker %d: got %+v, want %+v", i+1, b, want)
		}
	}
	// The result is a copy.
	bs[0].Endpoints[0].Host = "changed"
	again, _ := c.Brokers(cx)
	if again[0].Endpoints[0].Host == "changed" {
		t.Fatal("Brokers returned the coordinator's own slice")
	}
	// Without a timestamp, registration time is filled in.
	b := broker(4, "")
	b.Timestamp = 0
	before := time.Now().UnixMilli()
	must(t, c.RegisterBroker(cx, b))
	bs, _ = c.Brokers(cx)
	if ts := bs[3].Timestamp; ts < before-1000 || ts > time.Now().UnixMilli()+1000 {
		t.Fatalf("registration timestamp %d, now %d", ts, before)
	}
	if ep, ok := bs[0].Endpoint("INTERNAL"); !ok || ep.Port != 19093 {
		t.Fatalf("endpoint by listener: %+v %v", ep, ok)
	}
}

func testNextBrokerID(t *testing.T, s Store) {
	c := s.Open(t)
	seen := map[int32]bool{}
	for i := 0; i < 3; i++ {
		id, err := c.NextBrokerID(ctx(t))
		must(t, err)
		if id <= cluster.ReservedBrokerMaxID || seen[id] {
			t.Fatalf("generated id %d (seen %v)", id, seen)
		}
		if i == 0 && id != cluster.ReservedBrokerMaxID+1 {
			t.Fatalf("first generated id %d, Kafka gives %d", id, cluster.ReservedBrokerMaxID+1)
		}
		seen[id] = true
	}
}

func testCampaign(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	if ci, err := c.Controller(cx); err != nil || ci.ID != -1 {
		t.Fatalf("controller of an empty store: %+v %v", ci, err)
	}
	if _, err := c.Campaign(cx, 5); err == nil {
		t.Fatal("an unregistered broker became controller")
	}
	must(t, c.RegisterBroker(cx, broker(5, "")))
	ci, err := c.Campaign(cx, 5)
	must(t, err)
	if ci.ID != 5 || ci.Epoch < 1 {
		t.Fatalf("campaign: %+v", ci)
	}
	again, err := c.Campaign(cx, 5)
	if err != nil || again != ci {
		t.Fatalf("second campaign by the controller: %+v %v, want %+v", again, err, ci)
	}
	if got, err := c.Controller(cx); err != nil || got != ci {
		t.Fatalf("Controller: %+v %v, want %+v", got, err, ci)
	}
}

func testTopics(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	_, err := c.Topic(cx, "nope")
	wantErr(t, err, cluster.ErrNoTopic, "Topic of an unknown topic")
	b := topic("b", []int32{1, 2}, []int32{2, 1})
	a := topic("a", []int32{1})
	must(t, c.CreateTopic(cx, b, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}))
	must(t, c.CreateTopic(cx, a, nil))
	wantErr(t, c.CreateTopic(cx, topic("a", []int32{2}), nil), cluster.ErrTopicExists, "creating topic a twice")
	names, err := c.Topics(cx)
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("Topics %v %v", names, err)
	}
	got, err := c.Topic(cx, "b")
	must(t, err)
	if got.Name != "b" || got.ID != b.ID || len(got.Replicas) != 2 || !slices.Equal(got.Replicas[1], []int32{2, 1}) {
		t.Fatalf("topic b: %+v", got)
	}
	// A copy.
	got.Replicas[0][0] = 99
	if again, _ := c.Topic(cx, "b"); again.Replicas[0][0] == 99 {
		t.Fatal("Topic returned the coordinator's own slices")
	}
	cfg, err := c.TopicConfig(cx, "b")
	if err != nil || !maps.Equal(cfg, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}) {
		t.Fatalf("configs of b: %v %v", cfg, err)
	}

	// Adding partitions: compare-and-set on the version.
	cur, _ := c.Topic(cx, "b")
	cur.Replicas = append(cur.Replicas, []int32{1, 2})
	v, err := c.SetTopicAssignment(cx, cur)
	must(t, err)
	if v == cur.Version {
		t.Fatalf("version did not move: %d", v)
	}
	_, err = c.SetTopicAssignment(cx, cur)
	wantErr(t, err, cluster.ErrBadVersion, "assignment with a stale version")
	got, _ = c.Topic(cx, "b")
	if got.Version != v || len(got.Replicas) != 3 || got.ID != b.ID {
		t.Fatalf("after SetTopicAssignment: %+v (version %d)", got, v)
	}
	_, err = c.SetTopicAssignment(cx, cluster.Topic{Name: "nope", Replicas: [][]int32{{1}}})
	wantErr(t, err, cluster.ErrNoTopic, "assignment of an unknown topic")

	// A reassignment in progress (KIP-455): replicas are the union, with
	// the replicas being added and removed.
	cur, _ = c.Topic(cx, "b")
	cur.Replicas[0] = []int32{3, 1, 2}
	cur.Adding = map[int32][]int32{0: {3}}
	cur.Removing = map[int32][]int32{0: {2}}
	_, err = c.SetTopicAssignment(cx, cur)
	must(t, err)
	got, _ = c.Topic(cx, "b")
	if !got.Reassigning(0) || got.Reassigning(1) || !slices.Equal(got.Adding[0], []int32{3}) || !slices.Equal(got.Removing[0], []int32{2}) ||
		!slices.Equal(got.Target(0), []int32{3, 1}) || !slices.Equal(got.Original(0), []int32{1, 2}) {
		t.Fatalf("reassignment: %+v", got)
	}
	got.Replicas[0], got.Adding, got.Removing = []int32{3, 1}, nil, nil
	_, err = c.SetTopicAssignment(cx, got)
	must(t, err)
	if got, _ = c.Topic(cx, "b"); got.Reassigning(0) || len(got.Adding)+len(got.Removing) != 0 {
		t.Fatalf("after completing the reassignment: %+v", got)
	}
}

func testDeletion(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	wantErr(t, c.MarkTopicForDeletion(cx, "nope"), cluster.ErrNoTopic, "marking an unknown topic")
	x := topic("x", []int32{1}, []int32{1})
	must(t, c.CreateTopic(cx, x, map[string]string{"retention.ms": "5"}))
	must(t, c.CreateTopic(cx, topic("w", []int32{1}), nil))
	for p := int32(0); p < 2; p++ {
		_, err := c.CreatePartitionState(cx, "x", p, cluster.PartitionState{Leader: 1, ISR: []int32{1}})
		must(t, err)
	}
	must(t, c.MarkTopicForDeletion(cx, "x"))
	must(t, c.MarkTopicForDeletion(cx, "x")) // idempotent
	must(t, c.MarkTopicForDeletion(cx, "w"))
	if d, err := c.PendingDeletions(cx); err != nil || !slices.Equal(d, []string{"w", "x"}) {
		t.Fatalf("pending deletions %v %v", d, err)
	}
	if names, _ := c.Topics(cx); !slices.Equal(names, []string{"w", "x"}) {
		t.Fatalf("topics pending deletion must still be listed: %v", names)
	}
	wantErr(t, c.CreateTopic(cx, topic("x", []int32{1}), nil), cluster.ErrTopicExists, "re-creating a topic pending deletion")
	must(t, c.DeleteTopic(cx, "x"))
	_, err := c.Topic(cx, "x")
	wantErr(t, err, cluster.ErrNoTopic, "deleted topic")
	_, err = c.PartitionState(cx, "x", 0)
	wantErr(t, err, cluster.ErrNoState, "state of a deleted topic")
	_, err = c.TopicConfig(cx, "x")
	wantErr(t, err, cluster.ErrNoTopic, "config of a deleted topic")
	if d, _ := c.PendingDeletions(cx); !slices.Equal(d, []string{"w"}) {
		t.Fatalf("pending deletions after deleting x: %v", d)
	}
	wantErr(t, c.DeleteTopic(cx, "x"), cluster.ErrNoTopic, "deleting x again")

	// A new topic of the same name starts clean.
	x2 := topic("x", []int32{2})
	must(t, c.CreateTopic(cx, x2, nil))
	got, _ := c.Topic(cx, "x")
	if got.ID != x2.ID || len(got.Replicas) != 1 {
		t.Fatalf("re-created x: %+v", got)
	}
	_, err = c.PartitionState(cx, "x", 0)
	wantErr(t, err, cluster.ErrNoState, "state of the re-created topic")
	if cfg, _ := c.TopicConfig(cx, "x"); len(cfg) != 0 {
		t.Fatalf("re-created topic inherited configs %v", cfg)
	}
}

func testPartitionStates(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	_, err := c.CreatePartitionState(cx, "nope", 0, cluster.PartitionState{Leader: 1})
	wantErr(t, err, cluster.ErrNoTopic, "state of an unknown topic")
	must(t, c.CreateTopic(cx, topic("t", []int32{1, 2, 3}, []int32{2, 3, 1}), nil))
	_, err = c.PartitionState(cx, "t", 0)
	wantErr(t, err, cluster.ErrNoState, "state before creation")
	_, err = c.SetPartitionState(cx, "t", 0, cluster.PartitionState{Leader: 1})
	wantErr(t, err, cluster.ErrNoState, "set before creation")

	first := cluster.PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}, ControllerEpoch: 4}
	v0, err := c.CreatePartitionState(cx, "t", 0, first)
	must(t, err)
	_, err = c.CreatePartitionState(cx, "t", 0, first)
	wantErr(t, err, cluster.ErrStateExists, "creating a state twice")
	st, err := c.PartitionState(cx, "t", 0)
	must(t, err)
	if st.Leader != 1 || st.LeaderEpoch != 0 || !slices.Equal(st.ISR, []int32{1, 2, 3}) || st.ControllerEpoch != 4 || st.Version != v0 {
		t.Fatalf("state %+v (created at version %d)", st, v0)
	}
	st.ISR[0] = 42
	if again, _ := c.PartitionState(cx, "t", 0); again.ISR[0] == 42 {
		t.Fatal("PartitionState returned the coordinator's own slice")
	}

	next := cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}, ControllerEpoch: 4, Version: v0}
	v1, err := c.SetPartitionState(cx, "t", 0, next)
	must(t, err)
	if v1 == v0 {
		t.Fatal("version did not move")
	}
	_, err = c.SetPartitionState(cx, "t", 0, next) // still at v0
	wantErr(t, err, cluster.ErrBadVersion, "compare-and-set with a stale version")
	st, _ = c.PartitionState(cx, "t", 0)
	if st.Leader != 2 || st.LeaderEpoch != 1 || !slices.Equal(st.ISR, []int32{2, 3}) || st.Version != v1 {
		t.Fatalf("state after CAS %+v", st)
	}
	// An empty ISR and an offline leader round-trip.
	off := cluster.PartitionState{Leader: -1, LeaderEpoch: 2, ISR: []int32{}, ControllerEpoch: 5, Version: v1}
	v2, err := c.SetPartitionState(cx, "t", 0, off)
	must(t, err)
	st, _ = c.PartitionState(cx, "t", 0)
	if st.Leader != -1 || len(st.ISR) != 0 || st.ControllerEpoch != 5 || st.Version != v2 {
		t.Fatalf("offline state %+v", st)
	}
	// Partition 1 is independent.
	_, err = c.PartitionState(cx, "t", 1)
	wantErr(t, err, cluster.ErrNoState, "partition 1")
}

func testConcurrentCAS(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	must(t, c.CreateTopic(cx, topic("cas", []int32{1}), nil))
	_, err := c.CreatePartitionState(cx, "cas", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1}})
	must(t, err)
	incrementConcurrently(t, []cluster.Coordinator{c}, "cas", 6, 8)
}

// incrementConcurrently bumps the leader epoch of <topic>-0 from workers
// goroutines spread over coordinators, n times each, with read-CAS-retry
// loops, and checks that no increment was lost.
func incrementConcurrently(t *testing.T, cs []cluster.Coordinator, topic string, workers, n int) {
	cx := ctx(t)
	start, _ := cs[0].PartitionState(cx, topic, 0)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		c := cs[w%len(cs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				for attempt := 0; ; attempt++ {
					if attempt > 500 {
						errc <- errors.New("too many lost compare-and-sets")
						return
					}
					st, err := c.PartitionState(cx, topic, 0)
					if err != nil {
						errc <- err
						return
					}
					st.LeaderEpoch++
					_, err = c.SetPartitionState(cx, topic, 0, st)
					if errors.Is(err, cluster.ErrBadVersion) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						errc <- err
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	want := start.LeaderEpoch + int32(workers*n)
	// Every increment counted.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		for _, c := range cs {
			st, err := c.PartitionState(cx, topic, 0)
			if err != nil {
				return err
			}
			if st.LeaderEpoch != want {
				return fmt.Errorf("leader epoch %d, want %d", st.LeaderEpoch, want)
			}
		}
		return nil
	})
}

func testConfigs(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	_, err := c.TopicConfig(cx, "nope")
	wantErr(t, err, cluster.ErrNoTopic, "config of an unknown topic")
	wantErr(t, c.SetTopicConfig(cx, "nope", map[string]string{"a": "b"}), cluster.ErrNoTopic, "setting the config of an unknown topic")
	must(t, c.CreateTopic(cx, topic("c", []int32{1}), nil))
	cfg, err := c.TopicConfig(cx, "c")
	if err != nil || cfg == nil || len(cfg) != 0 {
		t.Fatalf("config of a topic without overrides: %#v %v", cfg, err)
	}
	must(t, c.SetTopicConfig(cx, "c", map[string]string{"retention.ms": "1", "segment.bytes": "2"}))
	must(t, c.SetTopicConfig(cx, "c", map[string]string{"retention.ms": "3"}))
	cfg, _ = c.TopicConfig(cx, "c")
	if !maps.Equal(cfg, map[string]string{"retention.ms": "3"}) {
		t.Fatalf("SetTopicConfig must replace, got %v", cfg)
	}
	cfg["x"] = "y"
	if again, _ := c.TopicConfig(cx, "c"); again["x"] == "y" {
		t.Fatal("TopicConfig returned the coordinator's own map")
	}
	must(t, c.SetTopicConfig(cx, "c", nil))
	if cfg, _ := c.TopicConfig(cx, "c"); cfg == nil || len(cfg) != 0 {
		t.Fatalf("config after clearing %#v", cfg)
	}
}

// testConfigCAS: ReadTopicConfig returns the overrides with a version;
// SetTopicConfigIf writes only at that version.
func testConfigCAS(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	_, _, err := c.ReadTopicConfig(cx, "nope")
	wantErr(t, err, cluster.ErrNoTopic, "reading the config of an unknown topic")
	wantErr(t, c.SetTopicConfigIf(cx, "nope", map[string]string{"a": "b"}, -1), cluster.ErrNoTopic, "a conditional write to an unknown topic")
	must(t, c.CreateTopic(cx, topic("cas", []int32{1}), nil))
	cfg, v0, err := c.ReadTopicConfig(cx, "cas")
	if err != nil || cfg == nil || len(cfg) != 0 {
		t.Fatalf("config of a topic without overrides: %#v %v", cfg, err)
	}
	must(t, c.SetTopicConfigIf(cx, "cas", map[string]string{"retention.ms": "1"}, v0))
	cfg, v1, err := c.ReadTopicConfig(cx, "cas")
	if err != nil || !maps.Equal(cfg, map[string]string{"retention.ms": "1"}) || v1 == v0 {
		t.Fatalf("after a conditional write: %v version %d (was %d) %v", cfg, v1, v0, err)
	}
	if cached, _ := c.TopicConfig(cx, "cas"); !maps.Equal(cached, cfg) {
		t.Fatalf("TopicConfig %v after the writer's own conditional write, ReadTopicConfig %v", cached, cfg)
	}
	// A write at a version that is no longer current loses, and changes nothing.
	wantErr(t, c.SetTopicConfigIf(cx, "cas", map[string]string{"retention.ms": "2"}, v0), cluster.ErrBadVersion, "a write at an old version")
	must(t, c.SetTopicConfig(cx, "cas", map[string]string{"segment.ms": "5"}))
	wantErr(t, c.SetTopicConfigIf(cx, "cas", map[string]string{"retention.ms": "2"}, v1), cluster.ErrBadVersion, "a write at the version before an unconditional write")
	cfg, v2, err := c.ReadTopicConfig(cx, "cas")
	if err != nil || !maps.Equal(cfg, map[string]string{"segment.ms": "5"}) {
		t.Fatalf("the losing writes changed the config: %v %v", cfg, err)
	}
	must(t, c.SetTopicConfigIf(cx, "cas", nil, v2))
	if cfg, _, _ := c.ReadTopicConfig(cx, "cas"); len(cfg) != 0 {
		t.Fatalf("config after clearing %#v", cfg)
	}
	// Deleted and created again: the old version does not apply.
	_, v3, err := c.ReadTopicConfig(cx, "cas")
	must(t, err)
	must(t, c.DeleteTopic(cx, "cas"))
	wantErr(t, c.SetTopicConfigIf(cx, "cas", map[string]string{"retention.ms": "3"}, v3), cluster.ErrNoTopic, "a conditional write to a deleted topic")
}

// testPeerConfigRead: ReadTopicConfig on one session sees a config written
// through another at once (not when the watch delivers it), and a
// read-modify-write built on a peer's read loses against a write made in
// between.
func testPeerConfigRead(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	must(t, a.CreateTopic(cx, topic("rw", []int32{1}), nil))
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		_, err := b.Topic(cx, "rw")
		return err
	})
	for i := range 20 {
		want := map[string]string{"retention.ms": fmt.Sprint(1000 + i)}
		must(t, a.SetTopicConfig(cx, "rw", want))
		got, _, err := b.ReadTopicConfig(cx, "rw")
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("write %d through a, read through b at once: %v %v", i, got, err)
		}
	}
	_, v, err := b.ReadTopicConfig(cx, "rw")
	must(t, err)
	_, va, err := a.ReadTopicConfig(cx, "rw")
	if err != nil || va != v {
		t.Fatalf("the sessions read versions %d and %d (%v)", va, v, err)
	}
	must(t, a.SetTopicConfigIf(cx, "rw", map[string]string{"retention.ms": "1", "segment.ms": "2"}, va))
	wantErr(t, b.SetTopicConfigIf(cx, "rw", map[string]string{"retention.ms": "3"}, v), cluster.ErrBadVersion, "b's write on the version a replaced")
	if got, _, _ := b.ReadTopicConfig(cx, "rw"); !maps.Equal(got, map[string]string{"retention.ms": "1", "segment.ms": "2"}) {
		t.Fatalf("after the lost write: %v", got)
	}
}

func testProducerIDs(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	if _, err := c.AllocateProducerIDs(cx, 1, 0); err == nil {
		t.Fatal("a block of size 0 was allocated")
	}
	var prev cluster.ProducerIDBlock
	for i := 0; i < 3; i++ {
		b, err := c.AllocateProducerIDs(cx, 1, 1000)
		must(t, err)
		if b.End-b.Start+1 != 1000 || (i > 0 && b.Start != prev.End+1) || (i == 0 && b.Start < 0) {
			t.Fatalf("block %d: %+v after %+v", i, b, prev)
		}
		prev = b
	}
}

func testWatch(t *testing.T, s Store) {
	c := s.Open(t)
	cx, cancel := context.WithCancel(ctx(t))
	ch := c.Watch(cx)
	expect := func(what string, want cluster.Change, do func()) {
		t.Helper()
		// Drain what is pending, act, and wait for the kind.
		select {
		case <-ch:
		default:
		}
		do()
		deadline := time.After(15 * time.Second)
		var got cluster.Change
		for got&want != want {
			select {
			case c, ok := <-ch:
				if !ok {
					t.Fatalf("%s: watch closed", what)
				}
				got |= c
			case <-deadline:
				t.Fatalf("%s: got change %b, want %b", what, got, want)
			}
		}
	}
	bg := ctx(t)
	expect("register", cluster.ChangeBrokers, func() { must(t, c.RegisterBroker(bg, broker(1, ""))) })
	expect("campaign", cluster.ChangeController, func() { _, err := c.Campaign(bg, 1); must(t, err) })
	expect("create topic", cluster.ChangeTopics, func() { must(t, c.CreateTopic(bg, topic("w", []int32{1}), nil)) })
	expect("create state", cluster.ChangePartitions, func() {
		_, err := c.CreatePartitionState(bg, "w", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1}})
		must(t, err)
	})
	expect("set state", cluster.ChangePartitions, func() {
		st, _ := c.PartitionState(bg, "w", 0)
		st.LeaderEpoch++
		_, err := c.SetPartitionState(bg, "w", 0, st)
		must(t, err)
	})
	expect("config", cluster.ChangeConfigs, func() { must(t, c.SetTopicConfig(bg, "w", map[string]string{"retention.ms": "9"})) })
	expect("assignment", cluster.ChangeTopics, func() {
		tp, _ := c.Topic(bg, "w")
		tp.Replicas = append(tp.Replicas, []int32{1})
		_, err := c.SetTopicAssignment(bg, tp)
		must(t, err)
	})
	expect("mark deletion", cluster.ChangeDeletions, func() { must(t, c.MarkTopicForDeletion(bg, "w")) })
	expect("delete", cluster.ChangeTopics|cluster.ChangeDeletions, func() { must(t, c.DeleteTopic(bg, "w")) })

	// Changes coalesce while nobody reads: one receive carries both kinds.
	must(t, c.CreateTopic(bg, topic("w2", []int32{1}), nil))
	_, err := c.CreatePartitionState(bg, "w2", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1}})
	must(t, err)
	deadline := time.After(15 * time.Second)
	var got cluster.Change
	for got&(cluster.ChangeTopics|cluster.ChangePartitions) != cluster.ChangeTopics|cluster.ChangePartitions {
		select {
		case c := <-ch:
			got |= c
		case <-deadline:
			t.Fatalf("coalesced changes: %b", got)
		}
	}

	// Cancelling the context closes the channel.
	cancel()
	deadline = time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				goto closed
			}
		case <-deadline:
			t.Fatal("watch channel not closed after its context ended")
		}
	}
closed:
	// Close closes the channels of live watches.
	ch2 := c.Watch(context.Background())
	must(t, c.Close())
	deadline = time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch2:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed by Close")
		}
	}
}

func testClosed(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	must(t, c.RegisterBroker(cx, broker(1, "")))
	must(t, c.Close())
	must(t, c.Close()) // idempotent
	_, err := c.Brokers(cx)
	wantErr(t, err, cluster.ErrClosed, "Brokers after Close")
	_, err = c.ClusterID(cx)
	wantErr(t, err, cluster.ErrClosed, "ClusterID after Close")
	_, err = c.Topics(cx)
	wantErr(t, err, cluster.ErrClosed, "Topics after Close")
	wantErr(t, c.CreateTopic(cx, topic("z", []int32{1}), nil), cluster.ErrClosed, "CreateTopic after Close")
	wantErr(t, c.RegisterBroker(cx, broker(2, "")), cluster.ErrClosed, "RegisterBroker after Close")
	if _, ok := <-c.Watch(cx); ok {
		t.Fatal("Watch after Close delivered a change")
	}
}

func testPersistence(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	id, err := c.ClusterID(cx)
	must(t, err)
	must(t, c.RegisterBroker(cx, broker(1, "")))
	ci, err := c.Campaign(cx, 1)
	must(t, err)
	tp := topic("p", []int32{1}, []int32{1})
	must(t, c.CreateTopic(cx, tp, map[string]string{"retention.ms": "7"}))
	_, err = c.CreatePartitionState(cx, "p", 1, cluster.PartitionState{Leader: 1, LeaderEpoch: 3, ISR: []int32{1}, ControllerEpoch: ci.Epoch})
	must(t, err)
	must(t, c.MarkTopicForDeletion(cx, "p"))
	blk, err := c.AllocateProducerIDs(cx, 1, 10)
	must(t, err)
	gen, err := c.NextBrokerID(cx)
	must(t, err)
	must(t, c.Close())

	c2 := s.Open(t)
	if id2, _ := c2.ClusterID(cx); id2 != id {
		t.Fatalf("cluster id changed: %s -> %s", id, id2)
	}
	if bs, _ := c2.Brokers(cx); len(bs) != 0 {
		t.Fatalf("a closed session's broker is still registered: %v", bs)
	}
	if ci2, _ := c2.Controller(cx); ci2.ID != -1 {
		t.Fatalf("a closed session is still controller: %+v", ci2)
	}
	got, err := c2.Topic(cx, "p")
	if err != nil || got.ID != tp.ID || len(got.Replicas) != 2 {
		t.Fatalf("topic after reopening: %+v %v", got, err)
	}
	if cfg, _ := c2.TopicConfig(cx, "p"); cfg["retention.ms"] != "7" {
		t.Fatalf("config after reopening: %v", cfg)
	}
	st, err := c2.PartitionState(cx, "p", 1)
	if err != nil || st.LeaderEpoch != 3 || st.ControllerEpoch != ci.Epoch {
		t.Fatalf("state after reopening: %+v %v", st, err)
	}
	if d, _ := c2.PendingDeletions(cx); !slices.Equal(d, []string{"p"}) {
		t.Fatalf("deletion mark after reopening: %v", d)
	}
	if b2, _ := c2.AllocateProducerIDs(cx, 1, 10); b2.Start != blk.End+1 {
		t.Fatalf("producer ids after reopening: %+v after %+v", b2, blk)
	}
	if gen2, _ := c2.NextBrokerID(cx); gen2 != gen+1 {
		t.Fatalf("generated broker id after reopening: %d after %d", gen2, gen)
	}
	must(t, c2.RegisterBroker(cx, broker(1, "")))
	if ci2, _ := c2.Campaign(cx, 1); ci2.Epoch != ci.Epoch+1 {
		t.Fatalf("controller epoch after reopening %d, want %d", ci2.Epoch, ci.Epoch+1)
	}
}

func testControllerReconcile(t *testing.T, s Store) {
	c := s.Open(t)
	cx := ctx(t)
	must(t, c.RegisterBroker(cx, broker(7, "")))
	must(t, c.RegisterBroker(cx, broker(8, "")))
	must(t, c.CreateTopic(cx, topic("x", []int32{7, 8}, []int32{8, 7}, []int32{9, 7}), nil))
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: c, BrokerID: 7})
	ci, err := c.Campaign(cx, 7)
	must(t, err)
	must(t, ctl.Reconcile(cx, ci.Epoch))
	for p, want := range []struct {
		leader int32
		isr    []int32
	}{{7, []int32{7, 8}}, {8, []int32{8, 7}}, {7, []int32{7}}} {
		st, err := c.PartitionState(cx, "x", int32(p))
		if err != nil || st.Leader != want.leader || !slices.Equal(st.ISR, want.isr) || st.ControllerEpoch != ci.Epoch {
			t.Fatalf("x-%d: %+v %v, want leader %d isr %v", p, st, err, want.leader, want.isr)
		}
	}
	st0, _ := c.PartitionState(cx, "x", 0)
	must(t, ctl.Reconcile(cx, ci.Epoch))
	if st1, _ := c.PartitionState(cx, "x", 0); st1.Version != st0.Version {
		t.Fatal("a pass with nothing changed rewrote a state")
	}
	must(t, c.MarkTopicForDeletion(cx, "x"))
	must(t, ctl.Reconcile(cx, ci.Epoch))
	_, err = c.Topic(cx, "x")
	wantErr(t, err, cluster.ErrNoTopic, "topic deleted by the controller")
}

// ---- several sessions on one store ----

func testSharedClusterID(t *testing.T, s Store) {
	const n = 4
	ids := make([]string, n)
	errs := make([]error, n)
	cs := make([]cluster.Coordinator, n)
	for i := range cs {
		cs[i] = s.Open(t)
	}
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); ids[i], errs[i] = cs[i].ClusterID(ctx(t)) }()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("sessions disagree on the cluster id: %v %v", ids, errs)
		}
	}
}

func testPeerSeesWrites(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	watch := b.Watch(cx)
	must(t, a.RegisterBroker(cx, broker(1, "r1")))
	tp := topic("seen", []int32{1}, []int32{1})
	must(t, a.CreateTopic(cx, tp, map[string]string{"retention.ms": "1"}))
	_, err := a.CreatePartitionState(cx, "seen", 1, cluster.PartitionState{Leader: 1, LeaderEpoch: 2, ISR: []int32{1}, ControllerEpoch: 3})
	must(t, err)
	must(t, a.SetTopicConfig(cx, "seen", map[string]string{"retention.ms": "2"}))
	// Peer sees the writes.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		bs, _ := b.Brokers(cx)
		if len(bs) != 1 || bs[0].Rack != "r1" {
			return fmt.Errorf("brokers %v", bs)
		}
		got, err := b.Topic(cx, "seen")
		if err != nil || got.ID != tp.ID {
			return fmt.Errorf("topic %+v %v", got, err)
		}
		st, err := b.PartitionState(cx, "seen", 1)
		if err != nil || st.LeaderEpoch != 2 || st.ControllerEpoch != 3 {
			return fmt.Errorf("state %+v %v", st, err)
		}
		if cfg, _ := b.TopicConfig(cx, "seen"); cfg["retention.ms"] != "2" {
			return fmt.Errorf("config %v", cfg)
		}
		return nil
	})
	select {
	case <-watch:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's watch delivered nothing")
	}
	// Deletion is seen too.
	must(t, a.MarkTopicForDeletion(cx, "seen"))
	// Peer sees the mark.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if d, _ := b.PendingDeletions(cx); !slices.Equal(d, []string{"seen"}) {
			return fmt.Errorf("pending %v", d)
		}
		return nil
	})
	must(t, a.DeleteTopic(cx, "seen"))
	// Peer sees the deletion.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if _, err := b.Topic(cx, "seen"); !errors.Is(err, cluster.ErrNoTopic) {
			return fmt.Errorf("topic still there: %v", err)
		}
		if d, _ := b.PendingDeletions(cx); len(d) != 0 {
			return fmt.Errorf("pending %v", d)
		}
		return nil
	})
	// The broker goes with its session.
	must(t, a.Close())
	// Peer sees the broker go.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if bs, _ := b.Brokers(cx); len(bs) != 0 {
			return fmt.Errorf("brokers %v", bs)
		}
		return nil
	})
}

func testPeerBrokerExists(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	must(t, a.RegisterBroker(cx, broker(1, "")))
	wantErr(t, b.RegisterBroker(cx, broker(1, "")), cluster.ErrBrokerExists, "registering a live broker's id from another session")
}

func testControllerHandover(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	must(t, a.RegisterBroker(cx, broker(1, "")))
	must(t, b.RegisterBroker(cx, broker(2, "")))
	ca, err := a.Campaign(cx, 1)
	must(t, err)
	if ca.ID != 1 {
		t.Fatalf("campaign: %+v", ca)
	}
	cb, err := b.Campaign(cx, 2)
	if err != nil || cb != ca {
		t.Fatalf("second broker's campaign: %+v %v, want %+v", cb, err, ca)
	}
	watch := b.Watch(cx)
	must(t, a.Close())
	select {
	case <-watch:
	case <-time.After(10 * time.Second):
		t.Fatal("no change delivered when the controller went")
	}
	var cb2 cluster.ControllerInfo
	// The second broker takes over.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		var err error
		cb2, err = b.Campaign(cx, 2)
		if err != nil {
			return err
		}
		if cb2.ID != 2 {
			return fmt.Errorf("controller %+v", cb2)
		}
		return nil
	})
	if cb2.Epoch != ca.Epoch+1 {
		t.Fatalf("epoch after handover %d, want %d", cb2.Epoch, ca.Epoch+1)
	}
}

func testPeerCAS(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	must(t, a.CreateTopic(cx, topic("pcas", []int32{1}), nil))
	_, err := a.CreatePartitionState(cx, "pcas", 0, cluster.PartitionState{Leader: 1, ISR: []int32{1}})
	must(t, err)
	// Peer sees the state.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error { _, err := b.PartitionState(cx, "pcas", 0); return err })
	incrementConcurrently(t, []cluster.Coordinator{a, b}, "pcas", 4, 10)
}

func testPeerProducerIDs(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	var mu sync.Mutex
	var blocks []cluster.ProducerIDBlock
	var wg sync.WaitGroup
	for i, c := range []cluster.Coordinator{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				blk, err := c.AllocateProducerIDs(ctx(t), int32(i), 100)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				blocks = append(blocks, blk)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(blocks, func(x, y cluster.ProducerIDBlock) int { return int(x.Start - y.Start) })
	for i := 1; i < len(blocks); i++ {
		if blocks[i].Start <= blocks[i-1].End {
			t.Fatalf("overlapping producer id blocks %+v and %+v", blocks[i-1], blocks[i])
		}
	}
	if len(blocks) != 20 {
		t.Fatalf("%d blocks", len(blocks))
	}
}

// testFailoverReconcile: the controller moves leadership off a broker whose
// session ended, in assignment order among the ISR, and takes a partition
// offline (visibly: leader -1) when no ISR member is left.
func testFailoverReconcile(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	must(t, a.RegisterBroker(cx, broker(1, "")))
	must(t, a.RegisterBroker(cx, broker(3, "")))
	must(t, b.RegisterBroker(cx, broker(2, "")))
	must(t, a.CreateTopic(cx, topic("f", []int32{2, 3, 1}, []int32{2}, []int32{1, 2}), nil))
	ci, err := a.Campaign(cx, 1)
	must(t, err)
	ctl := cluster.NewController(cluster.ControllerConfig{Coordinator: a, BrokerID: 1})
	// Controller sees broker 2.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if bs, _ := a.Brokers(cx); len(bs) != 3 {
			return fmt.Errorf("brokers %v", bs)
		}
		return nil
	})
	must(t, ctl.Reconcile(cx, ci.Epoch))
	st0, _ := a.PartitionState(cx, "f", 0)
	if st0.Leader != 2 {
		t.Fatalf("f-0 %+v", st0)
	}
	must(t, b.Close())
	// Controller sees broker 2 go.
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if bs, _ := a.Brokers(cx); len(bs) != 2 {
			return fmt.Errorf("brokers %v", bs)
		}
		return nil
	})
	must(t, ctl.Reconcile(cx, ci.Epoch))
	st, _ := a.PartitionState(cx, "f", 0)
	if st.Leader != 3 || st.LeaderEpoch != st0.LeaderEpoch+1 || !slices.Equal(st.ISR, []int32{3, 1}) {
		t.Fatalf("f-0 after broker 2 went: %+v (before %+v)", st, st0)
	}
	st, _ = a.PartitionState(cx, "f", 1)
	if st.Leader != -1 {
		t.Fatalf("f-1 (only replica gone) must be offline: %+v", st)
	}
	st, _ = a.PartitionState(cx, "f", 2)
	if st.Leader != 1 {
		t.Fatalf("f-2 %+v", st)
	}
}

// brokerConfigStore is the coordinator's BrokerConfigStore; every store
// of the project has one.
func brokerConfigStore(t *testing.T, c cluster.Coordinator) cluster.BrokerConfigStore {
	t.Helper()
	bc, ok := c.(cluster.BrokerConfigStore)
	if !ok {
		t.Fatalf("%T does not keep dynamic broker configs", c)
	}
	return bc
}

// testBrokerConfigs: dynamic broker configs per entity are replaced whole,
// copied out, announced by Watch and kept across sessions.
func testBrokerConfigs(t *testing.T, s Store) {
	c := s.Open(t)
	bc := brokerConfigStore(t, c)
	cx := ctx(t)
	if cfg, err := bc.BrokerConfig(cx, cluster.DefaultBrokerEntity); err != nil || cfg == nil || len(cfg) != 0 {
		t.Fatalf("default entity before any write: %#v %v", cfg, err)
	}
	watch := c.Watch(cx)
	must(t, bc.SetBrokerConfig(cx, cluster.DefaultBrokerEntity, map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2"}))
	must(t, bc.SetBrokerConfig(cx, cluster.DefaultBrokerEntity, map[string]string{"log.retention.ms": "2000"}))
	must(t, bc.SetBrokerConfig(cx, "1", map[string]string{"message.max.bytes": "512"}))
	select {
	case ch := <-watch:
		if ch&cluster.ChangeBrokerConfigs == 0 {
			t.Fatalf("watch delivered %b without ChangeBrokerConfigs", ch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change delivered")
	}
	cfg, _ := bc.BrokerConfig(cx, cluster.DefaultBrokerEntity)
	if !maps.Equal(cfg, map[string]string{"log.retention.ms": "2000"}) {
		t.Fatalf("SetBrokerConfig must replace, got %v", cfg)
	}
	cfg["x"] = "y"
	if again, _ := bc.BrokerConfig(cx, cluster.DefaultBrokerEntity); again["x"] == "y" {
		t.Fatal("BrokerConfig returned the coordinator's own map")
	}
	must(t, c.Close())
	c2 := s.Open(t)
	bc2 := brokerConfigStore(t, c2)
	if cfg, _ := bc2.BrokerConfig(cx, "1"); !maps.Equal(cfg, map[string]string{"message.max.bytes": "512"}) {
		t.Fatalf("broker 1 after reopening: %v", cfg)
	}
	if cfg, _ := bc2.BrokerConfig(cx, cluster.DefaultBrokerEntity); cfg["log.retention.ms"] != "2000" {
		t.Fatalf("default after reopening: %v", cfg)
	}
	must(t, bc2.SetBrokerConfig(cx, "1", nil))
	if cfg, _ := bc2.BrokerConfig(cx, "1"); cfg == nil || len(cfg) != 0 {
		t.Fatalf("broker 1 after clearing: %#v", cfg)
	}
}

// testPeerBrokerConfigs: another session sees a dynamic broker config
// change, by its notification.
func testPeerBrokerConfigs(t *testing.T, s Store) {
	a, b := s.Open(t), s.Open(t)
	cx := ctx(t)
	watch := b.Watch(cx)
	must(t, brokerConfigStore(t, a).SetBrokerConfig(cx, cluster.DefaultBrokerEntity, map[string]string{"message.max.bytes": "100"}))
	must(t, brokerConfigStore(t, a).SetBrokerConfig(cx, "2", map[string]string{"log.segment.bytes": "1048576"}))
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if cfg, _ := brokerConfigStore(t, b).BrokerConfig(cx, cluster.DefaultBrokerEntity); cfg["message.max.bytes"] != "100" {
			return fmt.Errorf("default %v", cfg)
		}
		if cfg, _ := brokerConfigStore(t, b).BrokerConfig(cx, "2"); cfg["log.segment.bytes"] != "1048576" {
			return fmt.Errorf("broker 2 %v", cfg)
		}
		return nil
	})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ch := <-watch:
			if ch&cluster.ChangeBrokerConfigs != 0 {
				return
			}
		case <-deadline:
			t.Fatal("the peer's watch never delivered ChangeBrokerConfigs")
		}
	}
}

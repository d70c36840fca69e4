package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStandalonePersistsAndCAS(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenStandalone(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.ClusterID(ctx)
	if err != nil || len(id) != 22 {
		t.Fatalf("cluster id %q %v", id, err)
	}
	if err := s.RegisterBroker(ctx, Broker{ID: 1, Endpoints: []Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 9092}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBroker(ctx, Broker{ID: 1}); !errors.Is(err, ErrBrokerExists) {
		t.Fatalf("second registration of id 1: %v", err)
	}
	ci, err := s.Campaign(ctx, 1)
	if err != nil || ci.ID != 1 || ci.Epoch != 1 {
		t.Fatalf("campaign %+v %v", ci, err)
	}
	topic := Topic{Name: "t", ID: NewUUID(), Replicas: [][]int32{{1}, {1}}}
	if err := s.CreateTopic(ctx, topic, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(ctx, topic, nil); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate topic: %v", err)
	}
	if _, err := s.CreatePartitionState(ctx, "t", 0, PartitionState{Leader: 1, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	st, _ := s.PartitionState(ctx, "t", 0)
	st.LeaderEpoch = 1
	v, err := s.SetPartitionState(ctx, "t", 0, st)
	if err != nil || v != 1 {
		t.Fatalf("CAS at version 0: %d %v", v, err)
	}
	if _, err := s.SetPartitionState(ctx, "t", 0, st); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("CAS with a stale version: %v", err)
	}
	b1, _ := s.AllocateProducerIDs(ctx, 1, 1000)
	gen, _ := s.NextBrokerID(ctx)
	if gen != 1001 {
		t.Fatalf("first generated broker id %d, Kafka gives 1001", gen)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Everything persistent survives; sessions (brokers, controller) do not.
	s2, err := OpenStandalone(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if id2, _ := s2.ClusterID(ctx); id2 != id {
		t.Fatalf("cluster id changed: %s -> %s", id, id2)
	}
	if bs, _ := s2.Brokers(ctx); len(bs) != 0 {
		t.Fatalf("brokers survived the session: %v", bs)
	}
	got, err := s2.Topic(ctx, "t")
	if err != nil || got.ID != topic.ID || len(got.Replicas) != 2 {
		t.Fatalf("topic after reopen %+v %v", got, err)
	}
	cfg, _ := s2.TopicConfig(ctx, "t")
	if cfg["retention.ms"] != "1000" {
		t.Fatalf("configs after reopen %v", cfg)
	}
	st2, _ := s2.PartitionState(ctx, "t", 0)
	if st2.LeaderEpoch != 1 || st2.Version != 1 {
		t.Fatalf("state after reopen %+v", st2)
	}
	b2, _ := s2.AllocateProducerIDs(ctx, 1, 1000)
	if b2.Start != b1.End+1 {
		t.Fatalf("producer id blocks overlap or skip: %+v then %+v", b1, b2)
	}
	if gen2, _ := s2.NextBrokerID(ctx); gen2 != 1002 {
		t.Fatalf("second generated id %d", gen2)
	}
	s2.RegisterBroker(ctx, Broker{ID: 1})
	if ci, _ := s2.Campaign(ctx, 1); ci.Epoch != 2 {
		t.Fatalf("controller epoch after restart %d, want 2", ci.Epoch)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != StandaloneFile {
			t.Fatalf("stray file %s", e.Name())
		}
	}
}

func TestStandaloneRefusesCorruptFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, StandaloneFile), []byte("{not json"), 0o644)
	if _, err := OpenStandalone(dir); err == nil {
		t.Fatal("opened a corrupt metadata file")
	}
}

func TestStandaloneWatchCoalesces(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := OpenStandalone(t.TempDir())
	defer s.Close()
	ch := s.Watch(ctx)
	s.RegisterBroker(ctx, Broker{ID: 1})
	s.CreateTopic(ctx, Topic{Name: "a", ID: NewUUID(), Replicas: [][]int32{{1}}}, nil)
	select {
	case c := <-ch:
		if c&ChangeBrokers == 0 || c&ChangeTopics == 0 {
			t.Fatalf("coalesced change %b lacks brokers or topics", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change delivered")
	}
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			// A last delivery may race with the cancel; the next must close.
			if _, ok := <-ch; ok {
				t.Fatal("channel still open after cancel")
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch channel not closed after its context ended")
	}
}

func TestControllerElectsAndDeletes(t *testing.T) {
	ctx := context.Background()
	s, _ := OpenStandalone(t.TempDir())
	defer s.Close()
	s.RegisterBroker(ctx, Broker{ID: 7})
	s.CreateTopic(ctx, Topic{Name: "x", ID: NewUUID(), Replicas: [][]int32{{7}, {7}, {7}}}, nil)
	c := NewController(ControllerConfig{Coordinator: s, BrokerID: 7})
	ci, _ := s.Campaign(ctx, 7)
	if err := c.Reconcile(ctx, ci.Epoch); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		st, err := s.PartitionState(ctx, "x", p)
		if err != nil || st.Leader != 7 || len(st.ISR) != 1 || st.ControllerEpoch != ci.Epoch {
			t.Fatalf("x-%d: %+v %v", p, st, err)
		}
	}
	// A second pass with nothing changed writes nothing.
	st0, _ := s.PartitionState(ctx, "x", 0)
	c.Reconcile(ctx, ci.Epoch)
	if st1, _ := s.PartitionState(ctx, "x", 0); st1.Version != st0.Version {
		t.Fatal("idempotent pass rewrote a partition state")
	}
	s.MarkTopicForDeletion(ctx, "x")
	c.Reconcile(ctx, ci.Epoch)
	if _, err := s.Topic(ctx, "x"); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("topic not deleted: %v", err)
	}
	if _, err := s.PartitionState(ctx, "x", 0); !errors.Is(err, ErrNoState) {
		t.Fatalf("state not deleted: %v", err)
	}
}

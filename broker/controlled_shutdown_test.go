package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
)

// shutdownFunc is a ShutdownController played by the test.
type shutdownFunc func(ctx context.Context, brokerID int32) ([]cluster.TopicPartitionID, error)

func (f shutdownFunc) ControlledShutdown(ctx context.Context, brokerID int32) ([]cluster.TopicPartitionID, error) {
	return f(ctx, brokerID)
}

// TestControlledShutdownStopsFollowingFirst: a broker shutting down has
// stopped its replica fetchers when it asks the controller to move
// leadership away, as Kafka's controller stops a shutting-down broker's
// replicas before it shrinks their ISRs. A follower still fetching then is
// caught up, so its leaders would add it back to the ISRs the controller
// just shrank, and acks=all producers would wait for a broker about to go.
func TestControlledShutdownStopsFollowingFirst(t *testing.T) {
	ctx := context.Background()
	b, co := startBroker(t, Config{}, true)
	if err := co.CreateTopic(ctx, cluster.Topic{Name: "followed", ID: cluster.NewUUID(), Replicas: [][]int32{{2, 1}, {2, 1}}}, nil); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if _, err := co.CreatePartitionState(ctx, "followed", p, cluster.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := co.Campaign(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	fetchers := func() (n int, closed bool) {
		b.fetchers.mu.Lock()
		defer b.fetchers.mu.Unlock()
		return len(b.fetchers.bySource), b.fetchers.closed
	}
	if n, _ := fetchers(); n != 1 {
		t.Fatalf("%d fetchers before the shutdown, want 1 (following broker 2)", n)
	}
	asked := false
	b.ControlledShutdown(ControlledShutdownConfig{RetryBackoff: time.Millisecond,
		Controller: shutdownFunc(func(_ context.Context, id int32) ([]cluster.TopicPartitionID, error) {
			asked = true
			if id != 1 {
				t.Errorf("controlled shutdown asked for broker %d, want 1", id)
			}
			if n, closed := fetchers(); n != 0 || !closed {
				t.Errorf("asked the controller with %d fetchers running (closed %v): following should stop first", n, closed)
			}
			return nil, nil
		})})
	if !asked {
		t.Fatal("the controller was not asked")
	}
	// The metadata refreshed after the answer does not start following again.
	if n, _ := fetchers(); n != 0 {
		t.Fatalf("%d fetchers after the controlled shutdown", n)
	}
}

package group

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/record"
)

// gateBackend holds every Append until the test lets it return, and keeps
// what was appended.
type gateBackend struct {
	nopBackend
	mu      sync.Mutex
	calls   [][]byte // the batches of each Append, in call order
	entered chan int // an Append started (its index)
	release chan struct{}
}

func (b *gateBackend) Append(ctx context.Context, _, _ int32, batches []byte, _ time.Duration) error {
	b.mu.Lock()
	b.calls = append(b.calls, append([]byte(nil), batches...))
	i := len(b.calls) - 1
	b.mu.Unlock()
	b.entered <- i
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func startCoordinator(t *testing.T, be Backend) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NumPartitions = 1
	c, err := New(Options{Config: cfg, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.BecomeLeader(0, 0)
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		loaded, err := c.Coordinating(context.Background())
		if err == nil && !loaded[0] {
			err = fmt.Errorf("partition 0 not loaded")
		}
		return err
	})
	return c
}

func simpleCommit(group string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = group, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: offset, LeaderEpoch: -1},
	}}}
	return req
}

// TestCommitsQueuedBehindAnAppendAreWrittenTogether: while one commit's
// append is in flight, the commits of other groups of the same
// __consumer_offsets partition queue and are written in one Append (group
// commit), after it; none is answered before the Append holding it
// returned, and each group's offset is then the committed one.
func TestCommitsQueuedBehindAnAppendAreWrittenTogether(t *testing.T) {
	be := &gateBackend{entered: make(chan int, 16), release: make(chan struct{})}
	c := startCoordinator(t, be)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const queued = 5
	answered := make(chan string, queued+1)
	commit := func(group string, offset int64) {
		resp, err := c.OffsetCommit(ctx, simpleCommit(group, offset))
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("commit %s: %v %+v", group, err, resp)
		}
		answered <- group
	}
	go commit("first", 1)
	if i := <-be.entered; i != 0 {
		t.Fatalf("first Append is call %d", i)
	}
	for i := range queued {
		go commit(fmt.Sprintf("queued-%d", i), int64(10+i))
	}
	// The queued commits wait behind the first Append: none is answered,
	// none is appended yet. Wait until all five are queued.
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		w := c.writers[0]
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.queue) != queued {
			return fmt.Errorf("%d commits queued", len(w.queue))
		}
		return nil
	})
	select {
	case g := <-answered:
		t.Fatalf("%s answered before its append returned", g)
	default:
	}

	be.release <- struct{}{} // the first Append returns
	if g := <-answered; g != "first" {
		t.Fatalf("answered %s first", g)
	}
	if i := <-be.entered; i != 1 {
		t.Fatalf("second Append is call %d", i)
	}
	select {
	case g := <-answered:
		t.Fatalf("%s answered before its append returned", g)
	case <-time.After(50 * time.Millisecond):
	}
	be.release <- struct{}{}
	for range queued {
		<-answered
	}

	be.mu.Lock()
	calls := be.calls
	be.mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("%d Appends, want 2", len(calls))
	}
	n := 0
	if err := record.ForEachBatch(calls[1], func(*record.BatchHeader, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != queued {
		t.Fatalf("second Append carried %d batches, want %d", n, queued)
	}
	if s := c.Stats(); s.Appends != 2 || s.Batches != queued+1 {
		t.Fatalf("stats %+v", s)
	}
	for i := range queued {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 7
		req.Group = fmt.Sprintf("queued-%d", i)
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		resp, err := c.OffsetFetch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].Offset; got != int64(10+i) {
			t.Fatalf("%s committed %d, want %d", req.Group, got, 10+i)
		}
	}
}

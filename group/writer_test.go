package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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

// recordingBackend keeps what each Append carried and fails every Append
// with err while it is set.
type recordingBackend struct {
	nopBackend
	mu    sync.Mutex
	calls [][]byte
	err   error
}

func (b *recordingBackend) Append(_ context.Context, _, _ int32, batches []byte, _ time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	b.calls = append(b.calls, append([]byte(nil), batches...))
	return nil
}

func (b *recordingBackend) setErr(err error) {
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
}

// batchesPerAppend returns how many record batches each Append carried.
func (b *recordingBackend) batchesPerAppend(t *testing.T) []int {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, c := range b.calls {
		n := 0
		if err := record.ForEachBatch(c, func(*record.BatchHeader, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// started is a commit begun with StartOffsetCommit.
type started struct {
	lead   func()
	answer func() (*kmsg.OffsetCommitResponse, error)
}

// startCommits starts one simple commit per offset, as group groups[i],
// the way a connection starts the commits it read together; none is
// written yet.
func startCommits(t *testing.T, c *Coordinator, groups []string, offsets []int64) []started {
	t.Helper()
	out := make([]started, len(offsets))
	for i, off := range offsets {
		lead, answer, err := c.StartOffsetCommit(context.Background(), simpleCommit(groups[i], off))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = started{lead, answer}
	}
	return out
}

// settle leads every started commit, then returns each answer's error
// code, in order (the connection's settle).
func settle(t *testing.T, ss []started) []int16 {
	t.Helper()
	for _, s := range ss {
		if s.lead != nil {
			s.lead()
		}
	}
	codes := make([]int16, len(ss))
	for i, s := range ss {
		resp, err := s.answer()
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		codes[i] = resp.Topics[0].Partitions[0].ErrorCode
	}
	return codes
}

func fetchOffset(t *testing.T, c *Coordinator, group string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp, err := c.OffsetFetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestStartedCommitsShareOneAppend: commits started together (a
// connection's pipelined OffsetCommits, several of one group) are written
// by the first one's lead in one Append, in order: nothing is visible to
// OffsetFetch before, and afterwards each group's offset is its last
// commit's.
func TestStartedCommitsShareOneAppend(t *testing.T) {
	be := &recordingBackend{}
	c := startCoordinator(t, be)
	groups := []string{"a", "b", "a", "c", "b", "a", "c", "a"}
	offsets := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	ss := startCommits(t, c, groups, offsets)
	for i, s := range ss {
		if (s.lead != nil) != (i == 0) {
			t.Fatalf("commit %d has a lead: %v (only the first finds the writer idle)", i, s.lead != nil)
		}
	}
	if n := len(be.batchesPerAppend(t)); n != 0 {
		t.Fatalf("%d Appends before the lead", n)
	}
	if got := fetchOffset(t, c, "a"); got != -1 {
		t.Fatalf("offset of a is %d before it was stored", got)
	}
	for i, code := range settle(t, ss) {
		if code != 0 {
			t.Fatalf("commit %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	if got := be.batchesPerAppend(t); len(got) != 1 || got[0] != len(offsets) {
		t.Fatalf("batches per Append %v, want [%d]", got, len(offsets))
	}
	if s := c.Stats(); s.Appends != 1 || s.Batches != int64(len(offsets)) {
		t.Fatalf("stats %+v", s)
	}
	for g, want := range map[string]int64{"a": 8, "b": 5, "c": 7} {
		if got := fetchOffset(t, c, g); got != want {
			t.Errorf("offset of %s is %d, want %d (its last commit)", g, got, want)
		}
	}
}

// TestFailedAppendFailsEveryStartedCommit: when the Append carrying
// several commits fails, every one of them gets the error Kafka answers
// for it (GroupMetadataManager.storeOffsets), and no offset of them
// becomes visible.
func TestFailedAppendFailsEveryStartedCommit(t *testing.T) {
	be := &recordingBackend{}
	c := startCoordinator(t, be)
	groups := []string{"a", "b", "a"}
	if codes := settle(t, startCommits(t, c, groups, []int64{1, 1, 1})); codes[0]|codes[1]|codes[2] != 0 {
		t.Fatalf("baseline commits: %v", codes)
	}
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{errors.New("log closed"), kerr.NotCoordinator},
		{kerr.NotLeaderForPartition, kerr.NotCoordinator},
		{kerr.KafkaStorageError, kerr.NotCoordinator},
		{kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable},
		{kerr.NotEnoughReplicasAfterAppend, kerr.CoordinatorNotAvailable},
		{kerr.RequestTimedOut, kerr.CoordinatorNotAvailable},
		{kerr.MessageTooLarge, kerr.InvalidCommitOffsetSize},
	} {
		be.setErr(tc.err)
		codes := settle(t, startCommits(t, c, groups, []int64{10, 20, 30}))
		for i, code := range codes {
			if code != tc.want.Code {
				t.Errorf("append error %v: commit %d answered %v, want %v", tc.err, i, kerr.ErrorForCode(code), tc.want)
			}
		}
		be.setErr(nil)
		if a, b := fetchOffset(t, c, "a"), fetchOffset(t, c, "b"); a != 1 || b != 1 {
			t.Fatalf("append error %v: offsets a=%d b=%d, want the stored 1", tc.err, a, b)
		}
	}
}

// TestStartedCommitsFailWhenTheCoordinatorMoves: the partition's
// leadership moves after the commits were started and before they were
// written: every one is answered NOT_COORDINATOR and nothing is appended;
// a commit started while the partition loads again is answered
// COORDINATOR_LOAD_IN_PROGRESS at once.
func TestStartedCommitsFailWhenTheCoordinatorMoves(t *testing.T) {
	rb := &recordingBackend{}
	be := &slowLoadBackend{recordingBackend: rb, loading: make(chan struct{})}
	close(be.loading) // the first load is immediate
	c := startCoordinator(t, be)
	ss := startCommits(t, c, []string{"a", "b", "a"}, []int64{1, 2, 3})
	c.Resign(0, -1)
	for i, code := range settle(t, ss) {
		if code != kerr.NotCoordinator.Code {
			t.Errorf("commit %d answered %v, want NOT_COORDINATOR", i, kerr.ErrorForCode(code))
		}
	}
	if n := len(rb.batchesPerAppend(t)); n != 0 {
		t.Fatalf("%d Appends after the coordinator moved", n)
	}

	be.mu.Lock()
	be.loading = make(chan struct{})
	be.mu.Unlock()
	c.BecomeLeader(0, 1)
	ss = startCommits(t, c, []string{"a"}, []int64{4})
	if ss[0].lead != nil {
		t.Fatal("a commit to a loading partition has an append to lead")
	}
	if codes := settle(t, ss); codes[0] != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("commit while loading answered %v", kerr.ErrorForCode(codes[0]))
	}
	be.mu.Lock()
	close(be.loading)
	be.mu.Unlock()
}

// slowLoadBackend's Read waits until loading is closed.
type slowLoadBackend struct {
	*recordingBackend
	loading chan struct{}
}

func (b *slowLoadBackend) Read(ctx context.Context, p int32, off int64, maxBytes int32) ([]byte, int64, int64, error) {
	b.mu.Lock()
	ch := b.loading
	b.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, 0, 0, ctx.Err()
	}
	return b.recordingBackend.Read(ctx, p, off, maxBytes)
}

// TestConcurrentStartedCommits: connections, each starting a few commits
// and settling them, at once, over groups of one __consumer_offsets
// partition: every commit is answered without error, appends are shared,
// and each group's offset is its last commit's.
func TestConcurrentStartedCommits(t *testing.T) {
	be := &recordingBackend{}
	c := startCoordinator(t, be)
	const conns, rounds, depth = 8, 40, 5
	var wg sync.WaitGroup
	for ci := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var off int64
			for range rounds {
				groups := make([]string, depth)
				offsets := make([]int64, depth)
				for i := range depth {
					off++
					groups[i] = fmt.Sprintf("conn-%d-%d", ci, off%2)
					offsets[i] = off
				}
				ss := make([]started, depth)
				for i := range depth {
					lead, answer, err := c.StartOffsetCommit(context.Background(), simpleCommit(groups[i], offsets[i]))
					if err != nil {
						t.Error(err)
						return
					}
					ss[i] = started{lead, answer}
				}
				for _, s := range ss {
					if s.lead != nil {
						s.lead()
					}
				}
				for i, s := range ss {
					resp, err := s.answer()
					if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
						t.Errorf("conn %d commit %d: %v %+v", ci, i, err, resp)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := 0
	for _, n := range be.batchesPerAppend(t) {
		total += n
	}
	if s := c.Stats(); total != conns*rounds*depth || s.Batches != int64(total) || s.Appends >= s.Batches {
		t.Fatalf("%d batches stored, stats %+v, want %d batches in fewer appends", total, s, conns*rounds*depth)
	}
	last := int64(rounds * depth)
	for ci := range conns {
		// Offsets 1..rounds*depth alternate between the two groups: the
		// even ones go to group 0, the odd ones to group 1.
		if got := fetchOffset(t, c, fmt.Sprintf("conn-%d-0", ci)); got != last {
			t.Errorf("conn %d group 0 offset %d, want %d", ci, got, last)
		}
		if got := fetchOffset(t, c, fmt.Sprintf("conn-%d-1", ci)); got != last-1 {
			t.Errorf("conn %d group 1 offset %d, want %d", ci, got, last-1)
		}
	}
}

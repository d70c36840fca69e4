package txn

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// fakeBackend is __transaction_state in memory, a producer id counter and
// a recorder of markers.
type fakeBackend struct {
	mu      sync.Mutex
	logs    map[int32][]byte // concatenated batches with offsets assigned
	next    map[int32]int64
	pid     int64
	markers []kmsg.WriteTxnMarkersRequestMarker
	// markerCode, when set, answers each marker partition (else NONE).
	markerCode func(TopicPartition) int16
	appendErr  error
}

func newFake() *fakeBackend {
	return &fakeBackend{logs: map[int32][]byte{}, next: map[int32]int64{}, pid: 1000}
}

func (f *fakeBackend) EnsureTopic(context.Context) error { return nil }
func (f *fakeBackend) Leader(p int32, _ string) (Node, bool) {
	return Node{ID: 1, Host: "h", Port: 9092}, true
}
func (f *fakeBackend) PartitionExists(topic string, p int32) bool { return topic != "gone" }
func (f *fakeBackend) AllocateProducerID(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pid++
	return f.pid, nil
}

func (f *fakeBackend) Append(_ context.Context, p, _ int32, batch []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.appendErr != nil {
		return f.appendErr
	}
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(b[0:8], uint64(f.next[p]))
	f.next[p] += int64(binary.BigEndian.Uint32(b[57:61]))
	f.logs[p] = append(f.logs[p], b...)
	return nil
}

func (f *fakeBackend) Read(_ context.Context, p int32, offset int64, _ int32) ([]byte, int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if offset >= f.next[p] {
		return nil, offset, f.next[p], nil
	}
	return append([]byte(nil), f.logs[p]...), 0, f.next[p], nil
}

func (f *fakeBackend) WriteTxnMarkers(_ context.Context, m kmsg.WriteTxnMarkersRequestMarker) map[TopicPartition]int16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.markers = append(f.markers, m)
	out := map[TopicPartition]int16{}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{Topic: t.Topic, Partition: p}
			if f.markerCode != nil {
				out[tp] = f.markerCode(tp)
			} else {
				out[tp] = 0
			}
		}
	}
	return out
}

func (f *fakeBackend) markerCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.markers)
}

// newCoord starts a coordinator of 1 partition, led at epoch 5 and loaded.
func newCoord(t *testing.T, f *fakeBackend, now func() time.Time) *Coordinator {
	t.Helper()
	c, err := New(Options{Config: Config{NumPartitions: 1, MaxTimeout: time.Minute, MarkerRetryBackoff: time.Millisecond,
		MarkerRetryBackoffMx: 5 * time.Millisecond, AbortTimedOutEvery: time.Hour}, Backend: f, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.BecomeLeader(0, 5)
	waitLoaded(t, c)
	return c
}

func waitLoaded(t *testing.T, c *Coordinator) {
	t.Helper()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if ps, ok := c.parts[0]; !ok || !ps.loaded {
			return fmt.Errorf("not loaded")
		}
		return nil
	})
}

func waitState(t *testing.T, c *Coordinator, id string, want State) Transaction {
	t.Helper()
	var tx Transaction
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		var ok bool
		tx, ok = c.Describe(id)
		if !ok || tx.State != want {
			return fmt.Errorf("%s: %+v, want %v", id, tx, want)
		}
		return nil
	})
	return tx
}

var ctx = context.Background()

func TestInitProducerIDBumpsAndFences(t *testing.T) {
	f := newFake()
	c := newCoord(t, f, nil)
	pid, epoch, code := c.InitProducerID(ctx, "a", 10000, -1, -1)
	if code != 0 || epoch != 0 || pid != 1001 {
		t.Fatalf("first: %d/%d code %d", pid, epoch, code)
	}
	pid2, epoch2, code := c.InitProducerID(ctx, "a", 10000, -1, -1)
	if code != 0 || pid2 != pid || epoch2 != 1 {
		t.Fatalf("second: %d/%d code %d", pid2, epoch2, code)
	}
	// KIP-360: the current (pid, epoch) bumps; the previous one is a retry
	// answered with the current epoch; anything else is fenced.
	if _, e, code := c.InitProducerID(ctx, "a", 10000, pid, 1); code != 0 || e != 2 {
		t.Fatalf("expected current: epoch %d code %d", e, code)
	}
	if _, e, code := c.InitProducerID(ctx, "a", 10000, pid, 1); code != 0 || e != 2 {
		t.Fatalf("retry with the last epoch: epoch %d code %d", e, code)
	}
	if _, _, code := c.InitProducerID(ctx, "a", 10000, pid, 0); code != kerr.ProducerFenced.Code {
		t.Fatalf("stale epoch: code %d", code)
	}
	if _, _, code := c.InitProducerID(ctx, "a", 10000, pid+7, 2); code != kerr.ProducerFenced.Code {
		t.Fatalf("other pid: code %d", code)
	}
	// Bad requests.
	for _, tc := range []struct {
		id      string
		timeout int32
		pid     int64
		epoch   int16
		want    *kerr.Error
	}{
		{"", 1000, -1, -1, kerr.InvalidRequest},
		{"a", 0, -1, -1, kerr.InvalidTransactionTimeout},
		{"a", 60001, -1, -1, kerr.InvalidTransactionTimeout},
		{"a", 1000, 5, -1, kerr.InvalidRequest},
	} {
		if _, _, code := c.InitProducerID(ctx, tc.id, tc.timeout, tc.pid, tc.epoch); code != tc.want.Code {
			t.Errorf("%+v: code %d, want %s", tc, code, tc.want.Message)
		}
	}
}

func TestTransactionLifecycle(t *testing.T) {
	f := newFake()
	c := newCoord(t, f, nil)
	pid, epoch, _ := c.InitProducerID(ctx, "tx", 10000, -1, -1)
	parts := []TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}

	if codes := c.AddPartitions(ctx, "tx", pid+1, epoch, parts); codes[parts[0]] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("wrong pid: %v", codes)
	}
	if codes := c.AddPartitions(ctx, "tx", pid, epoch+1, parts); codes[parts[0]] != kerr.ProducerFenced.Code {
		t.Fatalf("wrong epoch: %v", codes)
	}
	if code := c.EndTxn(ctx, "tx", pid, epoch, true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn in Empty: %d", code)
	}
	bad := append(parts, TopicPartition{Topic: "gone", Partition: 0})
	if codes := c.AddPartitions(ctx, "tx", pid, epoch, bad); codes[bad[2]] != kerr.UnknownTopicOrPartition.Code || codes[bad[0]] != kerr.OperationNotAttempted.Code {
		t.Fatalf("unknown partition: %v", codes)
	}
	if codes := c.AddPartitions(ctx, "tx", pid, epoch, parts); codes[parts[0]] != 0 || codes[parts[1]] != 0 {
		t.Fatalf("add: %v", codes)
	}
	if code := c.AddOffsets(ctx, "tx", pid, epoch, "g"); code != 0 {
		t.Fatalf("add offsets: %d", code)
	}
	tx, _ := c.Describe("tx")
	if tx.State != Ongoing || len(tx.Partitions) != 3 || tx.StartMs <= 0 {
		t.Fatalf("ongoing: %+v", tx)
	}
	// InitProducerId during a transaction: CONCURRENT_TRANSACTIONS while
	// the old one is fenced and aborted.
	if code := c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	waitState(t, c, "tx", CompleteCommit)
	f.mu.Lock()
	m := f.markers[len(f.markers)-1]
	f.mu.Unlock()
	if !m.Committed || m.ProducerID != pid || m.ProducerEpoch != epoch || m.CoordinatorEpoch != 5 || len(m.Topics) != 2 {
		t.Fatalf("marker: %+v", m)
	}
	if code := c.EndTxn(ctx, "tx", pid, epoch, true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	if code := c.EndTxn(ctx, "tx", pid, epoch, false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %d", code)
	}
	if c.Stats().Commits != 1 {
		t.Fatalf("stats: %+v", c.Stats())
	}
}

func TestInitProducerIDAbortsOpenTransaction(t *testing.T) {
	f := newFake()
	c := newCoord(t, f, nil)
	pid, epoch, _ := c.InitProducerID(ctx, "z", 10000, -1, -1)
	tp := TopicPartition{Topic: "t", Partition: 0}
	c.AddPartitions(ctx, "z", pid, epoch, []TopicPartition{tp})
	if _, _, code := c.InitProducerID(ctx, "z", 10000, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init during a transaction: %d", code)
	}
	waitState(t, c, "z", CompleteAbort)
	// The old producer is fenced.
	if code := c.EndTxn(ctx, "z", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("old producer's commit: %d", code)
	}
	_, e, code := c.InitProducerID(ctx, "z", 10000, -1, -1)
	if code != 0 || e != epoch+2 {
		t.Fatalf("retry: epoch %d (want %d) code %d", e, epoch+2, code)
	}
	f.mu.Lock()
	m := f.markers[len(f.markers)-1]
	f.mu.Unlock()
	if m.Committed || m.ProducerEpoch != epoch+1 {
		t.Fatalf("abort marker: %+v", m)
	}
}

func TestTimedOutTransactionAborted(t *testing.T) {
	f := newFake()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newCoord(t, f, clock)
	pid, epoch, _ := c.InitProducerID(ctx, "slow", 1000, -1, -1)
	c.AddPartitions(ctx, "slow", pid, epoch, []TopicPartition{{Topic: "t", Partition: 0}})
	c.AbortTimedOut()
	if tx, _ := c.Describe("slow"); tx.State != Ongoing {
		t.Fatalf("aborted before its timeout: %+v", tx)
	}
	mu.Lock()
	now = now.Add(1001 * time.Millisecond)
	mu.Unlock()
	c.AbortTimedOut()
	tx := waitState(t, c, "slow", CompleteAbort)
	if tx.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch %d, want %d (fenced)", tx.ProducerEpoch, epoch+1)
	}
	if code := c.EndTxn(ctx, "slow", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("commit of the timed-out producer: %d", code)
	}
	if c.Stats().TimedOut != 1 || c.Stats().Aborts != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
}

func TestExpireIDs(t *testing.T) {
	f := newFake()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, err := New(Options{Config: Config{NumPartitions: 1, IDExpiration: time.Hour}, Backend: f, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.BecomeLeader(0, 1)
	waitLoaded(t, c)
	c.InitProducerID(ctx, "old", 1000, -1, -1)
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	c.ExpireIDs()
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if _, ok := c.Describe("old"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	// The tombstone is in the log: a reload does not bring it back.
	c.Resign(0)
	c.BecomeLeader(0, 2)
	waitLoaded(t, c)
	if _, ok := c.Describe("old"); ok {
		t.Fatal("an expired id came back after a reload")
	}
}

// A new coordinator loading a partition completes the transactions that
// were preparing a commit (failover mid-commit): markers under its epoch,
// then CompleteCommit.
func TestLoadCompletesPreparedCommit(t *testing.T) {
	f := newFake()
	f.markerCode = func(TopicPartition) int16 { return kerr.NotLeaderForPartition.Code } // markers never land
	c := newCoord(t, f, nil)
	pid, epoch, _ := c.InitProducerID(ctx, "fo", 10000, -1, -1)
	c.AddPartitions(ctx, "fo", pid, epoch, []TopicPartition{{Topic: "t", Partition: 3}})
	if code := c.EndTxn(ctx, "fo", pid, epoch, true); code != 0 {
		t.Fatal(code)
	}
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if f.markerCount() < 2 {
			return fmt.Errorf("no retries yet")
		}
		return nil
	})
	if tx, _ := c.Describe("fo"); tx.State != PrepareCommit {
		t.Fatalf("state %v", tx.State)
	}
	// A retried EndTxn while the markers are pending.
	if code := c.EndTxn(ctx, "fo", pid, epoch, true); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("retried EndTxn: %d", code)
	}
	c.Close()

	f.mu.Lock()
	f.markerCode = nil
	f.markers = nil
	f.mu.Unlock()
	c2, err := New(Options{Config: Config{NumPartitions: 1}, Backend: f})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.BecomeLeader(0, 6)
	waitLoaded(t, c2)
	waitState(t, c2, "fo", CompleteCommit)
	f.mu.Lock()
	m := f.markers[0]
	f.mu.Unlock()
	if !m.Committed || m.CoordinatorEpoch != 6 || m.ProducerID != pid {
		t.Fatalf("resent marker: %+v", m)
	}
}

func TestNotCoordinatorAndLoading(t *testing.T) {
	f := newFake()
	c, err := New(Options{Config: Config{NumPartitions: 1}, Backend: f})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, code := c.InitProducerID(ctx, "x", 1000, -1, -1); code != kerr.NotCoordinator.Code {
		t.Fatalf("not led: %d", code)
	}
	c.mu.Lock()
	c.parts[0] = &partState{id: 0, epoch: 1, txns: map[string]*metadata{}, ctx: ctx, cancel: func() {}}
	c.mu.Unlock()
	if _, _, code := c.InitProducerID(ctx, "x", 1000, -1, -1); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("loading: %d", code)
	}
	desc := c.DescribeTransactions(&kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{"x"}})
	if desc.TransactionStates[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("describe while loading: %+v", desc)
	}
}

func TestAppendFailureLeavesStateUnchanged(t *testing.T) {
	f := newFake()
	c := newCoord(t, f, nil)
	pid, epoch, _ := c.InitProducerID(ctx, "af", 1000, -1, -1)
	f.mu.Lock()
	f.appendErr = kerr.NotEnoughReplicas
	f.mu.Unlock()
	codes := c.AddPartitions(ctx, "af", pid, epoch, []TopicPartition{{Topic: "t", Partition: 0}})
	if codes[TopicPartition{Topic: "t", Partition: 0}] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("codes %v", codes)
	}
	if tx, _ := c.Describe("af"); tx.State != Empty || len(tx.Partitions) != 0 {
		t.Fatalf("state changed by a failed append: %+v", tx)
	}
}

func TestListTransactions(t *testing.T) {
	f := newFake()
	c := newCoord(t, f, nil)
	pid, epoch, _ := c.InitProducerID(ctx, "l1", 1000, -1, -1)
	c.InitProducerID(ctx, "l2", 1000, -1, -1)
	c.AddPartitions(ctx, "l1", pid, epoch, []TopicPartition{{Topic: "t", Partition: 0}})
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing", "Bogus"}
	resp := c.ListTransactions(req)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].TransactionalID != "l1" || len(resp.UnknownStateFilters) != 1 {
		t.Fatalf("list: %+v", resp)
	}
	req.StateFilters = nil
	if resp := c.ListTransactions(req); len(resp.TransactionStates) != 2 {
		t.Fatalf("list all: %+v", resp)
	}
}

// The metrics' view of the coordinator: the oldest open transaction's age
// by the coordinator's clock (0 when none is open), and the completed
// commits and aborts.
func TestMetricStats(t *testing.T) {
	f := newFake()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newCoord(t, f, clock)
	if s := c.metricStats(); s.Open != 0 || s.OldestOpenSeconds != 0 {
		t.Fatalf("no transaction: %+v", s)
	}
	tp := []TopicPartition{{Topic: "t", Partition: 0}}
	a, ae, _ := c.InitProducerID(ctx, "a", 60000, -1, -1)
	c.AddPartitions(ctx, "a", a, ae, tp)
	advance(30 * time.Second)
	b, be, _ := c.InitProducerID(ctx, "b", 60000, -1, -1)
	c.AddPartitions(ctx, "b", b, be, tp)
	advance(60 * time.Second)
	if s := c.metricStats(); s.Open != 2 || s.OldestOpenSeconds != 90 {
		t.Fatalf("two open, the older for 90 s: %+v", s)
	}
	if code := c.EndTxn(ctx, "a", a, ae, true); code != 0 {
		t.Fatal(code)
	}
	waitState(t, c, "a", CompleteCommit)
	if s := c.metricStats(); s.Open != 1 || s.OldestOpenSeconds != 60 || s.Committed != 1 {
		t.Fatalf("a committed: %+v", s)
	}
	c.AbortTimedOut() // b's 60 s are not past yet
	advance(time.Second)
	c.AbortTimedOut()
	waitState(t, c, "b", CompleteAbort)
	if s := c.metricStats(); s.Open != 0 || s.OldestOpenSeconds != 0 || s.Committed != 1 || s.Aborted != 1 || s.TimedOut != 1 {
		t.Fatalf("b timed out: %+v", s)
	}
}

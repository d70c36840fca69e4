package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/internal/testutil"
)

// Tests of a reader with postponed OffsetCommits that must wait for
// queued.max.request.bytes before it can read its next frame.

// settleServer serves nothing itself: it is a server on n's broker and
// group coordinator (a real one, OffsetCommitStarter) with a request
// memory budget and a long request read timeout, whose connections the
// test drives. It is stopped when the test ends.
func settleServer(t *testing.T, n *fuzzNode) *Server {
	t.Helper()
	s, err := newServer(Config{
		Listeners: []Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}},
		Broker:    n.brk, Groups: n.s.cfg.Groups,
		MaxRequestBytes: 64 << 10, QueuedMaxRequestBytes: 64 << 10,
		RequestReadTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.holdMax = time.Hour // however slow the machine, answers are held only by design
	t.Cleanup(s.cancelBase)
	return s
}

// groupCommit commits offset of partition 0 of topic "fuzz" (which
// exists) for the simple consumer group "settle": every such commit goes
// to the same __consumer_offsets partition, so to the same writer.
func groupCommit(offset int64) kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.Generation = "settle", -1
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "fuzz", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: offset, LeaderEpoch: -1},
	}}}
	return r
}

// commitAnswers decodes the OffsetCommit v8 answers nc was sent: their
// correlation ids and every partition's error code, in order.
func commitAnswers(t *testing.T, nc *scriptConn) (corrs []int32, codes []int16) {
	t.Helper()
	nc.mu.Lock()
	var all []byte
	for _, w := range nc.writes {
		all = append(all, w...)
	}
	nc.mu.Unlock()
	for len(all) > 0 {
		if len(all) < 8 {
			t.Fatalf("truncated answer % x", all)
		}
		size := int(binary.BigEndian.Uint32(all))
		if size < 4 || 4+size > len(all) {
			t.Fatalf("answer of %d bytes in %d", size, len(all))
		}
		corrs = append(corrs, int32(binary.BigEndian.Uint32(all[4:])))
		body, err := kwire.SkipTags(all[8 : 4+size])
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = 8
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("answer %d: %v", corrs[len(corrs)-1], err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				codes = append(codes, rp.ErrorCode)
			}
		}
		all = all[4+size:]
	}
	return corrs, codes
}

// TestPostponedCommitsSettleBeforeRequestMemoryWait: a connection (A)
// that read pipelined OffsetCommits and left them postponed, and then
// finds no request memory for its next frame, writes their append before
// it waits for memory. Another connection's (B) commit queued behind that
// append is answered at once, not after socket.request.read.timeout.ms
// (30 s here), which matters when the memory A waits for is held by
// requests that wait for that append themselves.
//
// The reader checks for memory before it leaves commits postponed
// (mayPostpone), so A finds none only when another connection takes it
// between that check and the reservation. The test takes it there: it is
// A's reader, runs readOne as far as the check and then the rest of the
// frame's reading as readOne does.
func TestPostponedCommitsSettleBeforeRequestMemoryWait(t *testing.T) {
	n := newFuzzNode(t)
	defer n.close()
	s := settleServer(t, n)
	newScripted := func() (*conn, *scriptConn) {
		nc := newScriptConn()
		return newConn(s, nc, &s.cfg.Listeners[0]), nc
	}
	a, anc := newScripted()
	b, bnc := newScripted()
	// On failure: whatever A left postponed is settled (B's commit and
	// the coordinator's Close wait for that append) and B's reader ends.
	var aRead, bRead chan error
	var grabbed int64
	defer func() {
		s.budget.release(grabbed)
		if aRead != nil {
			<-aRead
		}
		if len(a.postponed) > 0 {
			a.settle()
		}
		bnc.Close()
		if bRead != nil {
			<-bRead
		}
	}()

	// A pipelines four commits; its reader handles three, each started
	// and postponed (the first claimed the writer of group "settle"'s
	// partition without writing), and may leave them postponed while it
	// reads the fourth: it is buffered and there is memory for it.
	anc.in <- encodeFrames(0, groupCommit(1), groupCommit(2), groupCommit(3), groupCommit(4))
	for i := range 3 {
		if err := a.readOne(); err != nil {
			t.Fatalf("A's commit %d: %v", i, err)
		}
	}
	if len(a.postponed) != 3 || !a.mayPostpone() {
		t.Fatalf("A postponed %d commits, may postpone the next: %v", len(a.postponed), a.mayPostpone())
	}

	// B commits to the same group: its commit queues behind A's
	// unwritten append. Its reader then settles it (nothing more is
	// buffered) and waits there for A's append before it writes the
	// answer.
	bnc.in <- encodeFrames(100, groupCommit(10))
	if err := b.readOne(); err != nil {
		t.Fatalf("B's commit: %v", err)
	}
	if len(b.postponed) != 1 {
		t.Fatalf("B postponed %d commits, want 1", len(b.postponed))
	}
	bRead = make(chan error, 1)
	go func() { bRead <- b.readOne() }()

	// Another connection takes all the request memory now, after A's
	// check; A reads its fourth frame's size and then the frame, which
	// must wait for memory.
	grabbed = s.budget.avail.Load()
	if !s.budget.tryAcquire(grabbed) {
		t.Fatal("could not take the request memory")
	}
	a.frameStart.Store(time.Now().UnixNano())
	var sizeBuf [4]byte
	if _, err := io.ReadFull(a.br, sizeBuf[:]); err != nil {
		t.Fatal(err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	var held int64
	aRead = make(chan error, 1)
	start := time.Now()
	go func() {
		var fb *[]byte
		var err error
		_, fb, held, err = a.readFrame(size)
		putFrame(fb)
		aRead <- err
	}()

	// B is answered while A still waits for memory: A wrote the append
	// holding its commits and B's.
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if corrs, _ := commitAnswers(t, bnc); len(corrs) != 1 {
			return fmt.Errorf("B's commit unanswered %v after A began waiting for request memory", time.Since(start))
		}
		return nil
	})
	if corrs, codes := commitAnswers(t, bnc); corrs[0] != 100 || len(codes) != 1 || codes[0] != 0 {
		t.Fatalf("B's answer: correlation ids %v, error codes %v", corrs, codes)
	}
	select {
	case err := <-aRead:
		aRead = nil
		t.Fatalf("A read its frame without request memory: %v", err)
	default:
	}

	// The memory comes back (as it would once B's requests are done): A
	// reads its frame, and answers its three commits, stored.
	s.budget.release(grabbed)
	grabbed = 0
	select {
	case err := <-aRead:
		aRead = nil
		if err != nil {
			t.Fatalf("A's fourth frame: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A's frame not read within 5s of the memory coming back")
	}
	s.budget.release(held)
	if len(a.postponed) != 0 {
		t.Fatalf("A still has %d commits postponed", len(a.postponed))
	}
	a.flushHeld()
	corrs, codes := commitAnswers(t, anc)
	if fmt.Sprint(corrs) != "[0 1 2]" || fmt.Sprint(codes) != "[0 0 0]" {
		t.Fatalf("A's answers: correlation ids %v, error codes %v", corrs, codes)
	}
}

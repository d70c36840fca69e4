package protocol

import (
	"encoding/binary"
	"errors"
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

// scriptedConn is a connection of s from a scripted client; the test is
// its reader (readOne), nothing runs it.
func scriptedConn(s *Server) (*conn, *scriptConn) {
	nc := newScriptConn()
	return newConn(s, nc, &s.cfg.Listeners[0]), nc
}

// groupCommit commits offset of partition 0 of topic "fuzz" for the
// simple consumer group "fuzz-group" (newFuzzNode made both, and waited
// until the group's coordinator partition was loaded): every such commit
// goes to the same __consumer_offsets partition, so to the same writer.
func groupCommit(offset int64) kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.Generation = "fuzz-group", -1
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

// starvedRead is a reader reading its next buffered frame after another
// connection took all the request memory: after the reader checked for
// room (mayHold, mayPostpone), before it reserved.
type starvedRead struct {
	s       *Server
	grabbed int64
	start   time.Time
	done    chan error
	ended   bool
	err     error
	held    int64 // the frame's reservation (set before done)
}

// starveRead takes all of c's server's request memory and has c, whose
// reader the test is, read its next frame from there, as readOne does, on
// a goroutine.
func starveRead(t *testing.T, c *conn) *starvedRead {
	t.Helper()
	r := &starvedRead{s: c.s, grabbed: c.s.budget.avail.Load(), done: make(chan error, 1)}
	if !c.s.budget.tryAcquire(r.grabbed) {
		t.Fatal("could not take the request memory")
	}
	c.frameStart.Store(time.Now().UnixNano())
	var sizeBuf [4]byte
	if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
		c.s.budget.release(r.grabbed)
		t.Fatal(err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	r.start = time.Now()
	go func() {
		_, fb, held, err := c.readFrame(size)
		putFrame(fb)
		r.held = held
		r.done <- err
	}()
	return r
}

// waiting reports whether the read still waits for memory.
func (r *starvedRead) waiting() bool {
	if !r.ended {
		select {
		case r.err = <-r.done:
			r.ended = true
		default:
		}
	}
	return !r.ended
}

// end gives the memory back, waits for the read (up to 5 s) and releases
// what the frame reserved; it returns the read's error.
func (r *starvedRead) end() error {
	r.s.budget.release(r.grabbed)
	r.grabbed = 0
	if !r.ended {
		select {
		case r.err = <-r.done:
			r.ended = true
		case <-time.After(5 * time.Second):
			return errors.New("frame not read within 5s of the memory coming back")
		}
	}
	r.s.budget.release(r.held)
	r.held = 0
	return r.err
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
// frame's reading as readOne does (starveRead).
func TestPostponedCommitsSettleBeforeRequestMemoryWait(t *testing.T) {
	n := newFuzzNode(t)
	defer n.close()
	s := settleServer(t, n)
	a, anc := scriptedConn(s)
	b, bnc := scriptedConn(s)
	// On failure: whatever A left postponed is settled (B's commit and
	// the coordinator's Close wait for that append) and B's reader ends.
	var aRead *starvedRead
	var bRead chan error
	defer func() {
		if aRead != nil {
			if err := aRead.end(); err != nil {
				t.Error(err)
			}
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
	// and postponed (the first claimed the writer of the group's
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
	// check: A's fourth frame must wait for memory.
	aRead = starveRead(t, a)

	// B is answered while A still waits for memory: A wrote the append
	// holding its commits and B's.
	testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
		if corrs, _ := commitAnswers(t, bnc); len(corrs) != 1 {
			return fmt.Errorf("B's commit unanswered %v after A began waiting for request memory", time.Since(aRead.start))
		}
		return nil
	})
	if corrs, codes := commitAnswers(t, bnc); corrs[0] != 100 || len(codes) != 1 || codes[0] != 0 {
		t.Fatalf("B's answer: correlation ids %v, error codes %v", corrs, codes)
	}
	if !aRead.waiting() {
		t.Fatalf("A read its frame without request memory: %v", aRead.err)
	}

	// The memory comes back (as it would once B's requests are done): A
	// reads its frame, and answers its three commits, stored.
	if err := aRead.end(); err != nil {
		t.Fatalf("A's fourth frame: %v", err)
	}
	if len(a.postponed) != 0 {
		t.Fatalf("A still has %d commits postponed", len(a.postponed))
	}
	a.flushHeld()
	corrs, codes := commitAnswers(t, anc)
	if fmt.Sprint(corrs) != "[0 1 2]" || fmt.Sprint(codes) != "[0 0 0]" {
		t.Fatalf("A's answers: correlation ids %v, error codes %v", corrs, codes)
	}
}

// TestHeldAnswersWrittenBeforeRequestMemoryWait: answers a reader held
// back, and commits it settled, because it could read its next frame at
// once are written when that frame must wait for request memory after
// all: the client does not wait for them as long as the memory stays
// taken (up to socket.request.read.timeout.ms, 30 s here).
func TestHeldAnswersWrittenBeforeRequestMemoryWait(t *testing.T) {
	n := newFuzzNode(t)
	defer n.close()
	s := settleServer(t, n)

	t.Run("held", func(t *testing.T) {
		c, nc := scriptedConn(s)
		defer nc.Close()
		nc.in <- encodeFrames(0, apiVersions(), apiVersions())
		if err := c.readOne(); err != nil {
			t.Fatal(err)
		}
		if c.held != 1 || !c.mayHold() {
			t.Fatalf("reader holds %d answers, may hold the next: %v", c.held, c.mayHold())
		}
		r := starveRead(t, c)
		defer r.end()
		testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
			if _, corrs := nc.answers(); len(corrs) != 1 {
				return fmt.Errorf("answers %v %v after the reader began waiting for request memory", corrs, time.Since(r.start))
			}
			return nil
		})
		if !r.waiting() {
			t.Fatalf("read its frame without request memory: %v", r.err)
		}
	})

	t.Run("postponed", func(t *testing.T) {
		c, nc := scriptedConn(s)
		defer nc.Close()
		var r *starvedRead
		defer func() {
			if r != nil {
				r.end()
			}
			if len(c.postponed) > 0 {
				c.settle() // the coordinator's Close waits for the append
			}
		}()
		nc.in <- encodeFrames(0, groupCommit(1), groupCommit(2), groupCommit(3), groupCommit(4))
		for range 3 {
			if err := c.readOne(); err != nil {
				t.Fatal(err)
			}
		}
		if len(c.postponed) != 3 || !c.mayPostpone() {
			t.Fatalf("postponed %d commits, may postpone the next: %v", len(c.postponed), c.mayPostpone())
		}
		r = starveRead(t, c)
		testutil.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
			if corrs, _ := commitAnswers(t, nc); len(corrs) != 3 {
				return fmt.Errorf("answers %v %v after the reader began waiting for request memory", corrs, time.Since(r.start))
			}
			return nil
		})
		if corrs, codes := commitAnswers(t, nc); fmt.Sprint(corrs) != "[0 1 2]" || fmt.Sprint(codes) != "[0 0 0]" {
			t.Fatalf("answers: correlation ids %v, error codes %v", corrs, codes)
		}
		if !r.waiting() {
			t.Fatalf("read its frame without request memory: %v", r.err)
		}
	})
}

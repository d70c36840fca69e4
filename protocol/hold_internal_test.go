package protocol

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// Tests of the reader holding answers back for a pipelining client
// (conn.mayHold): the answers of requests read together go out in one
// write, and nothing is held behind a handler that waits.

// scriptConn is a client connection whose bytes arrive in the chunks the
// test sends (one chunk is one read) and whose writes are recorded.
type scriptConn struct {
	in     chan []byte
	cur    []byte
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	writes [][]byte
}

func newScriptConn() *scriptConn {
	return &scriptConn{in: make(chan []byte, 16), closed: make(chan struct{})}
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.cur) == 0 {
		select {
		case b, ok := <-c.in:
			if !ok {
				return 0, io.EOF
			}
			c.cur = b
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	c.mu.Unlock()
	return len(p), nil
}

func (c *scriptConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *scriptConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}
}

func (c *scriptConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// answers returns how many writes there were and the correlation ids of
// the frames they held, in order.
func (c *scriptConn) answers() (writes int, corrs []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.writes {
		for len(w) >= 8 {
			size := int(binary.BigEndian.Uint32(w))
			corrs = append(corrs, int32(binary.BigEndian.Uint32(w[4:])))
			w = w[min(4+size, len(w)):]
		}
	}
	return len(c.writes), corrs
}

// holdGroups is a group coordinator whose JoinGroup and OffsetCommit wait
// until the test lets them go (entered says they began).
type holdGroups struct {
	GroupCoordinator
	entered chan string
	release chan struct{}
}

func (g *holdGroups) JoinGroup(ctx context.Context, clientID, clientHost string, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	g.entered <- "join"
	<-g.release
	return req.ResponseKind().(*kmsg.JoinGroupResponse), nil
}

func (g *holdGroups) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	g.entered <- "commit"
	<-g.release
	return req.ResponseKind().(*kmsg.OffsetCommitResponse), nil
}

// wait returns which handler began (bounded).
func (g *holdGroups) wait(t *testing.T) string {
	t.Helper()
	select {
	case got := <-g.entered:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("no handler began within 10s")
		return ""
	}
}

// serveScript serves one scripted connection on a server with groups;
// the returned function ends the connection and waits for it.
func serveScript(t *testing.T, groups GroupCoordinator, holdMax time.Duration) (*scriptConn, func()) {
	t.Helper()
	n := newFuzzNode(t)
	s, err := newServer(Config{Listeners: []Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}}, Broker: n.brk, Groups: groups})
	if err != nil {
		n.close()
		t.Fatal(err)
	}
	s.holdMax = holdMax
	nc := newScriptConn()
	c := newConn(s, nc, &s.cfg.Listeners[0])
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	go c.serve()
	return nc, func() {
		close(nc.in)
		s.connWG.Wait()
		s.cancelBase()
		n.close()
	}
}

// encodeFrames frames reqs back to back, with correlation ids from first
// on. (AppendRequest writes the size at the start of its dst: each frame is
// encoded on its own.)
func encodeFrames(first int32, reqs ...kmsg.Request) []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("hold-test"))
	var b []byte
	for i, r := range reqs {
		b = append(b, f.AppendRequest(nil, r, first+int32(i))...)
	}
	return b
}

func apiVersions() kmsg.Request {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 3
	r.ClientSoftwareName, r.ClientSoftwareVersion = "test", "1.0"
	return r
}

func offsetCommit() kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.Generation = "g", -1
	return r
}

// TestPipelinedAnswersShareOneWrite: five requests read with one read are
// answered with one write, in order.
func TestPipelinedAnswersShareOneWrite(t *testing.T) {
	// However slow the machine, no handler counts as slow here.
	nc, stop := serveScript(t, nil, time.Hour)
	defer stop()
	nc.in <- encodeFrames(0, apiVersions(), apiVersions(), apiVersions(), apiVersions(), apiVersions())
	var writes int
	var corrs []int32
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if writes, corrs = nc.answers(); len(corrs) < 5 {
			return fmt.Errorf("%d writes, answers %v", writes, corrs)
		}
		return nil
	})
	if writes != 1 {
		t.Errorf("5 pipelined answers took %d writes, want 1", writes)
	}
	for i, c := range corrs {
		if c != int32(i) {
			t.Fatalf("answers in order %v", corrs)
		}
	}
}

// TestHeldAnswerNotDelayedByWaitingHandler: an answer is not held back
// behind a JoinGroup (which waits for the rest of the group), nor behind
// the request after a handler that took long (an OffsetCommit waiting for
// its followers).
func TestHeldAnswerNotDelayedByWaitingHandler(t *testing.T) {
	g := &holdGroups{entered: make(chan string, 4), release: make(chan struct{}, 4)}
	nc, stop := serveScript(t, g, holdMaxHandler)
	defer stop()
	defer close(g.release) // a failure leaves no handler waiting
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 7
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000

	// ApiVersions then JoinGroup: the first answer goes out while the
	// join waits.
	nc.in <- encodeFrames(0, apiVersions(), join)
	if got := g.wait(t); got != "join" {
		t.Fatalf("entered %s", got)
	}
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, corrs := nc.answers(); len(corrs) != 1 {
			return io.ErrNoProgress
		}
		return nil
	})
	g.release <- struct{}{}
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, corrs := nc.answers(); len(corrs) != 2 {
			return io.ErrNoProgress
		}
		return nil
	})

	// Two commits read together, the first slow (longer than
	// holdMaxHandler): its answer goes out while the second waits.
	nc.in <- encodeFrames(2, offsetCommit(), offsetCommit())
	g.wait(t)
	time.Sleep(2 * holdMaxHandler) // the first commit takes long
	g.release <- struct{}{}
	g.wait(t)
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, corrs := nc.answers(); len(corrs) != 3 {
			return io.ErrNoProgress
		}
		return nil
	})
	g.release <- struct{}{}
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, corrs := nc.answers(); len(corrs) != 4 {
			return io.ErrNoProgress
		}
		return nil
	})
	if _, corrs := nc.answers(); corrs[0] != 0 || corrs[1] != 1 || corrs[2] != 2 || corrs[3] != 3 {
		t.Fatalf("answers %v", corrs)
	}
}

// startGroups is a group coordinator that starts OffsetCommits
// (OffsetCommitStarter) and logs the order of what happens: each run of
// commits started while one is unled gets one lead, as a writer found idle.
type startGroups struct {
	GroupCoordinator
	mu     sync.Mutex
	events []string
	unled  bool
}

func (g *startGroups) log(e string) {
	g.mu.Lock()
	g.events = append(g.events, e)
	g.mu.Unlock()
}

func (g *startGroups) logged() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.events...)
}

func (g *startGroups) StartOffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (func(), func() (*kmsg.OffsetCommitResponse, error), error) {
	name := fmt.Sprintf("%d", req.Topics[0].Partitions[0].Offset)
	g.log("start " + name)
	var lead func()
	g.mu.Lock()
	if !g.unled {
		g.unled = true
		lead = func() {
			g.mu.Lock()
			g.unled = false
			g.mu.Unlock()
			g.log("lead")
		}
	}
	g.mu.Unlock()
	return lead, func() (*kmsg.OffsetCommitResponse, error) {
		g.log("answer " + name)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}, nil
}

func (g *startGroups) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error) {
	g.log("fetch")
	return req.ResponseKind().(*kmsg.OffsetFetchResponse), nil
}

func commitOf(offset int64) kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.Generation = "g", -1
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: offset, LeaderEpoch: -1},
	}}}
	return r
}

// TestPipelinedCommitsSettleTogether: OffsetCommits read together are all
// started before any is led, led once, then answered in order, before the
// OffsetFetch that follows them runs (it sees them); the six answers go
// out in one write. A commit with nothing read after it is settled before
// the reader waits for the client.
func TestPipelinedCommitsSettleTogether(t *testing.T) {
	g := &startGroups{}
	nc, stop := serveScript(t, g, time.Hour)
	defer stop()
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 7
	fetch.Group = "g"
	nc.in <- encodeFrames(0, commitOf(1), commitOf(2), commitOf(3), commitOf(4), commitOf(5), fetch)
	var writes int
	var corrs []int32
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if writes, corrs = nc.answers(); len(corrs) < 6 {
			return fmt.Errorf("%d writes, answers %v", writes, corrs)
		}
		return nil
	})
	if writes != 1 {
		t.Errorf("6 pipelined answers took %d writes, want 1", writes)
	}
	for i, c := range corrs {
		if c != int32(i) {
			t.Fatalf("answers out of order: %v", corrs)
		}
	}
	want := []string{"start 1", "start 2", "start 3", "start 4", "start 5", "lead",
		"answer 1", "answer 2", "answer 3", "answer 4", "answer 5", "fetch"}
	if got := g.logged(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}

	nc.in <- encodeFrames(6, commitOf(6))
	testutil.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, corrs = nc.answers(); len(corrs) < 7 {
			return fmt.Errorf("answers %v", corrs)
		}
		return nil
	})
	want = append(want, "start 6", "lead", "answer 6")
	if got := g.logged(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
)

// BenchmarkCommitWire measures single-partition OffsetCommit requests to one
// coordinator end to end over TCP, with the broker's cost apart from the
// client's: one `sluice serve` process (single node, no console), and in this
// process a raw load generator that keeps up to depth requests in flight on
// each of conns connections (Kafka clients pipeline up to
// max.in.flight.requests.per.connection = 5 requests). Each connection is a
// simple consumer of its own group (generation -1) committing one partition
// of a topic of 8 partitions, a new offset each time; every answer is
// checked: in order, and without error.
//
// Reported: commits/s; broker-µs/commit, the broker process's CPU time
// (utime + stime from /proc) per commit; client-µs/commit, this process's;
// broker-writes/commit, the broker's write system calls (syscw in
// /proc/<pid>/io: socket writes and log pwrites) per commit.
// $SLUICE_CLUSTER_PROFILE=dir takes a CPU profile of the broker over the
// first 5 s of each run of 20,000 commits or more (use -benchtime 10s).
// $SLUICE_BIN runs a prebuilt binary (to compare two builds interleaved).
//
//	go test -run '^$' -bench CommitWire -benchtime 10s ./internal/clustertest/
func BenchmarkCommitWire(b *testing.B) {
	testutil.Heavy(b, "a sluice serve process")
	n := startSingleNode(b)
	for _, c := range []struct{ conns, depth int }{{1, 1}, {8, 1}, {32, 1}, {8, 5}, {32, 5}, {64, 5}} {
		b.Run(fmt.Sprintf("conns=%d/depth=%d", c.conns, c.depth), func(b *testing.B) {
			n.commitLoad(b, c.conns, c.depth)
		})
	}
}

// singleNode is one `sluice serve` process without ZooKeeper.
type singleNode struct {
	addr  string
	pprof string
	cmd   *exec.Cmd
	// groups counts the groups handed out, so that no two cases share one.
	groups atomic.Int64
}

func startSingleNode(b *testing.B) *singleNode {
	b.Helper()
	bin, err := sluiceBinary()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	ports := freePorts(b, 2)
	n := &singleNode{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		pprof: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	level := os.Getenv("SLUICE_BROKER_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	args := []string{"serve", "--log-level", level}
	for _, o := range []string{
		"listeners=PLAINTEXT://" + n.addr,
		"log.dirs=" + filepath.Join(dir, "data"),
		"console.listen=",
		"console.data.dir=" + filepath.Join(dir, "console"),
		"schema.registry.listen=",
		"group.initial.rebalance.delay.ms=0",
	} {
		args = append(args, "--override", o)
	}
	logf, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SLUICE_PPROF_LISTEN="+n.pprof)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	n.cmd = cmd
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	testutil.CheckFor(b, 60*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(dir, "broker.log"))
			return fmt.Errorf("broker exited during start: %v\n%s", cmd.ProcessState, out)
		default:
		}
		c, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 8, 1, nil, "commits"); err != nil {
		b.Fatal(err)
	}
	// FindCoordinator creates __consumer_offsets, as a client's first
	// lookup does.
	testutil.CheckFor(b, 30*time.Second, 100*time.Millisecond, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "commit-bench"
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	return n
}

// freePorts returns n distinct free loopback ports (held open together).
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// processCPU is this process's CPU time (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// commitLoad runs b.N commits over conns connections, depth in flight on
// each.
func (n *singleNode) commitLoad(b *testing.B, conns, depth int) {
	cs := make([]*commitConn, conns)
	for i := range cs {
		g := fmt.Sprintf("commit-bench-%d", n.groups.Add(1))
		c := dialCommitConn(b, n.addr, g, int32(i%8))
		defer c.nc.Close()
		cs[i] = c
	}
	var budget atomic.Int64
	budget.Store(int64(b.N))
	var wait func()
	if profileDir() != "" && b.N >= 20000 { // not the benchmark's short probing runs
		wait = n.profile(b, 5*time.Second)
	}
	b.ResetTimer()
	cpu0, _ := cpuTime(n.cmd.Process.Pid)
	w0, _ := writeCalls(n.cmd.Process.Pid)
	self0 := processCPU()
	start := time.Now()
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.run(&budget, depth); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	self := processCPU() - self0
	cpu1, _ := cpuTime(n.cmd.Process.Pid)
	w1, werr := writeCalls(n.cmd.Process.Pid)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if wait != nil {
		wait()
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "broker-µs/commit")
	b.ReportMetric(float64(self.Microseconds())/float64(b.N), "client-µs/commit")
	if werr == nil {
		b.ReportMetric(float64(w1-w0)/float64(b.N), "broker-writes/commit")
	}
}

// writeCalls is the process's write system calls so far (syscw in
// /proc/<pid>/io).
func writeCalls(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/io: no syscw", pid)
}

// profile takes a CPU profile of the broker for d, in the background, into
// $SLUICE_CLUSTER_PROFILE/<benchmark>.pprof; the function waits for it.
func (n *singleNode) profile(b *testing.B, d time.Duration) (wait func()) {
	c := &testCluster{brokers: []*brokerProc{{id: 1, pprof: n.pprof, cmd: n.cmd}}}
	return c.profileBrokers(b, benchName(b), d)
}

// commitConn is one connection of the load generator.
type commitConn struct {
	nc   net.Conn
	br   *bufio.Reader
	tmpl []byte // one framed request; the correlation id and the offset are patched in
	off  int    // where the offset is in tmpl
	corr int32  // the next correlation id to send
	next int32  // the next correlation id to be answered
	want []byte // a successful answer, after its correlation id
	wbuf []byte
}

const commitOffsetMark = 0x5a5a5a5a5a5a5a5a

func dialCommitConn(b *testing.B, addr, group string, partition int32) *commitConn {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	c := &commitConn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = group, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "commits", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: partition, Offset: commitOffsetMark, LeaderEpoch: -1},
	}}}
	c.tmpl = kmsg.NewRequestFormatter(kmsg.FormatterClientID("commit-bench")).AppendRequest(nil, req, 0)
	var mark [8]byte
	binary.BigEndian.PutUint64(mark[:], commitOffsetMark)
	c.off = bytes.Index(c.tmpl, mark[:])
	if c.off < 0 {
		nc.Close()
		b.Fatal("offset not found in the encoded request")
	}
	// The first commit creates __consumer_offsets: retry while the
	// coordinator is not ready.
	testutil.CheckFor(b, 30*time.Second, 100*time.Millisecond, func() error {
		c.wbuf = c.appendRequest(c.wbuf[:0], 0)
		if _, err := nc.Write(c.wbuf); err != nil {
			return err
		}
		body, err := c.readAnswer()
		if err != nil {
			return err
		}
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = 8
		if err := resp.ReadFrom(body[1:]); err != nil { // after the header's tags
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("answer %+v", resp)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			return kerr.ErrorForCode(code)
		}
		c.want = append([]byte(nil), body...)
		return nil
	})
	return c
}

// appendRequest appends the request with offset off and the next
// correlation id.
func (c *commitConn) appendRequest(dst []byte, off int64) []byte {
	start := len(dst)
	dst = append(dst, c.tmpl...)
	binary.BigEndian.PutUint32(dst[start+8:], uint32(c.corr)) // size, key, version, then the id
	binary.BigEndian.PutUint64(dst[start+c.off:], uint64(off))
	c.corr++
	return dst
}

// readAnswer reads one response frame, checks its correlation id and
// returns what follows it.
func (c *commitConn) readAnswer() ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(hdr[:]))
	if size < 4 || size > 1<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", size)
	}
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != c.next {
		return nil, fmt.Errorf("answer %d where %d was due (out of order)", corr, c.next)
	}
	c.next++
	body, err := c.br.Peek(size - 4)
	if err != nil {
		return nil, err
	}
	c.br.Discard(size - 4)
	return body, nil
}

// run commits while the budget lasts, keeping depth requests in flight:
// every answer read is replaced by a new request, the new requests of one
// read written together.
func (c *commitConn) run(budget *atomic.Int64, depth int) error {
	inflight := 0
	var offset int64 = 1
	for {
		c.wbuf = c.wbuf[:0]
		for inflight < depth && budget.Add(-1) >= 0 {
			c.wbuf = c.appendRequest(c.wbuf, offset)
			offset++
			inflight++
		}
		if len(c.wbuf) > 0 {
			if _, err := c.nc.Write(c.wbuf); err != nil {
				return err
			}
		}
		if inflight == 0 {
			return nil
		}
		for {
			body, err := c.readAnswer()
			if err != nil {
				return err
			}
			if !bytes.Equal(body, c.want) {
				return fmt.Errorf("answer %x, want %x", body, c.want)
			}
			inflight--
			if inflight == 0 || !c.frameBuffered() {
				break
			}
		}
	}
}

// frameBuffered reports whether a whole response frame is buffered.
func (c *commitConn) frameBuffered() bool {
	if c.br.Buffered() < 4 {
		return false
	}
	hdr, _ := c.br.Peek(4)
	return c.br.Buffered() >= 4+int(binary.BigEndian.Uint32(hdr))
}

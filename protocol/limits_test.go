package protocol_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/protocol"
)

// Tests of the connection limits: what a hostile or careless client can
// make the broker hold (frames announced and not sent, idle and slow
// sockets, too many sockets) and what it can make the broker store.

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// apiVersionsOK checks that c is served: an ApiVersions round trip.
func apiVersionsOK(t *testing.T, c *rawConn) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "sluice-test", "1"
	var resp kmsg.ApiVersionsResponse
	resp.Version = 3
	body := c.recv(c.send(frame(req)))
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v, error %d", err, resp.ErrorCode)
	}
}

// closedWithin waits until the server closes nc (a read ends in EOF or a
// reset) and returns how long that took; it fails after limit.
func closedWithin(t *testing.T, nc net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	nc.SetReadDeadline(start.Add(limit))
	buf := make([]byte, 64<<10)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open after %v", limit)
		}
		return time.Since(start)
	}
}

// TestStalledFramesDoNotGrowTheHeap: eight sockets announcing 100 MiB
// Produce frames (socket.request.max.bytes) and then sending nothing more
// hold a bounded buffer each, not the announced size (800 MiB before).
func TestStalledFramesDoNotGrowTheHeap(t *testing.T) {
	n := startBenchNode(t, nil)
	runtime.GC()
	before := heapAlloc()
	var peak uint64
	for range 8 {
		nc, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		f := binary.BigEndian.AppendUint32(nil, 100<<20)
		f = append(f, 0, 0, 0, 9) // Produce v9 ...
		f = append(f, make([]byte, 4<<10)...)
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 { // the server reads what was sent at once; watch for a second
		peak = max(peak, heapAlloc())
		time.Sleep(50 * time.Millisecond)
	}
	grown := int64(peak) - int64(before)
	t.Logf("heap grew by %d KiB with 8 stalled 100 MiB frames", grown>>10)
	if grown > 32<<20 {
		t.Fatalf("heap grew by %d MiB", grown>>20)
	}
	apiVersionsOK(t, dialRaw(t, n.addr)) // others are still served
}

// TestLargeFrameGrowsAsItArrives: a request larger than what is allocated
// up front (a 5 MiB produce) is read whole as its buffer grows.
func TestLargeFrameGrowsAsItArrives(t *testing.T) {
	maxMsg := "8388608"
	n := startBenchNode(t, map[string]*string{"max.message.bytes": &maxMsg})
	c := dialRaw(t, n.addr)
	defer c.Close()
	for _, size := range []int{5 << 20, 700 << 10} {
		if p := produceResp(t, c.recv(c.send(produceFrame(1, benchBatch(t, size/(64<<10), 64<<10))))); p.ErrorCode != 0 {
			t.Fatalf("produce of %d bytes: error %d", size, p.ErrorCode)
		}
	}
}

// TestIdleConnectionsAreClosed: connections.max.idle.ms closes a connection
// that read and wrote nothing for that long, and only such a one.
func TestIdleConnectionsAreClosed(t *testing.T) {
	testutil.Heavy(t, "waits out idle timeouts, ~3 s")
	reg := metrics.New()
	const idle = time.Second // well above the scheduling stalls of a loaded machine
	n := startBenchNode(t, nil, func(c *protocol.Config) { c.ConnectionsMaxIdle = idle; c.Metrics = reg })
	quiet := dialRaw(t, n.addr)
	defer quiet.Close()
	busy := dialRaw(t, n.addr)
	defer busy.Close()
	apiVersionsOK(t, quiet)
	lastUse := time.Now()
	closed := make(chan time.Time, 1)
	go func() {
		quiet.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		quiet.br.ReadByte() // ends when the server closes it
		closed <- time.Now()
	}()
	for time.Since(lastUse) < 3*idle {
		apiVersionsOK(t, busy)
		time.Sleep(idle / 4)
	}
	select {
	case at := <-closed:
		if took := at.Sub(lastUse); took < idle || took > 3*idle {
			t.Fatalf("idle connection closed after %v, connections.max.idle.ms is %v", took, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection not closed")
	}
	apiVersionsOK(t, busy) // the busy one is still open
	if got := scrape(t, reg, "sluice_broker_connections_expired_total", `timeout="connections.max.idle.ms"`); got != 1 {
		t.Fatalf("expired connections metric %v, want 1", got)
	}
}

// TestSlowFrameTimesOut: a frame that trickles in (slow loris) or stops
// half way is closed after socket.request.read.timeout.ms, however much
// time connections.max.idle.ms would allow.
func TestSlowFrameTimesOut(t *testing.T) {
	reg := metrics.New()
	const timeout = 500 * time.Millisecond
	n := startBenchNode(t, nil, func(c *protocol.Config) { c.RequestReadTimeout = timeout; c.Metrics = reg })
	for name, prefix := range map[string][]byte{
		"trickle":      binary.BigEndian.AppendUint32(nil, 1000),
		"partial size": {0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", n.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			stop := make(chan struct{})
			defer close(stop)
			nc.Write(prefix)
			if name == "trickle" {
				go func() { // a byte every 50 ms: the frame would take 50 s
					for {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
							if _, err := nc.Write([]byte{1}); err != nil {
								return
							}
						}
					}
				}()
			}
			took := closedWithin(t, nc, 10*time.Second)
			if took < timeout-20*time.Millisecond {
				t.Fatalf("closed after %v, before the timeout", took)
			}
		})
	}
	if got := scrape(t, reg, "sluice_broker_connections_expired_total", `timeout="socket.request.read.timeout.ms"`); got != 2 {
		t.Fatalf("expired connections metric %v, want 2", got)
	}
	apiVersionsOK(t, dialRaw(t, n.addr))
}

// TestConnectionLimits: max.connections, max.connections.per.ip and its
// overrides close the connections over the limit at accept, count them
// and let new ones in once others closed.
func TestConnectionLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     func(*protocol.Config)
		allowed int
		limit   string
	}{
		{"max.connections", func(c *protocol.Config) { c.MaxConnections = 3 }, 3, "max.connections"},
		{"max.connections.per.ip", func(c *protocol.Config) { c.MaxConnectionsPerIP = 2 }, 2, "max.connections.per.ip"},
		{"override", func(c *protocol.Config) {
			c.MaxConnectionsPerIP = 1
			c.MaxConnectionsPerIPOverrides = map[string]int{"127.0.0.1": 4}
		}, 4, "max.connections.per.ip"},
		{"only overrides", func(c *protocol.Config) {
			c.MaxConnectionsPerIP = 0
			c.MaxConnectionsPerIPOverrides = map[string]int{"192.0.2.1": 4}
		}, 0, "max.connections.per.ip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := metrics.New()
			var cfg func(*protocol.Config)
			if tc.allowed > 0 {
				cfg = func(c *protocol.Config) { tc.cfg(c); c.Metrics = reg }
			} else {
				// The node's setup needs a connection: limit after.
				cfg = func(c *protocol.Config) { c.Metrics = reg }
			}
			n := startBenchNode(t, nil, cfg)
			if tc.allowed == 0 {
				n = restartWithLimits(t, n, func(c *protocol.Config) { tc.cfg(c); c.Metrics = reg })
			}
			// The node's setup connection is gone.
			testutil.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				if v := scrape(t, reg, "sluice_broker_connections", `listener="PLAINTEXT"`); v > 0 {
					return fmt.Errorf("%v connections open", v)
				}
				return nil
			})
			var open []*rawConn
			for range tc.allowed {
				c := dialRaw(t, n.addr)
				defer c.Close()
				apiVersionsOK(t, c)
				open = append(open, c)
			}
			over := dialRaw(t, n.addr)
			defer over.Close()
			closedWithin(t, over.nc, 5*time.Second)
			if got := scrape(t, reg, "sluice_broker_connections_refused_total", `limit="`+tc.limit+`"`); got != 1 {
				t.Fatalf("refused connections metric %v, want 1", got)
			}
			if tc.allowed == 0 {
				return
			}
			for _, c := range open {
				apiVersionsOK(t, c) // those let in are served
			}
			open[0].Close()
			testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
				c := dialRaw(t, n.addr)
				defer c.Close()
				c.nc.SetDeadline(time.Now().Add(time.Second))
				if _, err := c.nc.Write(frame(kmsg.NewPtrApiVersionsRequest())); err != nil {
					return err
				}
				_, err := c.br.ReadByte()
				return err
			})
		})
	}
}

// restartWithLimits serves n's broker again with a server configured by
// opts (for limits that would refuse the node's own setup connection).
func restartWithLimits(t *testing.T, n *benchNode, opts func(*protocol.Config)) *benchNode {
	t.Helper()
	n.srv.Close()
	cfg := protocol.Config{Listeners: []protocol.Listener{{Name: "PLAINTEXT", Addr: n.addr}}}
	opts(&cfg)
	var srv *protocol.Server
	testutil.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		b, err := protocol.Bind(cfg)
		if err != nil {
			return err
		}
		srv, err = b.Serve(n.brk)
		return err
	})
	t.Cleanup(func() { srv.Close() })
	return &benchNode{addr: n.addr, srv: srv, brk: n.brk}
}

// TestRequestBudgetHoldsReadersBack: queued.max.request.bytes bounds the
// frame bytes held over every connection: while a stalled frame holds it
// all, another connection's request is not read; it is once the stalled
// frame times out.
func TestRequestBudgetHoldsReadersBack(t *testing.T) {
	testutil.Heavy(t, "fills the request budget with large frames, 2 s")
	const timeout = 2 * time.Second
	n := startBenchNode(t, nil, func(c *protocol.Config) {
		c.MaxRequestBytes = 2 << 20
		c.QueuedMaxRequestBytes = 2 << 20
		c.RequestReadTimeout = timeout
	})
	stalled, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	f := binary.BigEndian.AppendUint32(nil, 2<<20)
	f = append(f, 0, 0, 0, 9)
	stalled.Write(append(f, make([]byte, 1536<<10)...)) // 1.5 of 2 MiB, then nothing
	start := time.Now()
	time.Sleep(timeout / 2)

	c := dialRaw(t, n.addr)
	defer c.Close()
	apiVersionsOK(t, c)
	waited := time.Since(start)
	if waited < timeout-100*time.Millisecond {
		t.Fatalf("answered after %v while the budget was held", waited)
	}
	closedWithin(t, stalled, 2*time.Second)
	apiVersionsOK(t, c)
}

// TestPoisonAndBombRefused: over the wire, a gzip batch whose body is not
// gzip and one record of 200 MiB of zeros gzipped to ~204 KB are answered
// INVALID_RECORD, and nothing of them enters the log.
func TestPoisonAndBombRefused(t *testing.T) {
	n := startBenchNode(t, nil)
	c := dialRaw(t, n.addr)
	defer c.Close()

	bomb := testutil.GzipBomb(200 << 20)
	t.Logf("bomb: %d bytes", len(bomb))

	runtime.GC()
	before := heapAlloc()
	for name, batch := range map[string][]byte{
		"poison": testutil.RawBatch(1, 1, []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffnot deflate")),
		"bomb":   bomb,
	} {
		p := produceResp(t, c.recv(c.send(produceFrame(1, batch))))
		if p.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("%s: error %d, want INVALID_RECORD", name, p.ErrorCode)
		}
	}
	if grown := int64(heapAlloc()) - int64(before); grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB", grown>>20)
	}
	// The log is empty: the next batch gets offset 0.
	if p := produceResp(t, c.recv(c.send(produceFrame(1, benchBatch(t, 1, 10))))); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce after: error %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
}

// TestIdleCountsRequestsAndWrites: a request being handled is not idleness
// (a long-poll fetch parked longer than connections.max.idle.ms is
// answered), but a response write stuck that long (a client that stopped
// reading) is, and closes the connection.
func TestIdleCountsRequestsAndWrites(t *testing.T) {
	testutil.Heavy(t, "waits out idle timeouts, ~4 s")
	reg := metrics.New()
	const idle = time.Second
	n := startBenchNode(t, nil, func(c *protocol.Config) { c.ConnectionsMaxIdle = idle; c.Metrics = reg })

	parked := dialRaw(t, n.addr)
	defer parked.Close()
	ff, setOffset := fetchFrameWithOffset(t, 2500, 1<<20)
	setOffset(0) // the partition is empty: the fetch waits its 2.5 s
	start := time.Now()
	if fp := fetchResp(t, parked.recv(parked.send(ff))); fp.ErrorCode != 0 {
		t.Fatalf("parked fetch: error %d", fp.ErrorCode)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the fetch answered after %v", waited)
	}
	apiVersionsOK(t, parked)

	c := dialRaw(t, n.addr)
	defer c.Close()
	for range 12 {
		if p := produceResp(t, c.recv(c.send(produceFrame(1, benchBatch(t, 15, 64<<10))))); p.ErrorCode != 0 {
			t.Fatalf("produce: error %d", p.ErrorCode)
		}
	}
	// Done with these two: closed now, so that on a slow machine they
	// cannot sit idle long enough to expire and be counted below.
	parked.Close()
	c.Close()
	stuck := dialRaw(t, n.addr)
	defer stuck.Close()
	ff, setOffset = fetchFrameWithOffset(t, 0, 16<<20)
	setOffset(0)
	for range 8 { // ~100 MB of answers, never read
		stuck.send(ff)
	}
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if got := scrape(t, reg, "sluice_broker_connections_expired_total", `timeout="connections.max.idle.ms"`); got != 1 {
			return fmt.Errorf("expired connections %v", got)
		}
		return nil
	})
}

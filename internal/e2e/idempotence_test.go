package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdempotentSequences drives the producer-state checks with raw
// requests: a retried batch is answered with its original offset and not
// written twice (also after a restart), a gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
// an older epoch is INVALID_PRODUCER_EPOCH.
func TestIdempotentSequences(t *testing.T) {
	n := startNode(t)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.Addr())
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(4)
	ipr := c.recv(ip, c.send(ip)).(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode != 0 || ipr.ProducerID < 0 || ipr.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %+v", ipr)
	}
	pid := ipr.ProducerID
	ipr2 := c.recv(ip, c.send(ip)).(*kmsg.InitProducerIDResponse)
	if ipr2.ProducerID == pid {
		t.Fatal("two InitProducerId calls returned the same producer id")
	}
	send := func(epoch int16, seq int32, records int) (int16, int64) {
		req := produceReq("idem", 0, -1, batch(t, records, pid, epoch, seq, "s"))
		return produceCode(t, c.recv(req, c.send(req)))
	}
	if code, off := send(0, 0, 3); code != 0 || off != 0 {
		t.Fatalf("first batch: %d at %d", code, off)
	}
	if code, off := send(0, 3, 2); code != 0 || off != 3 {
		t.Fatalf("second batch: %d at %d", code, off)
	}
	// Retry of the first batch: original offset, nothing written.
	if code, off := send(0, 0, 3); code != 0 || off != 0 {
		t.Fatalf("duplicate of the first batch: %d at %d, want 0 at 0", code, off)
	}
	if code, _ := send(0, 9, 1); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", code)
	}
	endOffset := func() int64 {
		lo, err := n.Admin().ListEndOffsets(ctx, "idem")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("idem", 0)
		return o.Offset
	}
	if e := endOffset(); e != 5 {
		t.Fatalf("end offset %d after a duplicate and a rejected batch, want 5", e)
	}

	// Producer state survives a restart: the duplicate is still caught.
	n.Restart()
	c = dialRaw(t, n.Addr())
	if code, off := send(0, 3, 2); code != 0 || off != 3 {
		t.Fatalf("duplicate after restart: %d at %d, want 0 at 3", code, off)
	}
	if code, off := send(0, 5, 1); code != 0 || off != 5 {
		t.Fatalf("next batch after restart: %d at %d", code, off)
	}
	// A bumped epoch starts again at sequence 0; the old epoch is fenced.
	if code, off := send(1, 0, 1); code != 0 || off != 6 {
		t.Fatalf("epoch 1: %d at %d", code, off)
	}
	if code, _ := send(0, 6, 1); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if e := endOffset(); e != 7 {
		t.Fatalf("end offset %d, want 7", e)
	}
}

// dropProxy forwards Kafka connections to a broker and, while armed, cuts
// the connection after a Produce request reached the broker but before its
// response reaches the client: the client cannot know whether the write
// happened and must retry it.
type dropProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Int32 // number of produce responses still to drop
	dropped atomic.Int32
	wg      sync.WaitGroup
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		var mu sync.Mutex
		keys := map[int32]int16{}
		p.wg.Add(2)
		go func() { // client -> broker
			defer p.wg.Done()
			defer s.Close()
			for {
				f, err := readRawFrame(c)
				if err != nil {
					return
				}
				mu.Lock()
				keys[int32(binary.BigEndian.Uint32(f[8:]))] = int16(binary.BigEndian.Uint16(f[4:]))
				mu.Unlock()
				if _, err := s.Write(f); err != nil {
					return
				}
			}
		}()
		go func() { // broker -> client
			defer p.wg.Done()
			defer c.Close()
			for {
				f, err := readRawFrame(s)
				if err != nil {
					return
				}
				mu.Lock()
				key := keys[int32(binary.BigEndian.Uint32(f[4:]))]
				mu.Unlock()
				if key == 0 && p.armed.Load() > 0 && p.armed.Add(-1) >= 0 {
					p.dropped.Add(1)
					s.Close()
					return
				}
				if _, err := c.Write(f); err != nil {
					return
				}
			}
		}()
	}
}

func readRawFrame(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	f := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(f, size[:])
	_, err := io.ReadFull(c, f[4:])
	return f, err
}

// TestIdempotentRetryAfterDroppedConnection: franz-go's idempotent
// producer loses the connection after its produce requests were written
// (the responses never arrive), retries them on a new connection, and the
// log holds every record exactly once, in order.
func TestIdempotentRetryAfterDroppedConnection(t *testing.T) {
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := proxyLn.Addr().String()
	proxyLn.Close()
	// The broker advertises the proxy, so every client connection goes
	// through it.
	n := startNode(t, "advertised.listeners=PLAINTEXT://"+proxyAddr)
	brokerAddr := n.Addr()
	ln, err := net.Listen("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: brokerAddr}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })

	ctx := ctxFor(t, 60*time.Second)
	start := time.Now()
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "retry"); err != nil {
		t.Fatal(err)
	}
	t.Logf("create topic took %v", time.Since(start))
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxyAddr), kgo.DefaultProduceTopic("retry"),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.ProducerLinger(0), kgo.RequestRetries(20), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const total = 300
	p.armed.Store(3)
	var failed atomic.Value
	for i := range total {
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%04d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		})
		if i%50 == 49 {
			time.Sleep(20 * time.Millisecond) // several produce requests, so several can be cut
		}
	}
	start = time.Now()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("flush took %v", time.Since(start))
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if p.dropped.Load() == 0 {
		t.Fatal("the proxy dropped no produce response: the test did not exercise a retry")
	}
	t.Logf("dropped %d produce responses", p.dropped.Load())

	direct, err := kgo.NewClient(kgo.SeedBrokers(proxyAddr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"retry": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	var got []string
	for len(got) < total {
		fs := direct.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), total)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if v != fmt.Sprintf("r%04d", i) {
			t.Fatalf("record %d is %q: duplicate or reordering", i, v)
		}
	}
	lo, err := n.Admin().ListEndOffsets(ctx, "retry")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("retry", 0); o.Offset != total {
		t.Fatalf("end offset %d, want %d: a retried batch was written twice", o.Offset, total)
	}
}

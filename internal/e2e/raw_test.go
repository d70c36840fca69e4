package e2e

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// rawConn speaks the wire protocol by hand, for the tests that need to
// send what no client would.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// frame encodes req at its set version as a complete frame.
func frame(req kmsg.Request, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "raw"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func (r *rawConn) send(req kmsg.Request) int32 {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(frame(req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// readFrame reads one response frame: its correlation id and the rest.
func (r *rawConn) readFrame(timeout time.Duration) (int32, []byte, error) {
	r.c.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// recv reads the response to req (sent with corr) and decodes it.
func (r *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	r.t.Helper()
	got, body, err := r.readFrame(10 * time.Second)
	if err != nil {
		r.t.Fatalf("reading response to %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got != corr {
		r.t.Fatalf("response correlation id %d, want %d (out of order)", got, corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:] // response header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed asserts the broker closes the connection (without a
// response) within a few seconds.
func (r *rawConn) expectClosed(what string) {
	r.t.Helper()
	_, _, err := r.readFrame(5 * time.Second)
	if err == nil {
		r.t.Fatalf("%s: got a response, want the connection closed", what)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Fatalf("%s: connection still open after 5s", what)
	}
}

// produceReq builds a Produce v9 request for one partition.
func produceReq(topic string, partition int32, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// batch builds a record batch v2 with n records.
func batch(t *testing.T, n int, pid int64, epoch int16, seq int32, prefix string) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: []byte(prefix + string(rune('a'+i%26)))}
	}
	b, err := record.BuildBatch(record.BatchOptions{
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: time.Now().UnixMilli(),
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceCode(t *testing.T, resp kmsg.Response) (int16, int64) {
	t.Helper()
	pr := resp.(*kmsg.ProduceResponse)
	p := pr.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// TestBadInput sends what a broken or hostile client might: each gets the
// right error or a closed connection, while the broker, a well-behaved
// client's connection and the data already written are unaffected.
func TestBadInput(t *testing.T) {
	n := startNode(t, "socket.request.max.bytes=1048576")
	ctx := ctxFor(t, 60*time.Second)
	good := n.Client(kgo.DefaultProduceTopic("keep"), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 50 {
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A raw connection kept open across all of the below.
	bystander := dialRaw(t, n.Addr())
	checkAlive := func(step string) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		resp := bystander.recv(req, bystander.send(req)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Fatalf("after %s: bystander ApiVersions %+v", step, resp)
		}
	}
	checkAlive("start")

	t.Run("huge size prefix", func(t *testing.T) {
		c := dialRaw(t, n.Addr())
		c.write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 3})
		c.expectClosed("size 2^31-1")
		c = dialRaw(t, n.Addr())
		c.write(binary.BigEndian.AppendUint32(nil, 1048577)) // one over socket.request.max.bytes
		c.expectClosed("size over socket.request.max.bytes")
		c = dialRaw(t, n.Addr())
		c.write([]byte{0xff, 0xff, 0xff, 0xfe})
		c.expectClosed("negative size")
		checkAlive("huge sizes")
	})
	t.Run("truncated frames", func(t *testing.T) {
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(4)
		f := frame(md, 1)
		for _, cut := range []int{2, 4, 9, len(f) - 1} {
			c := dialRaw(t, n.Addr())
			c.write(f[:cut])
			c.c.(*net.TCPConn).CloseWrite()
			c.expectClosed("truncated frame")
		}
		// A frame whose body ends early (the size is honest, the body is
		// cut): decoding fails and the connection closes.
		body := f[4 : len(f)-3]
		c := dialRaw(t, n.Addr())
		c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
		c.expectClosed("body shorter than its fields")
		checkAlive("truncated frames")
	})
	t.Run("random frames", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for i := range 200 {
			size := 10 + rng.IntN(300)
			b := binary.BigEndian.AppendUint32(nil, uint32(size))
			for range size {
				b = append(b, byte(rng.Uint32()))
			}
			if i%2 == 0 {
				// Keep the key valid half of the time so the body decoder
				// is what meets the garbage. (Not Fetch: garbage that
				// decodes as a long poll rightly waits.)
				binary.BigEndian.PutUint16(b[4:], uint16([]int{0, 2, 3, 18, 32}[rng.IntN(5)]))
				binary.BigEndian.PutUint16(b[6:], uint16(rng.IntN(10)))
				binary.BigEndian.PutUint16(b[12:], 0)
			}
			c := dialRaw(t, n.Addr())
			c.write(b)
			// Either an answer (garbage can decode) or a close; never a hang.
			c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var sz [4]byte
			if _, err := io.ReadFull(c.c, sz[:]); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("random frame %d: neither answered nor closed", i)
			}
			c.c.Close()
		}
		checkAlive("random frames")
	})
	t.Run("unknown API key and version", func(t *testing.T) {
		c := dialRaw(t, n.Addr())
		c.write([]byte{0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0, 0}) // key 999
		c.expectClosed("key 999")
		c = dialRaw(t, n.Addr())
		c.write([]byte{0, 0, 0, 10, 0, 68, 0, 0, 0, 0, 0, 1, 0, 0}) // KIP-848 heartbeat: not served
		c.expectClosed("unregistered key 68")
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(4)
		f := frame(md, 1)
		binary.BigEndian.PutUint16(f[6:], 99) // Metadata v99
		c = dialRaw(t, n.Addr())
		c.write(f)
		c.expectClosed("Metadata v99")
		// ApiVersions of an unknown version gets UNSUPPORTED_VERSION in a
		// v0 body listing ApiVersions' own range (KIP-511).
		av := kmsg.NewPtrApiVersionsRequest()
		f = frame(av, 5)
		binary.BigEndian.PutUint16(f[6:], 77)
		c = dialRaw(t, n.Addr())
		c.write(f)
		corr, body, err := c.readFrame(5 * time.Second)
		if err != nil || corr != 5 {
			t.Fatalf("ApiVersions v77: corr %d err %v", corr, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 3 {
			t.Fatalf("ApiVersions v77 answer %+v", resp)
		}
		checkAlive("unknown keys")
	})
	t.Run("bad CRC in a produce", func(t *testing.T) {
		c := dialRaw(t, n.Addr())
		b := batch(t, 3, -1, -1, -1, "crc")
		b[len(b)-1] ^= 0xff // a record byte: covered by the CRC
		req := produceReq("keep", 0, -1, b)
		code, _ := produceCode(t, c.recv(req, c.send(req)))
		if code != kerr.CorruptMessage.Code {
			t.Fatalf("bad CRC: error %d, want CORRUPT_MESSAGE", code)
		}
		// A batch whose length field lies.
		b = batch(t, 3, -1, -1, -1, "len")
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)+100))
		req = produceReq("keep", 0, -1, b)
		if code, _ := produceCode(t, c.recv(req, c.send(req))); code != kerr.CorruptMessage.Code {
			t.Fatalf("bad length: error %d, want CORRUPT_MESSAGE", code)
		}
		// The connection is still usable, and a good batch goes in.
		req = produceReq("keep", 0, -1, batch(t, 2, -1, -1, -1, "ok"))
		if code, off := produceCode(t, c.recv(req, c.send(req))); code != 0 || off != 50 {
			t.Fatalf("good produce after bad ones: error %d offset %d, want 0 at 50", code, off)
		}
		// Unknown partition and topic.
		req = produceReq("keep", 9, -1, batch(t, 1, -1, -1, -1, "x"))
		if code, _ := produceCode(t, c.recv(req, c.send(req))); code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("unknown partition: %d", code)
		}
		// A batch larger than the topic's max.message.bytes.
		alt, err := n.Admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("1000")}}, "keep")
		if err != nil || alt[0].Err != nil {
			t.Fatalf("alter max.message.bytes: %v %+v", err, alt)
		}
		big := make([]record.Record, 1)
		big[0] = record.Record{Value: make([]byte, 2000)}
		bb, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, big)
		req = produceReq("keep", 0, -1, bb[:])
		if code, _ := produceCode(t, c.recv(req, c.send(req))); code != kerr.MessageTooLarge.Code {
			t.Fatalf("oversized batch: %d, want MESSAGE_TOO_LARGE", code)
		}
		checkAlive("bad CRC")
	})

	// Nothing written before is lost, and the good client still works.
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("good client after the abuse: %v", err)
	}
	cl := n.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"keep": {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < 53 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of 53 records", len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i := range 50 {
		if got[i] != string([]byte{byte(i)}) {
			t.Fatalf("record %d changed: %q", i, got[i])
		}
	}
	if got[50] != "oka" || got[51] != "okb" || got[52] != "after" {
		t.Fatalf("records after the abuse: %q", got[50:])
	}
}

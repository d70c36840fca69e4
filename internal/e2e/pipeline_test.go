package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fetchReq(topic string, partition int32, offset int64, maxWait, minBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestPipeliningAndLongPoll: several requests in flight on one connection
// are answered in order; a long-poll fetch parked behind them does not hold
// up the requests after it, wakes as soon as a record is appended (not at
// max_wait_ms), and its answer still comes before theirs; acks=0 produce
// gets no response.
func TestPipeliningAndLongPoll(t *testing.T) {
	n := startNode(t)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 1, 1, nil, "lp"); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.Addr())

	// 20 requests back to back, then read 20 answers in order.
	var reqs []kmsg.Request
	var corrs []int32
	for i := range 20 {
		var r kmsg.Request
		switch i % 3 {
		case 0:
			md := kmsg.NewPtrMetadataRequest()
			md.SetVersion(int16(i % 13))
			r = md
		case 1:
			av := kmsg.NewPtrApiVersionsRequest()
			av.SetVersion(int16(i % 3))
			r = av
		default:
			lo := kmsg.NewPtrListOffsetsRequest()
			lo.SetVersion(int16(i % 8))
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = "lp"
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
			r = lo
		}
		reqs = append(reqs, r)
		corrs = append(corrs, c.send(r))
	}
	for i, r := range reqs {
		c.recv(r, corrs[i]) // fails on an out-of-order correlation id
	}

	// A long poll (10 s, 1 byte), then a Metadata, an acks=0 produce and an
	// ApiVersions behind it on the same connection.
	fetch := fetchReq("lp", 0, 0, 10_000, 1)
	fcorr := c.send(fetch)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	mcorr := c.send(md)
	// acks=0: no response; the next answer on the wire is the ApiVersions.
	p0 := produceReq("lp", 0, 0, batch(t, 1, -1, -1, -1, "acks0"))
	c.send(p0)
	av := kmsg.NewPtrApiVersionsRequest()
	acorr := c.send(av)

	// Wake the fetch with an append from another client.
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := n.Client().ProduceSync(ctx, &kgo.Record{Topic: "lp", Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fr := c.recv(fetch, fcorr).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("long poll answered %v after the append: not woken by it", waited)
	}
	fp := fr.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 || fp.HighWatermark < 1 {
		t.Fatalf("long poll answer %+v", fp)
	}
	c.recv(md, mcorr)
	c.recv(av, acorr)

	// The acks=0 record was written.
	lo, err := n.Admin().ListEndOffsets(ctx, "lp")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("lp", 0); o.Offset != 2 {
		t.Fatalf("end offset %d, want 2 (acks=0 record and the waking record)", o.Offset)
	}

	// A long poll with nothing arriving answers empty at max_wait_ms.
	start = time.Now()
	fetch = fetchReq("lp", 0, 2, 400, 1)
	fr = c.recv(fetch, c.send(fetch)).(*kmsg.FetchResponse)
	if el := time.Since(start); el < 350*time.Millisecond || el > 5*time.Second {
		t.Fatalf("empty long poll took %v, max_wait_ms 400", el)
	}
	if len(fr.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatal("empty long poll returned records")
	}

	// An acks=0 produce that fails closes the connection (Kafka's only
	// way to tell such a producer).
	bad := produceReq("lp", 7, 0, batch(t, 1, -1, -1, -1, "x"))
	c.send(bad)
	c.expectClosed("failed acks=0 produce")
}

// TestFetchLimits checks max_bytes / partition_max_bytes (KIP-74: the
// first batch always comes, even when larger), out-of-range offsets and
// the sessionless fetch-session answers.
func TestFetchLimits(t *testing.T) {
	n := startNode(t)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := n.Admin().CreateTopic(ctx, 2, 1, nil, "lim"); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.Addr())
	var sizes []int
	for i := range 5 {
		b := batch(t, 10, -1, -1, -1, string(rune('A'+i))+"-padding-padding-padding")
		sizes = append(sizes, len(b))
		for p := int32(0); p < 2; p++ {
			req := produceReq("lim", p, 1, b)
			if code, _ := produceCode(t, c.recv(req, c.send(req))); code != 0 {
				t.Fatalf("produce: %d", code)
			}
		}
	}
	two := fetchReq("lim", 0, 0, 0, 0)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
	two.Topics[0].Partitions = append(two.Topics[0].Partitions, rp)

	// max_bytes 1: one batch from the first partition, none from the second.
	two.MaxBytes = 1
	fr := c.recv(two, c.send(two)).(*kmsg.FetchResponse)
	if got := len(fr.Topics[0].Partitions[0].RecordBatches); got != sizes[0] {
		t.Fatalf("max_bytes=1: partition 0 returned %d bytes, want exactly the first batch (%d)", got, sizes[0])
	}
	if got := len(fr.Topics[0].Partitions[1].RecordBatches); got != 0 {
		t.Fatalf("max_bytes=1: partition 1 returned %d bytes", got)
	}
	// partition_max_bytes: two batches' worth from each partition.
	two.MaxBytes = 1 << 20
	two.Topics[0].Partitions[0].PartitionMaxBytes = int32(sizes[0] + sizes[1])
	two.Topics[0].Partitions[1].PartitionMaxBytes = int32(sizes[0] + sizes[1])
	fr = c.recv(two, c.send(two)).(*kmsg.FetchResponse)
	for p := range 2 {
		if got := len(fr.Topics[0].Partitions[p].RecordBatches); got != sizes[0]+sizes[1] {
			t.Fatalf("partition_max_bytes: partition %d returned %d bytes, want %d", p, got, sizes[0]+sizes[1])
		}
	}
	// Out of range.
	oor := fetchReq("lim", 0, 999, 0, 0)
	fr = c.recv(oor, c.send(oor)).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 50 {
		t.Fatalf("out of range fetch: %+v", p)
	}
	// Unknown topic.
	unk := fetchReq("nope", 0, 0, 0, 0)
	fr = c.recv(unk, c.send(unk)).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic fetch: %+v", p)
	}
	// Sessions (KIP-227): a new-session request gets a session id and the
	// full answer; a request naming an unknown session gets
	// FETCH_SESSION_ID_NOT_FOUND (protocol's TestFetchSessions covers the
	// rest).
	s := fetchReq("lim", 0, 0, 0, 0)
	s.SessionEpoch = 0
	fr = c.recv(s, c.send(s)).(*kmsg.FetchResponse)
	if fr.SessionID == 0 || fr.ErrorCode != 0 || len(fr.Topics) != 1 {
		t.Fatalf("new session answer: id %d error %d, %d topics", fr.SessionID, fr.ErrorCode, len(fr.Topics))
	}
	s.SessionID, s.SessionEpoch = fr.SessionID+1, 1
	fr = c.recv(s, c.send(s)).(*kmsg.FetchResponse)
	if fr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session answer: error %d", fr.ErrorCode)
	}
	// Every served Fetch version decodes.
	for v := int16(4); v <= 12; v++ {
		f := fetchReq("lim", 0, 0, 0, 0)
		f.SetVersion(v)
		fr := c.recv(f, c.send(f)).(*kmsg.FetchResponse)
		if p := fr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
			t.Fatalf("Fetch v%d: %+v", v, p)
		}
	}
}

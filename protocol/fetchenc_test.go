package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
)

// TestFetchEncoderDecodesWithKmsg encodes a Fetch response with the
// streaming encoder for every served version and decodes it with kmsg:
// every field must come back as written, and the frame size must be exact.
func TestFetchEncoderDecodesWithKmsg(t *testing.T) {
	batchA := bytes.Repeat([]byte{0xAB}, 300)
	batchB := []byte("some record batch bytes")
	for v := int16(4); v <= 12; v++ {
		// read_committed (an empty, not null, aborted transactions array
		// on every partition) on every other version.
		readCommitted := v%2 == 0
		f := &fetchResponse{version: v, throttle: 7, errorCode: 0, sessionID: 0, abortedEmpty: readCommitted}
		p0 := testFetchPartition(0)
		p0.HighWatermark, p0.LastStableOffset, p0.LogStartOffset = 100, 100, 3
		p0.Records = broker.MemoryRecords(batchA)
		p1 := testFetchPartition(5)
		p1.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
		p1.LeaderID, p1.LeaderEpoch = 2, 9
		p2 := testFetchPartition(1)
		p2.HighWatermark, p2.LastStableOffset, p2.LogStartOffset = 42, 42, 0
		p2.DivergingEpoch, p2.DivergingEndOffset = 4, 40
		p2.Records = broker.MemoryRecords(batchB)
		p3 := testFetchPartition(2) // empty records
		p3.HighWatermark, p3.LastStableOffset, p3.LogStartOffset = 0, 0, 0
		f.addTopic("orders", p0, p1)
		f.addTopic("t2", p2, p3)
		f.addTopic("empty-topic-list")

		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		if err := f.writeResponse(w, nil, 77); err != nil {
			t.Fatalf("v%d: write: %v", v, err)
		}
		w.Flush()
		frame := out.Bytes()
		size := int(binary.BigEndian.Uint32(frame))
		if size != len(frame)-4 {
			t.Fatalf("v%d: size prefix %d, frame has %d bytes after it", v, size, len(frame)-4)
		}
		if corr := int32(binary.BigEndian.Uint32(frame[4:])); corr != 77 {
			t.Fatalf("v%d: correlation id %d", v, corr)
		}
		body := frame[8:]
		if v >= 12 {
			if body[0] != 0 {
				t.Fatalf("v%d: response header tags %d", v, body[0])
			}
			body = body[1:]
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		// Re-encoding with kmsg must give the same bytes.
		if again := resp.AppendTo(nil); !bytes.Equal(again, body) {
			t.Fatalf("v%d: kmsg re-encoding differs:\n got %x\nwant %x", v, body, again)
		}
		if resp.ThrottleMillis != 7 || len(resp.Topics) != 3 {
			t.Fatalf("v%d: throttle %d topics %d", v, resp.ThrottleMillis, len(resp.Topics))
		}
		rp := resp.Topics[0].Partitions[0]
		if resp.Topics[0].Topic != "orders" || rp.Partition != 0 || rp.HighWatermark != 100 || rp.LastStableOffset != 100 || !bytes.Equal(rp.RecordBatches, batchA) {
			t.Fatalf("v%d: partition 0: %+v", v, rp)
		}
		if v >= 5 && rp.LogStartOffset != 3 {
			t.Fatalf("v%d: log start %d", v, rp.LogStartOffset)
		}
		if (rp.AbortedTransactions != nil) != readCommitted || len(rp.AbortedTransactions) != 0 {
			t.Fatalf("v%d: aborted transactions %v (read_committed %v)", v, rp.AbortedTransactions, readCommitted)
		}
		if v >= 11 && rp.PreferredReadReplica != -1 {
			t.Fatalf("v%d: preferred read replica %d", v, rp.PreferredReadReplica)
		}
		nl := resp.Topics[0].Partitions[1]
		if nl.ErrorCode != 6 || nl.Partition != 5 || len(nl.RecordBatches) != 0 {
			t.Fatalf("v%d: error partition: %+v", v, nl)
		}
		if v >= 12 && (nl.CurrentLeader.LeaderID != 2 || nl.CurrentLeader.LeaderEpoch != 9) {
			t.Fatalf("v%d: current leader %+v", v, nl.CurrentLeader)
		}
		d := resp.Topics[1].Partitions[0]
		if !bytes.Equal(d.RecordBatches, batchB) || (d.AbortedTransactions != nil) != readCommitted || len(d.AbortedTransactions) != 0 {
			t.Fatalf("v%d: t2/1: %+v", v, d)
		}
		if v >= 12 && (d.DivergingEpoch.Epoch != 4 || d.DivergingEpoch.EndOffset != 40) {
			t.Fatalf("v%d: diverging epoch %+v", v, d.DivergingEpoch)
		}
		if e := resp.Topics[1].Partitions[1]; e.Partition != 2 || len(e.RecordBatches) != 0 {
			t.Fatalf("v%d: empty partition %+v", v, e)
		}
	}
}

// TestFetchEncoderSessionError checks the top-level error and session id
// fields (v7+).
func TestFetchEncoderSessionError(t *testing.T) {
	for v := int16(7); v <= 12; v++ {
		f := &fetchResponse{version: v, errorCode: 70}
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		if err := f.writeResponse(w, nil, 1); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		body := out.Bytes()[8:]
		if v >= 12 {
			body = body[1:]
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if resp.ErrorCode != 70 || resp.SessionID != 0 || len(resp.Topics) != 0 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
}

// testFetchPartition is a partition result with nothing set: no offsets, no
// diverging epoch, no leader.
func testFetchPartition(p int32) broker.FetchPartition {
	fp := broker.FetchPartition{Partition: p}
	fp.Fail(nil)
	return fp
}

// addTopic appends a topic and its partitions.
func (f *fetchResponse) addTopic(name string, partitions ...broker.FetchPartition) {
	f.topics = append(f.topics, fetchTopic{name: name, partitions: len(partitions)})
	f.req.Partitions = append(f.req.Partitions, partitions...)
}

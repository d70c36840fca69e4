package txn

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"testing"
)

// The bytes of Kafka's TransactionLogValue v0 (TransactionLog.scala):
// version, producer id, epoch, timeout, status, partitions (null in Empty),
// last update and start timestamps.
func TestValueBytesAreKafkas(t *testing.T) {
	be := binary.BigEndian
	md := &metadata{id: "x", producerID: 7, epoch: 3, timeoutMs: 60000, state: Ongoing,
		partitions: map[TopicPartition]struct{}{{Topic: "b", Partition: 1}: {}, {Topic: "a", Partition: 2}: {}, {Topic: "a", Partition: 0}: {}},
		startMs:    100, updateMs: 200}
	var want []byte
	want = be.AppendUint16(want, 0)
	want = be.AppendUint64(want, 7)
	want = be.AppendUint16(want, 3)
	want = be.AppendUint32(want, 60000)
	want = append(want, 1)
	want = be.AppendUint32(want, 2) // topics
	want = be.AppendUint16(want, 1)
	want = append(want, 'a')
	want = be.AppendUint32(want, 2)
	want = be.AppendUint32(want, 0)
	want = be.AppendUint32(want, 2)
	want = be.AppendUint16(want, 1)
	want = append(want, 'b')
	want = be.AppendUint32(want, 1)
	want = be.AppendUint32(want, 1)
	want = be.AppendUint64(want, 200)
	want = be.AppendUint64(want, 100)
	if got := encodeValue(md); !bytes.Equal(got, want) {
		t.Fatalf("value\n got %x\nwant %x", got, want)
	}
	md.state, md.partitions, md.startMs = Empty, nil, -1
	got := encodeValue(md)
	if !bytes.Equal(got[17:21], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("Empty's partitions are not null: %x", got)
	}
	if k := encodeKey("tx"); !bytes.Equal(k, []byte{0, 0, 0, 2, 't', 'x'}) {
		t.Fatalf("key %x", k)
	}
	back, err := decodeValue("x", got)
	if err != nil || back.state != Empty || back.producerID != 7 || back.epoch != 3 || back.startMs != -1 {
		t.Fatalf("decode: %+v %v", back, err)
	}
}

func TestStateTransitions(t *testing.T) {
	legal := map[[2]State]bool{
		{Empty, Ongoing}: true, {Ongoing, PrepareCommit}: true, {Ongoing, PrepareAbort}: true,
		{PrepareCommit, CompleteCommit}: true, {PrepareAbort, CompleteAbort}: true,
		{CompleteCommit, Ongoing}: true, {CompleteAbort, Empty}: true, {Empty, Dead}: true,
		{Ongoing, PrepareEpochFence}: true, {PrepareEpochFence, PrepareAbort}: true,
	}
	illegal := [][2]State{{Empty, PrepareCommit}, {PrepareCommit, PrepareAbort}, {Ongoing, Empty}, {Ongoing, Dead}, {PrepareAbort, CompleteCommit}, {Dead, Empty}}
	for tr := range legal {
		if !canTransit(tr[0], tr[1]) {
			t.Errorf("%v -> %v refused", tr[0], tr[1])
		}
	}
	for _, tr := range illegal {
		if canTransit(tr[0], tr[1]) {
			t.Errorf("%v -> %v allowed", tr[0], tr[1])
		}
	}
}

func FuzzDecode(f *testing.F) {
	md := &metadata{id: "x", producerID: 7, epoch: 3, timeoutMs: 60000, state: Ongoing,
		partitions: map[TopicPartition]struct{}{{Topic: "a", Partition: 0}: {}}, startMs: 1, updateMs: 2}
	f.Add(encodeKey("x"), encodeValue(md))
	md.state = Empty
	f.Add(encodeKey(""), encodeValue(md))
	f.Add([]byte{0, 1, 0, 0}, []byte{0, 1, 0})
	f.Add([]byte{0xff, 0xff}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 3, 0x7f, 0xff, 0xff, 0xff, 9, 0xff, 0xff, 0xff, 0xfe})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		txns := map[string]*metadata{}
		applyRecord(txns, key, value, discardLog)
		for id, md := range txns {
			// What decodes encodes back to a value that decodes the same.
			back, err := decodeValue(id, encodeValue(md))
			if err != nil || back.state != md.state || back.producerID != md.producerID || len(back.partitions) != len(md.partitions) && md.state != Empty {
				t.Fatalf("round trip of %+v: %+v %v", md, back, err)
			}
		}
	})
}

var discardLog = slog.New(slog.DiscardHandler)

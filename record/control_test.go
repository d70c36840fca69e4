package record_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

// kafkaMarker is the control batch as Kafka's
// MemoryRecords.writeEndTransactionalMarker writes it, built with kmsg's
// types (the bytes kfake appends too).
func kafkaMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	key := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyTypeAbort}
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	marker := kmsg.EndTxnMarker{CoordinatorEpoch: coordinatorEpoch}
	rec := kmsg.Record{Key: key.AppendTo(nil), Value: marker.AppendTo(nil)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x30,
		FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: -1, NumRecords: 1,
		Records: rec.AppendTo(nil),
	}
	enc := b.AppendTo(nil)
	b.Length = int32(len(enc) - 12)
	enc = b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

func TestEndTxnMarkerIsKafkas(t *testing.T) {
	for _, tc := range []struct {
		pid     int64
		epoch   int16
		commit  bool
		coordEp int32
		ts      int64
	}{
		{1000, 0, true, 0, 1700000000000},
		{7, 32766, false, 12, 1},
		{1 << 40, 3, true, 1<<31 - 1, 1700000000123},
	} {
		got := record.AppendEndTxnMarker(nil, record.EndTxnMarker{ProducerID: tc.pid, ProducerEpoch: tc.epoch,
			CoordinatorEpoch: tc.coordEp, Commit: tc.commit}, tc.ts)
		want := kafkaMarker(tc.pid, tc.epoch, tc.commit, tc.coordEp, tc.ts)
		if !bytes.Equal(got, want) {
			t.Fatalf("marker %+v:\n got %x\nwant %x", tc, got, want)
		}
		if len(got) != record.EndTxnMarkerSize || record.EndTxnMarkerSize != 78 {
			t.Fatalf("marker of %d bytes, EndTxnMarkerSize %d, Kafka's is 78", len(got), record.EndTxnMarkerSize)
		}
		h, err := record.ValidateBatch(got)
		if err != nil {
			t.Fatal(err)
		}
		m, ok, err := record.ParseEndTxnMarker(&h, got)
		if err != nil || !ok {
			t.Fatalf("parse: %v %v", ok, err)
		}
		if m.ProducerID != tc.pid || m.ProducerEpoch != tc.epoch || m.Commit != tc.commit || m.CoordinatorEpoch != tc.coordEp {
			t.Fatalf("parsed %+v from %+v", m, tc)
		}
	}
}

func TestParseEndTxnMarkerRejects(t *testing.T) {
	// A data batch is not a marker.
	data, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: []byte("x")}})
	h, _ := record.ParseBatchHeader(data)
	if _, _, err := record.ParseEndTxnMarker(&h, data); !errors.Is(err, record.ErrCorruptBatch) {
		t.Fatalf("data batch: %v", err)
	}
	// A control record with a short key, a negative version, a short value.
	for name, rec := range map[string]record.Record{
		"short key":        {Key: []byte{0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}},
		"negative version": {Key: []byte{0xff, 0xff, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}},
		"short value":      {Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0}},
		"null value":       {Key: []byte{0, 0, 0, 0}},
	} {
		b, _ := record.BuildBatch(record.BatchOptions{ProducerID: 5, ProducerEpoch: 1, BaseSequence: -1,
			Control: true, Transactional: true}, []record.Record{rec})
		h, _ := record.ParseBatchHeader(b)
		if _, _, err := record.ParseEndTxnMarker(&h, b); !errors.Is(err, record.ErrCorruptBatch) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A higher version is read (it only adds fields); another control type
	// ends nothing; an emptied control batch ends nothing.
	b, _ := record.BuildBatch(record.BatchOptions{ProducerID: 5, ProducerEpoch: 1, BaseSequence: -1, Control: true, Transactional: true},
		[]record.Record{{Key: []byte{0, 1, 0, 1, 9}, Value: []byte{0, 1, 0, 0, 0, 7, 1, 2}}})
	h, _ = record.ParseBatchHeader(b)
	if m, ok, err := record.ParseEndTxnMarker(&h, b); err != nil || !ok || !m.Commit || m.CoordinatorEpoch != 7 {
		t.Fatalf("v1 marker: %+v %v %v", m, ok, err)
	}
	b, _ = record.BuildBatch(record.BatchOptions{ProducerID: 5, ProducerEpoch: 1, BaseSequence: -1, Control: true},
		[]record.Record{{Key: []byte{0, 0, 0, 3}, Value: []byte{}}})
	h, _ = record.ParseBatchHeader(b)
	if _, ok, err := record.ParseEndTxnMarker(&h, b); err != nil || ok {
		t.Fatalf("other control type: %v %v", ok, err)
	}
	b, _ = record.BuildBatch(record.BatchOptions{ProducerID: 5, ProducerEpoch: 1, BaseSequence: -1, Control: true, Transactional: true}, nil)
	h, _ = record.ParseBatchHeader(b)
	if _, ok, err := record.ParseEndTxnMarker(&h, b); err != nil || ok {
		t.Fatalf("empty control batch: %v %v", ok, err)
	}
}

package record

import (
	"encoding/binary"
	"fmt"
)

// End-transaction markers (KIP-98): a control batch with one record whose
// key is [version int16 0][type int16: 0 ABORT, 1 COMMIT] and whose value is
// [version int16 0][coordinator_epoch int32] (EndTransactionMarker.java,
// ControlRecordType.java). The batch is uncompressed, has the transactional
// and control attributes (0x30), base sequence -1, and is 78 bytes long:
// the 61-byte header and one 17-byte record.

// EndTxnMarkerSize is the size of the control batch AppendEndTxnMarker writes.
const EndTxnMarkerSize = BatchHeaderSize + 17

// EndTxnMarker is what an end-transaction control batch says.
type EndTxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
}

// AppendEndTxnMarker appends the control batch of m to dst with base offset
// 0 and partition leader epoch -1 (the leader's append sets both), stamped
// with timestamp ts, and returns dst extended.
func AppendEndTxnMarker(dst []byte, m EndTxnMarker, ts int64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	// The record: length 16, attributes 0, timestamp delta 0, offset
	// delta 0, key length 4, key, value length 6, value, no headers.
	dst = binary.AppendVarint(dst, 16)
	dst = append(dst, 0)
	dst = binary.AppendVarint(dst, 0)
	dst = binary.AppendVarint(dst, 0)
	dst = binary.AppendVarint(dst, 4)
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(typ))
	dst = binary.AppendVarint(dst, 6)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.CoordinatorEpoch))
	dst = binary.AppendVarint(dst, 0)
	h := BatchHeader{
		BatchLength:          int32(len(dst) - start - BatchLengthOverhead),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           AttrTransactional | AttrControl,
		BaseTimestamp:        ts,
		MaxTimestamp:         ts,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         -1,
		RecordCount:          1,
	}
	b := dst[start:]
	PutHeader(b, &h)
	binary.BigEndian.PutUint32(b[OffCRC:], BatchCRC(b))
	return dst
}

// ParseEndTxnMarker reads the end-transaction marker of a control batch
// (batch holds the whole batch, h its parsed header). ok is false for an
// empty control batch (one the cleaner emptied): it ends nothing. A record
// whose key or value is too short or has a negative version is
// ErrCorruptBatch; higher versions are read as version 0, as Kafka reads
// them (they only add fields).
func ParseEndTxnMarker(h *BatchHeader, batch []byte) (m EndTxnMarker, ok bool, err error) {
	if !h.Control() {
		return m, false, fmt.Errorf("%w: not a control batch", ErrCorruptBatch)
	}
	m.ProducerID, m.ProducerEpoch = h.ProducerID, h.ProducerEpoch
	if h.RecordCount == 0 {
		return m, false, nil
	}
	found := false
	hc := *h // a copy: WalkRecords' callback makes its argument escape, and h is the append path's
	err = WalkRecords(&hc, batch, func(_ *BatchHeader, r *Record) error {
		if found {
			return nil
		}
		found = true
		if len(r.Key) < 4 || int16(binary.BigEndian.Uint16(r.Key)) < 0 {
			return fmt.Errorf("%w: control record key of %d bytes", ErrCorruptBatch, len(r.Key))
		}
		switch ControlRecordType(r.Key) {
		case ControlCommit:
			m.Commit = true
		case ControlAbort:
		default:
			return errNotEndTxn
		}
		if len(r.Value) < 6 || int16(binary.BigEndian.Uint16(r.Value)) < 0 {
			return fmt.Errorf("%w: end transaction marker value of %d bytes", ErrCorruptBatch, len(r.Value))
		}
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		return nil
	})
	if err == errNotEndTxn {
		// Another control type (Kafka's KRaft control records): ends no
		// transaction.
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	return m, found, nil
}

var errNotEndTxn = fmt.Errorf("record: not an end transaction marker")

package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Offsets of the fields of a record batch v2 header (DefaultRecordBatch.java).
const (
	OffBaseOffset           = 0
	OffBatchLength          = 8
	OffPartitionLeaderEpoch = 12
	OffMagic                = 16
	OffCRC                  = 17
	OffAttributes           = 21
	OffLastOffsetDelta      = 23
	OffBaseTimestamp        = 27
	OffMaxTimestamp         = 35
	OffProducerID           = 43
	OffProducerEpoch        = 51
	OffBaseSequence         = 53
	OffRecordCount          = 57

	// BatchHeaderSize is the size of a record batch v2 header; records follow it.
	BatchHeaderSize = 61

	// BatchLengthOverhead is what BatchLength does not count: baseOffset and
	// batchLength themselves.
	BatchLengthOverhead = 12

	// MinBatchLength is the smallest legal BatchLength: a header with no records.
	MinBatchLength = BatchHeaderSize - BatchLengthOverhead
)

// Attribute bits.
const (
	AttrCompressionMask  = 0x07
	AttrTimestampType    = 0x08
	AttrTransactional    = 0x10
	AttrControl          = 0x20
	AttrHasDeleteHorizon = 0x40
)

// Compression is the codec of a batch (attribute bits 0-2).
type Compression int8

// Codecs, numbered as on the wire.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// ParseCompressionType maps a topic's compression.type to a codec. ok is false
// for "producer" (keep what the producer sent).
func ParseCompressionType(s string) (c Compression, keepProducer bool, err error) {
	switch s {
	case "", "producer":
		return CompressionNone, true, nil
	case "uncompressed", "none":
		return CompressionNone, false, nil
	case "gzip":
		return CompressionGzip, false, nil
	case "snappy":
		return CompressionSnappy, false, nil
	case "lz4":
		return CompressionLZ4, false, nil
	case "zstd":
		return CompressionZstd, false, nil
	}
	return 0, false, fmt.Errorf("record: unknown compression.type %q", s)
}

// BatchHeader is the decoded 61-byte header of a record batch v2.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Compression returns the codec of the batch.
func (h *BatchHeader) Compression() Compression {
	return Compression(h.Attributes & AttrCompressionMask)
}

// LogAppendTime reports whether the timestamp type bit is set: every record's
// timestamp is then MaxTimestamp.
func (h *BatchHeader) LogAppendTime() bool { return h.Attributes&AttrTimestampType != 0 }

// Transactional reports the transactional bit.
func (h *BatchHeader) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports the control bit (commit/abort markers).
func (h *BatchHeader) Control() bool { return h.Attributes&AttrControl != 0 }

// HasDeleteHorizon reports bit 6: BaseTimestamp is the delete horizon set by
// the cleaner (KIP-534).
func (h *BatchHeader) HasDeleteHorizon() bool { return h.Attributes&AttrHasDeleteHorizon != 0 }

// LastOffset is the offset of the last record the batch was built with.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is LastOffset+1.
func (h *BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Size is the number of bytes the batch occupies: 12 + BatchLength.
func (h *BatchHeader) Size() int { return BatchLengthOverhead + int(h.BatchLength) }

// Idempotent reports whether the batch carries a producer id and sequence.
func (h *BatchHeader) Idempotent() bool { return h.ProducerID >= 0 && h.BaseSequence >= 0 }

// LastSequence is the sequence number of the last record (wrapping at MaxInt32
// as Kafka does).
func (h *BatchHeader) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return incSequence(h.BaseSequence, h.LastOffsetDelta)
}

func incSequence(seq, by int32) int32 {
	if seq > int32(^uint32(0)>>1)-by {
		return by - (int32(^uint32(0)>>1) - seq) - 1
	}
	return seq + by
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchCRC computes the CRC-32C of a batch: attributes to the end.
func BatchCRC(batch []byte) uint32 { return crc32.Checksum(batch[OffAttributes:], castagnoli) }

// DecodeHeader decodes the fixed header without checking it, for bytes
// already validated (ParseBatchHeader checks); b must hold BatchHeaderSize
// bytes.
func DecodeHeader(b []byte, h *BatchHeader) {
	_ = b[BatchHeaderSize-1]
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[OffBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[OffBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[OffPartitionLeaderEpoch:]))
	h.Magic = int8(b[OffMagic])
	h.CRC = binary.BigEndian.Uint32(b[OffCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[OffAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[OffBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[OffMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[OffProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[OffProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[OffBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[OffRecordCount:]))
}

// PutHeader encodes h into b (BatchHeaderSize bytes); the CRC is written as is.
func PutHeader(b []byte, h *BatchHeader) {
	_ = b[BatchHeaderSize-1]
	binary.BigEndian.PutUint64(b[OffBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[OffBatchLength:], uint32(h.BatchLength))
	binary.BigEndian.PutUint32(b[OffPartitionLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[OffMagic] = byte(h.Magic)
	binary.BigEndian.PutUint32(b[OffCRC:], h.CRC)
	binary.BigEndian.PutUint16(b[OffAttributes:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(b[OffLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[OffBaseTimestamp:], uint64(h.BaseTimestamp))
	binary.BigEndian.PutUint64(b[OffMaxTimestamp:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[OffProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[OffProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[OffBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[OffRecordCount:], uint32(h.RecordCount))
}

// ParseBatchHeader decodes the header at the start of b. It checks what the
// header alone can tell: the magic byte, a BatchLength no smaller than a
// header, consistent record count and offset delta. It does not need the
// whole batch and does not check the CRC (ValidateBatch does).
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	err := ParseBatchHeaderInto(b, &h)
	return h, err
}

// ParseBatchHeaderInto is ParseBatchHeader into h, for loops that reuse one
// header (no copy per batch).
func ParseBatchHeaderInto(b []byte, h *BatchHeader) error {
	if len(b) < BatchLengthOverhead+5 {
		return fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(b))
	}
	// The magic byte sits at 16, before the rest of the v2 header; look at it
	// first so a v0/v1 message (whose header is shorter) is named as such.
	if m := int8(b[OffMagic]); m != 2 {
		return fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
	}
	if len(b) < BatchHeaderSize {
		return fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(b))
	}
	DecodeHeader(b, h)
	if h.BatchLength < MinBatchLength {
		return fmt.Errorf("%w: batch length %d is shorter than a header", ErrCorruptBatch, h.BatchLength)
	}
	if h.RecordCount < 0 || h.LastOffsetDelta < 0 {
		return fmt.Errorf("%w: record count %d, last offset delta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	if c := h.Compression(); c > CompressionZstd {
		return fmt.Errorf("%w: unknown compression codec %d", ErrInvalidRecord, c)
	}
	return nil
}

// ValidateBatch checks one whole batch: the header, that b holds exactly
// Size() bytes, and the CRC-32C.
func ValidateBatch(b []byte) (BatchHeader, error) {
	var h BatchHeader
	err := ValidateBatchInto(b, &h)
	return h, err
}

// ValidateBatchInto is ValidateBatch into h.
func ValidateBatchInto(b []byte, h *BatchHeader) error {
	if err := ParseBatchHeaderInto(b, h); err != nil {
		return err
	}
	if h.Size() != len(b) {
		return fmt.Errorf("%w: batch length %d does not match %d bytes", ErrCorruptBatch, h.Size(), len(b))
	}
	if crc := BatchCRC(b); crc != h.CRC {
		return fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, crc)
	}
	return nil
}

// ForEachBatch walks concatenated batches in b, validating each (header,
// length, CRC) before calling fn. A trailing partial batch is an error.
func ForEachBatch(b []byte, fn func(h *BatchHeader, batch []byte) error) error {
	var h BatchHeader
	for pos := 0; pos < len(b); {
		if err := ParseBatchHeaderInto(b[pos:], &h); err != nil {
			return fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		end := pos + h.Size()
		if end > len(b) {
			return fmt.Errorf("batch at byte %d: %w: needs %d bytes, %d left", pos, ErrCorruptBatch, h.Size(), len(b)-pos)
		}
		if crc := BatchCRC(b[pos:end]); crc != h.CRC {
			return fmt.Errorf("batch at byte %d: %w: crc %08x, computed %08x", pos, ErrCorruptBatch, h.CRC, crc)
		}
		if err := fn(&h, b[pos:end]); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// WholeBatches returns the whole batches at the start of b, dropping a
// trailing partial batch (a leader cuts a fetch response at its size limit
// mid-batch, as Kafka's does) and whatever follows a header that does not
// parse. It checks headers, not CRCs.
func WholeBatches(b []byte) []byte {
	n := 0
	for len(b)-n >= BatchHeaderSize {
		h, err := ParseBatchHeader(b[n:])
		if err != nil || h.Size() > len(b)-n {
			break
		}
		n += h.Size()
	}
	return b[:n]
}

// SetBaseOffset rewrites a batch's base offset (not covered by the CRC).
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[OffBaseOffset:], uint64(off))
}

// SetLeaderEpoch rewrites a batch's partition leader epoch (not covered by
// the CRC).
func SetLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[OffPartitionLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks a batch LogAppendTime with max timestamp ts and
// recomputes the CRC, which covers both fields.
func SetLogAppendTime(batch []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(batch[OffAttributes:]) | AttrTimestampType
	binary.BigEndian.PutUint16(batch[OffAttributes:], attrs)
	binary.BigEndian.PutUint64(batch[OffMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[OffCRC:], BatchCRC(batch))
}

package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Offsets of the fields of a record batch v2 header (DefaultRecordBatch.java).
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offBaseTimestamp        = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordCount          = 57

	// BatchHeaderSize is the size of a record batch v2 header; records follow it.
	BatchHeaderSize = 61

	// batchLengthOverhead is what BatchLength does not count: baseOffset and
	// batchLength themselves.
	batchLengthOverhead = 12

	// minBatchLength is the smallest legal BatchLength: a header with no records.
	minBatchLength = BatchHeaderSize - batchLengthOverhead
)

// Attribute bits.
const (
	attrCompressionMask  = 0x07
	attrTimestampType    = 0x08
	attrTransactional    = 0x10
	attrControl          = 0x20
	attrHasDeleteHorizon = 0x40
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
	return 0, false, fmt.Errorf("storage: unknown compression.type %q", s)
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
	return Compression(h.Attributes & attrCompressionMask)
}

// LogAppendTime reports whether the timestamp type bit is set: every record's
// timestamp is then MaxTimestamp.
func (h *BatchHeader) LogAppendTime() bool { return h.Attributes&attrTimestampType != 0 }

// Transactional reports the transactional bit.
func (h *BatchHeader) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports the control bit (commit/abort markers).
func (h *BatchHeader) Control() bool { return h.Attributes&attrControl != 0 }

// HasDeleteHorizon reports bit 6: BaseTimestamp is the delete horizon set by
// the cleaner (KIP-534).
func (h *BatchHeader) HasDeleteHorizon() bool { return h.Attributes&attrHasDeleteHorizon != 0 }

// LastOffset is the offset of the last record the batch was built with.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is LastOffset+1.
func (h *BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Size is the number of bytes the batch occupies: 12 + BatchLength.
func (h *BatchHeader) Size() int { return batchLengthOverhead + int(h.BatchLength) }

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

// batchCRC computes the CRC-32C of a batch: attributes to the end.
func batchCRC(batch []byte) uint32 { return crc32.Checksum(batch[offAttributes:], castagnoli) }

// parseHeader decodes the fixed header; b must hold BatchHeaderSize bytes.
func parseHeader(b []byte, h *BatchHeader) {
	_ = b[BatchHeaderSize-1]
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
}

// putHeader encodes h into b (BatchHeaderSize bytes); the CRC is written as is.
func putHeader(b []byte, h *BatchHeader) {
	_ = b[BatchHeaderSize-1]
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(h.BatchLength))
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = byte(h.Magic)
	binary.BigEndian.PutUint32(b[offCRC:], h.CRC)
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(h.BaseTimestamp))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(h.RecordCount))
}

// ParseBatchHeader decodes the header at the start of b. It checks what the
// header alone can tell: the magic byte, a BatchLength no smaller than a
// header, consistent record count and offset delta. It does not need the
// whole batch and does not check the CRC (ValidateBatch does).
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	err := parseBatchHeaderInto(b, &h)
	return h, err
}

func parseBatchHeaderInto(b []byte, h *BatchHeader) error {
	if len(b) < batchLengthOverhead+5 {
		return fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(b))
	}
	// The magic byte sits at 16, before the rest of the v2 header; look at it
	// first so a v0/v1 message (whose header is shorter) is named as such.
	if m := int8(b[offMagic]); m != 2 {
		return fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
	}
	if len(b) < BatchHeaderSize {
		return fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(b))
	}
	parseHeader(b, h)
	if h.BatchLength < minBatchLength {
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
	err := validateBatchInto(b, &h)
	return h, err
}

func validateBatchInto(b []byte, h *BatchHeader) error {
	if err := parseBatchHeaderInto(b, h); err != nil {
		return err
	}
	if h.Size() != len(b) {
		return fmt.Errorf("%w: batch length %d does not match %d bytes", ErrCorruptBatch, h.Size(), len(b))
	}
	if crc := batchCRC(b); crc != h.CRC {
		return fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, crc)
	}
	return nil
}

// ForEachBatch walks concatenated batches in b, validating each (header,
// length, CRC) before calling fn. A trailing partial batch is an error.
func ForEachBatch(b []byte, fn func(h *BatchHeader, batch []byte) error) error {
	var h BatchHeader
	for pos := 0; pos < len(b); {
		if err := parseBatchHeaderInto(b[pos:], &h); err != nil {
			return fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		end := pos + h.Size()
		if end > len(b) {
			return fmt.Errorf("batch at byte %d: %w: needs %d bytes, %d left", pos, ErrCorruptBatch, h.Size(), len(b)-pos)
		}
		if crc := batchCRC(b[pos:end]); crc != h.CRC {
			return fmt.Errorf("batch at byte %d: %w: crc %08x, computed %08x", pos, ErrCorruptBatch, h.CRC, crc)
		}
		if err := fn(&h, b[pos:end]); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// setBaseOffset and setLeaderEpoch rewrite fields the CRC does not cover.
func setBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

func setLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offPartitionLeaderEpoch:], uint32(epoch))
}

// setLogAppendTime marks a batch LogAppendTime with max timestamp ts and
// recomputes the CRC, which covers both fields.
func setLogAppendTime(batch []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:]) | attrTimestampType
	binary.BigEndian.PutUint16(batch[offAttributes:], attrs)
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[offCRC:], batchCRC(batch))
}

// Error markers, tested with errors.Is; the broker maps them to Kafka codes.
var (
	// ErrCorruptBatch: bad CRC, bad length, truncated (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("corrupt record batch")
	// ErrInvalidRecord: record count, offset deltas or varints inconsistent,
	// bad compressed data (INVALID_RECORD).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrUnsupportedMagic: not a v2 batch where one is needed.
	ErrUnsupportedMagic = errors.New("unsupported message format magic")
	// ErrBatchTooLarge: larger than max.message.bytes (MESSAGE_TOO_LARGE).
	ErrBatchTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrOffsetOutOfRange: below the log start or above the log end (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrDuplicateSequence: the batch was appended before; AppendInfo carries
	// its original offsets (the broker answers success with them, as Kafka does).
	ErrDuplicateSequence = errors.New("duplicate sequence number")
	// ErrOutOfOrderSequence: a gap or reordering in a producer's sequence.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch: an epoch older than the one seen (fenced producer).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrUnknownProducerID: a non-zero sequence from a producer the log does
	// not know (its state was removed by retention).
	ErrUnknownProducerID = errors.New("unknown producer id")
	// ErrLogClosed: the log (or its manager) was closed.
	ErrLogClosed = errors.New("log closed")
	// ErrLogDeleted: the log was deleted.
	ErrLogDeleted = errors.New("log deleted")
)

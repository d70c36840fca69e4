package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Message format v0/v1 (Produce v0-v2, before KIP-98):
//
//	offset int64, messageSize int32, then the message:
//	crc uint32 (IEEE, over magic..end), magic int8, attributes int8,
//	[timestamp int64 when magic 1], key bytes (int32 length, -1 null),
//	value bytes (int32 length, -1 null)
//
// A compressed message (attribute bits 0-2) wraps a whole inner message set
// in its value. In v1 the inner offsets are relative (0..n-1) and the
// wrapper carries the absolute offset of the last one; in v0 they are
// absolute. Attribute bit 3 in v1 is the timestamp type: LogAppendTime
// wrappers override the inner timestamps.
const (
	legacyLogOverhead = 12 // offset + size
	legacyMinV0       = 4 + 1 + 1 + 4 + 4
	legacyMinV1       = legacyMinV0 + 8
)

type legacyRecord struct {
	timestamp  int64
	key, value []byte
}

// ConvertMessageSet turns a v0/v1 message set into record batch v2 bytes, as
// Kafka's LogValidator does for old producers: one batch holding every record,
// in the codec of the first compressed wrapper (or none), with relative
// offsets 0..n-1, no producer id, and timestamps -1 for v0. A message set may
// end with a partial message (old clients truncate to the fetch size); it is
// ignored, as Kafka does. A bad CRC is ErrCorruptBatch.
func ConvertMessageSet(msgset []byte) ([]byte, error) {
	var recs []legacyRecord
	codec := CompressionNone
	logAppend := false
	if err := walkLegacy(msgset, 0, &recs, &codec, &logAppend); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: message set holds no complete message", ErrCorruptBatch)
	}
	base := recs[0].timestamp
	maxTS := base
	records := make([]Record, len(recs))
	for i, r := range recs {
		records[i] = Record{Key: r.key, Value: r.value, OffsetDelta: int32(i)}
		if base >= 0 && r.timestamp >= 0 {
			records[i].TimestampDelta = r.timestamp - base
		}
		maxTS = max(maxTS, r.timestamp)
	}
	return BuildBatch(BatchOptions{
		Compression:   codec,
		LogAppendTime: logAppend,
		ProducerID:    -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: base,
		MaxTimestamp:  maxTS,
	}, records)
}

func walkLegacy(b []byte, depth int, recs *[]legacyRecord, codec *Compression, logAppend *bool) error {
	for len(b) >= legacyLogOverhead {
		size := int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < 0 {
			return fmt.Errorf("%w: negative message size %d", ErrCorruptBatch, size)
		}
		if legacyLogOverhead+size > len(b) {
			break // partial trailing message
		}
		msg := b[legacyLogOverhead : legacyLogOverhead+size]
		b = b[legacyLogOverhead+size:]
		if len(msg) < legacyMinV0 {
			return fmt.Errorf("%w: message of %d bytes", ErrCorruptBatch, len(msg))
		}
		magic := int8(msg[4])
		if magic != 0 && magic != 1 {
			return fmt.Errorf("%w: magic %d in a v0/v1 message set", ErrUnsupportedMagic, magic)
		}
		if crc := crc32.ChecksumIEEE(msg[4:]); crc != binary.BigEndian.Uint32(msg) {
			return fmt.Errorf("%w: message crc %08x, computed %08x", ErrCorruptBatch, binary.BigEndian.Uint32(msg), crc)
		}
		attrs := msg[5]
		p := 6
		ts := int64(-1)
		if magic == 1 {
			if len(msg) < legacyMinV1 {
				return fmt.Errorf("%w: v1 message of %d bytes", ErrCorruptBatch, len(msg))
			}
			ts = int64(binary.BigEndian.Uint64(msg[p:]))
			p += 8
		}
		key, n, err := readLegacyBytes(msg[p:])
		if err != nil {
			return err
		}
		p += n
		value, n, err := readLegacyBytes(msg[p:])
		if err != nil {
			return err
		}
		if p+n != len(msg) {
			return fmt.Errorf("%w: %d trailing bytes in a message", ErrCorruptBatch, len(msg)-p-n)
		}
		c := Compression(attrs & AttrCompressionMask)
		if c == CompressionNone {
			*recs = append(*recs, legacyRecord{timestamp: ts, key: key, value: value})
			continue
		}
		if depth > 0 {
			return fmt.Errorf("%w: nested compressed message", ErrInvalidRecord)
		}
		if *codec == CompressionNone {
			*codec = c
		}
		inner, err := Decompress(c, nil, value)
		if err != nil {
			return fmt.Errorf("%w: %s wrapper: %v", ErrInvalidRecord, c, err)
		}
		first := len(*recs)
		if err := walkLegacy(inner, depth+1, recs, codec, logAppend); err != nil {
			return err
		}
		if magic == 1 && attrs&AttrTimestampType != 0 {
			*logAppend = true
			for i := first; i < len(*recs); i++ {
				(*recs)[i].timestamp = ts
			}
		}
	}
	return nil
}

func readLegacyBytes(b []byte) ([]byte, int, error) {
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("%w: truncated length", ErrCorruptBatch)
	}
	n := int(int32(binary.BigEndian.Uint32(b)))
	if n < 0 {
		return nil, 4, nil
	}
	if n > len(b)-4 {
		return nil, 0, fmt.Errorf("%w: length %d with %d bytes left", ErrCorruptBatch, n, len(b)-4)
	}
	return b[4 : 4+n], 4 + n, nil
}

// IsMessageSetV2 reports whether b starts with a record batch v2 (magic byte
// at 16), as opposed to a v0/v1 message set (magic byte at 16 too, 0 or 1).
func IsMessageSetV2(b []byte) bool { return len(b) > OffMagic && b[OffMagic] == 2 }

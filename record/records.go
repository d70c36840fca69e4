package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
)

// Header is one record header. Key is valid only during a Records callback.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a batch. In a Records callback the Record and its
// slices are only valid during the call; copy what must outlive it.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte // nil = null
	Headers        []Header
}

// errVarint is wrapped into ErrInvalidRecord by the callers.
var errVarint = errors.New("malformed varint")

func readVarint(b []byte) (int64, int, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, 0, errVarint
	}
	return v, n, nil
}

// readVarBytes reads a varint length and that many bytes; -1 is null.
func readVarBytes(b []byte) ([]byte, int, error) {
	l, n, err := readVarint(b)
	if err != nil {
		return nil, 0, err
	}
	if l < 0 {
		if l != -1 {
			return nil, 0, fmt.Errorf("negative length %d", l)
		}
		return nil, n, nil
	}
	if l > int64(len(b)-n) {
		return nil, 0, fmt.Errorf("length %d exceeds the %d bytes left", l, len(b)-n)
	}
	return b[n : n+int(l) : n+int(l)], n + int(l), nil
}

// decodeRecord decodes the record at the start of b into r (reusing
// r.Headers) and returns its encoded size.
func decodeRecord(b []byte, r *Record) (int, error) {
	length, n, err := readVarint(b)
	if err != nil {
		return 0, err
	}
	if length < 0 || length > int64(len(b)-n) {
		return 0, fmt.Errorf("record length %d with %d bytes left", length, len(b)-n)
	}
	end := n + int(length)
	body := b[n:end]
	if len(body) < 1 {
		return 0, fmt.Errorf("empty record")
	}
	r.Attributes = int8(body[0])
	p := 1
	var v int64
	if v, n, err = readVarint(body[p:]); err != nil {
		return 0, err
	}
	r.TimestampDelta = v
	p += n
	if v, n, err = readVarint(body[p:]); err != nil {
		return 0, err
	}
	if v < 0 || v > math.MaxInt32 {
		return 0, fmt.Errorf("offset delta %d", v)
	}
	r.OffsetDelta = int32(v)
	p += n
	if r.Key, n, err = readVarBytes(body[p:]); err != nil {
		return 0, fmt.Errorf("key: %w", err)
	}
	p += n
	if r.Value, n, err = readVarBytes(body[p:]); err != nil {
		return 0, fmt.Errorf("value: %w", err)
	}
	p += n
	count, n, err := readVarint(body[p:])
	if err != nil {
		return 0, err
	}
	p += n
	// Each header needs at least two bytes; reject counts the body cannot hold
	// before growing the slice.
	if count < 0 || count > int64(len(body)-p)/2 {
		return 0, fmt.Errorf("header count %d", count)
	}
	r.Headers = r.Headers[:0]
	for i := int64(0); i < count; i++ {
		k, n, err := readVarBytes(body[p:])
		if err != nil {
			return 0, fmt.Errorf("header key: %w", err)
		}
		if k == nil {
			return 0, fmt.Errorf("null header key")
		}
		p += n
		val, n, err := readVarBytes(body[p:])
		if err != nil {
			return 0, fmt.Errorf("header value: %w", err)
		}
		p += n
		r.Headers = append(r.Headers, Header{Key: string(k), Value: val})
	}
	if p != len(body) {
		return 0, fmt.Errorf("record has %d trailing bytes", len(body)-p)
	}
	return end, nil
}

// Records decodes every record of one batch (decompressing it if needed) and
// calls fn for each. The batch is validated first (header, length, CRC); a
// record count or offset delta that disagrees with the header, or a malformed
// record, is ErrInvalidRecord. The Record and its slices are only valid during
// the call.
func Records(batch []byte, fn func(h *BatchHeader, r *Record) error) error {
	var h BatchHeader
	if err := ValidateBatchInto(batch, &h); err != nil {
		return err
	}
	return WalkRecords(&h, batch, fn)
}

// decompressBufs holds scratch buffers for decompressed records: batches are
// up to max.message.bytes, so keeping them avoids a large allocation per
// compressed batch on the cleaner and recompression paths.
var decompressBufs = sync.Pool{New: func() any { return new([]byte) }}

// WalkRecords is Records without the CRC check, for batches already validated.
func WalkRecords(h *BatchHeader, batch []byte, fn func(h *BatchHeader, r *Record) error) error {
	body := batch[BatchHeaderSize:h.Size()]
	if c := h.Compression(); c != CompressionNone {
		bp := decompressBufs.Get().(*[]byte)
		defer decompressBufs.Put(bp)
		out, err := Decompress(c, (*bp)[:0], body)
		*bp = out[:0]
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidRecord, c, err)
		}
		body = out
	}
	var r Record
	prev := int32(-1)
	var i int32
	for pos := 0; pos < len(body); i++ {
		if i >= h.RecordCount {
			return fmt.Errorf("%w: more records than the count %d", ErrInvalidRecord, h.RecordCount)
		}
		n, err := decodeRecord(body[pos:], &r)
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrInvalidRecord, i, err)
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (last %d)", ErrInvalidRecord, i, r.OffsetDelta, prev, h.LastOffsetDelta)
		}
		prev = r.OffsetDelta
		pos += n
		if err := fn(h, &r); err != nil {
			return err
		}
	}
	if i != h.RecordCount {
		return fmt.Errorf("%w: %d records, header says %d", ErrInvalidRecord, i, h.RecordCount)
	}
	return nil
}

// CheckUncompressedRecords verifies, without allocating, that an
// uncompressed producer batch holds exactly RecordCount well-formed records
// with offset deltas 0..n-1, as Kafka's LogValidator requires of a producer.
func CheckUncompressedRecords(h *BatchHeader, batch []byte) error {
	body := batch[BatchHeaderSize:h.Size()]
	var i int32
	for pos := 0; pos < len(body); i++ {
		n, delta, err := skipRecord(body[pos:])
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrInvalidRecord, i, err)
		}
		if delta != int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, i, delta)
		}
		pos += n
	}
	if i != h.RecordCount {
		return fmt.Errorf("%w: %d records, header says %d", ErrInvalidRecord, i, h.RecordCount)
	}
	return nil
}

// skipRecord checks one record's structure without allocating (lengths,
// varints, headers inside the record's length prefix) and returns the
// record's size and offset delta. A producer can send a batch with a valid
// CRC around malformed records, so the CRC alone is not enough.
func skipRecord(b []byte) (int, int64, error) {
	length, n, err := readVarint(b)
	if err != nil {
		return 0, 0, err
	}
	if length < 1 || length > int64(len(b)-n) {
		return 0, 0, fmt.Errorf("record length %d with %d bytes left", length, len(b)-n)
	}
	body := b[n : n+int(length)]
	p := 1
	if _, m, err := readVarint(body[p:]); err != nil { // timestamp delta
		return 0, 0, err
	} else {
		p += m
	}
	delta, m, err := readVarint(body[p:])
	if err != nil {
		return 0, 0, err
	}
	p += m
	for range 2 { // key, value
		_, m, err := readVarBytes(body[p:])
		if err != nil {
			return 0, 0, err
		}
		p += m
	}
	count, m, err := readVarint(body[p:])
	if err != nil {
		return 0, 0, err
	}
	p += m
	if count < 0 || count > int64(len(body)-p)/2 {
		return 0, 0, fmt.Errorf("header count %d", count)
	}
	for i := int64(0); i < count; i++ {
		k, m, err := readVarBytes(body[p:])
		if err != nil || k == nil {
			return 0, 0, fmt.Errorf("header key: %v", err)
		}
		p += m
		if _, m, err = readVarBytes(body[p:]); err != nil {
			return 0, 0, err
		}
		p += m
	}
	if p != len(body) {
		return 0, 0, fmt.Errorf("record has %d trailing bytes", len(body)-p)
	}
	return n + int(length), delta, nil
}

// BatchOptions describe a batch built by BuildBatch.
type BatchOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Compression          Compression
	LogAppendTime        bool
	Transactional        bool
	Control              bool
	ProducerID           int64 // -1 when not idempotent
	ProducerEpoch        int16 // -1 when not idempotent
	BaseSequence         int32 // -1 when not idempotent
	BaseTimestamp        int64 // ms; records carry deltas from it
	// LastOffsetDelta, when larger than the last record's offset delta, keeps
	// a batch's offset range after records were removed (the cleaner keeps
	// an empty batch so a producer's last sequence survives compaction).
	LastOffsetDelta int32
	// MaxTimestamp, when set (not 0), is written as is instead of
	// BaseTimestamp + the largest delta (LogAppendTime, the cleaner).
	MaxTimestamp int64
	// DeleteHorizon sets attribute bit 6; BaseTimestamp is then the horizon.
	DeleteHorizon bool
}

// AppendRecord encodes one record (Kafka's v2 record format).
func AppendRecord(dst []byte, r *Record, offsetDelta int32) []byte {
	size := 1 + varintLen(r.TimestampDelta) + varintLen(int64(offsetDelta)) +
		varBytesLen(r.Key) + varBytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		size += varintLen(int64(len(r.Headers[i].Key))) + len(r.Headers[i].Key) + varBytesLen(r.Headers[i].Value)
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendVarBytes(dst, r.Key)
	dst = appendVarBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(r.Headers[i].Key)))
		dst = append(dst, r.Headers[i].Key...)
		dst = appendVarBytes(dst, r.Headers[i].Value)
	}
	return dst
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func varBytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// BuildBatch builds one record batch v2. Records' OffsetDelta are used as
// given when any is non-zero (they must increase); when all are zero they
// are numbered 0..n-1. The result has a valid CRC.
func BuildBatch(opts BatchOptions, records []Record) ([]byte, error) {
	return appendBatch(nil, opts, records)
}

func appendBatch(dst []byte, opts BatchOptions, records []Record) ([]byte, error) {
	if opts.Compression < CompressionNone || opts.Compression > CompressionZstd {
		return nil, fmt.Errorf("record: unknown compression %d", opts.Compression)
	}
	explicit := false
	for i := range records {
		if records[i].OffsetDelta != 0 {
			explicit = true
			break
		}
	}
	start := len(dst)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	lastDelta := int32(-1)
	maxTS := opts.BaseTimestamp
	bodyStart := len(dst)
	for i := range records {
		delta := int32(i)
		if explicit {
			delta = records[i].OffsetDelta
		}
		if delta <= lastDelta {
			return nil, fmt.Errorf("record: record %d offset delta %d after %d", i, delta, lastDelta)
		}
		lastDelta = delta
		if ts := opts.BaseTimestamp + records[i].TimestampDelta; ts > maxTS {
			maxTS = ts
		}
		dst = AppendRecord(dst, &records[i], delta)
	}
	if opts.Compression != CompressionNone && len(records) > 0 {
		raw := append([]byte(nil), dst[bodyStart:]...)
		var err error
		dst, err = Compress(opts.Compression, dst[:bodyStart], raw)
		if err != nil {
			return nil, err
		}
	}
	if opts.LastOffsetDelta > lastDelta {
		lastDelta = opts.LastOffsetDelta
	}
	if lastDelta < 0 {
		lastDelta = 0
	}
	if opts.MaxTimestamp != 0 {
		maxTS = opts.MaxTimestamp
	}
	attrs := int16(opts.Compression)
	if opts.LogAppendTime {
		attrs |= AttrTimestampType
	}
	if opts.Transactional {
		attrs |= AttrTransactional
	}
	if opts.Control {
		attrs |= AttrControl
	}
	if opts.DeleteHorizon {
		attrs |= AttrHasDeleteHorizon
	}
	h := BatchHeader{
		BaseOffset:           opts.BaseOffset,
		BatchLength:          int32(len(dst) - start - BatchLengthOverhead),
		PartitionLeaderEpoch: opts.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      lastDelta,
		BaseTimestamp:        opts.BaseTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           opts.ProducerID,
		ProducerEpoch:        opts.ProducerEpoch,
		BaseSequence:         opts.BaseSequence,
		RecordCount:          int32(len(records)),
	}
	b := dst[start:]
	PutHeader(b, &h)
	binary.BigEndian.PutUint32(b[OffCRC:], BatchCRC(b))
	return dst, nil
}

// Control record keys: version int16 then type int16.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ControlRecordType returns the type of a control record's key (0 abort,
// 1 commit), or -1 when the key is malformed.
func ControlRecordType(key []byte) int16 {
	if len(key) < 4 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(key[2:]))
}

package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressedBatchBytes is the default bound on what one
// compressed producer batch may decompress to (the broker key
// message.decompressed.max.bytes). Kafka has no such bound. A batch is at most
// max.message.bytes (1 MiB by default) compressed, and real producers build
// batches of a few MiB at most before compression (a Java producer on very
// repetitive data with batch.size raised to 1 MB reaches ~20 MiB), so 64 MiB
// leaves room for them while refusing the decompression bomb that claims
// hundreds of MiB, which every consumer would otherwise have to expand.
const DefaultMaxDecompressedBatchBytes = 64 << 20

// The compressed records of a producer batch are checked on append the way
// Kafka's LogValidator does it (its skipKeyValueIterator): the body is
// decompressed as a stream through a small window and every record is parsed
// and skipped in place, so checking a batch costs a decompression but holds
// no more memory than the window and the codec's own state, however large the
// batch claims to expand. Only raw snappy (a single block whose decoded length
// is declared up front and checked against the limit first) and zstd frames
// whose window exceeds ZstdStreamWindow are expanded whole.
const (
	// scanWindow is the decompressed bytes held at a time. A record larger
	// than the window is parsed field by field, its key and value skipped.
	scanWindow = 64 << 10
	// ZstdStreamWindow is the largest zstd window decoded as a stream (its
	// ring buffer is allocated up front). Producers use 64 KiB (franz-go),
	// the batch size (single-segment frames: librdkafka, franz-go) or 2-8
	// MiB (zstd-jni streaming at levels 3-19); the ultra levels' 32-128 MiB
	// windows are decoded whole instead, within the limit.
	ZstdStreamWindow = 8 << 20
	// maxKeptWholeBuffer bounds the whole-body buffer kept with a pooled
	// scanner; larger ones are left to the collector.
	maxKeptWholeBuffer = 4 << 20
)

// recordScanner reads a batch's records from its decompressed body. It is
// pooled with the codec state it needs, so a check allocates nothing in steady
// state.
type recordScanner struct {
	buf    []byte    // the bytes being read: window, or the whole body
	r, w   int       // unread bytes are buf[r:w]
	window []byte    // scanWindow bytes, kept with the scanner
	src    io.Reader // decompressing reader; nil when buf is the whole body
	eof    bool      // src is exhausted (or there is none)
	read   int64     // decompressed bytes produced so far
	limit  int64
	codec  Compression

	body  []byte       // the compressed body
	in    bytes.Reader // body, the codecs' input
	gz    gzip.Reader
	lz    *lz4.Reader
	zs    *zstd.Decoder
	xs    xerialReader
	whole []byte // a body expanded whole (raw snappy, wide zstd windows)
}

var scanners = sync.Pool{New: func() any {
	return &recordScanner{window: make([]byte, scanWindow)}
}}

// errCodec marks a compressed body the codec refuses (wrapped with the
// codec's own error).
var errCodec = errors.New("compressed data does not decode")

// open prepares s to read the records of body, compressed with c, refusing
// more than limit decompressed bytes.
func (s *recordScanner) open(c Compression, body []byte, limit int64) error {
	s.r, s.w, s.read, s.eof, s.src, s.limit, s.codec = 0, 0, 0, false, nil, limit, c
	s.buf, s.body = s.window, body
	s.in.Reset(body)
	var err error
	switch c {
	case CompressionGzip:
		if err = s.gz.Reset(&s.in); err == nil {
			s.src = &s.gz
		}
	case CompressionLZ4:
		if s.lz == nil {
			s.lz = lz4.NewReader(nil)
		}
		s.lz.Reset(&s.in)
		s.src = s.lz
	case CompressionZstd:
		if s.zs == nil {
			// Concurrency 1: the stream is decoded on the caller's
			// goroutine, so a pooled decoder dropped by the GC leaks
			// no goroutine.
			s.zs, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(ZstdStreamWindow), zstd.WithDecoderMaxMemory(ZstdStreamWindow))
			if err != nil {
				return err
			}
		}
		if err = s.zs.Reset(&s.in); err == nil {
			s.src = s.zs
		}
	case CompressionSnappy:
		if bytes.HasPrefix(body, xerialMagic) {
			if len(body) < xerialHeaderLen {
				err = errors.New("short xerial header")
				break
			}
			s.xs.reset(body[xerialHeaderLen:], s)
			s.src = &s.xs
			break
		}
		var n int
		if n, err = snappy.DecodedLen(body); err != nil {
			break
		}
		if int64(n) > limit {
			return ErrDecompressedTooLarge
		}
		if cap(s.whole) < n {
			s.whole = make([]byte, n)
		}
		var out []byte
		if out, err = snappy.Decode(s.whole[:n], body); err == nil {
			s.setWhole(out)
		}
	default:
		err = fmt.Errorf("unknown compression codec %d", c)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errCodec, c, err)
	}
	return nil
}

// setWhole makes b, the whole decompressed body, the window.
func (s *recordScanner) setWhole(b []byte) {
	s.src, s.eof = nil, true
	s.buf, s.r, s.w = b, 0, len(b)
	s.read = int64(len(b))
}

// release drops the references to the caller's bytes and pools s.
func (s *recordScanner) release() {
	s.in.Reset(nil)
	if s.lz != nil {
		s.lz.Reset(nil)
	}
	if s.zs != nil {
		s.zs.Reset(nil)
	}
	s.xs.reset(nil, nil)
	s.src, s.body, s.buf = nil, nil, nil
	if cap(s.whole) > maxKeptWholeBuffer {
		s.whole = nil
	}
	if cap(s.xs.block) > maxKeptWholeBuffer {
		s.xs.block = nil
	}
	scanners.Put(s)
}

// fill makes at least n bytes readable in the window, or every byte left
// when the body ends first. n is at most the window size.
func (s *recordScanner) fill(n int) error {
	for s.w-s.r < n && !s.eof {
		if s.r+n > len(s.buf) {
			s.w = copy(s.buf, s.buf[s.r:s.w])
			s.r = 0
		}
		m, err := s.src.Read(s.buf[s.w:])
		s.w += m
		s.read += int64(m)
		if s.read > s.limit {
			return ErrDecompressedTooLarge
		}
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			if s.codec == CompressionZstd && s.read == 0 && (errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)) {
				return s.zstdWhole()
			}
			if errors.Is(err, ErrDecompressedTooLarge) {
				return err
			}
			return fmt.Errorf("%w: %s: %v", errCodec, s.codec, err)
		}
	}
	return nil
}

// zstdWhole decodes a zstd body whose window is too wide to stream (see
// ZstdStreamWindow) in one piece, within the limit.
func (s *recordScanner) zstdWhole() error {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(s.limit)))
	if err != nil {
		return err
	}
	defer d.Close()
	out, err := d.DecodeAll(s.body, s.whole[:0])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return ErrDecompressedTooLarge
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errCodec, s.codec, err)
	}
	s.whole = out
	s.setWhole(out)
	return nil
}

// varint reads a varint of at most *rem bytes (the rest of the record) and
// takes its size off *rem.
func (s *recordScanner) varint(rem *int64) (int64, error) {
	if err := s.fill(int(min(*rem, binary.MaxVarintLen64))); err != nil {
		return 0, err
	}
	b := s.buf[s.r:s.w]
	if int64(len(b)) > *rem {
		b = b[:*rem]
	}
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, errVarint
	}
	s.r += n
	*rem -= int64(n)
	return v, nil
}

// skip passes over n bytes of the record.
func (s *recordScanner) skip(n int64, rem *int64) error {
	if n > *rem {
		return fmt.Errorf("length %d exceeds the %d bytes left", n, *rem)
	}
	*rem -= n
	for n > 0 {
		if s.r == s.w {
			if err := s.fill(1); err != nil {
				return err
			}
			if s.r == s.w {
				return io.ErrUnexpectedEOF
			}
		}
		k := min(n, int64(s.w-s.r))
		s.r += int(k)
		n -= k
	}
	return nil
}

// bytesField skips a length-prefixed field (-1 = null) and reports whether
// it was null.
func (s *recordScanner) bytesField(rem *int64) (null bool, err error) {
	l, err := s.varint(rem)
	if err != nil {
		return false, err
	}
	if l < -1 {
		return false, fmt.Errorf("negative length %d", l)
	}
	if l == -1 {
		return true, nil
	}
	return false, s.skip(l, rem)
}

// next checks the next record, which must be there, and returns its offset
// delta and whether its key is null.
func (s *recordScanner) next() (delta int64, nullKey bool, err error) {
	if err := s.fill(binary.MaxVarintLen64); err != nil {
		return 0, false, err
	}
	length, n := binary.Varint(s.buf[s.r:s.w])
	if n <= 0 {
		return 0, false, errVarint
	}
	if length < 1 {
		return 0, false, fmt.Errorf("record length %d", length)
	}
	if length > s.limit {
		return 0, false, ErrDecompressedTooLarge
	}
	if size := n + int(length); size <= len(s.buf) {
		// The common case: the whole record fits the window; check it
		// where it lies.
		if err := s.fill(size); err != nil {
			return 0, false, err
		}
		if s.w-s.r < size {
			return 0, false, fmt.Errorf("record length %d with %d bytes left", length, s.w-s.r-n)
		}
		rec := s.buf[s.r : s.r+size]
		_, delta, err := skipRecord(rec)
		if err != nil {
			return 0, false, err
		}
		s.r += size
		return delta, recordKeyNull(rec), nil
	}
	// A record larger than the window: field by field.
	s.r += n
	rem := length
	if err := s.skip(1, &rem); err != nil { // attributes
		return 0, false, err
	}
	if _, err := s.varint(&rem); err != nil { // timestamp delta
		return 0, false, err
	}
	if delta, err = s.varint(&rem); err != nil {
		return 0, false, err
	}
	if nullKey, err = s.bytesField(&rem); err != nil {
		return 0, false, fmt.Errorf("key: %w", err)
	}
	if _, err = s.bytesField(&rem); err != nil {
		return 0, false, fmt.Errorf("value: %w", err)
	}
	count, err := s.varint(&rem)
	if err != nil {
		return 0, false, err
	}
	if count < 0 || count > rem/2 {
		return 0, false, fmt.Errorf("header count %d", count)
	}
	for range count {
		null, err := s.bytesField(&rem)
		if err != nil || null {
			return 0, false, fmt.Errorf("header key: %v", err)
		}
		if _, err = s.bytesField(&rem); err != nil {
			return 0, false, fmt.Errorf("header value: %w", err)
		}
	}
	if rem != 0 {
		return 0, false, fmt.Errorf("record has %d trailing bytes", rem)
	}
	return delta, nullKey, nil
}

// recordKeyNull reports whether the record at the start of rec (already
// checked by skipRecord) has a null key.
func recordKeyNull(rec []byte) bool {
	_, p := binary.Varint(rec) // length
	p++                        // attributes
	for range 2 {              // timestamp delta, offset delta
		_, n := binary.Varint(rec[p:])
		p += n
	}
	l, _ := binary.Varint(rec[p:])
	return l < 0
}

// CheckCompressedRecords is the append-time check of a compressed producer
// batch: the body decompresses (within limit bytes) and holds exactly the
// header's record count of well-formed records with offset deltas 0..n-1,
// each with a key when needKeys (a compacted topic). A body the codec refuses
// or that expands beyond the limit is ErrInvalidRecord too.
func CheckCompressedRecords(h *BatchHeader, batch []byte, needKeys bool, limit int64) error {
	s := scanners.Get().(*recordScanner)
	defer s.release()
	c := h.Compression()
	err := s.open(c, batch[BatchHeaderSize:h.Size()], limit)
	var i int32
	for err == nil {
		if err = s.fill(1); err != nil || s.r == s.w {
			break
		}
		if i == h.RecordCount {
			err = fmt.Errorf("more records than the count %d", h.RecordCount)
			break
		}
		delta, nullKey, rerr := s.next()
		switch {
		case rerr != nil:
			err = fmt.Errorf("record %d: %w", i, rerr)
		case delta != int64(i):
			err = fmt.Errorf("record %d has offset delta %d", i, delta)
		case needKeys && nullKey:
			err = errors.New("compacted topic cannot accept a record without a key")
		}
		i++
	}
	switch {
	case errors.Is(err, ErrDecompressedTooLarge):
		return fmt.Errorf("%w: %w: %s batch expands beyond %d bytes (message.decompressed.max.bytes)", ErrInvalidRecord, ErrDecompressedTooLarge, c, limit)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	case i != h.RecordCount:
		return fmt.Errorf("%w: %d records, header says %d", ErrInvalidRecord, i, h.RecordCount)
	}
	return nil
}

// DecompressLimit appends src, compressed with c, decompressed to dst, and
// fails with ErrDecompressedTooLarge as soon as the output would exceed max
// bytes: the output is all it allocates beyond pooled, bounded codec state.
// It bounds the console's own clients (see package internal/decompress).
func DecompressLimit(c Compression, dst, src []byte, max int) ([]byte, error) {
	if c == CompressionNone {
		if len(src) > max {
			return dst, ErrDecompressedTooLarge
		}
		return append(dst, src...), nil
	}
	s := scanners.Get().(*recordScanner)
	defer s.release()
	if err := s.open(c, src, int64(max)); err != nil {
		return dst, err
	}
	for {
		if err := s.fill(len(s.buf)); err != nil {
			return dst, err
		}
		dst = append(dst, s.buf[s.r:s.w]...)
		s.r, s.w = 0, 0
		if s.eof {
			return dst, nil
		}
	}
}

// xerialReader decodes snappy-java's framing block by block.
type xerialReader struct {
	src   []byte // what is left of the framed body
	block []byte // the decoded current block
	pos   int    // bytes of block already read
	s     *recordScanner
}

// reset starts reading the blocks that follow the xerial header.
func (x *xerialReader) reset(blocks []byte, s *recordScanner) {
	x.src, x.pos, x.s = blocks, 0, s
	x.block = x.block[:0]
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for x.pos == len(x.block) {
		if len(x.src) == 0 {
			return 0, io.EOF
		}
		if len(x.src) < 4 {
			return 0, errors.New("snappy: truncated xerial block length")
		}
		n := int(binary.BigEndian.Uint32(x.src))
		x.src = x.src[4:]
		if n < 0 || n > len(x.src) {
			return 0, fmt.Errorf("snappy: xerial block of %d bytes with %d left", n, len(x.src))
		}
		dl, err := snappy.DecodedLen(x.src[:n])
		if err != nil {
			return 0, err
		}
		if int64(dl) > x.s.limit-x.s.read {
			return 0, ErrDecompressedTooLarge
		}
		if cap(x.block) < dl {
			x.block = make([]byte, dl)
		}
		if x.block, err = snappy.Decode(x.block[:dl], x.src[:n]); err != nil {
			return 0, err
		}
		x.src, x.pos = x.src[n:], 0
	}
	n := copy(p, x.block[x.pos:])
	x.pos += n
	return n, nil
}

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

// MaxDecompressedBatchBytesLimit bounds what one batch may expand to when it
// is decompressed whole (the cleaner, recompression to a topic's
// compression.type, reads that decode records), and so the highest
// message.decompressed.max.bytes, the bound checked on append. Kafka has no
// such bound, but a few hundred bytes of zstd or gzip can claim gigabytes.
const MaxDecompressedBatchBytesLimit = 256 << 20

// maxDecompressedSize is MaxDecompressedBatchBytesLimit, a variable so fuzz
// targets can lower it: a fuzzer finds bombs fast, and expanding each to
// 256 MiB makes a run crawl.
var maxDecompressedSize = MaxDecompressedBatchBytesLimit

var errTooLarge = errors.New("decompressed data exceeds the limit")

// Encoders and decoders are pooled: a gzip writer holds ~800 KiB of state and
// a zstd encoder several MiB, so building one per batch would dominate the
// cost of recompression and compaction.
var (
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return w
	}}
	gzipReaders sync.Pool // *gzip.Reader; New is not set because NewReader needs input
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	// zstd: EncodeAll/DecodeAll on pooled single-goroutine coders. With
	// concurrency 1 and only the *All methods used, neither starts
	// goroutines, so a pooled coder dropped by the GC leaks nothing.
	zstdEncoders = sync.Pool{New: func() any {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		return e
	}}
	zstdDecoders = sync.Pool{New: func() any {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(maxDecompressedSize)))
		return d
	}}
)

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// Compress appends src compressed with c to dst. Snappy is written raw (the
// block format), as franz-go and librdkafka write it; every Kafka client reads
// raw and xerial-framed snappy.
func Compress(c Compression, dst, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		aw := appendWriter{dst}
		w.Reset(&aw)
		if _, err := w.Write(src); err != nil {
			return dst, err
		}
		if err := w.Close(); err != nil {
			return dst, err
		}
		w.Reset(nil)
		return aw.b, nil
	case CompressionSnappy:
		n := snappy.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, errors.New("snappy: input too large")
		}
		start := len(dst)
		dst = grow(dst, n)
		out := snappy.Encode(dst[start:start+n], src)
		return dst[:start+len(out)], nil
	case CompressionLZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		aw := appendWriter{dst}
		w.Reset(&aw)
		if _, err := w.Write(src); err != nil {
			return dst, err
		}
		if err := w.Close(); err != nil {
			return dst, err
		}
		w.Reset(nil)
		return aw.b, nil
	case CompressionZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("unknown compression codec %d", c)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, len(b)+n+len(b)/2)
	copy(nb, b)
	return nb
}

// xerialMagic starts a snappy stream framed by xerial's snappy-java
// (SnappyOutputStream), which the Java producer uses: the 8-byte magic, a
// version int32 and a compatible-version int32, then [int32 length][block]...
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

// Decompress appends src decompressed with c to dst. Snappy accepts both the
// xerial framing and raw blocks.
func Decompress(c Compression, dst, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		var r *gzip.Reader
		if v := gzipReaders.Get(); v != nil {
			r = v.(*gzip.Reader)
			if err := r.Reset(bytes.NewReader(src)); err != nil {
				gzipReaders.Put(r)
				return dst, err
			}
		} else {
			var err error
			if r, err = gzip.NewReader(bytes.NewReader(src)); err != nil {
				return dst, err
			}
		}
		defer gzipReaders.Put(r)
		return readAllLimited(dst, r)
	case CompressionSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return decodeXerial(dst, src)
		}
		return decodeSnappyBlock(dst, src)
	case CompressionLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		return readAllLimited(dst, r)
	case CompressionZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		return d.DecodeAll(src, dst)
	}
	return dst, fmt.Errorf("unknown compression codec %d", c)
}

func decodeSnappyBlock(dst, src []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > maxDecompressedSize-len(dst) {
		return dst, errTooLarge
	}
	start := len(dst)
	dst = grow(dst, n)
	out, err := snappy.Decode(dst[start:start+n], src)
	if err != nil {
		return dst[:start], err
	}
	return dst[:start+len(out)], nil
}

func decodeXerial(dst, src []byte) ([]byte, error) {
	if len(src) < xerialHeaderLen {
		return dst, errors.New("snappy: short xerial header")
	}
	for p := xerialHeaderLen; p < len(src); {
		if len(src)-p < 4 {
			return dst, errors.New("snappy: truncated xerial block length")
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n < 0 || n > len(src)-p {
			return dst, fmt.Errorf("snappy: xerial block of %d bytes with %d left", n, len(src)-p)
		}
		var err error
		if dst, err = decodeSnappyBlock(dst, src[p:p+n]); err != nil {
			return dst, err
		}
		p += n
	}
	return dst, nil
}

// AppendXerial appends src compressed as snappy-java's stream format
// (SnappyOutputStream: the xerial header, then 32 KiB input blocks, each a
// length and a raw snappy block): what a Java producer sends. Compress
// writes raw snappy, as franz-go and librdkafka do; Decompress reads both.
func AppendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // compatible version
	for len(src) > 0 {
		n := min(len(src), 32<<10)
		block := snappy.Encode(nil, src[:n])
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		dst = append(dst, block...)
		src = src[n:]
	}
	return dst
}

func readAllLimited(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > maxDecompressedSize {
			return dst, errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// Recompress appends b re-encoded with codec: the records are
// decompressed and compressed again, the header keeps every field but the
// length and codec bits, and the CRC is recomputed.
func Recompress(dst []byte, h *BatchHeader, b []byte, codec Compression) ([]byte, error) {
	body := b[BatchHeaderSize:]
	if c := h.Compression(); c != CompressionNone {
		bp := decompressBufs.Get().(*[]byte)
		defer decompressBufs.Put(bp)
		raw, err := Decompress(c, (*bp)[:0], body)
		*bp = raw[:0]
		if err != nil {
			return dst, fmt.Errorf("%w: %s: %v", ErrInvalidRecord, c, err)
		}
		body = raw
	}
	start := len(dst)
	dst = append(dst, b[:BatchHeaderSize]...)
	var err error
	if dst, err = Compress(codec, dst, body); err != nil {
		return dst[:start], err
	}
	nb := dst[start:]
	binary.BigEndian.PutUint32(nb[OffBatchLength:], uint32(len(nb)-BatchLengthOverhead))
	attrs := binary.BigEndian.Uint16(nb[OffAttributes:])&^AttrCompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(nb[OffAttributes:], attrs)
	binary.BigEndian.PutUint32(nb[OffCRC:], BatchCRC(nb))
	return dst, nil
}

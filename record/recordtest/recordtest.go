// Package recordtest builds record batches for tests: well-formed ones, the
// captures real clients sent (record/testdata), and the malformed, poisoned
// and decompression-bomb batches a hostile or broken producer can send. It
// uses only package record's exported API, so the codec's tests and the
// log's share one set of fixtures.
package recordtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/sluice-io/sluice/record"
)

// Codecs are the compression codecs (every one but none).
var Codecs = []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd}

// Batch builds a batch of n records of valueSize bytes with keys "k<i>",
// timestamps at ts, compressed with c, without a producer id.
func Batch(t testing.TB, n, valueSize int, ts int64, c record.Compression) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: v}
	}
	b, err := record.BuildBatch(record.BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: ts}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testdata is record/testdata, wherever the test runs from.
func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Capture returns the bytes of record/testdata/name (see its README: what
// franz-go and kcat sent, byte for byte).
func Capture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata(), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Captures returns every captured batch and message set (the .bin files of
// record/testdata), for seeding fuzz targets.
func Captures() [][]byte {
	ents, _ := os.ReadDir(testdata())
	var out [][]byte
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".bin" {
			if b, err := os.ReadFile(filepath.Join(testdata(), e.Name())); err == nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// CapturedValue is what the capture tool sent as record i's value.
func CapturedValue(i int) string { return strings.Repeat(fmt.Sprintf("value-%d ", i), 8) }

// WrapBody puts body, claimed to be compressed with c, behind a batch
// header claiming count records, with a correct CRC: what a hostile or
// broken producer can send.
func WrapBody(c record.Compression, count int32, body []byte) []byte {
	b, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000}, nil)
	b = append(b, body...)
	h, _ := record.ParseBatchHeader(b)
	h.BatchLength = int32(len(b) - record.BatchLengthOverhead)
	h.Attributes = int16(c)
	h.RecordCount = count
	h.LastOffsetDelta = count - 1
	record.PutHeader(b, &h)
	binary.BigEndian.PutUint32(b[record.OffCRC:], record.BatchCRC(b))
	return b
}

// StreamCompressor returns a writer compressing into buf with c, as a
// producer streams a batch (snappy: xerial framing, as the Java producer).
func StreamCompressor(t testing.TB, c record.Compression, buf *bytes.Buffer) io.WriteCloser {
	t.Helper()
	switch c {
	case record.CompressionGzip:
		return gzip.NewWriter(buf)
	case record.CompressionLZ4:
		return lz4.NewWriter(buf)
	case record.CompressionZstd:
		w, err := zstd.NewWriter(buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		return w
	case record.CompressionSnappy:
		return &xerialWriter{dst: buf}
	}
	t.Fatalf("codec %s", c)
	return nil
}

// xerialWriter frames what is written as snappy-java does (32 KiB blocks),
// without holding the whole input.
type xerialWriter struct {
	dst     *bytes.Buffer
	pending []byte
	started bool
}

func (x *xerialWriter) Write(p []byte) (int, error) {
	if !x.started {
		x.dst.Write(record.AppendXerial(nil, nil)) // the header alone
		x.started = true
	}
	x.pending = append(x.pending, p...)
	for len(x.pending) >= 32<<10 {
		x.block(x.pending[:32<<10])
		x.pending = x.pending[32<<10:]
	}
	return len(p), nil
}

func (x *xerialWriter) block(b []byte) {
	enc := snappy.Encode(nil, b)
	x.dst.Write(binary.BigEndian.AppendUint32(nil, uint32(len(enc))))
	x.dst.Write(enc)
}

func (x *xerialWriter) Close() error {
	if len(x.pending) > 0 {
		x.block(x.pending)
	}
	return nil
}

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int { return len(binary.AppendVarint(nil, v)) }

// BombBody compresses records records, each holding a value of size zero
// bytes, streaming (the decompressed form is never in memory).
func BombBody(t testing.TB, c record.Compression, records int, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := StreamCompressor(t, c, &buf)
	zeros := make([]byte, 1<<20)
	for i := range records {
		var hdr []byte
		rest := []byte{0} // header count
		body := 1 + 1 + varintLen(int64(i)) + varintLen(-1) + varintLen(size) + int(size) + len(rest)
		hdr = binary.AppendVarint(hdr, int64(body)) // record length
		hdr = append(hdr, 0)                        // attributes
		hdr = binary.AppendVarint(hdr, 0)           // timestamp delta
		hdr = binary.AppendVarint(hdr, int64(i))    // offset delta
		hdr = binary.AppendVarint(hdr, -1)          // null key
		hdr = binary.AppendVarint(hdr, size)        // value length
		w.Write(hdr)
		for left := size; left > 0; left -= int64(len(zeros)) {
			w.Write(zeros[:min(left, int64(len(zeros)))])
		}
		w.Write(rest)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// GzipBomb is the batch of the report: one record of 200 MiB of zeros,
// gzip-compressed to about 204 KB.
func GzipBomb(t testing.TB) []byte {
	return WrapBody(record.CompressionGzip, 1, BombBody(t, record.CompressionGzip, 1, 200<<20))
}

// GarbageGzip is the poison pill of the report: a gzip batch whose body is
// not gzip (a valid header and CRC around it).
func GarbageGzip() []byte {
	return WrapBody(record.CompressionGzip, 1, []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffthis is not deflate data at all"))
}

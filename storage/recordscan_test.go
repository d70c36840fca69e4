package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

var allCodecs = []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// wrapBody puts body, claimed to be compressed with c, behind a batch header
// claiming count records, with a correct CRC: what a hostile or broken
// producer can send.
func wrapBody(c Compression, count int32, body []byte) []byte {
	b, _ := BuildBatch(BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000}, nil)
	b = append(b, body...)
	h, _ := ParseBatchHeader(b)
	h.BatchLength = int32(len(b) - batchLengthOverhead)
	h.Attributes = int16(c)
	h.RecordCount = count
	h.LastOffsetDelta = count - 1
	putHeader(b, &h)
	binary.BigEndian.PutUint32(b[offCRC:], batchCRC(b))
	return b
}

// streamCompressor returns a writer compressing into buf with c, as a
// producer streams a batch (snappy: xerial framing, as the Java producer).
func streamCompressor(t testing.TB, c Compression, buf *bytes.Buffer) io.WriteCloser {
	t.Helper()
	switch c {
	case CompressionGzip:
		return gzip.NewWriter(buf)
	case CompressionLZ4:
		return lz4.NewWriter(buf)
	case CompressionZstd:
		w, err := zstd.NewWriter(buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		return w
	case CompressionSnappy:
		return &xerialWriter{dst: buf}
	}
	t.Fatalf("codec %s", c)
	return nil
}

// xerialWriter frames what is written as snappy-java does (32 KiB blocks).
type xerialWriter struct {
	dst     *bytes.Buffer
	pending []byte
	started bool
}

func (x *xerialWriter) Write(p []byte) (int, error) {
	if !x.started {
		x.dst.Write(xerialMagic)
		x.dst.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
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

// bombBody compresses records records, each holding a value of size zero
// bytes, streaming (the decompressed form is never in memory).
func bombBody(t testing.TB, c Compression, records int, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := streamCompressor(t, c, &buf)
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

// gzipBomb is the batch of the report: one record of 200 MiB of zeros,
// gzip-compressed to about 204 KB.
func gzipBomb(t testing.TB) []byte {
	return wrapBody(CompressionGzip, 1, bombBody(t, CompressionGzip, 1, 200<<20))
}

// garbageGzip is the poison pill of the report: a gzip batch whose body is
// not gzip (a valid header and CRC around it).
func garbageGzip() []byte {
	return wrapBody(CompressionGzip, 1, []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffthis is not deflate data at all"))
}

func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestAppendRefusesPoisonAndBomb: a gzip batch with a garbage body and one
// that expands to 200 MiB are refused with ErrInvalidRecord (INVALID_RECORD)
// and leave the log as it was; checking the bomb allocates next to nothing.
func TestAppendRefusesPoisonAndBomb(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, testBatch(t, 3, 10, time.Now().UnixMilli(), CompressionGzip))
	size, leo := l.Size(), l.LogEndOffset()

	bomb := gzipBomb(t)
	if len(bomb) > 300<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	for _, c := range []struct {
		name  string
		batch []byte
		too   bool
	}{
		{"garbage gzip", garbageGzip(), false},
		{"gzip bomb", bomb, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			before := allocated()
			_, err := l.AppendAsLeader(c.batch, 0)
			grown := allocated() - before
			if !errors.Is(err, ErrInvalidRecord) || errors.Is(err, ErrDecompressedTooLarge) != c.too {
				t.Fatalf("append: %v", err)
			}
			if l.Size() != size || l.LogEndOffset() != leo {
				t.Fatalf("log changed: size %d -> %d, end %d -> %d", size, l.Size(), leo, l.LogEndOffset())
			}
			if grown > 4<<20 {
				t.Fatalf("the check allocated %d bytes", grown)
			}
			t.Logf("%v (allocated %d bytes)", err, grown)
		})
	}
	if got := readAllRecords(t, l, 0); len(got) != 3 {
		t.Fatalf("read back %d records", len(got))
	}
}

// TestAppendDecompressedLimit: for every codec, a batch expanding beyond
// message.decompressed.max.bytes is refused, in one record or spread over
// many, and one just within it is accepted; neither costs the expanded size
// in memory.
func TestAppendDecompressedLimit(t *testing.T) {
	const limit = 4 << 20
	m := openTestManager(t, t.TempDir(), nil, func(c *ManagerConfig) { c.MaxDecompressedBatchBytes = limit })
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.MaxMessageBytes = 16 << 20 // xerial snappy is only ~20x smaller
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range allCodecs {
		for _, tc := range []struct {
			records int
			size    int64
			ok      bool
		}{
			{1, 8 << 20, false},  // one record larger than the limit
			{64, 1 << 20, false}, // many records adding up beyond it
			{3, 1 << 20, true},   // within it, records larger than the window
		} {
			t.Run(fmt.Sprintf("%s/%dx%d", c, tc.records, tc.size), func(t *testing.T) {
				b := wrapBody(c, int32(tc.records), bombBody(t, c, tc.records, tc.size))
				runtime.GC()
				before := allocated()
				leo := l.LogEndOffset()
				_, err := l.AppendAsLeader(b, 0)
				grown := allocated() - before
				if tc.ok {
					if err != nil {
						t.Fatalf("append: %v", err)
					}
					if l.LogEndOffset() != leo+int64(tc.records) {
						t.Fatalf("end %d -> %d", leo, l.LogEndOffset())
					}
					return
				}
				if !errors.Is(err, ErrInvalidRecord) || !errors.Is(err, ErrDecompressedTooLarge) {
					t.Fatalf("append: %v", err)
				}
				if l.LogEndOffset() != leo {
					t.Fatal("refused batch changed the log")
				}
				// The codec state, pooled: zstd's ring buffer is as
				// large as the frame's window (8 MiB by default), lz4's
				// block buffer as its frame's block size (4 MiB here).
				state := int64(2 << 20)
				switch c {
				case CompressionZstd:
					state += zstdStreamWindow
				case CompressionLZ4:
					state += 4 << 20
				}
				if int64(grown) > state {
					t.Fatalf("the check allocated %d bytes", grown)
				}
			})
		}
	}
}

// TestAppendChecksCompressedRecords: the records inside a compressed batch
// must match the header (count, offset deltas 0..n-1), parse, leave no
// trailing bytes, and carry keys on a compacted topic.
func TestAppendChecksCompressedRecords(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	plain, err := m.GetOrCreateLog(TopicPartition{"plain", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	cc := DefaultLogConfig()
	cc.Cleanup = "compact"
	compacted, err := m.GetOrCreateLog(TopicPartition{"compacted", 0}, cc)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(key []byte, value []byte, delta int32) []byte {
		return appendRecord(nil, &Record{Key: key, Value: value}, delta)
	}
	big := bytes.Repeat([]byte("v"), 200<<10) // larger than the scan window
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range allCodecs {
		comp := func(raw []byte) []byte {
			out, err := Compress(c, nil, raw)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		for _, tc := range []struct {
			name  string
			log   *Log
			count int32
			raw   []byte
			ok    bool
		}{
			{"valid", plain, 2, cat(rec([]byte("a"), []byte("1"), 0), rec(nil, []byte("2"), 1)), true},
			{"valid large records", plain, 2, cat(rec([]byte("a"), big, 0), rec(big, nil, 1)), true},
			{"count too high", plain, 3, cat(rec([]byte("a"), []byte("1"), 0), rec(nil, []byte("2"), 1)), false},
			{"count too low", plain, 1, cat(rec([]byte("a"), []byte("1"), 0), rec(nil, []byte("2"), 1)), false},
			{"delta gap", plain, 2, cat(rec([]byte("a"), []byte("1"), 0), rec(nil, []byte("2"), 2)), false},
			{"delta gap after large record", plain, 2, cat(rec([]byte("a"), big, 1), rec(nil, []byte("2"), 2)), false},
			{"trailing bytes", plain, 1, cat(rec([]byte("a"), []byte("1"), 0), []byte{7}), false},
			{"truncated record", plain, 1, rec([]byte("a"), []byte("12345"), 0)[:6], false},
			{"truncated large record", plain, 1, rec([]byte("a"), big, 0)[:100<<10], false},
			{"empty body", plain, 1, nil, false},
			{"keyed on compacted", compacted, 2, cat(rec([]byte("a"), []byte("1"), 0), rec([]byte("b"), big, 1)), true},
			{"null key on compacted", compacted, 2, cat(rec([]byte("a"), []byte("1"), 0), rec(nil, []byte("2"), 1)), false},
			{"large null key on compacted", compacted, 1, rec(nil, big, 0), false},
		} {
			t.Run(fmt.Sprintf("%s/%s", c, tc.name), func(t *testing.T) {
				b := wrapBody(c, tc.count, comp(tc.raw))
				leo := tc.log.LogEndOffset()
				_, err := tc.log.AppendAsLeader(b, 0)
				if tc.ok {
					if err != nil {
						t.Fatalf("append: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("append: %v", err)
				}
				if tc.log.LogEndOffset() != leo {
					t.Fatal("refused batch changed the log")
				}
			})
		}
	}
}

// TestAppendCorruptCompressedBodies: for every codec, a body the codec
// refuses (truncated, bit-flipped, garbage) is INVALID_RECORD.
func TestAppendCorruptCompressedBodies(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range allCodecs {
		good := testBatch(t, 20, 100, time.Now().UnixMilli(), c)
		body := good[BatchHeaderSize:]
		flipped := bytes.Clone(body)
		if c == CompressionSnappy {
			flipped[0] ^= 0x7f // raw snappy has no checksum: break the declared length
		} else {
			flipped[len(flipped)/2] ^= 0xff // the codec's checksum catches it
		}
		for name, b := range map[string][]byte{
			"truncated": body[:len(body)-5],
			"flipped":   flipped,
			"garbage":   bytes.Repeat([]byte{0xa5}, 300),
			"empty":     nil,
		} {
			t.Run(fmt.Sprintf("%s/%s", c, name), func(t *testing.T) {
				_, err := l.AppendAsLeader(wrapBody(c, 20, b), 0)
				if !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("append: %v", err)
				}
			})
		}
		if _, err := l.AppendAsLeader(good, 0); err != nil {
			t.Fatalf("%s: good batch: %v", c, err)
		}
	}
}

// TestZstdWideWindow: a zstd frame declaring a window wider than is
// streamed (an ultra-level Java producer) is still checked, in one piece,
// and a wide-window bomb is refused within the limit.
func TestZstdWideWindow(t *testing.T) {
	raw := bytes.Join([][]byte{
		appendRecord(nil, &Record{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 1<<20)}, 0),
		appendRecord(nil, &Record{Key: []byte("k"), Value: []byte("y")}, 1),
	}, nil)
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(32<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	w.Close()
	var fh zstd.Header
	if err := fh.Decode(buf.Bytes()); err != nil || fh.WindowSize <= zstdStreamWindow {
		t.Fatalf("frame window %d (%v)", fh.WindowSize, err)
	}
	b := wrapBody(CompressionZstd, 2, buf.Bytes())
	h, _ := ParseBatchHeader(b)
	if err := checkCompressedRecords(&h, b, false, 64<<20); err != nil {
		t.Fatalf("wide window: %v", err)
	}
	if err := checkCompressedRecords(&h, b, false, 512<<10); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("wide window over the limit: %v", err)
	}
}

// TestCheckCompressedAllocs: checking a compressed batch allocates nothing
// once the pooled decoders are warm (nothing per record, nothing per batch).
func TestCheckCompressedAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	for _, c := range allCodecs {
		b := testBatch(t, 500, 100, time.Now().UnixMilli(), c)
		h, _ := ParseBatchHeader(b)
		check := func() {
			if err := checkCompressedRecords(&h, b, true, 64<<20); err != nil {
				t.Fatal(err)
			}
		}
		check()
		if n := testing.AllocsPerRun(50, check); n > 0.5 {
			t.Errorf("%s: %.1f allocations per check", c, n)
		}
	}
}

// TestDecompressLimit: what the console's clients decompress with.
func TestDecompressLimit(t *testing.T) {
	src := bytes.Repeat([]byte("sluice decompress limit "), 20000) // 480 KB
	for _, c := range append([]Compression{CompressionNone}, allCodecs...) {
		comp, err := Compress(c, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := DecompressLimit(c, []byte("x"), comp, len(src))
		if err != nil || !bytes.Equal(out[1:], src) || out[0] != 'x' {
			t.Fatalf("%s: round trip: %v", c, err)
		}
		if _, err := DecompressLimit(c, nil, comp, len(src)-1); !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("%s: over the limit: %v", c, err)
		}
		if c != CompressionNone {
			if _, err := DecompressLimit(c, nil, comp[:len(comp)/2], len(src)); err == nil {
				t.Fatalf("%s: truncated input decoded", c)
			}
		}
	}
	framed := appendXerial(nil, src)
	if out, err := DecompressLimit(CompressionSnappy, nil, framed, len(src)); err != nil || !bytes.Equal(out, src) {
		t.Fatalf("xerial: %v", err)
	}
	if _, err := DecompressLimit(CompressionSnappy, nil, framed, 100<<10); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("xerial over the limit: %v", err)
	}
}

// TestFuzzCorpusHoldsPoisonAndBomb keeps the reported batches in FuzzBatch's
// seed corpus: the seeds must be the batches the append check refuses.
func TestFuzzCorpusHoldsPoisonAndBomb(t *testing.T) {
	for name, want := range map[string][]byte{"poison-gzip": garbageGzip(), "bomb-gzip-200MiB": nil} {
		data, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzBatch", name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := parseCorpusBytes(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want != nil && !bytes.Equal(b, want) {
			t.Fatalf("%s: corpus entry differs from the test's batch", name)
		}
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := checkCompressedRecords(&h, b, false, DefaultMaxDecompressedBatchBytes); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("%s: check: %v", name, err)
		}
	}
}

// parseCorpusBytes reads a "go test fuzz v1" file holding one []byte.
func parseCorpusBytes(data []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(data, []byte("go test fuzz v1\n[]byte("))
	if !ok {
		return nil, errors.New("not a one-[]byte corpus file")
	}
	lit := string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(")")))
	s, err := strconv.Unquote(lit)
	return []byte(s), err
}

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the FuzzBatch corpus entries of the poison and bomb batches")

// TestWriteFuzzCorpus (go test ./storage -run TestWriteFuzzCorpus
// -write-corpus) writes the corpus entries TestFuzzCorpusHoldsPoisonAndBomb
// checks.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("-write-corpus not given")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzBatch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"poison-gzip": garbageGzip(), "bomb-gzip-200MiB": gzipBomb(t)} {
		data := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAppendCheckOrder: the compressed-record check runs before the log's
// lock, over every batch of an append; a bad batch after a good one refuses
// the whole append, and a batch with a wrong CRC is still CORRUPT_MESSAGE
// (the CRC is checked before the records).
func TestAppendCheckOrder(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	good := testBatch(t, 5, 10, time.Now().UnixMilli(), CompressionZstd)
	if _, err := l.AppendAsLeader(bytes.Join([][]byte{good, garbageGzip()}, nil), 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("good then poison: %v", err)
	}
	badCRC := garbageGzip()
	badCRC[offCRC] ^= 1
	if _, err := l.AppendAsLeader(bytes.Join([][]byte{good, badCRC}, nil), 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("good then a wrong CRC: %v", err)
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("refused appends changed the log: end %d, size %d", l.LogEndOffset(), l.Size())
	}
	mustAppend(t, l, bytes.Join([][]byte{good, testBatch(t, 2, 10, time.Now().UnixMilli(), CompressionGzip)}, nil))
	if l.LogEndOffset() != 7 {
		t.Fatalf("end %d", l.LogEndOffset())
	}
}

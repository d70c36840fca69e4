package record_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// TestZstdWideWindow: a zstd frame declaring a window wider than is
// streamed (an ultra-level Java producer) is still checked, in one piece,
// and a wide-window bomb is refused within the limit.
func TestZstdWideWindow(t *testing.T) {
	raw := bytes.Join([][]byte{
		record.AppendRecord(nil, &record.Record{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 1<<20)}, 0),
		record.AppendRecord(nil, &record.Record{Key: []byte("k"), Value: []byte("y")}, 1),
	}, nil)
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(32<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	w.Close()
	var fh zstd.Header
	if err := fh.Decode(buf.Bytes()); err != nil || fh.WindowSize <= record.ZstdStreamWindow {
		t.Fatalf("frame window %d (%v)", fh.WindowSize, err)
	}
	b := recordtest.WrapBody(record.CompressionZstd, 2, buf.Bytes())
	h, _ := record.ParseBatchHeader(b)
	if err := record.CheckCompressedRecords(&h, b, false, 64<<20); err != nil {
		t.Fatalf("wide window: %v", err)
	}
	if err := record.CheckCompressedRecords(&h, b, false, 512<<10); !errors.Is(err, record.ErrDecompressedTooLarge) {
		t.Fatalf("wide window over the limit: %v", err)
	}
}

// TestCheckCompressedAllocs: checking a compressed batch allocates nothing
// once the pooled decoders are warm (nothing per record, nothing per batch).
func TestCheckCompressedAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	for _, c := range recordtest.Codecs {
		b := recordtest.Batch(t, 500, 100, time.Now().UnixMilli(), c)
		h, _ := record.ParseBatchHeader(b)
		check := func() {
			if err := record.CheckCompressedRecords(&h, b, true, 64<<20); err != nil {
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
	for _, c := range append([]record.Compression{record.CompressionNone}, recordtest.Codecs...) {
		comp, err := record.Compress(c, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := record.DecompressLimit(c, []byte("x"), comp, len(src))
		if err != nil || !bytes.Equal(out[1:], src) || out[0] != 'x' {
			t.Fatalf("%s: round trip: %v", c, err)
		}
		if _, err := record.DecompressLimit(c, nil, comp, len(src)-1); !errors.Is(err, record.ErrDecompressedTooLarge) {
			t.Fatalf("%s: over the limit: %v", c, err)
		}
		if c != record.CompressionNone {
			if _, err := record.DecompressLimit(c, nil, comp[:len(comp)/2], len(src)); err == nil {
				t.Fatalf("%s: truncated input decoded", c)
			}
		}
	}
	framed := record.AppendXerial(nil, src)
	if out, err := record.DecompressLimit(record.CompressionSnappy, nil, framed, len(src)); err != nil || !bytes.Equal(out, src) {
		t.Fatalf("xerial: %v", err)
	}
	if _, err := record.DecompressLimit(record.CompressionSnappy, nil, framed, 100<<10); !errors.Is(err, record.ErrDecompressedTooLarge) {
		t.Fatalf("xerial over the limit: %v", err)
	}
}

// TestFuzzCorpusHoldsPoisonAndBomb keeps the reported batches in FuzzBatch's
// seed corpus: the seeds must be the batches the append check refuses.
func TestFuzzCorpusHoldsPoisonAndBomb(t *testing.T) {
	for name, want := range map[string][]byte{"poison-gzip": recordtest.GarbageGzip(), "bomb-gzip-200MiB": nil} {
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
		h, err := record.ValidateBatch(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := record.CheckCompressedRecords(&h, b, false, record.DefaultMaxDecompressedBatchBytes); !errors.Is(err, record.ErrInvalidRecord) {
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
	for name, b := range map[string][]byte{"poison-gzip": recordtest.GarbageGzip(), "bomb-gzip-200MiB": recordtest.GzipBomb(t)} {
		data := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

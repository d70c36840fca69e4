package storage

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record/recordtest"

	"github.com/sluice-io/sluice/record"
)

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
	mustAppend(t, l, recordtest.Batch(t, 3, 10, time.Now().UnixMilli(), record.CompressionGzip))
	size, leo := l.Size(), l.LogEndOffset()

	bomb := recordtest.GzipBomb(t)
	if len(bomb) > 300<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	for _, c := range []struct {
		name  string
		batch []byte
		too   bool
	}{
		{"garbage gzip", recordtest.GarbageGzip(), false},
		{"gzip bomb", bomb, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			before := allocated()
			_, err := l.AppendAsLeader(c.batch, 0)
			grown := allocated() - before
			if !errors.Is(err, record.ErrInvalidRecord) || errors.Is(err, record.ErrDecompressedTooLarge) != c.too {
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
	for _, c := range recordtest.Codecs {
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
				b := recordtest.WrapBody(c, int32(tc.records), recordtest.BombBody(t, c, tc.records, tc.size))
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
				if !errors.Is(err, record.ErrInvalidRecord) || !errors.Is(err, record.ErrDecompressedTooLarge) {
					t.Fatalf("append: %v", err)
				}
				if l.LogEndOffset() != leo {
					t.Fatal("refused batch changed the log")
				}
				// The codec state, pooled: zstd's ring buffer is as
				// large as the frame's window (8 MiB by default); lz4
				// holds two buffers of its frame's block size (4 MiB
				// here), one for a compressed block and one for it
				// decompressed, both from lz4's own pools, which a
				// garbage collection between two subtests may have
				// emptied.
				state := int64(2 << 20)
				switch c {
				case record.CompressionZstd:
					state += record.ZstdStreamWindow
				case record.CompressionLZ4:
					state += 2 * 4 << 20
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
		return record.AppendRecord(nil, &record.Record{Key: key, Value: value}, delta)
	}
	big := bytes.Repeat([]byte("v"), 200<<10) // larger than the scan window
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range recordtest.Codecs {
		comp := func(raw []byte) []byte {
			out, err := record.Compress(c, nil, raw)
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
				b := recordtest.WrapBody(c, tc.count, comp(tc.raw))
				leo := tc.log.LogEndOffset()
				_, err := tc.log.AppendAsLeader(b, 0)
				if tc.ok {
					if err != nil {
						t.Fatalf("append: %v", err)
					}
					return
				}
				if !errors.Is(err, record.ErrInvalidRecord) {
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
	for _, c := range recordtest.Codecs {
		good := recordtest.Batch(t, 20, 100, time.Now().UnixMilli(), c)
		body := good[record.BatchHeaderSize:]
		flipped := bytes.Clone(body)
		if c == record.CompressionSnappy {
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
				_, err := l.AppendAsLeader(recordtest.WrapBody(c, 20, b), 0)
				if !errors.Is(err, record.ErrInvalidRecord) {
					t.Fatalf("append: %v", err)
				}
			})
		}
		if _, err := l.AppendAsLeader(good, 0); err != nil {
			t.Fatalf("%s: good batch: %v", c, err)
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
	good := recordtest.Batch(t, 5, 10, time.Now().UnixMilli(), record.CompressionZstd)
	if _, err := l.AppendAsLeader(bytes.Join([][]byte{good, recordtest.GarbageGzip()}, nil), 0); !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("good then poison: %v", err)
	}
	badCRC := recordtest.GarbageGzip()
	badCRC[record.OffCRC] ^= 1
	if _, err := l.AppendAsLeader(bytes.Join([][]byte{good, badCRC}, nil), 0); !errors.Is(err, record.ErrCorruptBatch) {
		t.Fatalf("good then a wrong CRC: %v", err)
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("refused appends changed the log: end %d, size %d", l.LogEndOffset(), l.Size())
	}
	mustAppend(t, l, bytes.Join([][]byte{good, recordtest.Batch(t, 2, 10, time.Now().UnixMilli(), record.CompressionGzip)}, nil))
	if l.LogEndOffset() != 7 {
		t.Fatalf("end %d", l.LogEndOffset())
	}
}

// TestAppendAdmit: the caller's Admit sees every batch's header before the
// rest of the batch is checked (a compressed batch it refuses is not
// decompressed), and a refusal leaves the log as it was.
func TestAppendAdmit(t *testing.T) {
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, err := m.GetOrCreateLog(TopicPartition{"t", 0}, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	errRefused := errors.New("refused")
	var seen []int32
	admit := func(h record.BatchHeader) error {
		seen = append(seen, h.RecordCount)
		if h.Compression() == record.CompressionGzip {
			return errRefused
		}
		return nil
	}
	now := time.Now().UnixMilli()
	two := bytes.Join([][]byte{recordtest.Batch(t, 2, 10, now, record.CompressionNone), recordtest.Batch(t, 3, 10, now, record.CompressionZstd)}, nil)
	if _, err := l.AppendAsLeaderAdmit(two, 0, admit); err != nil {
		t.Fatal(err)
	}
	// The compressed batch is asked about before the lock (before its
	// records are decompressed), then every batch under the lock.
	if !slices.Equal(seen, []int32{3, 2, 3}) {
		t.Fatalf("admit saw %v", seen)
	}
	for _, b := range [][]byte{recordtest.GarbageGzip(), bytes.Join([][]byte{recordtest.Batch(t, 1, 10, now, record.CompressionNone), recordtest.GarbageGzip()}, nil)} {
		if _, err := l.AppendAsLeaderAdmit(b, 0, admit); !errors.Is(err, errRefused) || errors.Is(err, record.ErrInvalidRecord) {
			t.Fatalf("refused batch: %v", err)
		}
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("refused appends changed the log: end %d", l.LogEndOffset())
	}
}

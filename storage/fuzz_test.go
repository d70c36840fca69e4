package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// fuzzLimits lowers the decompression limit for a fuzz run (see
// maxDecompressedSize).
func fuzzLimits(f *testing.F) {
	old := maxDecompressedSize
	maxDecompressedSize = 1 << 20
	f.Cleanup(func() { maxDecompressedSize = old })
}

func addCapturedSeeds(f *testing.F) {
	fuzzLimits(f)
	ents, _ := os.ReadDir("testdata")
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".bin" {
			b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err == nil {
				f.Add(b)
			}
		}
	}
}

// FuzzBatch feeds arbitrary bytes to the batch parser and record decoder:
// never a panic, and whatever validates decodes consistently.
func FuzzBatch(f *testing.F) {
	addCapturedSeeds(f)
	opts, recs := goldenInput()
	b, _ := BuildBatch(opts, recs)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseBatchHeader(data)
		ForEachBatch(data, func(h *BatchHeader, b []byte) error {
			return Records(b, func(*BatchHeader, *Record) error { return nil })
		})
		h, err := ValidateBatch(data)
		if err != nil {
			return
		}
		if h.Size() != len(data) {
			t.Fatalf("valid batch of %d bytes claims %d", len(data), h.Size())
		}
		var n int32
		if err := Records(data, func(*BatchHeader, *Record) error { n++; return nil }); err == nil && n != h.RecordCount {
			t.Fatalf("decoded %d records, header says %d", n, h.RecordCount)
		}
		checkAppendAgrees(t, &h, data)
	})
}

// checkAppendAgrees runs the append-time check of a compressed batch (the
// streaming one) and, when it accepts the batch, decodes it in full: the
// records must be there, as many as the header says, with deltas 0..n-1.
func checkAppendAgrees(t *testing.T, h *BatchHeader, b []byte) {
	if h.Compression() == CompressionNone || h.Compression() > CompressionZstd {
		return
	}
	if err := checkCompressedRecords(h, b, false, int64(maxDecompressedSize)); err != nil {
		if !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("append check: %v, not ErrInvalidRecord", err)
		}
		return
	}
	// Decompress in one piece (DecodeAll for zstd, whose fuzz-sized
	// bound also refuses wider windows: those go through DecompressLimit),
	// then decode every record.
	body := b[BatchHeaderSize:h.Size()]
	raw, err := Decompress(h.Compression(), nil, body)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		raw, err = DecompressLimit(h.Compression(), nil, body, maxDecompressedSize)
	}
	if err != nil {
		t.Fatalf("append check accepted a batch that does not decompress: %v", err)
	}
	var r Record
	var n int32
	for pos := 0; pos < len(raw); n++ {
		size, err := decodeRecord(raw[pos:], &r)
		if err != nil || r.OffsetDelta != n {
			t.Fatalf("append check accepted record %d: delta %d, %v", n, r.OffsetDelta, err)
		}
		pos += size
	}
	if n != h.RecordCount {
		t.Fatalf("append check accepted %d records, header says %d", n, h.RecordCount)
	}
}

// FuzzRecords fuzzes the records area behind a valid header (the CRC is
// recomputed so the decoder, not the CRC check, sees the bytes), for every
// codec bit.
func FuzzRecords(f *testing.F) {
	fuzzLimits(f)
	f.Add(byte(0), int32(2), []byte{0x12, 0, 0, 0, 2, 0x6b, 0x31, 4, 0x76, 0x31, 0})
	f.Add(byte(1), int32(1), []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add(byte(2), int32(1), append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 1, 0))
	f.Fuzz(func(t *testing.T, codec byte, count int32, body []byte) {
		opts := BatchOptions{ProducerID: -1, BaseSequence: -1}
		b, _ := BuildBatch(opts, nil)
		b = append(b, body...)
		h, _ := ParseBatchHeader(b)
		h.BatchLength = int32(len(b) - batchLengthOverhead)
		h.Attributes = int16(codec % 5)
		h.RecordCount = count
		if count > 0 {
			h.LastOffsetDelta = count - 1
		}
		putHeader(b, &h)
		b[offCRC], b[offCRC+1], b[offCRC+2], b[offCRC+3] = 0, 0, 0, 0
		c := batchCRC(b)
		b[offCRC], b[offCRC+1], b[offCRC+2], b[offCRC+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		Records(b, func(h *BatchHeader, r *Record) error {
			if r.OffsetDelta > h.LastOffsetDelta {
				t.Fatalf("offset delta %d past %d", r.OffsetDelta, h.LastOffsetDelta)
			}
			return nil
		})
		if h.Compression() == CompressionNone {
			checkUncompressedRecords(&h, b)
		}
		if count > 0 {
			checkAppendAgrees(t, &h, b)
		}
	})
}

// FuzzConvertMessageSet: old-format message sets from outside.
func FuzzConvertMessageSet(f *testing.F) {
	addCapturedSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := ConvertMessageSet(data)
		if err != nil {
			return
		}
		if _, err := ValidateBatch(out); err != nil {
			t.Fatalf("converted batch invalid: %v", err)
		}
	})
}

// FuzzIndex reads arbitrary bytes as offset and time index files: loading
// and lookups never panic, and a log whose index is garbage still reads.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 100, 0, 0, 0, 9, 0, 0, 1, 0}, int64(3))
	f.Add(bytes.Repeat([]byte{0xff}, 24), int64(-1))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, target int64) {
		dir := t.TempDir()
		for _, es := range []int{offsetIndexEntry, timeIndexEntry} {
			p := filepath.Join(dir, "x.idx")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			ix, err := openIndex(p, 100, es)
			if err != nil {
				continue
			}
			if ix.entries()*es > len(data) {
				t.Fatalf("%d entries of %d bytes in %d bytes", ix.entries(), es, len(data))
			}
			if es == offsetIndexEntry {
				ix.lookupOffset(target, 1<<20)
				ix.lookupEnd(target, target)
			} else {
				ix.lookupTime(target)
				ix.lastTimeEntry()
			}
			ix.unmap()
		}
	})
}

// FuzzRecoverSegment loads arbitrary bytes as the last segment of a log
// after a crash: recovery never panics, keeps only whole valid batches, and
// the log takes appends afterwards.
func FuzzRecoverSegment(f *testing.F) {
	addCapturedSeeds(f)
	good, _ := BuildBatch(BatchOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: 1}, []Record{{Key: []byte("k"), Value: []byte("v")}})
	f.Add(append(append([]byte(nil), good...), good[:30]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		syncEnabled.Store(false)
		defer syncEnabled.Store(true)
		pdir := filepath.Join(t.TempDir(), "f-0")
		os.MkdirAll(pdir, 0o755)
		os.WriteFile(filepath.Join(pdir, offsetFileName(0, logSuffix)), data, 0o644)
		cfg := DefaultLogConfig()
		cfg.SegmentIndexBytes = 4096
		lc, _ := newLogConfig(cfg)
		// openLog directly (no manager, no background goroutines): the
		// same load and recovery, at a fuzzing pace.
		l, err := openLog(logLoad{dir: pdir, tp: TopicPartition{"f", 0}, cfg: lc,
			env:           &env{logger: testLogger(t), now: time.Now},
			recoveryPoint: -1, logStart: -1, hw: -1, firstDirty: -1})
		if err != nil {
			return // refused (old format): nothing was changed
		}
		defer l.close()
		size := l.active().size.Load()
		kept := data[:size]
		if err := ForEachBatch(kept, func(*BatchHeader, []byte) error { return nil }); err != nil {
			t.Fatalf("recovery kept invalid bytes: %v", err)
		}
		if _, err := l.AppendAsLeader(append([]byte(nil), good...), 0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

package record_test

import (
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// maxDecompressed is the decompression limit of a fuzz run: a fuzzer finds
// bombs fast, and expanding each to the real limit makes a run crawl.
var maxDecompressed int

// fuzzLimits lowers the decompression limit for a fuzz run.
func fuzzLimits(f *testing.F) { maxDecompressed = record.LowerDecompressLimit(f) }

func addCapturedSeeds(f *testing.F) {
	fuzzLimits(f)
	for _, b := range recordtest.Captures() {
		f.Add(b)
	}
}

// FuzzBatch feeds arbitrary bytes to the batch parser and record decoder
// (and to WholeBatches, what a follower keeps of a leader's answer): never a
// panic, and whatever validates decodes consistently.
func FuzzBatch(f *testing.F) {
	addCapturedSeeds(f)
	opts, recs := goldenInput()
	b, _ := record.BuildBatch(opts, recs)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		record.ParseBatchHeader(data)
		if out := record.WholeBatches(data); len(out) > len(data) {
			t.Fatal("WholeBatches grew its input")
		}
		record.ForEachBatch(data, func(h *record.BatchHeader, b []byte) error {
			return record.Records(b, func(*record.BatchHeader, *record.Record) error { return nil })
		})
		h, err := record.ValidateBatch(data)
		if err != nil {
			return
		}
		if h.Size() != len(data) {
			t.Fatalf("valid batch of %d bytes claims %d", len(data), h.Size())
		}
		var n int32
		if err := record.Records(data, func(*record.BatchHeader, *record.Record) error { n++; return nil }); err == nil && n != h.RecordCount {
			t.Fatalf("decoded %d records, header says %d", n, h.RecordCount)
		}
		checkAppendAgrees(t, &h, data)
	})
}

// checkAppendAgrees runs the append-time check of a compressed batch (the
// streaming one) and, when it accepts the batch, decodes it in full: the
// records must be there, as many as the header says, with deltas 0..n-1.
func checkAppendAgrees(t *testing.T, h *record.BatchHeader, b []byte) {
	if h.Compression() == record.CompressionNone || h.Compression() > record.CompressionZstd {
		return
	}
	if err := record.CheckCompressedRecords(h, b, false, int64(maxDecompressed)); err != nil {
		if !errors.Is(err, record.ErrInvalidRecord) {
			t.Fatalf("append check: %v, not record.ErrInvalidRecord", err)
		}
		return
	}
	// Decompress in one piece (DecodeAll for zstd, whose fuzz-sized
	// bound also refuses wider windows: those go through DecompressLimit),
	// then decode every record.
	body := b[record.BatchHeaderSize:h.Size()]
	raw, err := record.Decompress(h.Compression(), nil, body)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		raw, err = record.DecompressLimit(h.Compression(), nil, body, maxDecompressed)
	}
	if err != nil {
		t.Fatalf("append check accepted a batch that does not decompress: %v", err)
	}
	var r record.Record
	var n int32
	for pos := 0; pos < len(raw); n++ {
		size, err := record.DecodeRecord(raw[pos:], &r)
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
	f.Add(byte(2), int32(1), append(append([]byte(nil), record.XerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 1, 0))
	f.Fuzz(func(t *testing.T, codec byte, count int32, body []byte) {
		opts := record.BatchOptions{ProducerID: -1, BaseSequence: -1}
		b, _ := record.BuildBatch(opts, nil)
		b = append(b, body...)
		h, _ := record.ParseBatchHeader(b)
		h.BatchLength = int32(len(b) - record.BatchLengthOverhead)
		h.Attributes = int16(codec % 5)
		h.RecordCount = count
		if count > 0 {
			h.LastOffsetDelta = count - 1
		}
		record.PutHeader(b, &h)
		b[record.OffCRC], b[record.OffCRC+1], b[record.OffCRC+2], b[record.OffCRC+3] = 0, 0, 0, 0
		c := record.BatchCRC(b)
		b[record.OffCRC], b[record.OffCRC+1], b[record.OffCRC+2], b[record.OffCRC+3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		record.Records(b, func(h *record.BatchHeader, r *record.Record) error {
			if r.OffsetDelta > h.LastOffsetDelta {
				t.Fatalf("offset delta %d past %d", r.OffsetDelta, h.LastOffsetDelta)
			}
			return nil
		})
		if h.Compression() == record.CompressionNone {
			record.CheckUncompressedRecords(&h, b)
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
		out, err := record.ConvertMessageSet(data)
		if err != nil {
			return
		}
		if _, err := record.ValidateBatch(out); err != nil {
			t.Fatalf("converted batch invalid: %v", err)
		}
	})
}

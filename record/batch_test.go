package record_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// TestCapturedBatches decodes batches written by real clients (franz-go and
// kcat/librdkafka, every codec; see testdata/README.md). (storage's
// TestCapturedBatchesThroughLog appends them to a log.)
func TestCapturedBatches(t *testing.T) {
	for _, client := range []string{"franz-go", "kcat"} {
		for _, codec := range []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
			name := fmt.Sprintf("%s-%s", client, codec)
			t.Run(name, func(t *testing.T) {
				raw, err := os.ReadFile(filepath.Join("testdata", name+".bin"))
				if err != nil {
					t.Fatal(err)
				}
				h, err := record.ValidateBatch(raw)
				if err != nil {
					t.Fatalf("ValidateBatch: %v", err)
				}
				if h.Compression() != codec || h.RecordCount != 5 || h.LastOffsetDelta != 4 || h.Magic != 2 {
					t.Fatalf("header %+v", h)
				}
				if client == "franz-go" && (h.ProducerID < 0 || h.BaseSequence != 0) {
					t.Fatalf("franz-go batch should be idempotent: %+v", h)
				}
				var i int
				err = record.Records(raw, func(h *record.BatchHeader, r *record.Record) error {
					if got, want := string(r.Key), fmt.Sprintf("key-%d", i); got != want {
						return fmt.Errorf("record %d key %q, want %q", i, got, want)
					}
					if got := string(r.Value); got != recordtest.CapturedValue(i) {
						return fmt.Errorf("record %d value %q", i, got)
					}
					if r.OffsetDelta != int32(i) {
						return fmt.Errorf("record %d offset delta %d", i, r.OffsetDelta)
					}
					if client == "franz-go" && (len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != fmt.Sprint(i)) {
						return fmt.Errorf("record %d headers %+v", i, r.Headers)
					}
					i++
					return nil
				})
				if err != nil || i != 5 {
					t.Fatalf("Records: %v (%d records)", err, i)
				}
			})
		}
	}
}

// TestCapturedMessageSets converts v0/v1 message sets written by kcat
// (librdkafka told the broker is Kafka 0.9 / 0.10.0).
func TestCapturedMessageSets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		codec  record.Compression
		hasTS  bool
		legacy int8
	}{
		{"kcat-v0-none", record.CompressionNone, false, 0},
		{"kcat-v0-gzip", record.CompressionGzip, false, 0},
		{"kcat-v1-none", record.CompressionNone, true, 1},
		{"kcat-v1-snappy", record.CompressionSnappy, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tc.name+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			if raw[record.OffMagic] != byte(tc.legacy) || record.IsMessageSetV2(raw) {
				t.Fatalf("capture is not magic %d", tc.legacy)
			}
			if _, err := record.ValidateBatch(raw); !errors.Is(err, record.ErrUnsupportedMagic) {
				t.Fatalf("ValidateBatch of a v%d message set: %v", tc.legacy, err)
			}
			b, err := record.ConvertMessageSet(raw)
			if err != nil {
				t.Fatal(err)
			}
			h, err := record.ValidateBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Compression() != tc.codec || h.RecordCount != 5 || h.ProducerID != -1 {
				t.Fatalf("converted header %+v", h)
			}
			i := 0
			err = record.Records(b, func(h *record.BatchHeader, r *record.Record) error {
				if string(r.Key) != fmt.Sprintf("key-%d", i) || string(r.Value) != recordtest.CapturedValue(i) {
					return fmt.Errorf("record %d: %q=%q", i, r.Key, r.Value)
				}
				ts := h.BaseTimestamp + r.TimestampDelta
				if tc.hasTS != (ts > 1_600_000_000_000) {
					return fmt.Errorf("record %d timestamp %d", i, ts)
				}
				i++
				return nil
			})
			if err != nil || i != 5 {
				t.Fatalf("%v (%d records)", err, i)
			}
			// A flipped bit fails the v0/v1 CRC.
			bad := append([]byte(nil), raw...)
			bad[len(bad)-3] ^= 1
			if _, err := record.ConvertMessageSet(bad); !errors.Is(err, record.ErrCorruptBatch) {
				t.Fatalf("corrupt message set: %v", err)
			}
		})
	}
}

// goldenInput's BuildBatch output is checked in as testdata/golden-batch.hex
// so a change in the encoding is noticed; TestGoldenBatch also checks it
// against franz-go's kmsg encoder, an independent implementation.
func goldenInput() (record.BatchOptions, []record.Record) {
	return record.BatchOptions{BaseOffset: 42, PartitionLeaderEpoch: 5, Transactional: true,
			ProducerID: 7, ProducerEpoch: 3, BaseSequence: 10, BaseTimestamp: 1629212000256},
		[]record.Record{
			{Key: []byte("k1"), Value: []byte("v1")},
			{Key: []byte("k2"), Value: nil, TimestampDelta: 1000, OffsetDelta: 1,
				Headers: []record.Header{{Key: "h", Value: []byte("x")}}},
		}
}

func kmsgBatch(opts record.BatchOptions, recs []record.Record) []byte {
	var body []byte
	maxTS := opts.BaseTimestamp
	for i, r := range recs {
		kr := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // less the length varint (0: one byte)
		body = kr.AppendTo(body)
		maxTS = max(maxTS, opts.BaseTimestamp+r.TimestampDelta)
	}
	attrs := int16(opts.Compression)
	if opts.Transactional {
		attrs |= record.AttrTransactional
	}
	rb := kmsg.RecordBatch{FirstOffset: opts.BaseOffset, PartitionLeaderEpoch: opts.PartitionLeaderEpoch, Magic: 2,
		Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: opts.BaseTimestamp, MaxTimestamp: maxTS,
		ProducerID: opts.ProducerID, ProducerEpoch: opts.ProducerEpoch, FirstSequence: opts.BaseSequence,
		NumRecords: int32(len(recs)), Records: body}
	raw := rb.AppendTo(nil)
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func TestGoldenBatch(t *testing.T) {
	opts, recs := goldenInput()
	got, err := record.BuildBatch(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	if want := kmsgBatch(opts, recs); !bytes.Equal(got, want) {
		t.Fatalf("BuildBatch differs from kmsg:\n got %x\nwant %x", got, want)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "golden-batch.hex"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(golden)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("BuildBatch differs from testdata/golden-batch.hex:\n got %x\nwant %x", got, want)
	}
	h, err := record.ValidateBatch(got)
	if err != nil {
		t.Fatal(err)
	}
	wantH := record.BatchHeader{BaseOffset: 42, BatchLength: int32(len(got) - 12), PartitionLeaderEpoch: 5, Magic: 2,
		CRC: binary.BigEndian.Uint32(got[17:]), Attributes: record.AttrTransactional, LastOffsetDelta: 1,
		BaseTimestamp: 1629212000256, MaxTimestamp: 1629212001256, ProducerID: 7, ProducerEpoch: 3,
		BaseSequence: 10, RecordCount: 2}
	if h != wantH {
		t.Fatalf("header\n got %+v\nwant %+v", h, wantH)
	}
	if !h.Transactional() || h.Control() || h.LogAppendTime() || h.LastOffset() != 43 || h.Size() != len(got) || h.LastSequence() != 11 {
		t.Fatalf("header accessors wrong: %+v", h)
	}
	var n int
	err = record.Records(got, func(h *record.BatchHeader, r *record.Record) error {
		w := recs[n]
		if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) ||
			r.TimestampDelta != w.TimestampDelta || len(r.Headers) != len(w.Headers) {
			return fmt.Errorf("record %d = %+v, want %+v", n, r, w)
		}
		n++
		return nil
	})
	if err != nil || n != 2 {
		t.Fatal(err, n)
	}
}

func TestBatchErrors(t *testing.T) {
	good := recordtest.Batch(t, 3, 20, 1000, record.CompressionNone)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	recrc := func(b []byte) []byte { binary.BigEndian.PutUint32(b[record.OffCRC:], record.BatchCRC(b)); return b }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, record.ErrCorruptBatch},
		{"short header", good[:40], record.ErrCorruptBatch},
		{"truncated", good[:len(good)-1], record.ErrCorruptBatch},
		{"trailing byte", append(append([]byte(nil), good...), 0), record.ErrCorruptBatch},
		{"bad crc", mod(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), record.ErrCorruptBatch},
		{"magic 1", mod(func(b []byte) []byte { b[record.OffMagic] = 1; return b }), record.ErrUnsupportedMagic},
		{"length too small", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[record.OffBatchLength:], 10); return b }), record.ErrCorruptBatch},
		{"negative count", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[record.OffRecordCount:], 0xffffffff)
			return recrc(b)
		}), record.ErrInvalidRecord},
		{"codec 7", mod(func(b []byte) []byte { b[record.OffAttributes+1] |= 7; return recrc(b) }), record.ErrInvalidRecord},
	}
	for _, tc := range cases {
		if _, err := record.ValidateBatch(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: ValidateBatch error %v, want %v", tc.name, err, tc.want)
		}
	}
	// Record-level errors are found by Records.
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"count too high", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[record.OffRecordCount:], 4); return recrc(b) })},
		{"count too low", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[record.OffRecordCount:], 2); return recrc(b) })},
		{"garbled record", mod(func(b []byte) []byte { b[record.BatchHeaderSize] = 0x7f; return recrc(b) })},
		{"bad gzip", recrc(append(append([]byte(nil), good[:record.BatchHeaderSize]...), 1, 2, 3))},
	} {
		b := tc.b
		if tc.name == "bad gzip" {
			b[record.OffAttributes+1] = byte(record.CompressionGzip)
			binary.BigEndian.PutUint32(b[record.OffBatchLength:], uint32(len(b)-12))
			recrc(b)
		}
		if err := record.Records(b, func(*record.BatchHeader, *record.Record) error { return nil }); !errors.Is(err, record.ErrInvalidRecord) {
			t.Errorf("%s: Records error %v, want record.ErrInvalidRecord", tc.name, err)
		}
	}
	// ForEachBatch walks concatenated batches and rejects a torn tail.
	two := append(append([]byte(nil), good...), good...)
	n := 0
	if err := record.ForEachBatch(two, func(*record.BatchHeader, []byte) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("ForEachBatch: %v, %d", err, n)
	}
	if err := record.ForEachBatch(two[:len(two)-5], func(*record.BatchHeader, []byte) error { return nil }); !errors.Is(err, record.ErrCorruptBatch) {
		t.Fatalf("torn tail: %v", err)
	}
}

func TestCompressionRoundTrip(t *testing.T) {
	src := bytes.Repeat([]byte("sluice compression round trip "), 5000)
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		comp, err := record.Compress(c, []byte("prefix"), src)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !bytes.HasPrefix(comp, []byte("prefix")) {
			t.Fatalf("%s: Compress did not append", c)
		}
		out, err := record.Decompress(c, nil, comp[6:])
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: round trip failed: %v", c, err)
		}
		// Batches in every codec survive BuildBatch -> Records.
		b := recordtest.Batch(t, 50, 100, 1000, c)
		if err := record.Records(b, func(*record.BatchHeader, *record.Record) error { return nil }); err != nil {
			t.Fatalf("%s batch: %v", c, err)
		}
	}
	// Snappy framed by xerial (the Java producer) decodes too.
	framed := record.AppendXerial(nil, src)
	if !bytes.HasPrefix(framed, record.XerialMagic) {
		t.Fatal("no xerial magic")
	}
	out, err := record.Decompress(record.CompressionSnappy, nil, framed)
	if err != nil || !bytes.Equal(out, src) {
		t.Fatalf("xerial: %v", err)
	}
	if _, err := record.Decompress(record.CompressionSnappy, nil, framed[:len(framed)-3]); err == nil {
		t.Fatal("truncated xerial stream decoded")
	}
}

func TestWholeBatches(t *testing.T) {
	a, b := recordtest.Batch(t, 2, 10, 1000, record.CompressionNone), recordtest.Batch(t, 3, 10, 1000, record.CompressionNone)
	all := append(append([]byte{}, a...), b...)
	if got := record.WholeBatches(all); len(got) != len(all) {
		t.Fatalf("two whole batches: %d of %d bytes", len(got), len(all))
	}
	if got := record.WholeBatches(all[:len(a)+10]); len(got) != len(a) {
		t.Fatalf("a trailing partial batch must go: %d bytes, want %d", len(got), len(a))
	}
	if got := record.WholeBatches(all[:20]); len(got) != 0 {
		t.Fatalf("a partial header: %d bytes", len(got))
	}
}

package storage

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
)

// batchOfSize builds an uncompressed batch of about size bytes made of
// records with recordSize-byte values.
func batchOfSize(b testing.TB, size, recordSize int) []byte {
	n := size / (recordSize + 12)
	return recordtest.Batch(b, n, recordSize, time.Now().UnixMilli(), record.CompressionNone)
}

// BenchmarkAppend measures AppendAsLeader of 16 KiB batches into the page
// cache (no fsync: flush.messages is Kafka's default). Every 256 MiB the log
// is emptied outside the timer so the benchmark does not fill the disk. With
// the default segment.bytes (1 GiB) no segment rolls inside a window; the
// roll64MiB case rolls every 64 MiB, and each roll fsyncs the old segment in
// the background (as Kafka does), so it measures the disk more than the
// append path.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name       string
		recordSize int
		segment    int64
	}{
		{"record=100B", 100, 1 << 30},
		{"record=1KiB", 1024, 1 << 30},
		{"record=1KiB/roll64MiB", 1024, 64 << 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := openTestManager(b, b.TempDir(), nil)
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = c.segment
			l, err := m.GetOrCreateLog(TopicPartition{"bench", 0}, cfg)
			if err != nil {
				b.Fatal(err)
			}
			batch := batchOfSize(b, 16<<10, c.recordSize)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			var written int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.AppendAsLeader(batch, 0); err != nil {
					b.Fatal(err)
				}
				written += int64(len(batch))
				if written >= 256<<20 {
					b.StopTimer()
					if err := l.TruncateFullyAndStartAt(l.LogEndOffset()); err != nil {
						b.Fatal(err)
					}
					written = 0
					b.StartTimer()
				}
			}
		})
	}
}

// benchLog fills a log with n 16 KiB batches (1 KiB records) for the read
// and lookup benchmarks.
func benchLog(b *testing.B, n int) (*Manager, *Log) {
	syncEnabled.Store(false)
	b.Cleanup(func() { syncEnabled.Store(true) })
	m := openTestManager(b, b.TempDir(), nil)
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := m.GetOrCreateLog(TopicPartition{"bench-read", 0}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	batch := batchOfSize(b, 16<<10, 1024)
	for i := 0; i < n; i++ {
		if _, err := l.AppendAsLeader(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	return m, l
}

// BenchmarkReadRegion reads 1 MiB regions (a consumer fetch) at random
// offsets and sends them with sendfile to /dev/null and to a TCP socket.
func BenchmarkReadRegion(b *testing.B) {
	m, l := benchLog(b, 8192) // 128 MiB over two segments
	defer m.Close()
	leo := l.LogEndOffset()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, c)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for _, dst := range []struct {
		name string
		w    io.Writer
	}{{"devnull", devnull}, {"tcp", conn}} {
		b.Run(dst.name, func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ri, err := l.Read(rng.Int63n(leo-1000), 1<<20, leo, true)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ri.Region.WriteTo(dst.w); err != nil {
					b.Fatal(err)
				}
				ri.Release()
			}
		})
	}
}

// BenchmarkOffsetLookup is the offset index path of a fetch: binary search
// over the mapped index, then the header of the batch found.
func BenchmarkOffsetLookup(b *testing.B) {
	m, l := benchLog(b, 4096)
	defer m.Close()
	leo := l.LogEndOffset()
	s := l.segments()[0]
	f, err := s.acquire()
	if err != nil {
		b.Fatal(err)
	}
	defer s.release()
	rng := rand.New(rand.NewSource(1))
	targets := make([]int64, 1024)
	for i := range targets {
		targets[i] = rng.Int63n(min(leo, s.next.Load()))
	}
	var hb [record.BatchHeaderSize]byte
	var h record.BatchHeader
	size := s.size.Load()
	b.Run("index", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.withIndexes(func(oi, _ *index) { oi.lookupOffset(targets[i%len(targets)], size) })
		}
	})
	b.Run("index+header", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, found, err := s.translate(f, targets[i%len(targets)], size, hb[:], &h); err != nil || !found {
				b.Fatal(err, found)
			}
		}
	})
}

// BenchmarkTimestampLookup is ListOffsets by timestamp: time index, offset
// index, then the records of one batch.
func BenchmarkTimestampLookup(b *testing.B) {
	m, l := benchLog(b, 4096)
	defer m.Close()
	ts, _ := l.MaxTimestampAndOffset()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, found, err := l.OffsetForTimestamp(ts); err != nil || !found {
			b.Fatal(err, found)
		}
	}
}

// BenchmarkPwriteBaseline is the ceiling for BenchmarkAppend: plain 16 KiB
// pwrites into a fresh file (deleted every 256 MiB, like BenchmarkAppend),
// no validation, no index. Compare the two on the same machine at the same
// moment: on a shared machine both swing by 3x.
func BenchmarkPwriteBaseline(b *testing.B) {
	dir := b.TempDir()
	buf := make([]byte, 16<<10)
	n := 0
	create := func() *os.File {
		f, err := os.Create(fmt.Sprintf("%s/%d", dir, n))
		if err != nil {
			b.Fatal(err)
		}
		n++
		return f
	}
	f := create()
	defer func() { f.Close() }()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var pos int64
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(buf, pos); err != nil {
			b.Fatal(err)
		}
		pos += int64(len(buf))
		if pos >= 256<<20 {
			b.StopTimer()
			f.Close()
			os.Remove(f.Name())
			f = create()
			pos = 0
			b.StartTimer()
		}
	}
}

// BenchmarkAppendFsync: writers appending 10-record batches to one log with
// flush.messages=1, each returning once its batch is on disk. Group commit
// makes concurrent appends share an fsync (fsyncs/op below 1).
func BenchmarkAppendFsync(b *testing.B) {
	for _, writers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			m := openTestManager(b, b.TempDir(), nil)
			defer m.Close()
			cfg := DefaultLogConfig()
			cfg.FlushMessages = 1
			l, err := m.GetOrCreateLog(TopicPartition{"bench-fsync", 0}, cfg)
			if err != nil {
				b.Fatal(err)
			}
			batch := recordtest.Batch(b, 10, 100, time.Now().UnixMilli(), record.CompressionNone)
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for range writers {
				wg.Add(1)
				go func(buf []byte) {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := l.AppendAsLeader(buf, 0); err != nil {
							errs <- err
							return
						}
					}
				}(bytes.Clone(batch))
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(l.syncRounds.Load())/float64(b.N), "fsyncs/op")
		})
	}
}

// BenchmarkCheckRecords: the per-record structure check of an uncompressed
// producer batch (1,000 records of 100 B), done on every append.
func BenchmarkCheckRecords(b *testing.B) {
	batch := recordtest.Batch(b, 1000, 100, time.Now().UnixMilli(), record.CompressionNone)
	h, err := record.ParseBatchHeader(batch)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := record.CheckUncompressedRecords(&h, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
}

// textBatch builds a batch of n records of size bytes of text (words from a
// 4,096-word vocabulary, as `sluice perf --payload text`), compressed with c:
// it shrinks about as log lines do, so decompression does real work.
func textBatch(b testing.TB, n, size int, c record.Compression) []byte {
	rng := rand.New(rand.NewSource(1))
	words := make([][]byte, 4096)
	for i := range words {
		w := make([]byte, 3+rng.Intn(8))
		for j := range w {
			w[j] = byte('a' + rng.Intn(26))
		}
		words[i] = w
	}
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, 0, size+11)
		for len(v) < size {
			v = append(append(v, words[rng.Intn(len(words))]...), ' ')
		}
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("key-%d", i)), Value: v[:size]}
	}
	batch, err := record.BuildBatch(record.BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// BenchmarkAppendCompressed: AppendAsLeader of a compressed batch (256
// records of 1 KiB of text, ~256 KiB before compression), which checks
// every record by decompressing the batch as a stream; MB/s counts the
// uncompressed record bytes. BenchmarkCheckCompressed is the check alone:
// the difference is what the rest of the append costs.
func BenchmarkAppendCompressed(b *testing.B) {
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		b.Run(c.String(), func(b *testing.B) {
			m := openTestManager(b, b.TempDir(), nil)
			defer m.Close()
			l, err := m.GetOrCreateLog(TopicPartition{"bench", 0}, DefaultLogConfig())
			if err != nil {
				b.Fatal(err)
			}
			batch := textBatch(b, 256, 1024, c)
			b.SetBytes(256 * 1024)
			b.ReportAllocs()
			var written int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.AppendAsLeader(batch, 0); err != nil {
					b.Fatal(err)
				}
				if written += int64(len(batch)); written >= 256<<20 {
					b.StopTimer()
					if err := l.TruncateFullyAndStartAt(l.LogEndOffset()); err != nil {
						b.Fatal(err)
					}
					written = 0
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(len(batch)), "compressed-bytes/op")
		})
	}
}

func BenchmarkCheckCompressed(b *testing.B) {
	for _, c := range []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		b.Run(c.String(), func(b *testing.B) {
			batch := textBatch(b, 256, 1024, c)
			h, err := record.ParseBatchHeader(batch)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(256 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if err := record.CheckCompressedRecords(&h, batch, false, record.DefaultMaxDecompressedBatchBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

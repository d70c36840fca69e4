package testutil

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"time"

	"github.com/klauspost/compress/gzip"
)

// RawBatch wraps body as the records of a v2 record batch of count records
// with the given codec attribute (1 = gzip, ...), a valid header and CRC:
// what a hostile or broken producer can send.
func RawBatch(codec int16, count int32, body []byte) []byte {
	b := make([]byte, 61, 61+len(body))
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(body))) // batch length
	b[16] = 2                                               // magic
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	binary.BigEndian.PutUint32(b[23:], uint32(count-1)) // last offset delta
	ts := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint64(b[27:], ts)
	binary.BigEndian.PutUint64(b[35:], ts)
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)     // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], 0xffffffff) // base sequence -1
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// GzipBomb is a gzip record batch of one record whose value is size zero
// bytes, compressed as a stream (about size/1000 bytes: 200 MiB become
// ~204 KB), the decompression bomb of issue 13.
func GzipBomb(size int64) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	var rec []byte
	body := 1 + 1 + 1 + 1 + int64(len(binary.AppendVarint(nil, size))) + size + 1
	rec = binary.AppendVarint(rec, body) // record length
	rec = append(rec, 0, 0, 0, 1)        // attributes, timestamp delta, offset delta, null key
	rec = binary.AppendVarint(rec, size) // value length
	zw.Write(rec)
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zeros)) {
		zw.Write(zeros[:min(left, int64(len(zeros)))])
	}
	zw.Write([]byte{0}) // no headers
	zw.Close()
	return RawBatch(1, 1, out.Bytes())
}

// WatchHeap samples the Go heap every interval until the returned function
// is called, which returns the highest HeapAlloc seen above the one at the
// start (a test's bound on what an operation holds at once).
func WatchHeap(interval time.Duration) func() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	start := int64(ms.HeapAlloc)
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		var peak int64
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, int64(ms.HeapAlloc)-start)
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(stop); return <-done }
}

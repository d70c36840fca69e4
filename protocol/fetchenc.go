package protocol

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/metrics"
)

// The Fetch response is the one response kmsg cannot encode for us: its
// record bytes stay in the segment files and go to the socket by sendfile.
// fetchResponse holds the whole response as a list of topics and
// partitions; appendResponse appends the framing bytes of Fetch v4-v12 to the
// connection's write buffer and, at a partition's records field, writes the
// buffer and sends that partition's file region straight from the page cache
// with sendfile (small regions are copied into the buffer instead, so a
// consumer that keeps up gets its answer in one write: see
// copyRecordsBelow). The partitions and their records are broker.Fetch's
// result (broker.Records: protocol never sees the storage behind them). The
// encoding is checked against kmsg.FetchResponse.ReadFrom for every version
// in fetchenc_test.go.

type fetchResponse struct {
	version   int16
	throttle  int32
	errorCode int16
	sessionID int32
	// abortedEmpty: each partition's aborted transactions are an empty
	// array (read_committed), not null.
	abortedEmpty bool

	// req is the broker's fetch: its partitions, in the request's order,
	// carry their outcomes and records (file regions to release).
	req broker.FetchRequest
	// topics are the response's topics, each a run of consecutive
	// partitions of req.Partitions.
	topics []fetchTopic

	// The common fetch of one partition needs no allocation beyond the
	// response itself.
	onePartition [1]broker.FetchPartition
	oneTopic     [1]fetchTopic
}

type fetchTopic struct {
	name       string
	partitions int // how many of req.Partitions are this topic's, after the previous topic's
}

// reserve sizes the response for a request of topics and partitions.
func (f *fetchResponse) reserve(topics, partitions int) {
	f.req.Partitions = f.onePartition[:0]
	if partitions > 1 {
		f.req.Partitions = make([]broker.FetchPartition, 0, partitions)
	}
	f.topics = f.oneTopic[:0]
	if topics > 1 {
		f.topics = make([]fetchTopic, 0, topics)
	}
}

func (f *fetchResponse) flexible() bool { return f.version >= 12 }

// release frees every file region.
func (f *fetchResponse) release() { f.req.Release() }

// The encoding walks the response twice with the same code: once to count
// (counting) and once to append, so the frame size is exact.

// copyRecordsBelow is the largest records field copied into the response
// buffer instead of sent by sendfile. A consumer that keeps up fetches a few
// kilobytes at a time: copying them (from the segment's mapping, a memcpy
// from the page cache) lets the whole response go in one write, where
// sendfile costs a write for the framing before it, the sendfile and a write
// for what follows. Larger regions go by sendfile, with no copy in user
// space.
const copyRecordsBelow = 32 << 10

type fetchWriter struct {
	buf      []byte
	nc       net.Conn // nil: copy every region
	counting bool
	n        int64 // bytes counted or written
	err      error
	flex     bool
	// copyBelow is the smallest region sent on its own rather than copied
	// into buf: copyRecordsBelow when nc can sendfile, else (TLS: every
	// byte is copied and encrypted in user space anyway) maxWriteBuffer, so
	// that the records go out in few large writes.
	copyBelow int64
}

// newFetchWriter returns the writer of a response to nc.
func newFetchWriter(buf []byte, nc net.Conn, flex bool) fetchWriter {
	fw := fetchWriter{buf: buf, nc: nc, flex: flex, copyBelow: copyRecordsBelow}
	if _, ok := nc.(syscall.Conn); nc != nil && !ok {
		fw.copyBelow = maxWriteBuffer
	}
	return fw
}

// chunkWriter is a connection without sendfile (TLS) as the destination of
// a large file region: the region is read into a pooled buffer and written
// in chunks (io.Copy uses ReadFrom), instead of io.Copy allocating its own
// buffer for each region.
type chunkWriter struct{ w io.Writer }

func (c chunkWriter) Write(p []byte) (int, error) { return c.w.Write(p) }

// ReadFrom implements io.ReaderFrom.
func (c chunkWriter) ReadFrom(r io.Reader) (int64, error) {
	bp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(bp)
	buf := *bp
	var n int64
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if _, werr := c.w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// chunkBufs are chunkWriter's buffers (256 KiB: sixteen TLS records).
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (fw *fetchWriter) int16(v int16) {
	fw.n += 2
	if !fw.counting {
		fw.buf = binary.BigEndian.AppendUint16(fw.buf, uint16(v))
	}
}

func (fw *fetchWriter) int32(v int32) {
	fw.n += 4
	if !fw.counting {
		fw.buf = binary.BigEndian.AppendUint32(fw.buf, uint32(v))
	}
}

func (fw *fetchWriter) int64(v int64) {
	fw.n += 8
	if !fw.counting {
		fw.buf = binary.BigEndian.AppendUint64(fw.buf, uint64(v))
	}
}

func (fw *fetchWriter) uvarint(v uint64) {
	if fw.counting {
		n := int64(1)
		for v >= 0x80 {
			v >>= 7
			n++
		}
		fw.n += n
		return
	}
	l := len(fw.buf)
	fw.buf = binary.AppendUvarint(fw.buf, v)
	fw.n += int64(len(fw.buf) - l)
}

// arrayLen writes an array length: int32, or a compact uvarint(n+1).
func (fw *fetchWriter) arrayLen(n int) {
	if fw.flex {
		fw.uvarint(uint64(n) + 1)
	} else {
		fw.int32(int32(n))
	}
}

func (fw *fetchWriter) nullArrayLen() {
	if fw.flex {
		fw.uvarint(0)
	} else {
		fw.int32(-1)
	}
}

func (fw *fetchWriter) string(s string) {
	if fw.flex {
		fw.uvarint(uint64(len(s)) + 1)
	} else {
		fw.int16(int16(len(s)))
	}
	fw.n += int64(len(s))
	if !fw.counting {
		fw.buf = append(fw.buf, s...)
	}
}

// records writes the records field: its length, then the bytes: copied
// into the buffer when small (or in memory, or when there is no
// connection), else sent with sendfile after writing the buffer.
func (fw *fetchWriter) records(recs *broker.Records) {
	n := recs.Len()
	if fw.flex {
		fw.uvarint(uint64(n) + 1)
	} else {
		fw.int32(int32(n))
	}
	fw.n += n
	if fw.counting || fw.err != nil || n == 0 {
		return
	}
	if n < fw.copyBelow || fw.nc == nil || recs.InMemory() {
		// A response of many small regions goes out in pieces of about
		// maxWriteBuffer, not gathered whole (a fetch may be 50 MB).
		if fw.nc != nil && len(fw.buf)+int(n) > maxWriteBuffer {
			if _, fw.err = fw.nc.Write(fw.buf); fw.err != nil {
				return
			}
			fw.buf = fw.buf[:0]
		}
		l := len(fw.buf)
		fw.buf, fw.err = recs.AppendTo(fw.buf)
		if fw.err == nil && int64(len(fw.buf)-l) != n {
			fw.err = errShortRegion
		}
		return
	}
	if len(fw.buf) > 0 {
		if _, fw.err = fw.nc.Write(fw.buf); fw.err != nil {
			return
		}
		fw.buf = fw.buf[:0]
	}
	var m int64
	if fw.copyBelow > copyRecordsBelow {
		m, fw.err = recs.WriteTo(chunkWriter{fw.nc})
	} else {
		m, fw.err = recs.WriteTo(fw.nc)
	}
	if fw.err == nil && m != n {
		fw.err = errShortRegion
	}
}

type encodeError string

func (e encodeError) Error() string { return string(e) }

const errShortRegion = encodeError("fetch: file region shorter than announced")

// body walks the response body (everything after the response header).
func (f *fetchResponse) body(fw *fetchWriter) {
	v := f.version
	fw.int32(f.throttle)
	if v >= 7 {
		fw.int16(f.errorCode)
		fw.int32(f.sessionID)
	}
	fw.arrayLen(len(f.topics))
	parts := f.req.Partitions
	for i := range f.topics {
		t := &f.topics[i]
		fw.string(t.name)
		fw.arrayLen(t.partitions)
		for j := range parts[:t.partitions] {
			p := &parts[j]
			fw.int32(p.Partition)
			fw.int16(p.ErrorCode)
			fw.int64(p.HighWatermark)
			fw.int64(p.LastStableOffset)
			if v >= 5 {
				fw.int64(p.LogStartOffset)
			}
			if f.abortedEmpty {
				fw.arrayLen(0)
			} else {
				fw.nullArrayLen()
			}
			if v >= 11 {
				fw.int32(-1) // preferred read replica: none (no rack-aware reads)
			}
			fw.records(&p.Records)
			if fw.flex {
				var tags uint64
				if p.DivergingEpoch >= 0 {
					tags++
				}
				if p.LeaderID >= 0 {
					tags++
				}
				fw.uvarint(tags)
				if p.DivergingEpoch >= 0 {
					fw.uvarint(0)         // tag DivergingEpoch
					fw.uvarint(4 + 8 + 1) // size: epoch, end offset, empty tags
					fw.int32(p.DivergingEpoch)
					fw.int64(p.DivergingEndOffset)
					fw.uvarint(0)
				}
				if p.LeaderID >= 0 {
					fw.uvarint(1)         // tag CurrentLeader
					fw.uvarint(4 + 4 + 1) // size: leader id, leader epoch, empty tags
					fw.int32(p.LeaderID)
					fw.int32(p.LeaderEpoch)
					fw.uvarint(0)
				}
			}
		}
		parts = parts[t.partitions:]
		if fw.flex {
			fw.uvarint(0) // topic tags
		}
	}
	if fw.flex {
		fw.uvarint(0) // response tags
	}
}

// size is the length of the frame after its 4-byte size field.
func (f *fetchResponse) size() int64 {
	fw := fetchWriter{flex: f.flexible(), counting: true}
	f.body(&fw)
	n := fw.n + 4 // correlation id
	if kwire.ResponseHeaderTags(1, f.flexible()) {
		n++ // response header tags
	}
	return n
}

// appendResponse implements streamResponse.
func (f *fetchResponse) appendResponse(buf []byte, nc net.Conn, corr int32) ([]byte, error) {
	size := f.size()
	fw := newFetchWriter(buf, nc, f.flexible())
	fw.int32(int32(size))
	fw.int32(corr)
	if kwire.ResponseHeaderTags(1, fw.flex) {
		fw.uvarint(0)
	}
	f.body(&fw)
	return fw.buf, fw.err
}

// writeResponse writes the whole frame to w, or, with nc set, the parts to
// w and record regions too large to copy straight to nc (w is flushed
// before them).
func (f *fetchResponse) writeResponse(w *bufio.Writer, nc net.Conn, corr int32) error {
	if nc != nil {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	buf, err := f.appendResponse(nil, nc, corr)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// errorCodes implements streamResponse.
func (f *fetchResponse) errorCodes(mx *metrics.API) int16 {
	t := errTally{api: mx}
	t.add(f.errorCode)
	for i := range f.req.Partitions {
		t.add(f.req.Partitions[i].ErrorCode)
	}
	return t.first
}

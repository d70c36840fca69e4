package protocol

import (
	"bufio"
	"encoding/binary"
	"net"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/internal/kwire"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/storage"
)

// The Fetch response is the one response kmsg cannot encode for us: its
// record bytes stay in the segment files and go to the socket by sendfile.
// fetchResponse holds the whole response as a list of topics and
// partitions; appendResponse appends the framing bytes of Fetch v4-v12 to the
// connection's write buffer and, at a partition's records field, writes the
// buffer and sends that partition's file region straight from the page cache
// with sendfile (small regions are copied into the buffer instead, so a
// consumer that keeps up gets its answer in one write: see
// copyRecordsBelow). The encoding
// is checked against kmsg.FetchResponse.ReadFrom for every version in
// fetchenc_test.go.

type fetchResponse struct {
	version   int16
	throttle  int32
	errorCode int16
	sessionID int32
	topics    []fetchTopic
}

type fetchTopic struct {
	name       string
	partitions []fetchPartition
}

type fetchPartition struct {
	partition            int32
	errorCode            int16
	highWatermark        int64
	lastStableOffset     int64
	logStartOffset       int64
	abortedEmpty         bool // read_committed: an empty (not null) aborted transactions array
	preferredReadReplica int32

	// records: a file region (read, present when read.Region.File is set;
	// it must be released) or, for tests and errors, in-memory bytes.
	read    storage.ReadInfo
	records []byte
	// part is the partition read was read from, to count what is sent
	// (Partition.CountSent).
	part *broker.Partition

	// v12+ tagged fields; -1 means absent.
	divergingEpoch     int32
	divergingEndOffset int64
	currentLeaderID    int32
	currentLeaderEpoch int32
}

func newFetchPartition(p int32) fetchPartition {
	return fetchPartition{
		partition: p, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1,
		preferredReadReplica: -1,
		divergingEpoch:       -1, divergingEndOffset: -1,
		currentLeaderID: -1, currentLeaderEpoch: -1,
	}
}

func (p *fetchPartition) recordsLen() int64 {
	if p.read.Region.File != nil {
		return p.read.Region.Len
	}
	return int64(len(p.records))
}

func (f *fetchResponse) flexible() bool { return f.version >= 12 }

// release frees every file region.
func (f *fetchResponse) release() {
	for i := range f.topics {
		for j := range f.topics[i].partitions {
			p := &f.topics[i].partitions[j]
			if p.read.Region.File != nil {
				p.read.Release()
				p.read = storage.ReadInfo{}
			}
		}
	}
}

// countSent counts every region in the response as sent, to a consumer or
// to the follower replicaID (broker.Partition.CountSent).
func (f *fetchResponse) countSent(replicaID int32) {
	for i := range f.topics {
		for j := range f.topics[i].partitions {
			p := &f.topics[i].partitions[j]
			if p.part != nil && p.read.Region.File != nil {
				p.part.CountSent(&p.read, replicaID)
			}
		}
	}
}

// bytes is the number of record bytes in the response.
func (f *fetchResponse) bytes() int64 {
	var n int64
	for i := range f.topics {
		for j := range f.topics[i].partitions {
			n += f.topics[i].partitions[j].recordsLen()
		}
	}
	return n
}

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
}

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
// into the buffer when small (or when there is no connection), else sent
// with sendfile after writing the buffer.
func (fw *fetchWriter) records(p *fetchPartition) {
	n := p.recordsLen()
	if fw.flex {
		fw.uvarint(uint64(n) + 1)
	} else {
		fw.int32(int32(n))
	}
	fw.n += n
	if fw.counting || fw.err != nil || n == 0 {
		return
	}
	if p.read.Region.File == nil {
		fw.buf = append(fw.buf, p.records...)
		return
	}
	if n < copyRecordsBelow || fw.nc == nil {
		// A response of many small regions goes out in pieces of about
		// maxWriteBuffer, not gathered whole (a fetch may be 50 MB).
		if fw.nc != nil && len(fw.buf)+int(n) > maxWriteBuffer {
			if _, fw.err = fw.nc.Write(fw.buf); fw.err != nil {
				return
			}
			fw.buf = fw.buf[:0]
		}
		l := len(fw.buf)
		fw.buf, fw.err = p.read.AppendTo(fw.buf)
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
	m, fw.err = p.read.Region.WriteTo(fw.nc)
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
	for i := range f.topics {
		t := &f.topics[i]
		fw.string(t.name)
		fw.arrayLen(len(t.partitions))
		for j := range t.partitions {
			p := &t.partitions[j]
			fw.int32(p.partition)
			fw.int16(p.errorCode)
			fw.int64(p.highWatermark)
			fw.int64(p.lastStableOffset)
			if v >= 5 {
				fw.int64(p.logStartOffset)
			}
			if p.abortedEmpty {
				fw.arrayLen(0)
			} else {
				fw.nullArrayLen()
			}
			if v >= 11 {
				fw.int32(p.preferredReadReplica)
			}
			fw.records(p)
			if fw.flex {
				var tags uint64
				if p.divergingEpoch >= 0 {
					tags++
				}
				if p.currentLeaderID >= 0 {
					tags++
				}
				fw.uvarint(tags)
				if p.divergingEpoch >= 0 {
					fw.uvarint(0)         // tag DivergingEpoch
					fw.uvarint(4 + 8 + 1) // size: epoch, end offset, empty tags
					fw.int32(p.divergingEpoch)
					fw.int64(p.divergingEndOffset)
					fw.uvarint(0)
				}
				if p.currentLeaderID >= 0 {
					fw.uvarint(1)         // tag CurrentLeader
					fw.uvarint(4 + 4 + 1) // size: leader id, leader epoch, empty tags
					fw.int32(p.currentLeaderID)
					fw.int32(p.currentLeaderEpoch)
					fw.uvarint(0)
				}
			}
		}
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
	fw := fetchWriter{buf: buf, nc: nc, flex: f.flexible()}
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
	for i := range f.topics {
		for j := range f.topics[i].partitions {
			t.add(f.topics[i].partitions[j].errorCode)
		}
	}
	return t.first
}

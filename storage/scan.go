package storage

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

// batchScanner reads the batches of a segment file sequentially through a
// buffer, for recovery, compaction and producer-state rebuilds. It stops at
// the end or at the first batch that is torn or invalid, and says why.
type batchScanner struct {
	f        vfs.File
	pos, end int64
	buf      []byte
	bufStart int64 // file position of buf[0]
	validate bool  // check the CRC of every batch

	h     record.BatchHeader
	batch []byte // the current batch, valid until next
	err   error  // I/O error
	bad   error  // why the scan stopped before end (torn or corrupt batch)
}

const scanBufSize = 1 << 20

func newBatchScanner(f vfs.File, start, end int64, validate bool) *batchScanner {
	return &batchScanner{f: f, pos: start, end: end, validate: validate, bufStart: start}
}

// fill makes buf cover [pos, pos+n).
func (sc *batchScanner) fill(n int) bool {
	if sc.pos >= sc.bufStart && sc.pos+int64(n) <= sc.bufStart+int64(len(sc.buf)) {
		return true
	}
	want := max(n, scanBufSize)
	if int64(want) > sc.end-sc.pos {
		want = int(sc.end - sc.pos)
	}
	if cap(sc.buf) < want {
		sc.buf = make([]byte, want)
	}
	sc.buf = sc.buf[:want]
	m, err := sc.f.ReadAt(sc.buf, sc.pos)
	sc.buf = sc.buf[:m]
	sc.bufStart = sc.pos
	if m < n {
		if err != nil && err != io.EOF {
			sc.err = fmt.Errorf("read %s at %d: %w", sc.f.Name(), sc.pos, err)
		}
		return false
	}
	return true
}

// next advances to the next batch; false at the end or on a bad batch.
// pos is the position of the current batch until next is called again.
func (sc *batchScanner) next() bool {
	if sc.batch != nil {
		sc.pos += int64(len(sc.batch))
		sc.batch = nil
	}
	if sc.pos >= sc.end || sc.err != nil || sc.bad != nil {
		return false
	}
	if sc.end-sc.pos < record.BatchHeaderSize {
		sc.bad = fmt.Errorf("%w: torn batch: %d bytes left at position %d", record.ErrCorruptBatch, sc.end-sc.pos, sc.pos)
		return false
	}
	if !sc.fill(record.BatchHeaderSize) {
		if sc.err == nil {
			sc.bad = fmt.Errorf("%w: short read at %d", record.ErrCorruptBatch, sc.pos)
		}
		return false
	}
	off := int(sc.pos - sc.bufStart)
	length := int64(int32(binary.BigEndian.Uint32(sc.buf[off+record.OffBatchLength:])))
	if length < record.MinBatchLength {
		sc.bad = fmt.Errorf("%w: batch length %d at position %d", record.ErrCorruptBatch, length, sc.pos)
		return false
	}
	size := length + record.BatchLengthOverhead
	if size > sc.end-sc.pos {
		sc.bad = fmt.Errorf("%w: torn batch: needs %d bytes, %d left at position %d", record.ErrCorruptBatch, size, sc.end-sc.pos, sc.pos)
		return false
	}
	if !sc.fill(int(size)) {
		if sc.err == nil {
			sc.bad = fmt.Errorf("%w: short read at %d", record.ErrCorruptBatch, sc.pos)
		}
		return false
	}
	off = int(sc.pos - sc.bufStart)
	b := sc.buf[off : off+int(size)]
	var err error
	if sc.validate {
		err = record.ValidateBatchInto(b, &sc.h)
	} else {
		err = record.ParseBatchHeaderInto(b, &sc.h)
	}
	if err != nil {
		sc.bad = fmt.Errorf("batch at position %d: %w", sc.pos, err)
		return false
	}
	sc.batch = b
	return true
}

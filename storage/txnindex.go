package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sluice-io/sluice/storage/vfs"
)

// The transaction index: <base>.txnindex beside each segment, Kafka's
// TransactionIndex format. Every aborted transaction whose abort marker lies
// in the segment has one 34-byte big-endian entry, in the order the markers
// were written (ascending last offset):
//
//	version int16 (0), producer_id int64, first_offset int64,
//	last_offset int64 (the abort marker), last_stable_offset int64
//
// where last_stable_offset is the partition's last stable offset once the
// transaction ended (the first offset of the earliest transaction of
// another producer still open then, else the offset after the marker).
// Fetch with read_committed answers with the entries that overlap what it
// returns, so clients drop the aborted batches.
//
// Aborts are rare, so a segment keeps its entries in memory too (readers
// take them without a lock: the slice is swapped atomically); the file is
// the record on disk. Kafka creates the file when the first abort lands;
// Sluice creates it empty with each new segment, so that a missing file
// means it was lost (and is rebuilt from the log), not that the segment
// never saw an abort. An empty file is what Kafka reads as no aborts.

const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 2 + 8 + 8 + 8 + 8
	txnIndexVersion   = 0
)

// AbortedTxn is one entry of the transaction index: an aborted transaction.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64 // its first batch
	LastOffset       int64 // its abort marker
	LastStableOffset int64 // the partition's LSO once it ended
}

// appendAbortedTxn appends a's 34 bytes to dst.
func appendAbortedTxn(dst []byte, a AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStableOffset))
}

// errCorruptTxnIndex marks a .txnindex that cannot be read as Kafka's.
var errCorruptTxnIndex = errors.New("corrupt transaction index")

// DecodeTxnIndex reads the entries of a .txnindex file's bytes. A file whose
// size is not a multiple of 34, an entry of a version other than 0 (Kafka's
// reader refuses any other), or entries whose last offsets do not increase
// are corrupt. Exported for tools and the fuzz target.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%txnIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte entries", errCorruptTxnIndex, len(b), txnIndexEntrySize)
	}
	out := make([]AbortedTxn, 0, len(b)/txnIndexEntrySize)
	last := int64(-1)
	for e := b; len(e) > 0; e = e[txnIndexEntrySize:] {
		if v := int16(binary.BigEndian.Uint16(e)); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: entry %d has version %d", errCorruptTxnIndex, len(out), v)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		if a.LastOffset <= last || a.FirstOffset > a.LastOffset || a.FirstOffset < 0 {
			return nil, fmt.Errorf("%w: entry %d (first %d, last %d) after last offset %d", errCorruptTxnIndex, len(out), a.FirstOffset, a.LastOffset, last)
		}
		last = a.LastOffset
		out = append(out, a)
	}
	return out, nil
}

// txnIndex is one segment's transaction index. The writer (Log.mu) appends
// and truncates; readers load entries without a lock.
type txnIndex struct {
	mu      sync.Mutex // file writes
	fs      vfs.FS
	path    string
	base    int64 // the segment's base offset
	entries atomic.Pointer[[]AbortedTxn]
	dirty   bool // written since the last sync (mu)
	// rebuild: the file was missing or unreadable at load, or the segment
	// was recovered: its entries come from replaying the log (load only).
	rebuild bool
}

func newTxnIndex(fsys vfs.FS, path string, base int64) *txnIndex {
	x := &txnIndex{fs: fsys, path: path, base: base}
	x.entries.Store(&[]AbortedTxn{})
	return x
}

// load returns the entries (shared: do not modify).
func (x *txnIndex) load() []AbortedTxn { return *x.entries.Load() }

// create makes the file empty (a new segment).
func (x *txnIndex) create() error {
	f, err := x.fs.OpenFile(x.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// open reads the file. A missing or corrupt file is reported with
// rebuild set, and the entries left empty.
func (x *txnIndex) open() error {
	if st, err := x.fs.Stat(x.path); err == nil && st.Size() == 0 {
		return nil // most segments have no aborted transaction: no open, no read
	}
	b, err := vfs.ReadFile(x.fs, x.path)
	if err != nil {
		x.rebuild = true
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	es, err := DecodeTxnIndex(b)
	if err == nil && len(es) > 0 && es[0].LastOffset < x.base {
		// Kafka's sanityCheck: every marker lies in the segment.
		err = fmt.Errorf("%w: marker at %d below the segment's base offset %d", errCorruptTxnIndex, es[0].LastOffset, x.base)
	}
	if err != nil {
		x.rebuild = true
		return err
	}
	x.entries.Store(&es)
	return nil
}

// append adds an entry, in memory and to the file. A failed write removes
// the file, so that the next start rebuilds it from the log (the entry
// stays in memory meanwhile).
func (x *txnIndex) append(a AbortedTxn) error {
	cur := x.load()
	next := append(cur[:len(cur):len(cur)], a)
	x.entries.Store(&next)
	x.mu.Lock()
	defer x.mu.Unlock()
	var buf [txnIndexEntrySize]byte
	f, err := x.fs.OpenFile(x.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		_, err = f.Write(appendAbortedTxn(buf[:0], a))
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		x.fs.Remove(x.path)
		return fmt.Errorf("append to %s: %w", x.path, err)
	}
	x.dirty = true
	return nil
}

// replace sets the entries and rewrites the file (rebuilt or truncated).
// An empty file that is to stay empty is left alone: recovery rebuilds the
// index of every segment it reads, and most have no aborted transaction (a
// file lost after this is rebuilt again by the next load).
func (x *txnIndex) replace(es []AbortedTxn) error {
	x.entries.Store(&es)
	if len(es) == 0 {
		if st, err := x.fs.Stat(x.path); err == nil && st.Size() == 0 {
			x.mu.Lock()
			x.dirty = false
			x.mu.Unlock()
			return nil
		}
	}
	b := make([]byte, 0, len(es)*txnIndexEntrySize)
	for _, a := range es {
		b = appendAbortedTxn(b, a)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dirty = false
	return writeFileAtomic(x.fs, x.path, b)
}

// truncate drops the entries whose marker is at or after offset.
func (x *txnIndex) truncate(offset int64) error {
	es := x.load()
	n := len(es)
	for n > 0 && es[n-1].LastOffset >= offset {
		n--
	}
	if n == len(es) {
		return nil
	}
	return x.replace(append([]AbortedTxn(nil), es[:n]...))
}

// sync fsyncs the file when it was appended to since the last sync.
func (x *txnIndex) sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.dirty {
		return nil
	}
	f, err := x.fs.OpenFile(x.path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		x.dirty = false
		return nil
	}
	if err != nil {
		return err
	}
	err = errors.Join(fsyncFile(f), f.Close())
	if err == nil {
		x.dirty = false
	}
	return err
}

// collect appends to dst the entries that overlap [from, upTo): marker at
// or after from, first offset before upTo. done is true when an entry's
// last stable offset reached upTo: no later segment can hold one that
// overlaps (Kafka's TransactionIndex.collectAbortedTxns).
func collectAborted(es []AbortedTxn, from, upTo int64, dst []AbortedTxn) ([]AbortedTxn, bool) {
	for _, a := range es {
		if a.LastOffset >= from && a.FirstOffset < upTo {
			dst = append(dst, a)
		}
		if a.LastStableOffset >= upTo {
			return dst, true
		}
	}
	return dst, false
}

// readTxnIndexFile reads a .txnindex file (tools, tests).
func readTxnIndexFile(path string) ([]AbortedTxn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return DecodeTxnIndex(b)
}

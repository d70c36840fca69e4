package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
	"github.com/sluice-io/sluice/storage/vfs"
)

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
			ix, err := openIndex(vfs.Default, p, 100, es)
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
	for _, b := range recordtest.Captures() {
		f.Add(b)
	}
	good, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: 1}, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
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
			env:           &env{logger: testLogger(t), now: time.Now, fs: vfs.Default},
			recoveryPoint: -1, logStart: -1, hw: -1, firstDirty: -1})
		if err != nil {
			return // refused (old format): nothing was changed
		}
		defer l.close()
		size := l.active().size.Load()
		kept := data[:size]
		if err := record.ForEachBatch(kept, func(*record.BatchHeader, []byte) error { return nil }); err != nil {
			t.Fatalf("recovery kept invalid bytes: %v", err)
		}
		if _, err := l.AppendAsLeader(append([]byte(nil), good...), 0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// FuzzTxnIndex feeds arbitrary bytes to the .txnindex decoder (the files
// are read at every start, and may come from Kafka or a damaged disk):
// never a panic, and what decodes is encoded back to the same bytes.
func FuzzTxnIndex(f *testing.F) {
	var b []byte
	for _, a := range []AbortedTxn{{1000, 0, 5, 6}, {1001, 3, 9, 10}, {7, 11, 1 << 40, 1<<40 + 1}} {
		b = appendAbortedTxn(b, a)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Add(b[:34])
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := DecodeTxnIndex(data)
		if err != nil {
			return
		}
		var again []byte
		for _, a := range es {
			again = appendAbortedTxn(again, a)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded %d entries that encode to other bytes", len(es))
		}
		got, _ := collectAborted(es, 0, 1<<62, nil)
		if len(got) > len(es) {
			t.Fatal("collected more entries than there are")
		}
	})
}

package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
)

// txnBatch is n records of a transactional producer.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte("txn")}
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		Transactional: true, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func plainBatch(t testing.TB, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte("plain")}
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marker(pid int64, epoch int16, coordEpoch int32, commit bool) []byte {
	return record.AppendEndTxnMarker(nil, record.EndTxnMarker{ProducerID: pid, ProducerEpoch: epoch,
		CoordinatorEpoch: coordEpoch, Commit: commit}, time.Now().UnixMilli())
}

func appendMarker(t testing.TB, l *Log, pid int64, epoch int16, coordEpoch int32, commit bool) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeaderWith(marker(pid, epoch, coordEpoch, commit), 0, AppendOptions{Origin: OriginCoordinator})
	if err != nil {
		t.Fatalf("marker for %d: %v", pid, err)
	}
	return info
}

// hwToEnd moves the high watermark to the log end (a single replica).
func hwToEnd(l *Log) { l.SetHighWatermark(l.LogEndOffset()) }

func TestTransactionHoldsLastStableOffset(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, _ := m.GetOrCreateLog(TopicPartition{"txn", 0}, DefaultLogConfig())
	mustAppend(t, l, plainBatch(t, 2)) // 0-1
	hwToEnd(l)
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("LSO without transactions %d, want the high watermark 2", got)
	}
	first := mustAppend(t, l, txnBatch(t, 10, 0, 0, 3)) // 2-4, producer 10 opens at 2
	mustAppend(t, l, plainBatch(t, 1))                  // 5
	mustAppend(t, l, txnBatch(t, 11, 0, 0, 1))          // 6, producer 11 opens at 6
	mustAppend(t, l, txnBatch(t, 10, 0, 3, 1))          // 7
	hwToEnd(l)
	if l.HighWatermark() != 8 || l.LastStableOffset() != first.FirstOffset {
		t.Fatalf("hw %d LSO %d, want 8 and 2", l.HighWatermark(), l.LastStableOffset())
	}
	// The commit marker ends producer 10's transaction; 11's still holds.
	c := appendMarker(t, l, 10, 0, 0, true) // 8
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("LSO %d before the high watermark passed the marker, want 2", got)
	}
	hwToEnd(l)
	if got := l.LastStableOffset(); got != 6 {
		t.Fatalf("LSO %d after the commit, want 6 (producer 11's transaction)", got)
	}
	// Abort 11: the LSO reaches the high watermark and an index entry is
	// written into the segment holding the marker.
	a := appendMarker(t, l, 11, 0, 0, false) // 9
	hwToEnd(l)
	if got := l.LastStableOffset(); got != 10 {
		t.Fatalf("LSO %d after both ended, want 10", got)
	}
	want := []AbortedTxn{{ProducerID: 11, FirstOffset: 6, LastOffset: a.FirstOffset, LastStableOffset: 10}}
	if got := l.AbortedTransactions(0, 10); !equalAborted(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	// Ranges that do not overlap it: the fetch started after its marker,
	// or ends before its first offset.
	if got := l.AbortedTransactions(10, 10); len(got) != 0 {
		t.Fatalf("aborted from 10: %+v", got)
	}
	if got := l.AbortedTransactions(0, 6); len(got) != 0 {
		t.Fatalf("aborted up to 6: %+v", got)
	}
	_ = c
	// The file is Kafka's: 34 bytes, version 0.
	b, err := os.ReadFile(filepath.Join(l.Dir(), offsetFileName(0, txnIndexSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := make([]byte, 0, 34)
	wantBytes = binary.BigEndian.AppendUint16(wantBytes, 0)
	for _, v := range []int64{11, 6, 9, 10} {
		wantBytes = binary.BigEndian.AppendUint64(wantBytes, uint64(v))
	}
	if !bytes.Equal(b, wantBytes) {
		t.Fatalf(".txnindex %x, want %x", b, wantBytes)
	}
	// Producer state: DescribeProducers' fields.
	p, ok := l.ProducerState(11)
	if !ok || p.CurrentTxnStartOffset != -1 || p.CoordinatorEpoch != 0 {
		t.Fatalf("producer 11 %+v", p)
	}
}

func equalAborted(a, b []AbortedTxn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTransactionAppendChecks(t *testing.T) {
	noSync(t)
	m := openTestManager(t, t.TempDir(), nil)
	defer m.Close()
	l, _ := m.GetOrCreateLog(TopicPartition{"txn", 0}, DefaultLogConfig())
	// Clients may not write control batches.
	if _, err := l.AppendAsLeader(marker(5, 0, 0, true), 0); !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("client marker: %v", err)
	}
	mustAppend(t, l, txnBatch(t, 5, 0, 0, 1))
	// A non-transactional batch while the transaction is open.
	if _, err := l.AppendAsLeader(producerBatch(t, 5, 0, 1, 1), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("plain batch in a transaction: %v", err)
	}
	// A marker from an older coordinator is fenced once a newer one wrote.
	appendMarker(t, l, 5, 0, 3, true)
	if _, err := l.AppendAsLeaderWith(marker(5, 0, 2, false), 0, AppendOptions{Origin: OriginCoordinator}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator: %v", err)
	}
	// A marker for nothing open is appended and changes nothing.
	end := l.LogEndOffset()
	appendMarker(t, l, 5, 0, 3, true)
	if l.LogEndOffset() != end+1 || l.aborted.Load() != 0 {
		t.Fatalf("duplicate marker: log end %d, aborted %d", l.LogEndOffset(), l.aborted.Load())
	}
	// A newer epoch on a marker is adopted: the fence reaches the
	// partition, and the old epoch's batches are refused.
	mustAppend(t, l, txnBatch(t, 5, 0, 1, 1))
	appendMarker(t, l, 5, 1, 3, false)
	if _, err := l.AppendAsLeader(txnBatch(t, 5, 0, 2, 1), 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	if _, err := l.AppendAsLeaderWith(marker(5, 0, 3, false), 0, AppendOptions{Origin: OriginCoordinator}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker at an older epoch: %v", err)
	}
	// The coordinator's transactional offset commits all start at
	// sequence 0: accepted, each appended.
	for i := 0; i < 3; i++ {
		info, err := l.AppendAsLeaderWith(txnBatch(t, 6, 0, 0, 1), 0, AppendOptions{Origin: OriginCoordinator})
		if err != nil || info.FirstOffset != l.LogEndOffset()-1 {
			t.Fatalf("coordinator batch %d: %+v %v", i, info, err)
		}
	}
}

func TestTransactionsSurviveRestart(t *testing.T) {
	noSync(t)
	for _, tc := range []struct {
		name  string
		crash bool // copy the files of a live log (kill -9) instead of closing it
		del   []string
	}{
		{name: "clean"},
		{name: "kill -9", crash: true},
		{name: "txnindex deleted", del: []string{txnIndexSuffix}},
		{name: "txnindex and snapshots deleted", del: []string{txnIndexSuffix, snapshotSuffix}},
		{name: "kill -9, txnindex and snapshots deleted", crash: true, del: []string{txnIndexSuffix, snapshotSuffix}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := openTestManager(t, dir, nil)
			cfg := DefaultLogConfig()
			cfg.SegmentBytes = 400 // several segments
			tp := TopicPartition{"txn", 0}
			l, _ := m.GetOrCreateLog(tp, cfg)
			mustAppend(t, l, txnBatch(t, 1, 0, 0, 2)) // aborted below
			mustAppend(t, l, txnBatch(t, 2, 0, 0, 2)) // still open at the end
			for i := 0; i < 6; i++ {
				mustAppend(t, l, plainBatch(t, 3))
			}
			mustAppend(t, l, txnBatch(t, 1, 0, 2, 1))
			ab := appendMarker(t, l, 1, 0, 4, false)
			mustAppend(t, l, txnBatch(t, 3, 0, 0, 1))
			appendMarker(t, l, 3, 0, 4, true)
			for i := 0; i < 4; i++ {
				mustAppend(t, l, plainBatch(t, 3))
			}
			hwToEnd(l)
			if l.NumSegments() < 3 {
				t.Fatalf("want several segments, have %d", l.NumSegments())
			}
			wantAborted := l.AbortedTransactions(0, l.LogEndOffset())
			if len(wantAborted) != 1 || wantAborted[0].LastOffset != ab.FirstOffset || wantAborted[0].FirstOffset != 0 {
				t.Fatalf("aborted before restart %+v", wantAborted)
			}
			lso, leo := l.LastStableOffset(), l.LogEndOffset()
			if lso != 2 {
				t.Fatalf("LSO %d, want 2 (producer 2's open transaction)", lso)
			}
			src := dir
			if tc.crash {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				src = t.TempDir()
				copyDir(t, dir, src)
				os.Remove(filepath.Join(src, cleanShutdownFile))
				m.Close()
			} else {
				m.Close()
			}
			for _, suf := range tc.del {
				files, _ := filepath.Glob(filepath.Join(src, tp.String(), "*"+suf))
				if len(files) == 0 {
					t.Fatalf("no %s files to delete", suf)
				}
				for _, f := range files {
					os.Remove(f)
				}
			}
			m2 := openTestManager(t, src, nil)
			defer m2.Close()
			l2, ok := m2.Log(tp)
			if !ok {
				t.Fatal("log gone")
			}
			if l2.LogEndOffset() != leo {
				t.Fatalf("log end %d after restart, want %d", l2.LogEndOffset(), leo)
			}
			hwToEnd(l2)
			if got := l2.LastStableOffset(); got != lso {
				t.Fatalf("LSO %d after restart, want %d: the open transaction was lost", got, lso)
			}
			if got := l2.AbortedTransactions(0, leo); !equalAborted(got, wantAborted) {
				t.Fatalf("aborted after restart %+v, want %+v", got, wantAborted)
			}
			p, _ := l2.ProducerState(2)
			if p.CurrentTxnStartOffset != 2 {
				t.Fatalf("producer 2 after restart %+v", p)
			}
			// Every segment has its .txnindex again.
			logs, _ := filepath.Glob(filepath.Join(src, tp.String(), "*.log"))
			idx, _ := filepath.Glob(filepath.Join(src, tp.String(), "*.txnindex"))
			if len(idx) != len(logs) {
				t.Fatalf("%d .txnindex files for %d segments", len(idx), len(logs))
			}
			// Ending the restored transaction moves the LSO on.
			appendMarker(t, l2, 2, 0, 4, true)
			hwToEnd(l2)
			if got := l2.LastStableOffset(); got != l2.LogEndOffset() {
				t.Fatalf("LSO %d after the restored transaction committed, want %d", got, l2.LogEndOffset())
			}
		})
	}
}

func TestTransactionIndexTruncatedAndDeleted(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 300
	l, _ := m.GetOrCreateLog(TopicPartition{"txn", 0}, cfg)
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 1))
	a := appendMarker(t, l, 1, 0, 0, false)
	mustAppend(t, l, txnBatch(t, 1, 0, 1, 1))
	b := appendMarker(t, l, 1, 0, 0, false)
	for i := 0; i < 6; i++ {
		mustAppend(t, l, plainBatch(t, 3))
	}
	hwToEnd(l)
	if n := len(l.AbortedTransactions(0, l.LogEndOffset())); n != 2 {
		t.Fatalf("%d aborted", n)
	}
	// A follower truncating below the second abort loses its entry, and
	// the producer's transaction is open again.
	if err := l.Truncate(b.FirstOffset); err != nil {
		t.Fatal(err)
	}
	got := l.AbortedTransactions(0, l.LogEndOffset())
	if len(got) != 1 || got[0].LastOffset != a.FirstOffset {
		t.Fatalf("after truncation %+v", got)
	}
	if p, _ := l.ProducerState(1); p.CurrentTxnStartOffset != a.FirstOffset+1 {
		t.Fatalf("producer after truncation %+v", p)
	}
	// Retention deletes a segment's .txnindex with it.
	for i := 0; i < 8; i++ {
		mustAppend(t, l, plainBatch(t, 3))
	}
	hwToEnd(l)
	before, _ := filepath.Glob(filepath.Join(l.Dir(), "*.txnindex"))
	if _, err := l.DeleteRecordsBefore(l.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(l.Dir(), "*.txnindex"))
	logs, _ := filepath.Glob(filepath.Join(l.Dir(), "*.log"))
	if len(after) >= len(before) || len(after) != len(logs) {
		t.Fatalf(".txnindex files %d before, %d after, %d segments", len(before), len(after), len(logs))
	}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); len(got) != 0 {
		t.Fatalf("aborted after their segments went: %+v", got)
	}
}

func TestDecodeTxnIndex(t *testing.T) {
	var b []byte
	for _, a := range []AbortedTxn{{1, 0, 5, 6}, {2, 3, 9, 10}} {
		b = appendAbortedTxn(b, a)
	}
	got, err := DecodeTxnIndex(b)
	if err != nil || len(got) != 2 || got[1] != (AbortedTxn{2, 3, 9, 10}) {
		t.Fatalf("%+v %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"short":      b[:33],
		"version 1":  append([]byte{0, 1}, b[2:34]...),
		"decreasing": append(append([]byte{}, b[34:]...), b[:34]...),
		"first>last": appendAbortedTxn(nil, AbortedTxn{1, 9, 5, 6}),
	} {
		if _, err := DecodeTxnIndex(bad); err == nil || !strings.Contains(err.Error(), "corrupt transaction index") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// keyedTxnBatch is a transactional batch of producer pid with the given
// key=value records.
func keyedTxnBatch(t testing.TB, pid int64, seq int32, kv ...string) []byte {
	t.Helper()
	var recs []record.Record
	for i := 0; i+1 < len(kv); i += 2 {
		recs = append(recs, record.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq,
		Transactional: true, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCleanerTransactions(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	m := openTestManager(t, t.TempDir(), clock)
	defer m.Close()
	cfg := compactConfig()
	cfg.SegmentBytes = 500
	l, _ := m.GetOrCreateLog(TopicPartition{"compacted", 0}, cfg)
	// Committed a=1, b=1 by producer 1; producer 2 writes a=2 and aborts:
	// a stays 1. Producer 3 commits c=3.
	mustAppend(t, l, keyedTxnBatch(t, 1, 0, "a", "1", "b", "1"))
	appendMarker(t, l, 1, 0, 0, true)
	mustAppend(t, l, keyedTxnBatch(t, 2, 0, "a", "2"))
	abortAt := appendMarker(t, l, 2, 0, 0, false)
	mustAppend(t, l, keyedTxnBatch(t, 3, 0, "c", "3"))
	appendMarker(t, l, 3, 0, 0, true)
	// Producer 2 goes on: its aborted batch is no longer the one that
	// keeps its sequence, so nothing of it needs to stay (Kafka keeps a
	// producer's last batch, emptied, and with it that batch's marker).
	mustAppend(t, l, keyedTxnBatch(t, 2, 1, "e", "2"))
	appendMarker(t, l, 2, 0, 0, true)
	// Producer 4 leaves a transaction open: nothing from its first offset
	// on may be cleaned.
	open := mustAppend(t, l, keyedTxnBatch(t, 4, 0, "d", "4"))
	for i := 0; i < 12; i++ {
		mustAppend(t, l, keyedTxnBatch(t, 5, int32(i), fmt.Sprintf("x%d", i), "v"))
		appendMarker(t, l, 5, 0, 0, true)
	}
	hwToEnd(l)
	if l.NumSegments() < 3 {
		t.Fatalf("segments %d", l.NumSegments())
	}
	res, err := l.Clean(true)
	if err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	if res.EndDirty > open.FirstOffset {
		t.Fatalf("cleaned up to %d, past the open transaction at %d", res.EndDirty, open.FirstOffset)
	}
	values := map[string]string{}
	for _, r := range readAllRecords(t, l, 0) {
		if r.Offset >= open.FirstOffset {
			break
		}
		if r.Key == "a" && string(r.Value) == "2" {
			t.Fatal("the aborted a=2 survived cleaning")
		}
		values[r.Key] = string(r.Value)
	}
	if values["a"] != "1" || values["b"] != "1" || values["c"] != "3" {
		t.Fatalf("after cleaning %v: the aborted write shadowed the committed one", values)
	}
	// Its abort marker stays this time (its data was just removed), indexed
	// in the cleaned segment.
	if got := l.AbortedTransactions(0, open.FirstOffset); len(got) != 1 || got[0].LastOffset != abortAt.FirstOffset {
		t.Fatalf("aborted after the first cleaning %+v", got)
	}
	// The next cleaning finds no data of it: the marker is stamped with a
	// delete horizon, and after delete.retention.ms it goes.
	if _, err := l.Clean(true); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Duration(cfg.DeleteRetentionMs+1) * time.Millisecond)
	if _, err := l.Clean(true); err != nil {
		t.Fatal(err)
	}
	if got := l.AbortedTransactions(0, open.FirstOffset); len(got) != 0 {
		t.Fatalf("aborted after the marker went %+v", got)
	}
	markers := 0
	for _, s := range l.segments() {
		if s.base >= open.FirstOffset {
			break
		}
		l.scanSegment(s, func(h *record.BatchHeader, b []byte) error {
			if m, ok, _ := record.ParseEndTxnMarker(h, b); h.Control() && ok && !m.Commit && h.ProducerID == 2 {
				markers++
			}
			return nil
		})
	}
	if markers != 0 {
		t.Fatalf("%d abort markers of producer 2 left after their delete horizon", markers)
	}
	// The open transaction is untouched and still holds the LSO.
	if l.LastStableOffset() != open.FirstOffset {
		t.Fatalf("LSO %d, want %d", l.LastStableOffset(), open.FirstOffset)
	}
}

package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage/vfs"
)

func producerBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte("v")}
	}
	b, err := record.BuildBatch(record.BatchOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: time.Now().UnixMilli()}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIdempotentProducer(t *testing.T) {
	noSync(t)
	dir := t.TempDir()
	m := openTestManager(t, dir, nil)
	tp := TopicPartition{"idempotent", 0}
	l, _ := m.GetOrCreateLog(tp, DefaultLogConfig())
	const pid = 77
	var first []AppendInfo
	for i := 0; i < 7; i++ {
		first = append(first, mustAppend(t, l, producerBatch(t, pid, 0, int32(3*i), 3)))
	}
	// Retries of the last 5 batches are duplicates with their offsets.
	for i := 2; i < 7; i++ {
		info, err := l.AppendAsLeader(producerBatch(t, pid, 0, int32(3*i), 3), 0)
		if !errors.Is(err, ErrDuplicateSequence) || info.FirstOffset != first[i].FirstOffset || info.LastOffset != first[i].LastOffset {
			t.Fatalf("retry of batch %d: %+v %v (first %+v)", i, info, err, first[i])
		}
	}
	end := l.LogEndOffset()
	if end != 21 {
		t.Fatalf("duplicates were appended: log end %d", end)
	}
	cases := []struct {
		name  string
		epoch int16
		seq   int32
		want  error
	}{
		{"older than the last 5", 0, 3, ErrOutOfOrderSequence},
		{"gap", 0, 22, ErrOutOfOrderSequence},
		{"new epoch must start at 0", 1, 5, ErrOutOfOrderSequence},
	}
	for _, c := range cases {
		if _, err := l.AppendAsLeader(producerBatch(t, pid, c.epoch, c.seq, 1), 0); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	mustAppend(t, l, producerBatch(t, pid, 0, 21, 2))
	mustAppend(t, l, producerBatch(t, pid, 1, 0, 2)) // epoch bump
	if _, err := l.AppendAsLeader(producerBatch(t, pid, 0, 23, 1), 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch after bump: %v", err)
	}
	// A batch in the middle of a multi-batch append is checked against the
	// batches before it.
	two := append(producerBatch(t, pid, 1, 2, 1), producerBatch(t, pid, 1, 4, 1)...)
	if _, err := l.AppendAsLeader(two, 0); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap inside one append: %v", err)
	}
	two = append(producerBatch(t, pid, 1, 2, 1), producerBatch(t, pid, 1, 3, 1)...)
	mustAppend(t, l, two)
	// A new producer may start at any sequence (its state may have expired).
	mustAppend(t, l, producerBatch(t, 99, 4, 1000, 1))
	want, _ := l.ProducerState(pid)
	if want.Epoch != 1 || want.LastSequence != 3 {
		t.Fatalf("producer state %+v", want)
	}

	// After a clean restart (snapshot at the log end) duplicates are still
	// found, for all 5 remembered batches.
	last := l.LogEndOffset()
	m.Close()
	snap := filepath.Join(dir, tp.String(), offsetFileName(last, snapshotSuffix))
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no producer snapshot at the log end: %v", err)
	}
	m = openTestManager(t, dir, nil)
	l, _ = m.Log(tp)
	if got, _ := l.ProducerState(pid); got != want {
		t.Fatalf("after restart %+v, want %+v", got, want)
	}
	if _, err := l.AppendAsLeader(producerBatch(t, pid, 1, 0, 2), 0); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("duplicate after restart: %v", err)
	}
	m.Close()

	// After a crash without any snapshot the state is rebuilt from the log.
	simulateCrash(t, dir)
	os.Remove(snap)
	m = openTestManager(t, dir, nil)
	defer m.Close()
	l, _ = m.Log(tp)
	if got, _ := l.ProducerState(pid); got.Epoch != want.Epoch || got.LastSequence != want.LastSequence || got.LastOffset != want.LastOffset {
		t.Fatalf("rebuilt %+v, want %+v", got, want)
	}
	if _, err := l.AppendAsLeader(producerBatch(t, pid, 1, 2, 1), 0); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("duplicate after rebuild: %v", err)
	}
	if len(l.Producers()) != 2 {
		t.Fatalf("producers %+v", l.Producers())
	}
}

// TestProducerSnapshotFormat reads a snapshot back as Kafka's format defines
// it: version 1, CRC-32C, 46-byte entries.
func TestProducerSnapshotFormat(t *testing.T) {
	dir := t.TempDir()
	ps := newProducerStates(vfs.Default, dir)
	h := record.BatchHeader{ProducerID: 5, ProducerEpoch: 2, BaseSequence: 10, LastOffsetDelta: 4, BaseOffset: 100, MaxTimestamp: 1234}
	ps.update(&h)
	if err := ps.writeSnapshot(105); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "00000000000000000105.snapshot"))
	if len(b) != snapshotHeader+snapshotEntrySize || b[1] != 1 {
		t.Fatalf("snapshot %x", b)
	}
	ps2 := newProducerStates(vfs.Default, dir)
	if off := ps2.loadLatest(200, func(string, error) {}); off != 105 {
		t.Fatalf("loaded %d", off)
	}
	e := ps2.producers[5].entry()
	if e.Epoch != 2 || e.LastSequence != 14 || e.LastOffset != 104 || e.LastTimestamp != 1234 {
		t.Fatalf("entry %+v", e)
	}
	b[len(b)-1] ^= 1
	os.WriteFile(filepath.Join(dir, "00000000000000000105.snapshot"), b, 0o644)
	if off := newProducerStates(vfs.Default, dir).loadLatest(200, func(string, error) {}); off != -1 {
		t.Fatal("corrupt snapshot accepted")
	}
}

package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/record/recordtest"
	"github.com/sluice-io/sluice/storage/vfs"
)

type modelEntry struct {
	offset int64
	value  []byte // nil = tombstone
}

func compactConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.Cleanup = "compact"
	cfg.SegmentBytes = 2048
	cfg.SegmentIndexBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.DeleteRetentionMs = time.Hour.Milliseconds()
	return cfg
}

// appendRandom appends n batches of random puts and deletes over nKeys keys
// and records them in the model.
func appendRandom(t *testing.T, l *Log, rng *rand.Rand, model map[string]modelEntry, n, nKeys int, now int64) {
	t.Helper()
	codecs := []record.Compression{record.CompressionNone, record.CompressionNone, record.CompressionGzip, record.CompressionZstd, record.CompressionLZ4, record.CompressionSnappy}
	for i := 0; i < n; i++ {
		recs := make([]record.Record, 1+rng.Intn(5))
		for j := range recs {
			k := fmt.Sprintf("key-%03d", rng.Intn(nKeys))
			recs[j] = record.Record{Key: []byte(k)}
			if rng.Intn(5) > 0 {
				recs[j].Value = []byte(fmt.Sprintf("%s=%d", k, rng.Int63()))
			}
		}
		b, err := record.BuildBatch(record.BatchOptions{Compression: codecs[rng.Intn(len(codecs))], ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: now}, recs)
		if err != nil {
			t.Fatal(err)
		}
		info := mustAppend(t, l, b)
		for j, r := range recs {
			model[string(r.Key)] = modelEntry{info.FirstOffset + int64(j), r.Value}
		}
	}
}

// checkCompacted reads the whole log and compares it with the model: every
// key appears once, at its newest offset with its newest value; tombstones
// appear only while keepTombstones.
func checkCompacted(t *testing.T, l *Log, model map[string]modelEntry, keepTombstones bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range readAllRecords(t, l, l.LogStartOffset()) {
		if seen[r.Key] {
			t.Fatalf("key %s appears twice (again at offset %d)", r.Key, r.Offset)
		}
		seen[r.Key] = true
		want, ok := model[r.Key]
		if !ok {
			t.Fatalf("unknown key %s", r.Key)
		}
		if want.offset != r.Offset || !bytes.Equal(want.value, r.Value) || (want.value == nil) != (r.Value == nil) {
			t.Fatalf("key %s: offset %d value %q, model says offset %d value %q", r.Key, r.Offset, r.Value, want.offset, want.value)
		}
		if r.Value == nil && !keepTombstones {
			t.Fatalf("tombstone for %s at %d survived its delete horizon", r.Key, r.Offset)
		}
	}
	for k, e := range model {
		if !seen[k] && (e.value != nil || keepTombstones) {
			t.Fatalf("key %s (offset %d) missing after compaction", k, e.offset)
		}
	}
}

func TestCompactionAgainstModel(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	dir := t.TempDir()
	m := openTestManager(t, dir, clock)
	tp := TopicPartition{"compacted", 0}
	l, err := m.GetOrCreateLog(tp, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	model := map[string]modelEntry{}
	now := clock.Now().UnixMilli()
	appendRandom(t, l, rng, model, 300, 40, now)
	leo := l.LogEndOffset()
	sizeBefore := l.Size()
	// Nothing is cleaned above the high watermark.
	if res, _ := l.Clean(true); res.Cleaned {
		t.Fatal("cleaned with the high watermark at 0")
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	res, err := l.Clean(false)
	if err != nil || !res.Cleaned {
		t.Fatalf("first clean: %+v %v", res, err)
	}
	if l.LogEndOffset() != leo || l.Size() >= sizeBefore {
		t.Fatalf("after clean: log end %d (was %d), size %d (was %d)", l.LogEndOffset(), leo, l.Size(), sizeBefore)
	}
	checkCompacted(t, l, model, true)
	// Clean again with nothing new: the dirty ratio is 0, nothing happens.
	if res, _ := l.Clean(false); res.Cleaned {
		t.Fatalf("cleaned with no dirty data: %+v", res)
	}

	// More data, then a second pass over clean and dirty sections.
	appendRandom(t, l, rng, model, 200, 40, now)
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	if res, err := l.Clean(false); err != nil || !res.Cleaned {
		t.Fatalf("second clean: %+v %v", res, err)
	}
	checkCompacted(t, l, model, true)

	// Past delete.retention.ms the tombstones stamped by the first cleaning
	// that kept them go.
	clock.Advance(2 * time.Hour)
	if _, err := l.Clean(true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(true); err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, l, model, false)
	for k, e := range model {
		if e.value == nil {
			delete(model, k)
		}
	}

	// The compacted log survives a restart.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, dir, clock)
	defer m.Close()
	l, _ = m.Log(tp)
	l.SetConfig(compactConfig()) // the broker sets topic configs after start
	checkCompacted(t, l, model, false)
	if l.LogEndOffset() < leo {
		t.Fatalf("log end went back to %d", l.LogEndOffset())
	}
	// The broker refuses keyless records on a compacted topic.
	b := recordtest.Batch(t, 1, 10, now, record.CompressionNone)
	nokey, _ := record.BuildBatch(record.BatchOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: now}, []record.Record{{Value: []byte("v")}})
	if _, err := l.AppendAsLeader(nokey, 0); !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("keyless record on compacted topic: %v", err)
	}
	mustAppend(t, l, b)
}

// TestCompactionCrashSafety replays a crash at each point of the swap: a
// leftover .cleaned output is discarded (old data kept); a .swap output is
// completed at load (the old segments it replaces are removed).
func TestCompactionCrashSafety(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	dir := t.TempDir()
	m := openTestManager(t, dir, clock)
	tp := TopicPartition{"swap", 0}
	l, _ := m.GetOrCreateLog(tp, compactConfig())
	rng := rand.New(rand.NewSource(2))
	model := map[string]modelEntry{}
	appendRandom(t, l, rng, model, 150, 20, clock.Now().UnixMilli())
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	// A first pass leaves small segments that the next pass merges.
	if _, err := l.Clean(true); err != nil {
		t.Fatal(err)
	}
	appendRandom(t, l, rng, model, 20, 20, clock.Now().UnixMilli())
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	m.Close()
	pre := filepath.Join(t.TempDir(), "pre")
	copyDir(t, dir, pre)

	m = openTestManager(t, dir, clock)
	l, _ = m.Log(tp)
	l.SetConfig(compactConfig())
	if res, err := l.Clean(true); err != nil || !res.Cleaned || res.SegmentsAfter >= res.SegmentsBefore {
		t.Fatalf("clean: %+v %v", res, err)
	}
	var cleaned []string
	for _, s := range l.segments() {
		cleaned = append(cleaned, s.path(logSuffix))
	}
	m.Close()
	// The first output segment, as the cleaner left it before its swap.
	out0, _ := os.ReadFile(cleaned[0])

	t.Run("cleaned leftover", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "d")
		copyDir(t, pre, d)
		simulateCrash(t, d)
		p := filepath.Join(d, tp.String(), filepath.Base(cleaned[0])+cleanedSuffix)
		os.WriteFile(p, out0, 0o644)
		m := openTestManager(t, d, clock)
		defer m.Close()
		l, _ := m.Log(tp)
		if fileExists(vfs.Default, p) {
			t.Fatal(".cleaned file not removed")
		}
		// Uncompacted but complete: every key's newest record is there.
		latest := map[string]readRecord{}
		for _, r := range readAllRecords(t, l, 0) {
			latest[r.Key] = r
		}
		for k, e := range model {
			if latest[k].Offset != e.offset {
				t.Fatalf("key %s newest at %d, want %d", k, latest[k].Offset, e.offset)
			}
		}
	})
	t.Run("swap completed at load", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "d")
		copyDir(t, pre, d)
		simulateCrash(t, d)
		p := filepath.Join(d, tp.String(), filepath.Base(cleaned[0])+swapSuffix)
		os.WriteFile(p, out0, 0o644)
		m := openTestManager(t, d, clock)
		defer m.Close()
		l, _ := m.Log(tp)
		got, _ := os.ReadFile(filepath.Join(d, tp.String(), filepath.Base(cleaned[0])))
		if !bytes.Equal(got, out0) || fileExists(vfs.Default, p) {
			t.Fatal("swap not completed")
		}
		// Reads are the union of the swapped-in segment and the untouched
		// rest; every key's newest record is present exactly where it was.
		latest := map[string]readRecord{}
		var offs []int64
		for _, r := range readAllRecords(t, l, 0) {
			latest[r.Key] = r
			offs = append(offs, r.Offset)
		}
		if !sort.SliceIsSorted(offs, func(i, j int) bool { return offs[i] < offs[j] }) {
			t.Fatal("offsets out of order after swap")
		}
		for k, e := range model {
			if latest[k].Offset != e.offset {
				t.Fatalf("key %s newest at %d, want %d", k, latest[k].Offset, e.offset)
			}
		}
	})
}

// TestCompactionCrashImages takes a copy of the data directory at every step
// of the cleaner's swap (exactly what a crash there would leave) and checks
// that each copy loads to a complete log: every key's newest record present
// at its offset, nothing from the compacted-away past in its place.
func TestCompactionCrashImages(t *testing.T) {
	noSync(t)
	clock := newTestClock()
	dir := t.TempDir()
	m := openTestManager(t, dir, clock)
	tp := TopicPartition{"images", 0}
	l, _ := m.GetOrCreateLog(tp, compactConfig())
	rng := rand.New(rand.NewSource(3))
	model := map[string]modelEntry{}
	appendRandom(t, l, rng, model, 150, 20, clock.Now().UnixMilli())
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	l.Clean(true)
	appendRandom(t, l, rng, model, 40, 20, clock.Now().UnixMilli())
	l.Roll()
	l.SetHighWatermark(l.LogEndOffset())
	m.CheckpointNow()

	images := map[string]string{}
	var order []string
	cleanerHook = func(step string) {
		if _, ok := images[step]; ok {
			return // first group only
		}
		img := filepath.Join(t.TempDir(), "img")
		copyDir(t, dir, img)
		images[step] = img
		order = append(order, step)
	}
	defer func() { cleanerHook = nil }()
	if res, err := l.Clean(true); err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	cleanerHook = nil
	m.Close()
	if len(order) < 6 {
		t.Fatalf("steps seen: %v", order)
	}
	for _, step := range order {
		img := images[step]
		simulateCrash(t, img)
		os.Remove(filepath.Join(img, lockFile))
		m := openTestManager(t, img, clock)
		l, _ := m.Log(tp)
		latest := map[string]readRecord{}
		seen := map[int64]bool{}
		for _, r := range readAllRecords(t, l, 0) {
			if seen[r.Offset] {
				t.Fatalf("%s: offset %d twice", step, r.Offset)
			}
			seen[r.Offset] = true
			if prev, ok := latest[r.Key]; ok && prev.Offset > r.Offset {
				t.Fatalf("%s: offsets out of order for %s", step, r.Key)
			}
			latest[r.Key] = r
		}
		for k, e := range model {
			if latest[k].Offset != e.offset || !bytes.Equal(latest[k].Value, e.value) {
				t.Fatalf("crash at %s: key %s newest at %d, want %d", step, k, latest[k].Offset, e.offset)
			}
		}
		ents, _ := os.ReadDir(filepath.Join(img, tp.String()))
		for _, e := range ents {
			if n := e.Name(); filepath.Ext(n) == swapSuffix || filepath.Ext(n) == cleanedSuffix || filepath.Ext(n) == deletedSuffix {
				t.Fatalf("crash at %s: %s left after load", step, n)
			}
		}
		m.Close()
	}
}

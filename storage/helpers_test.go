package storage

import (
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/record"
)

// testClock is an injectable clock for retention and compaction tests.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// openTestManager opens a manager whose background loops effectively never
// fire: tests drive retention, cleaning and flushes explicitly.
func openTestManager(t testing.TB, dir string, clock *testClock, opts ...func(*ManagerConfig)) *Manager {
	t.Helper()
	cfg := ManagerConfig{
		Dirs:                            []string{dir},
		Logger:                          testLogger(t),
		RetentionCheckInterval:          time.Hour,
		CheckpointInterval:              time.Hour,
		HighWatermarkCheckpointInterval: time.Hour,
		FlushSchedulerInterval:          time.Hour,
		CleanerBackoff:                  time.Hour,
		IdleSegmentTimeout:              time.Hour,
	}
	if clock != nil {
		cfg.Now = clock.Now
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatalf("OpenManager: %v", err)
	}
	return m
}

// readAll reads every record from offset to the log end and returns
// offset -> value (tombstones as nil values) plus key per offset.
type readRecord struct {
	Offset    int64
	Key       string
	Value     []byte
	Timestamp int64
}

func readAllRecords(t testing.TB, l *Log, from int64) []readRecord {
	t.Helper()
	var out []readRecord
	off := from
	for off < l.LogEndOffset() {
		ri, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if ri.Region.Len == 0 {
			ri.Release()
			break
		}
		buf := make([]byte, ri.Region.Len)
		if _, err := ri.Region.File.ReadAt(buf, ri.Region.Pos); err != nil {
			t.Fatal(err)
		}
		ri.Release()
		last := off
		err = record.ForEachBatch(buf, func(h *record.BatchHeader, b []byte) error {
			last = h.NextOffset()
			return record.WalkRecords(h, b, func(h *record.BatchHeader, r *record.Record) error {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o < from {
					return nil
				}
				rr := readRecord{Offset: o, Key: string(r.Key), Timestamp: h.BaseTimestamp + r.TimestampDelta}
				if r.Value != nil {
					rr.Value = append([]byte{}, r.Value...)
				}
				out = append(out, rr)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if last <= off {
			t.Fatalf("read made no progress at %d", off)
		}
		off = last
	}
	return out
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

// noSync turns fsync off for the rest of the test (see syncEnabled).
func noSync(t testing.TB) {
	syncEnabled.Store(false)
	t.Cleanup(func() { syncEnabled.Store(true) })
}

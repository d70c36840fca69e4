package consoledb

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"
)

// MemLog is a Log in memory, for tests and tools: one partition, with
// Compact to do what the broker's cleaner does and SetDown to make it
// unreachable.
type MemLog struct {
	mu      sync.Mutex
	recs    []Record // in offset order; compaction leaves holes in the offsets
	next    int64
	id      string
	down    error
	changed chan struct{}
}

// NewMemLog returns an empty MemLog.
func NewMemLog() *MemLog { return &MemLog{changed: make(chan struct{}), id: "mem"} }

// errMemLogDown is what a MemLog answers while SetDown holds.
var errMemLogDown = errors.New("memlog: unreachable")

// SetDown makes every call fail (down) or succeed again.
func (m *MemLog) SetDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if down {
		m.down = errMemLogDown
	} else {
		m.down = nil
	}
	close(m.changed)
	m.changed = make(chan struct{})
}

// Append implements Log.
func (m *MemLog) Append(_ context.Context, recs []Record) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down != nil {
		return 0, m.down
	}
	now := time.Now()
	for _, r := range recs {
		r.Offset, r.Time = m.next, now
		r.Headers = maps.Clone(r.Headers)
		m.recs = append(m.recs, r)
		m.next++
	}
	close(m.changed)
	m.changed = make(chan struct{})
	return m.next - 1, nil
}

// Fetch implements Log: it waits up to 200ms for records at or after from.
func (m *MemLog) Fetch(ctx context.Context, from int64) ([]Record, error) {
	deadline := time.After(200 * time.Millisecond)
	for {
		m.mu.Lock()
		if m.down != nil {
			err := m.down
			m.mu.Unlock()
			return nil, err
		}
		var out []Record
		for _, r := range m.recs {
			if r.Offset >= from {
				out = append(out, r)
			}
		}
		ch := m.changed
		m.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			return nil, nil
		case <-ch:
		}
	}
}

// End implements Log.
func (m *MemLog) End(context.Context) (int64, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down != nil {
		return 0, "", m.down
	}
	return m.next, m.id, nil
}

// Records returns a copy of the records the log holds.
func (m *MemLog) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.recs...)
}

// Compact keeps only the last record of every key, as the broker's cleaner
// does; with dropTombstones, tombstones go too (as they do once
// delete.retention.ms has passed).
func (m *MemLog) Compact(dropTombstones bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := map[string]int64{}
	for _, r := range m.recs {
		last[string(r.Key)] = r.Offset
	}
	var kept []Record
	for _, r := range m.recs {
		if last[string(r.Key)] != r.Offset || (dropTombstones && r.Value == nil) {
			continue
		}
		kept = append(kept, r)
	}
	m.recs = kept
}

// Reset empties the log and gives it a new id: a topic deleted and
// created again.
func (m *MemLog) Reset(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs, m.next, m.id = nil, 0, id
}

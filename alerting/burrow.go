package alerting

import (
	"fmt"
	"strings"
	"time"
)

// Status is a Burrow consumer status. The order is Burrow's: a group's status
// is its worst partition's, capped at ERR.
type Status int

// The statuses, in Burrow's order.
const (
	StatusNotFound Status = iota // no data (also "unset" in a Rule)
	StatusOK
	StatusWarn   // offsets move but lag never falls: the consumer is too slow
	StatusErr    // group level: some partition is STOP, STALL or REWIND
	StatusStop   // commits stopped
	StatusStall  // commits keep coming for the same offset while lag > 0
	StatusRewind // the committed offset went backwards
)

var statusNames = [...]string{"NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// MarshalText writes the status's name (JSON: "WARN").
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status name.
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseStatus reads a status name (case-insensitive).
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		if strings.EqualFold(s, n) {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("unknown status %q", s)
}

// Commit is one entry of a partition's window: the committed offset, the lag
// at that moment, and when the commit was made (or first seen).
type Commit struct {
	Offset int64
	Lag    int64
	Time   time.Time
}

// PartitionStatus evaluates a window of commits (oldest first) with Burrow's
// rules, first hit wins:
//
//  1. current lag 0, or any lag in the window 0: OK;
//  2. an offset lower than the one before it: REWIND;
//  3. time since the last commit longer than the window's span: STOP;
//  4. the offset never changes: STALL;
//  5. the lag never decreases between two entries: WARN;
//  6. otherwise OK.
//
// An empty window is OK: nothing can be said yet.
func PartitionStatus(window []Commit, currentLag int64, now time.Time) Status {
	if len(window) == 0 || currentLag <= 0 {
		return StatusOK
	}
	for _, c := range window {
		if c.Lag == 0 {
			return StatusOK
		}
	}
	for i := 1; i < len(window); i++ {
		if window[i].Offset < window[i-1].Offset {
			return StatusRewind
		}
	}
	first, last := window[0].Time, window[len(window)-1].Time
	if now.Sub(last) > last.Sub(first) {
		return StatusStop
	}
	stalled := true
	for i := 1; i < len(window); i++ {
		if window[i].Offset != window[i-1].Offset {
			stalled = false
			break
		}
	}
	if stalled {
		return StatusStall
	}
	for i := 1; i < len(window); i++ {
		if window[i].Lag < window[i-1].Lag {
			return StatusOK
		}
	}
	return StatusWarn
}

// GroupStatus is Burrow's group status: the worst of its partitions', with
// STOP, STALL and REWIND reported as ERR; NOTFOUND when it has none.
func GroupStatus(partitions []Status) Status {
	if len(partitions) == 0 {
		return StatusNotFound
	}
	g := StatusOK
	for _, s := range partitions {
		if s > StatusErr {
			s = StatusErr
		}
		if s > g {
			g = s
		}
	}
	return g
}

// window is a ring of the last size commits of one partition of one group.
type window struct {
	entries []Commit // oldest first, at most size
	seen    uint64   // evaluation round that last reported this partition
}

type windowKey struct {
	group, topic string
	partition    int32
}

// windows keeps Burrow windows for every group partition the lag source
// reports. It is owned by the evaluator goroutine.
type windows struct {
	size        int
	minDistance time.Duration // commits closer than this to the previous entry replace it
	m           map[windowKey]*window
	round       uint64
}

func newWindows(size int, minDistance time.Duration) *windows {
	return &windows{size: size, minDistance: minDistance, m: map[windowKey]*window{}}
}

// observe records what the lag source reported for one group partition.
//
// With a commit timestamp (CommitTime) the window gets one entry per commit,
// exactly as Burrow's storage does. Without one, a changed offset is an entry
// stamped now, and an unchanged offset is an entry only while the group has
// members (they are alive and committing the same offset: a stall); an empty
// group adds nothing, so its last entry ages into STOP.
func (w *windows) observe(group string, members int, p PartitionLag, now time.Time) *window {
	k := windowKey{group, p.Topic, p.Partition}
	win := w.m[k]
	if win == nil {
		win = &window{}
		w.m[k] = win
	}
	win.seen = w.round
	if p.Committed < 0 {
		return win // no commit yet: nothing to add
	}
	c := Commit{Offset: p.Committed, Lag: max(p.Lag, 0), Time: now}
	n := len(win.entries)
	var last *Commit
	if n > 0 {
		last = &win.entries[n-1]
	}
	switch {
	case !p.CommitTime.IsZero():
		c.Time = p.CommitTime
		if last != nil && !c.Time.After(last.Time) {
			if c.Offset == last.Offset {
				last.Lag = c.Lag // same commit seen again: refresh its lag
				return win
			}
		}
		if last != nil && c.Time.Sub(last.Time) < w.minDistance {
			*last = c
			return win
		}
	case last != nil && c.Offset == last.Offset && members == 0:
		return win
	}
	win.entries = append(win.entries, c)
	if len(win.entries) > w.size {
		copy(win.entries, win.entries[len(win.entries)-w.size:])
		win.entries = win.entries[:w.size]
	}
	return win
}

// beginRound starts an evaluation round; endRound forgets partitions the
// source has not reported for staleRounds rounds (a group whose lag could not
// be read for a round or two keeps its windows).
func (w *windows) beginRound() { w.round++ }

const staleRounds = 5

func (w *windows) endRound() {
	for k, win := range w.m {
		if w.round-win.seen >= staleRounds {
			delete(w.m, k)
		}
	}
}

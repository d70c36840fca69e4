package alerting

import (
	"testing"
	"time"
)

// commits builds a window: one entry per (offset, lag), a minute apart,
// ending at end.
func commits(end time.Time, pairs ...int64) []Commit {
	n := len(pairs) / 2
	out := make([]Commit, n)
	for i := 0; i < n; i++ {
		out[i] = Commit{Offset: pairs[2*i], Lag: pairs[2*i+1], Time: end.Add(-time.Duration(n-1-i) * time.Minute)}
	}
	return out
}

func TestBurrowPartitionStatus(t *testing.T) {
	end := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	soon := end.Add(30 * time.Second) // well inside the window's span
	cases := []struct {
		name    string
		window  []Commit
		current int64
		now     time.Time
		want    Status
	}{
		{"empty window", nil, 100, soon, StatusOK},
		{"caught up now", commits(end, 10, 5, 20, 5, 30, 5), 0, soon, StatusOK},
		{"lag zero once in the window", commits(end, 10, 5, 20, 0, 30, 5, 40, 8), 9, soon, StatusOK},
		{"lag falls somewhere", commits(end, 10, 50, 20, 60, 30, 40, 40, 70), 70, soon, StatusOK},
		{"offsets move, lag never falls", commits(end, 10, 50, 20, 50, 30, 60, 40, 70), 70, soon, StatusWarn},
		{"same offset committed, lag > 0", commits(end, 10, 50, 10, 60, 10, 70, 10, 80), 80, soon, StatusStall},
		{"commits stopped", commits(end, 10, 50, 20, 40, 30, 30, 40, 20), 20, end.Add(4 * time.Minute), StatusStop},
		{"offset went backwards", commits(end, 10, 50, 20, 40, 5, 60, 15, 50), 50, soon, StatusRewind},
		// Order: REWIND is checked before STOP, STOP before STALL, STALL before WARN.
		{"rewound and stopped", commits(end, 10, 50, 5, 60), 60, end.Add(time.Hour), StatusRewind},
		{"stopped and stalled", commits(end, 10, 50, 10, 60), 60, end.Add(time.Hour), StatusStop},
		{"stalled, lag growing", commits(end, 10, 50, 10, 60, 10, 70), 70, soon, StatusStall},
		{"rewind not flagged when lag was zero", commits(end, 10, 0, 5, 3), 3, soon, StatusOK},
	}
	for _, c := range cases {
		if got := PartitionStatus(c.window, c.current, c.now); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestBurrowGroupStatus(t *testing.T) {
	cases := []struct {
		in   []Status
		want Status
	}{
		{nil, StatusNotFound},
		{[]Status{StatusOK, StatusOK}, StatusOK},
		{[]Status{StatusOK, StatusWarn}, StatusWarn},
		{[]Status{StatusWarn, StatusStop}, StatusErr},
		{[]Status{StatusStall}, StatusErr},
		{[]Status{StatusOK, StatusRewind, StatusWarn}, StatusErr},
	}
	for _, c := range cases {
		if got := GroupStatus(c.in); got != c.want {
			t.Errorf("GroupStatus(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	for _, s := range []Status{StatusNotFound, StatusOK, StatusWarn, StatusErr, StatusStop, StatusStall, StatusRewind} {
		if p, err := ParseStatus(s.String()); err != nil || p != s {
			t.Errorf("ParseStatus(%q) = %v, %v", s.String(), p, err)
		}
	}
}

func TestWindowsObserve(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWindows(3, 30*time.Second)
	p := func(off, lag int64) PartitionLag {
		return PartitionLag{Topic: "t", Partition: 0, Committed: off, Lag: lag}
	}
	// Sampling mode, live members: same offset still adds entries (a stall).
	for i := 0; i < 5; i++ {
		w.beginRound()
		w.observe("g", 1, p(10, 5), now.Add(time.Duration(i)*time.Minute))
		w.endRound()
	}
	win := w.m[windowKey{"g", "t", 0}]
	if len(win.entries) != 3 {
		t.Fatalf("ring holds %d entries, want 3", len(win.entries))
	}
	if got := PartitionStatus(win.entries, 5, now.Add(4*time.Minute)); got != StatusStall {
		t.Errorf("live group committing one offset: %v, want STALL", got)
	}
	// Empty group: no entries added, the last one ages into STOP.
	w2 := newWindows(10, 0)
	w2.observe("g", 1, p(10, 5), now)
	w2.observe("g", 1, p(20, 7), now.Add(time.Minute))
	for i := 2; i < 6; i++ {
		w2.observe("g", 0, p(20, 9), now.Add(time.Duration(i)*time.Minute))
	}
	win2 := w2.m[windowKey{"g", "t", 0}]
	if len(win2.entries) != 2 {
		t.Fatalf("empty group added entries: %d", len(win2.entries))
	}
	if got := PartitionStatus(win2.entries, 9, now.Add(5*time.Minute)); got != StatusStop {
		t.Errorf("empty group: %v, want STOP", got)
	}
	// Commit timestamps: one entry per commit; a repeat of the same commit
	// refreshes its lag; commits closer than minDistance replace the last.
	w3 := newWindows(10, 30*time.Second)
	c := func(off, lag int64, at time.Time) PartitionLag {
		pl := p(off, lag)
		pl.CommitTime = at
		return pl
	}
	w3.observe("g", 1, c(10, 5, now), now)
	w3.observe("g", 1, c(10, 6, now), now.Add(time.Minute))
	w3.observe("g", 1, c(12, 4, now.Add(10*time.Second)), now.Add(2*time.Minute))
	w3.observe("g", 1, c(20, 3, now.Add(time.Minute)), now.Add(3*time.Minute))
	got := w3.m[windowKey{"g", "t", 0}].entries
	if len(got) != 2 || got[0].Offset != 12 || got[1].Offset != 20 {
		t.Errorf("commit-time window = %+v", got)
	}
	// Partitions no longer reported are forgotten.
	for i := 0; i < staleRounds; i++ {
		if len(w.m) != 1 {
			t.Fatalf("window forgotten after %d rounds unseen", i)
		}
		w.beginRound()
		w.endRound()
	}
	if len(w.m) != 0 {
		t.Errorf("stale window kept")
	}
}

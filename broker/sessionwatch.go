package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// SessionWatch is a fetch session's record of its partitions' changes
// (KIP-227 made change-driven): every partition of the session that this
// broker has read is registered with it for as long as it stays in the
// session (a PartitionWatch each), and every change of such a partition (an
// append, a high watermark or log start move, a leadership change: whatever
// Partition.notify reports) puts it in the set of changed partitions. An
// incremental fetch then reads only the partitions that changed, those the
// request names and those whose last read had something to say (records, an
// error, a position behind the end), instead of every partition of the
// session; and a parked fetch waits on the session's one channel instead of
// registering a waiter with each partition.
//
// For a follower's session it also keeps the follower's lag clock without
// touching idle partitions (Kafka's rule for a follower caught up and
// idle): a partition whose last read found the follower at the leader's log
// end and that has not changed since is caught up as of the session's
// latest fetch; once it changes, as of the session's last fetch before the
// change (PartitionWatch.caughtUpAt, folded into the follower's state by
// the ISR checks and by the next read).
type SessionWatch struct {
	on        WakeOn
	c         chan struct{}
	lastFetch atomic.Int64 // unix nanoseconds (the broker's clock) of the session's latest fetch; 0: none

	mu      sync.Mutex
	changed []*PartitionWatch
}

// NewSessionWatch returns the watch of a session of replicaID (a follower
// for replicaID >= 0): its channel is signalled by appends for a follower,
// by high watermark moves for a consumer, and by leadership changes for
// both (the same wake-ups as NewWaiterOn's for Fetch).
func NewSessionWatch(replicaID int32) *SessionWatch {
	on := WakeOnHighWatermark
	if replicaID >= 0 {
		on = WakeOnAppend
	}
	return &SessionWatch{on: on | wakeOnState, c: make(chan struct{}, 1)}
}

// Take returns the partitions that changed since the last Take, and forgets
// them.
func (s *SessionWatch) Take() []*PartitionWatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.changed
	s.changed = nil
	for _, w := range out {
		w.marked = false
	}
	return out
}

// fetched records a fetch of the session at now.
func (s *SessionWatch) fetched(now time.Time) { s.lastFetch.Store(now.UnixNano()) }

// PartitionWatch is one partition of a SessionWatch, registered with the
// partition until Close.
type PartitionWatch struct {
	s      *SessionWatch
	p      *Partition
	marked bool // in s.changed (s.mu)
	closed atomic.Bool
	// quiet: the last read of the partition in the session found nothing
	// to return at the reader's limit (a follower at the log end).
	quiet atomic.Bool
	// changedAt is s.lastFetch when the partition first changed after
	// its last read (0: not since).
	changedAt atomic.Int64
}

// Partition is the partition watched.
func (w *PartitionWatch) Partition() *Partition { return w.p }

// Close unregisters the watch; the partition no longer marks it.
func (w *PartitionWatch) Close() {
	if w == nil || w.closed.Swap(true) {
		return
	}
	w.p.watchMu.Lock()
	delete(w.p.sessions, w)
	w.p.watchMu.Unlock()
}

// mark records a change of the partition (its notify, p.watchMu held).
func (w *PartitionWatch) mark(what WakeOn) {
	w.changedAt.CompareAndSwap(0, w.s.lastFetch.Load())
	s := w.s
	s.mu.Lock()
	if !w.marked {
		w.marked = true
		s.changed = append(s.changed, w)
	}
	s.mu.Unlock()
	if s.on&what != 0 {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

// caughtUpAt is when, by the session, the follower with log end
// followerLEO was last caught up with the partition's log end leaderLEO
// (unix nanoseconds, 0: the session tells nothing): the partition is quiet
// in the session, so the follower's position has not changed since a read
// that found it at the log end; with no change since, the session's latest
// fetch; after a change, the session's last fetch before it.
func (w *PartitionWatch) caughtUpAt(followerLEO, leaderLEO int64) int64 {
	if w.closed.Load() || !w.quiet.Load() {
		return 0
	}
	if c := w.changedAt.Load(); c != 0 {
		return c
	}
	if followerLEO < leaderLEO {
		return 0 // a change whose mark is not there yet
	}
	return w.s.lastFetch.Load()
}

// watchSession registers w with p.
func (p *Partition) watchSession(s *SessionWatch) *PartitionWatch {
	w := &PartitionWatch{s: s, p: p}
	p.watchMu.Lock()
	p.sessions[w] = struct{}{}
	p.watchMu.Unlock()
	return w
}

// foldSessionLocked moves f's last caught-up and fetch times up to what
// its fetch session shows (see SessionWatch). p.mu is held for writing.
func (p *Partition) foldSessionLocked(f *replicaState) {
	if f.watch == nil {
		return
	}
	n := f.watch.caughtUpAt(f.leo, p.log.LogEndOffset())
	if n == 0 {
		return
	}
	t := time.Unix(0, n)
	if t.After(f.lastCaughtUp) {
		f.lastCaughtUp = t
	}
	if t.After(f.lastFetch) {
		f.lastFetch = t
	}
}

// foldSessionsLocked folds every follower's session (foldSessionLocked).
func (p *Partition) foldSessionsLocked() {
	for _, f := range p.followers {
		p.foldSessionLocked(f)
	}
}

// linkFollower records that replicaID's session watch w read the partition
// quiet at fetchOffset: while the partition stays quiet, the session's
// fetches count as the follower's (SessionWatch).
func (p *Partition) linkFollower(replicaID int32, fetchOffset int64, w *PartitionWatch) {
	p.mu.Lock()
	if f, ok := p.followers[replicaID]; ok && f.leo == fetchOffset && p.leader == p.b.cfg.BrokerID {
		f.watch = w
	}
	p.mu.Unlock()
}

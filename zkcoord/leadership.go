package zkcoord

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ConsoleLeaderPath is the ephemeral znode (under the chroot) held by the
// console that does the cluster's background work: alert evaluation, lag
// export and history, migration comparisons.
const ConsoleLeaderPath = "/console_leader"

// Leadership is a role that one process of the cluster holds at a time: the
// one whose ZooKeeper session created an ephemeral znode, as the controller
// holds /controller. Lead starts campaigning; the role moves when the
// holder's session ends (Close, kill -9 plus the session timeout, a network
// partition) and another campaigner creates the node.
//
// IsLeader answers from memory. It is false while this process's session
// is in doubt (disconnected from ZooKeeper): the session may expire and
// another process take the role, and two leaders at once are worse than a
// short gap. Back in the same session the role is this process's again if
// its node is still there; in a new session it campaigns again.
type Leadership struct {
	c    *Coordinator
	path string // Kafka path, under the chroot
	data []byte
	log  *slog.Logger

	leading atomic.Bool
	holder  atomic.Pointer[string] // the current holder's node data

	mu      sync.Mutex // serialises the loop's writes with Close's delete
	session int64      // the session that holds the node, when leading
	closed  bool

	decided     chan struct{} // closed once the first campaign has an outcome
	decidedOnce sync.Once

	stop chan struct{}
	done chan struct{}
}

// Lead starts campaigning for the role held through the ephemeral znode at
// path (a path under the chroot, e.g. ConsoleLeaderPath); data says who
// holds it (readable by operators, and by Holder). Close gives the role up.
func (c *Coordinator) Lead(path string, data []byte) (*Leadership, error) {
	if err := validateChroot(path); err != nil || path == "/" {
		return nil, fmt.Errorf("zkcoord: leadership path %q: want an absolute znode path", path)
	}
	c.mu.RLock()
	closed := c.closed
	c.mu.RUnlock()
	if closed {
		return nil, errors.New("zkcoord: coordinator closed")
	}
	l := &Leadership{c: c, path: path, data: data, log: c.log.With("leadership", path),
		decided: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	empty := ""
	l.holder.Store(&empty)
	go l.run()
	return l, nil
}

// IsLeader reports whether this process holds the role now (from memory).
func (l *Leadership) IsLeader() bool { return l.leading.Load() }

// Decided is closed once the first campaign has an outcome (this process
// leads, or another does), so a caller can wait a moment before its first
// IsLeader.
func (l *Leadership) Decided() <-chan struct{} { return l.decided }

// Holder returns the data of the node's current holder as this process
// last saw it ("" when nobody holds it or it is not known).
func (l *Leadership) Holder() string { return *l.holder.Load() }

// Close stops campaigning and, when this process holds the role, deletes
// its node so that another campaigner takes over at once. It waits for the
// campaign goroutine.
func (l *Leadership) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.stop)
	l.mu.Unlock()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.leading.Swap(false)
	if !was || l.session == 0 {
		return nil
	}
	conn := l.c.conn
	_, st, err := conn.Get(l.c.path(l.path))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		// The session ends with the coordinator, and the node with it.
		return fmt.Errorf("give up %s: %w", l.path, zkErr(err))
	case st.EphemeralOwner != l.session:
		return nil
	}
	if err := conn.Delete(l.c.path(l.path), st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("give up %s: %w", l.path, zkErr(err))
	}
	l.log.Info("leadership given up")
	return nil
}

// set records whether this process leads (in session sid) and logs changes.
func (l *Leadership) set(leading bool, sid int64, holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.holder.Store(&holder)
	if leading {
		l.session = sid
	}
	if holder != "" {
		l.decidedOnce.Do(func() { close(l.decided) })
	}
	if l.leading.Swap(leading) != leading {
		if leading {
			l.log.Info("leadership taken", "session", fmt.Sprintf("%#x", sid))
		} else {
			l.log.Info("leadership lost", "holder", holder)
		}
	}
}

// run campaigns until Close: it creates the node when it is missing, keeps
// a data watch on it (which fires when it is deleted, and is closed when
// the session expires), and re-evaluates on every session event.
func (l *Leadership) run() {
	defer close(l.done)
	states := l.c.subscribeSession()
	defer l.c.unsubscribeSession(states)
	var watch <-chan zk.Event
	var watchSession int64
	for {
		var retry <-chan time.Time
		conn := l.c.conn
		switch {
		case conn.State() != zk.StateHasSession:
			if l.IsLeader() {
				l.set(false, 0, l.Holder())
			}
		case watch == nil || watchSession != conn.SessionID():
			w, sid, err := l.campaign()
			if err != nil {
				l.log.Debug("campaign failed; retrying", "err", err)
				retry = time.After(time.Second)
			}
			watch, watchSession = w, sid
		default:
			// Reconnected in the session the watch belongs to: is the
			// node still ours?
			if err := l.recheck(); err != nil {
				retry = time.After(time.Second)
			}
		}
		select {
		case <-l.stop:
			return
		case <-states:
		case <-watch:
			watch = nil
		case <-retry:
		}
	}
}

// campaign creates the node if it is missing and arms a watch on it.
func (l *Leadership) campaign() (<-chan zk.Event, int64, error) {
	conn := l.c.conn
	p := l.c.path(l.path)
	for range 3 {
		sid := conn.SessionID()
		_, err := conn.Create(p, l.data, zk.FlagEphemeral, l.c.acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return nil, 0, zkErr(err)
		}
		b, st, w, err := conn.GetW(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue // the holder went meanwhile: try again
		}
		if err != nil {
			return nil, 0, zkErr(err)
		}
		l.set(st.EphemeralOwner == sid && sid == conn.SessionID(), sid, string(b))
		return w, sid, nil
	}
	return nil, 0, errors.New("the node kept changing")
}

// recheck reads the node (without a watch) and updates the leadership.
func (l *Leadership) recheck() error {
	conn := l.c.conn
	sid := conn.SessionID()
	b, st, err := conn.Get(l.c.path(l.path))
	if errors.Is(err, zk.ErrNoNode) {
		l.set(false, 0, "")
		return nil // the armed watch fires for the deletion: campaign then
	}
	if err != nil {
		return zkErr(err)
	}
	l.set(st.EphemeralOwner == sid, sid, string(b))
	return nil
}

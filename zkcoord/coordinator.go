package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluice-io/sluice/cluster"
)

// ErrUnavailable marks errors caused by ZooKeeper being unreachable (no
// connection, the connection lost mid-request, no session). The write may or
// may not have happened; re-read before retrying. It is
// cluster.ErrUnavailable, so callers that only know the cluster package can
// test for it.
var ErrUnavailable = cluster.ErrUnavailable

// Coordinator is a cluster.Coordinator on ZooKeeper. See the package
// documentation.
type Coordinator struct {
	cfg  Config
	log  *slog.Logger
	cs   ConnectString
	conn *zk.Conn
	acl  []zk.ACL

	// Events from the ZooKeeper client's callback (which must not block),
	// drained by the owner goroutine.
	evMu     sync.Mutex
	evQueue  []zk.Event
	evSignal chan struct{}
	// Signalled (without blocking) on every session event: leaderships
	// re-evaluate.
	sessionSubs map[chan struct{}]struct{}

	// Loaders of one kind of znode hold its mutex across the read and the
	// cache update, so a later read never lands before an earlier one.
	stateLogMu   sync.Mutex
	configLogMu  sync.Mutex
	deletionsMu  sync.Mutex
	topicsMu     sync.Mutex
	brokersMu    sync.Mutex
	controllerMu sync.Mutex

	mu         sync.RWMutex
	closed     bool
	session    int64                    // the session the cache and registration belong to
	registered map[int32]cluster.Broker // what RegisterBroker registered, to redo in a new session
	won        *controllership          // the controllership this session holds
	cache      cache
	watchers   map[*watcher]struct{}
	creds      userCache  // SCRAM credentials (credentials.go)
	quotas     quotaCache // client quotas (quotas.go)

	acls aclState // the ACLs, loaded when first asked for (acls.go)

	done chan struct{}
	wg   sync.WaitGroup
}

// controllership is what Campaign won: the epoch, and the znode version of
// /controller_epoch that holds it (checked by fenced writes).
type controllership struct {
	epoch     int32
	zkVersion int32
	session   int64
}

type watcher struct{ ch chan cluster.Change }

var _ cluster.Coordinator = (*Coordinator)(nil)

// Open connects to ZooKeeper, waits up to cfg.ConnectionTimeout (and ctx) for
// a session, creates the chroot and Kafka's top-level znodes when missing,
// loads the metadata and starts watching it.
func Open(ctx context.Context, cfg Config) (*Coordinator, error) {
	cfg.setDefaults()
	cs, err := ParseConnect(cfg.Connect)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkIdentity(); err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "zkcoord"),
		cs:         cs,
		acl:        defaultACL(cfg.SetACL, "/"),
		evSignal:   make(chan struct{}, 1),
		watchers:   map[*watcher]struct{}{},
		registered: map[int32]cluster.Broker{},
		done:       make(chan struct{}),
		cache:      newCache(),
	}
	conn, _, err := zk.Connect(cs.Servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{c.log.With("component", "zookeeper-client")}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(c.onEvent),
		zk.WithDialer(dialer(handshakeTimeout(cfg.SessionTimeout), cfg.TLS)),
		zk.WithMaxBufferSize(16<<20))
	if err != nil {
		return nil, fmt.Errorf("zookeeper.connect %q: %w", cfg.Connect, err)
	}
	c.conn = conn
	if err := c.waitSession(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.authenticate(); err != nil {
		conn.Close()
		return nil, err
	}
	// Session events so far are history; watch events from here on count.
	c.evMu.Lock()
	c.evQueue = nil
	c.evMu.Unlock()
	if err := c.bootstrap(); err != nil {
		conn.Close()
		return nil, err
	}
	c.mu.Lock()
	c.session = conn.SessionID()
	c.mu.Unlock()
	if _, err := c.loadAll(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("zkcoord: load metadata: %w", err)
	}
	c.log.Info("connected to zookeeper", "servers", strings.Join(cs.Servers, ","), "chroot", cs.Chroot,
		"session", fmt.Sprintf("%#x", conn.SessionID()), "session_timeout", cfg.SessionTimeout)
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// waitSession waits for the client's first session.
func (c *Coordinator) waitSession(ctx context.Context) error {
	timer := time.NewTimer(c.cfg.ConnectionTimeout)
	defer timer.Stop()
	for c.conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("zookeeper %s: %w", strings.Join(c.cs.Servers, ","), ctx.Err())
		case <-timer.C:
			return fmt.Errorf("%w: no session with %s within zookeeper.connection.timeout.ms (%v)",
				ErrUnavailable, strings.Join(c.cs.Servers, ","), c.cfg.ConnectionTimeout)
		case <-c.evSignal:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// bootstrap creates the chroot and the top-level znodes when missing.
func (c *Coordinator) bootstrap() error {
	if c.cs.Chroot != "" {
		parts := strings.Split(c.cs.Chroot[1:], "/")
		for i := range parts {
			p := "/" + strings.Join(parts[:i+1], "/")
			if _, err := c.conn.Create(p, nil, 0, c.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("zkcoord: create chroot %s: %w", p, noAuthHint(zkErr(err)))
			}
		}
	}
	for _, p := range topLevelPaths {
		if err := c.ensurePath(p); err != nil {
			return err
		}
	}
	return c.secureExisting()
}

// ensurePath creates a persistent empty znode when it is missing.
func (c *Coordinator) ensurePath(p string) error {
	if _, err := c.conn.Create(c.path(p), nil, 0, c.aclFor(p)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zkcoord: create %s: %w", p, noAuthHint(zkErr(err)))
	}
	return nil
}

// path maps a Kafka path to the real one under the chroot.
func (c *Coordinator) path(p string) string { return c.cs.Chroot + p }

// zkErr marks connection-level errors with ErrUnavailable.
func zkErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrSessionExpired),
		errors.Is(err, zk.ErrSessionMoved), errors.Is(err, zk.ErrClosing):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// onEvent is the ZooKeeper client's callback: it runs on the client's
// receive goroutine and must not block.
func (c *Coordinator) onEvent(ev zk.Event) {
	c.evMu.Lock()
	c.evQueue = append(c.evQueue, ev)
	if ev.Type == zk.EventSession {
		for ch := range c.sessionSubs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	c.evMu.Unlock()
	select {
	case c.evSignal <- struct{}{}:
	default:
	}
}

// subscribeSession returns a channel signalled on every session event
// (connected, disconnected, expired); unsubscribeSession releases it.
func (c *Coordinator) subscribeSession() chan struct{} {
	ch := make(chan struct{}, 1)
	c.evMu.Lock()
	if c.sessionSubs == nil {
		c.sessionSubs = map[chan struct{}]struct{}{}
	}
	c.sessionSubs[ch] = struct{}{}
	c.evMu.Unlock()
	return ch
}

func (c *Coordinator) unsubscribeSession(ch chan struct{}) {
	c.evMu.Lock()
	delete(c.sessionSubs, ch)
	c.evMu.Unlock()
}

// dirty is what the owner goroutine has to reload.
type dirty struct {
	session, brokers, topics, deletions, controller, reassign, stateLog, configLog bool
}

func (d dirty) any() bool {
	return d.session || d.brokers || d.topics || d.deletions || d.controller || d.reassign || d.stateLog || d.configLog
}

// run is the owner goroutine: it turns ZooKeeper events into reloads of the
// cache and notifies the watchers of what changed. A failed reload is kept
// and retried.
func (c *Coordinator) run() {
	defer c.wg.Done()
	var todo dirty
	var retry <-chan time.Time
	purge := time.NewTicker(purgeInterval(c.cfg.ChangeRetention))
	defer purge.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.evSignal:
		case <-retry:
		case <-purge.C:
			c.purgeChanges()
			continue
		}
		retry = nil
		c.evMu.Lock()
		evs := c.evQueue
		c.evQueue = nil
		c.evMu.Unlock()
		for _, ev := range evs {
			c.classify(ev, &todo)
		}
		if !todo.any() {
			continue
		}
		changes, err := c.reload(&todo)
		c.notify(changes)
		if err != nil {
			select {
			case <-c.done:
				return
			default:
			}
			c.log.Warn("metadata reload failed; retrying", "err", err)
			retry = time.After(time.Second)
		}
	}
}

// classify records what an event makes stale.
func (c *Coordinator) classify(ev zk.Event, d *dirty) {
	if ev.Type == zk.EventSession {
		switch ev.State {
		case zk.StateHasSession:
			c.mu.RLock()
			same := c.session == c.conn.SessionID()
			c.mu.RUnlock()
			if !same {
				d.session = true
			} else {
				c.log.Info("reconnected to zookeeper; session kept", "server", ev.Server)
				// Watches are re-armed by the client; catch up with
				// notifications anyway in case a reload failed meanwhile.
				d.stateLog, d.configLog = true, true
			}
		case zk.StateExpired:
			c.log.Warn("zookeeper session expired; a new session will re-register and reload")
			c.mu.Lock()
			c.won = nil
			c.mu.Unlock()
		case zk.StateDisconnected:
			c.log.Warn("disconnected from zookeeper; serving the last known metadata", "server", ev.Server)
		}
		return
	}
	if ev.Type == zk.EventNotWatching {
		return
	}
	p, ok := strings.CutPrefix(ev.Path, c.cs.Chroot)
	if !ok {
		return
	}
	switch {
	case p == brokerIDsPath:
		d.brokers = true
	case p == topicsPath:
		d.topics = true
	case p == deleteTopicsPath:
		d.deletions = true
	case p == controllerPath || p == controllerEpochPath:
		d.controller = true
	case p == reassignPath:
		d.reassign = true
	case p == stateChangesPath:
		d.stateLog = true
	case p == configChangesPath:
		d.configLog = true
	}
}

// reload runs the loaders d asks for, clearing each that succeeds.
func (c *Coordinator) reload(d *dirty) (cluster.Change, error) {
	var changes cluster.Change
	if d.session {
		ch, err := c.newSession()
		changes |= ch
		if err != nil {
			return changes, err
		}
		*d = dirty{}
		return changes, nil
	}
	var errs []error
	step := func(flag *bool, fn func() (cluster.Change, error)) {
		if !*flag {
			return
		}
		ch, err := fn()
		changes |= ch
		if err != nil {
			errs = append(errs, err)
			return
		}
		*flag = false
	}
	step(&d.controller, c.loadController)
	step(&d.brokers, c.loadBrokers)
	step(&d.deletions, c.loadDeletions)
	step(&d.topics, c.loadTopics)
	step(&d.reassign, c.loadReassignments)
	step(&d.stateLog, c.processStateLog)
	step(&d.configLog, c.processConfigLog)
	return changes, errors.Join(errs...)
}

// newSession handles a session that replaced an expired one: register the
// broker again, reload everything, deliver ChangeAll.
func (c *Coordinator) newSession() (cluster.Change, error) {
	sid := c.conn.SessionID()
	c.log.Info("new zookeeper session; re-registering and reloading", "session", fmt.Sprintf("%#x", sid))
	c.mu.Lock()
	// A controllership of the expired session is over; one a Campaign won
	// in this session already (the controller may campaign as soon as the
	// session exists, before this runs) stands.
	if c.won != nil && c.won.session != sid {
		c.won = nil
	}
	regs := slices.Collect(maps.Values(c.registered))
	c.mu.Unlock()
	for _, b := range regs {
		if err := c.createBrokerZNode(b); err != nil {
			return 0, fmt.Errorf("re-register broker %d: %w", b.ID, err)
		}
		c.log.Info("broker re-registered", "broker", b.ID)
	}
	if _, err := c.loadAll(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.session = sid
	c.mu.Unlock()
	return cluster.ChangeAll, nil
}

// notify delivers change to every watcher, merged with an undelivered one.
func (c *Coordinator) notify(change cluster.Change) {
	if change == 0 {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for w := range c.watchers {
		ch := change
		for {
			select {
			case w.ch <- ch:
			default:
				select {
				case old := <-w.ch:
					ch |= old
				default:
				}
				continue
			}
			break
		}
	}
}

// Watch implements cluster.Coordinator.
func (c *Coordinator) Watch(ctx context.Context) <-chan cluster.Change {
	w := &watcher{ch: make(chan cluster.Change, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		close(w.ch)
		return w.ch
	}
	c.watchers[w] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
		case <-c.done:
		}
		c.mu.Lock()
		if _, ok := c.watchers[w]; ok {
			delete(c.watchers, w)
			close(w.ch)
		}
		c.mu.Unlock()
	}()
	return w.ch
}

// Close implements cluster.Coordinator: the session ends (the broker's
// registration and any controllership go at once), Watch channels close,
// and Close waits for the goroutines it started.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.won = nil
	close(c.done)
	c.mu.Unlock()
	c.conn.Close()
	c.wg.Wait()
	c.mu.Lock()
	for w := range c.watchers {
		delete(c.watchers, w)
		close(w.ch)
	}
	c.mu.Unlock()
	return nil
}

// check returns ErrClosed after Close.
func (c *Coordinator) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return cluster.ErrClosed
	}
	return nil
}

// writable is check plus a wait for a ZooKeeper session: a request issued
// while the client has none fails at once (or, while a reconnection is in
// progress, waits in the client without a bound), so writes wait here for
// the session to come back, up to the session timeout and ctx, and then
// fail with ErrUnavailable. A ZooKeeper restart or a switch to another
// server of the ensemble is thus invisible to the writer.
func (c *Coordinator) writable(ctx context.Context) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if c.conn.State() == zk.StateHasSession {
		return nil
	}
	limit := time.NewTimer(c.cfg.SessionTimeout)
	defer limit.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for c.conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no zookeeper session: %w", ErrUnavailable, ctx.Err())
		case <-c.done:
			return cluster.ErrClosed
		case <-limit.C:
			return fmt.Errorf("%w: no zookeeper session for %v", ErrUnavailable, c.cfg.SessionTimeout)
		case <-poll.C:
		}
	}
	return nil
}

// Connected reports whether the client has a live session with ZooKeeper.
func (c *Coordinator) Connected() bool { return c.conn.State() == zk.StateHasSession }

// SessionID is the current ZooKeeper session id (0 when there is none).
func (c *Coordinator) SessionID() int64 { return c.conn.SessionID() }

// zkLogger sends the ZooKeeper client's messages (connection attempts,
// retries) to slog at debug level; the Coordinator logs what matters
// (disconnected, expired, reconnected) itself.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}

func purgeInterval(retention time.Duration) time.Duration {
	return min(max(retention/4, time.Second), time.Minute)
}

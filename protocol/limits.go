package protocol

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the connection limits (Config). Kafka's where Kafka has a
// bounded default; max.connections and queued.max.request.bytes, unbounded
// in Kafka, get bounds here, so that idle or stalled sockets cannot take the
// memory of the broker (and of the console in the same process).
const (
	// DefaultConnectionsMaxIdle is Kafka's connections.max.idle.ms.
	DefaultConnectionsMaxIdle = 10 * time.Minute
	// DefaultRequestReadTimeout bounds the arrival of one request frame
	// once its first byte has been read (socket.request.read.timeout.ms; no
	// Kafka equivalent). It matches the clients' request.timeout.ms: a
	// client waits no longer than that for its answer anyway.
	DefaultRequestReadTimeout = 30 * time.Second
	// DefaultMaxConnections is max.connections (Kafka: unbounded). A
	// connection holds about 40 KiB before it sends anything (its read
	// buffer and goroutine), so 4096 of them hold about 160 MiB.
	DefaultMaxConnections = 4096
	// DefaultMaxConnectionsPerIP is Kafka's max.connections.per.ip.
	DefaultMaxConnectionsPerIP = math.MaxInt32
	// DefaultQueuedMaxRequestBytes is queued.max.request.bytes (Kafka: -1,
	// unbounded): request bytes read and not yet handled, over every
	// connection. It must be at least socket.request.max.bytes (100 MiB by
	// default), or the largest request could never be read.
	DefaultQueuedMaxRequestBytes = 256 << 20
)

// frameEagerBytes is how much of a frame's announced size is allocated
// before its body arrives; a larger frame's buffer grows (four-fold) as its
// bytes arrive, so a socket announcing 100 MiB and sending nothing holds
// 1 MiB. Produce requests (franz-go and librdkafka batch up to 1 MB) fit, so
// the data path reads into one buffer, as before.
const frameEagerBytes = 1 << 20

// requestBudget is queued.max.request.bytes: frame buffers held by requests
// read and not yet handled, over every connection. A reader that cannot
// reserve the next part of its frame waits, without reading, until bytes are
// released or its frame's read deadline passes (Kafka mutes the channel).
type requestBudget struct {
	avail   atomic.Int64
	waiters atomic.Int32
	mu      sync.Mutex
	wake    chan struct{} // closed when bytes are released and someone waits
}

func newRequestBudget(n int64) *requestBudget {
	b := &requestBudget{wake: make(chan struct{})}
	b.avail.Store(n)
	return b
}

func (b *requestBudget) tryAcquire(n int64) bool {
	for {
		a := b.avail.Load()
		if a < n {
			return false
		}
		if b.avail.CompareAndSwap(a, a-n) {
			return true
		}
	}
}

// acquire reserves n bytes, waiting until deadline (or ctx) if it must.
func (b *requestBudget) acquire(ctx context.Context, n int64, deadline time.Time) error {
	if b.tryAcquire(n) {
		return nil
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		wake := b.wake
		b.mu.Unlock()
		if b.tryAcquire(n) {
			return nil
		}
		var expired <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return errBudgetTimeout
			}
			if timer == nil {
				timer = time.NewTimer(d)
			}
			expired = timer.C
		}
		select {
		case <-wake:
		case <-expired:
			return errBudgetTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *requestBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.avail.Add(n)
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.wake)
		b.wake = make(chan struct{})
		b.mu.Unlock()
	}
}

var errBudgetTimeout = fmt.Errorf("no room in queued.max.request.bytes within socket.request.read.timeout.ms")

// Why a connection was closed by the server rather than by its client.
const (
	expiredIdle        int32 = 1 + iota // connections.max.idle.ms
	expiredReadTimeout                  // socket.request.read.timeout.ms
)

// connGate counts open connections, overall and per address, for
// max.connections and max.connections.per.ip (Lock Server.mu).
type connGate struct {
	maxTotal  int
	maxPerIP  int
	overrides map[netip.Addr]int
	total     int
	perIP     map[netip.Addr]int
}

// remoteIP is the address a connection counts against, if it has one.
func remoteIP(nc net.Conn) (netip.Addr, bool) {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip := ta.AddrPort().Addr().Unmap()
	return ip, ip.IsValid()
}

// admit counts a new connection from ip, or says which limit refuses it.
func (g *connGate) admit(ip netip.Addr, hasIP bool) (refused string, limit int) {
	if g.total >= g.maxTotal {
		return "max.connections", g.maxTotal
	}
	if hasIP {
		limit, ok := g.overrides[ip]
		if !ok {
			limit = g.maxPerIP
		}
		if g.perIP[ip] >= limit {
			return "max.connections.per.ip", limit
		}
		g.perIP[ip]++
	}
	g.total++
	return "", 0
}

func (g *connGate) leave(ip netip.Addr, hasIP bool) {
	g.total--
	if hasIP {
		if g.perIP[ip]--; g.perIP[ip] <= 0 {
			delete(g.perIP, ip)
		}
	}
}

// parseOverrides reads MaxConnectionsPerIPOverrides (addresses, not host
// names: the appliance resolves those).
func parseOverrides(in map[string]int) (map[netip.Addr]int, error) {
	out := make(map[netip.Addr]int, len(in))
	for k, v := range in {
		ip, err := netip.ParseAddr(k)
		if err != nil {
			return nil, fmt.Errorf("protocol: max.connections.per.ip.overrides: %q is not an IP address", k)
		}
		if v < 0 {
			return nil, fmt.Errorf("protocol: max.connections.per.ip.overrides: %s:%d is negative", k, v)
		}
		out[ip.Unmap()] = v
	}
	return out, nil
}

// logLimiter lets through one line per key per interval and counts the
// rest, which the next line reports (a flood of refused connections must
// not flood the log).
type logLimiter struct {
	mu    sync.Mutex
	every time.Duration
	next  map[string]time.Time
	quiet map[string]int
}

func (l *logLimiter) log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	if now.Before(l.next[key]) {
		l.quiet[key]++
		l.mu.Unlock()
		return
	}
	if l.next == nil {
		l.next, l.quiet = map[string]time.Time{}, map[string]int{}
	}
	l.next[key] = now.Add(l.every)
	n := l.quiet[key]
	delete(l.quiet, key)
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Log(context.Background(), level, msg, args...)
}

// janitorTick is how often the janitor looks at the connections: a tenth
// of the shortest timeout, within [5ms, 1s]. Its clock (Server.clock) is
// what the connections stamp their activity with.
func janitorTick(idle, read time.Duration) time.Duration {
	t := time.Second
	for _, d := range []time.Duration{idle, read} {
		if d > 0 && d/10 < t {
			t = d / 10
		}
	}
	return max(t, 5*time.Millisecond)
}

// janitor advances the server's coarse clock and closes the connections
// that were idle for connections.max.idle.ms or whose frame in progress is
// older than socket.request.read.timeout.ms. Idle means no byte read or
// written and no request being handled (a JoinGroup may wait out a long
// rebalance), or a response write stuck that long (a client that does not
// read). It stops with the server.
func (s *Server) janitor(tick time.Duration, stop <-chan struct{}) {
	defer s.janitorWG.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	// Activity is stamped with the clock of the last tick, up to a tick
	// early: a tick of margin keeps a connection from closing before its
	// time.
	idle, read := s.cfg.ConnectionsMaxIdle.Nanoseconds(), s.cfg.RequestReadTimeout.Nanoseconds()
	margin := tick.Nanoseconds()
	var conns []*conn
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			ns := now.UnixNano()
			s.clock.Store(ns)
			s.mu.Lock()
			conns = conns[:0]
			for c := range s.conns {
				conns = append(conns, c)
			}
			s.mu.Unlock()
			for _, c := range conns {
				start, writing := c.frameStart.Load(), c.writeStart.Load()
				switch {
				case start != 0:
					if read > 0 && ns-start > read+margin {
						c.expire(expiredReadTimeout)
					}
				case idle <= 0:
				case writing != 0:
					if ns-writing > idle+margin {
						c.expire(expiredIdle)
					}
				case len(c.inflight) > 0:
				case ns-c.lastActive.Load() > idle+margin:
					c.expire(expiredIdle)
				}
			}
			clear(conns)
		}
	}
}

package security

import (
	"net/netip"
	"sync"
	"time"
)

// Throttle slows password guessing per source address. Every address that
// failed to authenticate recently has a next slot: each of its
// authentication attempts waits for the slot and moves it on by the
// current penalty, which doubles with each failure (Base, 2*Base, ... up to
// Max) and is forgotten after Forget without failures or on a success. So
// an address gets at most one attempt per penalty, however many
// connections it opens in parallel: with the defaults (100 ms doubling to
// 5 s), a thousand guesses take well over an hour. An attempt that would
// wait longer than MaxWait is refused at once.
type Throttle struct {
	Base    time.Duration // the first penalty (connection.failed.authentication.delay.ms)
	Max     time.Duration // the largest penalty
	MaxWait time.Duration // the longest an attempt waits for its slot
	Forget  time.Duration // failures older than this are forgotten
	// MaxAddrs bounds the addresses remembered; beyond it the oldest
	// entries are dropped.
	MaxAddrs int

	now func() time.Time

	mu    sync.Mutex
	addrs map[netip.Addr]*penalty
}

type penalty struct {
	failures int
	next     time.Time // the next attempt's slot
	last     time.Time // the last failure
}

// NewThrottle returns a throttle whose first penalty is base (0: failures
// are counted but not slowed).
func NewThrottle(base time.Duration) *Throttle {
	return &Throttle{Base: base, Max: 5 * time.Second, MaxWait: 30 * time.Second, Forget: 10 * time.Minute,
		MaxAddrs: 100000, now: time.Now, addrs: map[netip.Addr]*penalty{}}
}

func (t *Throttle) penaltyFor(failures int) time.Duration {
	d := t.Base
	for i := 1; i < failures && d < t.Max; i++ {
		d *= 2
	}
	return min(d, t.Max)
}

// Admit reserves ip's next attempt and returns how long it must wait
// before its credentials are checked; ok is false when the wait would
// exceed MaxWait (refuse the attempt without checking).
func (t *Throttle) Admit(ip netip.Addr) (wait time.Duration, ok bool) {
	if t == nil || t.Base <= 0 {
		return 0, true
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.addrs[ip]
	if p == nil {
		return 0, true
	}
	if now.Sub(p.last) > t.Forget {
		delete(t.addrs, ip)
		return 0, true
	}
	start := p.next
	if start.Before(now) {
		start = now
	}
	wait = start.Sub(now)
	if wait > t.MaxWait {
		return wait, false
	}
	p.next = start.Add(t.penaltyFor(p.failures))
	return wait, true
}

// Failed records a failed authentication from ip and returns the penalty
// now in force for it (how long to hold the failure's answer).
func (t *Throttle) Failed(ip netip.Addr) time.Duration {
	if t == nil {
		return 0
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.addrs[ip]
	if p == nil || now.Sub(p.last) > t.Forget {
		if p == nil && len(t.addrs) >= t.MaxAddrs {
			t.evict(now)
		}
		p = &penalty{}
		t.addrs[ip] = p
	}
	p.failures++
	p.last = now
	d := t.penaltyFor(p.failures)
	if p.next.Before(now.Add(d)) {
		p.next = now.Add(d)
	}
	if t.Base <= 0 {
		return 0
	}
	return d
}

// Succeeded forgets ip's failures.
func (t *Throttle) Succeeded(ip netip.Addr) {
	if t == nil {
		return
	}
	t.mu.Lock()
	delete(t.addrs, ip)
	t.mu.Unlock()
}

// evict drops forgotten entries, or, when none are, the oldest half. Lock
// should be held.
func (t *Throttle) evict(now time.Time) {
	for ip, p := range t.addrs {
		if now.Sub(p.last) > t.Forget {
			delete(t.addrs, ip)
		}
	}
	if len(t.addrs) < t.MaxAddrs {
		return
	}
	n := 0
	for ip := range t.addrs { // map order: an arbitrary half
		delete(t.addrs, ip)
		if n++; n >= t.MaxAddrs/2 {
			break
		}
	}
}

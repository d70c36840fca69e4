package web

import (
	"strings"
	"sync"
	"time"
)

// limiter slows down password guessing with exponential backoff rather
// than a lock-out. Failures are counted per (user name, client address):
// after userFree failures, each further one doubles the wait before the
// next attempt from that address for that name (1 s, 2 s, 4 s, ... up to
// maxWait). A guesser is slowed to one try per maxWait, while the real
// user, signing in from another address, is not held up at all: one client
// cannot lock an account, the admin's included. Failures are also counted
// per address across names (with a much larger allowance, addrFree), which
// slows one client spraying many accounts. A success clears its (name,
// address) count; counts without a failure for forgetAfter are forgotten.
//
// The client address is the one ClientIP reports: behind a reverse proxy,
// set console.trusted.proxies, or every user shares the proxy's address
// (and its per-address count).
type limiter struct {
	userFree    int
	addrFree    int
	base        time.Duration
	maxWait     time.Duration
	forgetAfter time.Duration
	maxKeys     int

	mu   sync.Mutex
	keys map[string]*failures // Lock mu.
	now  func() time.Time
}

type failures struct {
	n    int
	last time.Time
}

// The limiter's settings.
const (
	signInUserFree    = 5
	signInAddrFree    = 50
	signInBackoffBase = time.Second
	signInMaxWait     = 15 * time.Minute
	signInForget      = 24 * time.Hour
	signInMaxKeys     = 100_000
)

func newLimiter() *limiter {
	return &limiter{
		userFree: signInUserFree, addrFree: signInAddrFree, base: signInBackoffBase, maxWait: signInMaxWait,
		forgetAfter: signInForget, maxKeys: signInMaxKeys,
		keys: make(map[string]*failures), now: time.Now,
	}
}

func addrKey(ip string) string { return "a\x00" + ip }

func userKey(ip, user string) string { return "u\x00" + strings.ToLower(user) + "\x00" + ip }

// backoff is how long after its last failure a key with n failures waits,
// free failures allowed first.
func (l *limiter) backoff(n, free int) time.Duration {
	if n < free {
		return 0
	}
	d := l.base
	for i := free; i < n && d < l.maxWait; i++ {
		d *= 2
	}
	return min(d, l.maxWait)
}

// wait is how much longer key must wait. Lock should be held.
func (l *limiter) wait(key string, free int, now time.Time) time.Duration {
	f := l.keys[key]
	if f == nil {
		return 0
	}
	if now.Sub(f.last) >= l.forgetAfter {
		delete(l.keys, key)
		return 0
	}
	return max(0, l.backoff(f.n, free)-now.Sub(f.last))
}

// blocked reports whether a sign-in from ip as user must wait, and how long.
// user "" checks the address only (the setup form).
func (l *limiter) blocked(ip, user string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	wait := l.wait(addrKey(ip), l.addrFree, now)
	if user != "" {
		wait = max(wait, l.wait(userKey(ip, user), l.userFree, now))
	}
	return wait, wait > 0
}

// fail records a failed sign-in.
func (l *limiter) fail(ip, user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.keys) >= l.maxKeys {
		l.shed(now)
	}
	l.count(addrKey(ip), now)
	if user != "" {
		l.count(userKey(ip, user), now)
	}
}

// Lock should be held.
func (l *limiter) count(key string, now time.Time) {
	f := l.keys[key]
	if f == nil || now.Sub(f.last) >= l.forgetAfter {
		f = &failures{}
		l.keys[key] = f
	}
	f.n++
	f.last = now
}

// shed bounds memory under a flood of distinct names or addresses: first
// the forgotten counts go, then those that impose no wait yet, and as a
// last resort any. Lock should be held.
func (l *limiter) shed(now time.Time) {
	for k, f := range l.keys {
		if now.Sub(f.last) >= l.forgetAfter {
			delete(l.keys, k)
		}
	}
	for k, f := range l.keys {
		if len(l.keys) < l.maxKeys*3/4 {
			return
		}
		if f.n < l.userFree {
			delete(l.keys, k)
		}
	}
	for k := range l.keys {
		if len(l.keys) < l.maxKeys*3/4 {
			return
		}
		delete(l.keys, k)
	}
}

// succeed clears the failures of user from ip after a good sign-in.
func (l *limiter) succeed(ip, user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, userKey(ip, user))
}

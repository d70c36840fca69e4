package web

import (
	"strings"
	"sync"
	"time"
)

// limiter slows down password guessing: after perIP failed sign-ins from
// one address, or perUser failures for one user name, within window, further
// attempts are refused until the oldest failure leaves the window. Counting
// per user name stops a distributed guess at one account; counting per
// address stops one client spraying many accounts.
type limiter struct {
	window  time.Duration
	perIP   int
	perUser int

	mu    sync.Mutex
	fails map[string][]time.Time
	now   func() time.Time
}

func newLimiter(window time.Duration, perIP, perUser int) *limiter {
	return &limiter{window: window, perIP: perIP, perUser: perUser, fails: make(map[string][]time.Time), now: time.Now}
}

// Lock should be held.
func (l *limiter) recent(key string, now time.Time) []time.Time {
	ts := l.fails[key]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= l.window {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.fails, key)
		return nil
	}
	l.fails[key] = ts
	return ts
}

// blocked reports whether a sign-in from ip as user must wait, and how long.
func (l *limiter) blocked(ip, user string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var wait time.Duration
	check := func(key string, limit int) {
		ts := l.recent(key, now)
		if len(ts) >= limit {
			wait = max(wait, l.window-now.Sub(ts[len(ts)-limit]))
		}
	}
	check("ip:"+ip, l.perIP)
	if user != "" {
		check("user:"+strings.ToLower(user), l.perUser)
	}
	return wait, wait > 0
}

// fail records a failed sign-in.
func (l *limiter) fail(ip, user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.fails) > 50000 {
		// Bound memory under a flood of distinct names or addresses.
		for k := range l.fails {
			l.recent(k, now)
		}
	}
	l.fails["ip:"+ip] = append(l.recent("ip:"+ip, now), now)
	if user != "" {
		k := "user:" + strings.ToLower(user)
		l.fails[k] = append(l.recent(k, now), now)
	}
}

// succeed clears the failures of a user name after a good sign-in.
func (l *limiter) succeed(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, "user:"+strings.ToLower(user))
}

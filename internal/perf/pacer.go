package perf

import (
	"context"
	"time"
)

// Pacer holds a generator to a fixed rate: record n (counting from 0) is
// released no earlier than start + n/rate. Measuring against the start
// rather than the previous record means a late record does not push every
// later one back: the generator catches up, as a real source with its own
// clock would, instead of silently running below the asked rate.
//
// A Pacer is used by one goroutine.
type Pacer struct {
	rate  float64 // records per second; <= 0 means unlimited
	start time.Time
	timer *time.Timer
}

// NewPacer returns a pacer for rate records per second from start. A rate
// of zero or less never waits.
func NewPacer(rate float64, start time.Time) *Pacer {
	return &Pacer{rate: rate, start: start}
}

// Wait blocks until record n may be sent, or ctx is done.
func (p *Pacer) Wait(ctx context.Context, n int64) error {
	if p.rate <= 0 {
		return ctx.Err()
	}
	due := p.start.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return ctx.Err()
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return nil
	case <-ctx.Done():
		p.timer.Stop()
		return ctx.Err()
	}
}

package perf

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Meter holds the running totals that the progress line reads. Many
// Recorders feed one Meter; the Meter itself is only atomics.
type Meter struct {
	records  atomic.Int64
	bytes    atomic.Int64
	errors   atomic.Int64
	latCount atomic.Int64
	latSum   atomic.Int64 // nanoseconds
	latMax   atomic.Int64 // nanoseconds, since the last progress line (swapped to 0)
}

// Records returns how many records have been counted so far.
func (m *Meter) Records() int64 { return m.records.Load() }

// Bytes returns how many payload bytes have been counted so far.
func (m *Meter) Bytes() int64 { return m.bytes.Load() }

// Errors returns how many failed records have been counted so far.
func (m *Meter) Errors() int64 { return m.errors.Load() }

// AddError counts one failed record.
func (m *Meter) AddError() { m.errors.Add(1) }

// Add counts records that carry no latency (a consumed fetch) at once.
func (m *Meter) Add(records, bytes int64) {
	m.records.Add(records)
	m.bytes.Add(bytes)
}

// Recorder is one goroutine's view of a Meter: it owns a Histogram and
// batches its updates to the shared atomics, so recording a record costs a
// bucket increment and, once in a while, a handful of atomic adds. A
// Recorder is not safe for concurrent use.
type Recorder struct {
	m    *Meter
	Hist *Histogram // every latency recorded, for the final summary

	records, bytes, latSum, latMax int64
	pending                        int
	lastFlush                      time.Time
}

// flushRecords and flushAfter bound how stale the progress line can be: pending counts are
// published every flushRecords records or flushAfter, whichever comes first.
const (
	flushRecords = 256
	flushAfter   = 50 * time.Millisecond
)

// NewRecorder returns a Recorder feeding m with its own empty histogram.
func (m *Meter) NewRecorder() *Recorder {
	return &Recorder{m: m, Hist: NewHistogram(), lastFlush: time.Now()}
}

// Record counts one record of n bytes whose latency was lat, observed at
// now (the caller has just read the clock to compute lat).
func (r *Recorder) Record(n int, lat time.Duration, now time.Time) {
	r.Hist.RecordDuration(lat)
	r.records++
	r.bytes += int64(n)
	r.latSum += int64(lat)
	r.latMax = max(r.latMax, int64(lat))
	r.pending++
	if r.pending >= flushRecords || now.Sub(r.lastFlush) >= flushAfter {
		r.flush(now)
	}
}

// Flush publishes whatever is pending to the Meter. Call it once when the
// recording goroutine is done.
func (r *Recorder) Flush() { r.flush(time.Now()) }

func (r *Recorder) flush(now time.Time) {
	r.lastFlush = now
	if r.pending == 0 {
		return
	}
	m := r.m
	m.records.Add(r.records)
	m.bytes.Add(r.bytes)
	m.latCount.Add(int64(r.pending))
	m.latSum.Add(r.latSum)
	for {
		cur := m.latMax.Load()
		if r.latMax <= cur || m.latMax.CompareAndSwap(cur, r.latMax) {
			break
		}
	}
	r.records, r.bytes, r.latSum, r.latMax, r.pending = 0, 0, 0, 0, 0
}

// Progress prints one line per interval with the rate since the previous
// line. Start it with StartProgress and stop it with Stop.
type Progress struct {
	stop chan struct{}
	done sync.WaitGroup
}

// StartProgress prints a progress line for m to w every interval until Stop
// is called. A zero or negative interval, or a nil w, prints nothing.
func StartProgress(w io.Writer, m *Meter, interval time.Duration, label string) *Progress {
	p := &Progress{stop: make(chan struct{})}
	if w == nil || interval <= 0 {
		return p
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		start := time.Now()
		last := start
		var lastRecords, lastBytes, lastLatCount, lastLatSum int64
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				records, bytes := m.records.Load(), m.bytes.Load()
				latCount, latSum := m.latCount.Load(), m.latSum.Load()
				latMax := m.latMax.Swap(0)
				secs := now.Sub(last).Seconds()
				line := fmt.Sprintf("%s %6.1fs: %10.0f records/s %8.2f MiB/s",
					label, now.Sub(start).Seconds(),
					float64(records-lastRecords)/secs, float64(bytes-lastBytes)/secs/(1<<20))
				if n := latCount - lastLatCount; n > 0 {
					line += fmt.Sprintf(", latency avg %.3f ms max %.3f ms",
						float64(latSum-lastLatSum)/float64(n)/1e6, float64(latMax)/1e6)
				}
				line += fmt.Sprintf(", %d records total", records)
				if e := m.errors.Load(); e > 0 {
					line += fmt.Sprintf(", %d errors", e)
				}
				fmt.Fprintln(w, line)
				last, lastRecords, lastBytes, lastLatCount, lastLatSum = now, records, bytes, latCount, latSum
			}
		}
	}()
	return p
}

// Stop stops the progress goroutine and waits for it to return.
func (p *Progress) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.done.Wait()
}

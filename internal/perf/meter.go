package perf

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
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
	// live counts every latency published so far in the buckets of a
	// Histogram, for the percentiles of the progress line. Recorders add
	// a batch at a time under mu; nil until the first.
	mu   sync.Mutex
	live []uint64
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
	buckets                        [flushRecords]int32 // the pending latencies' buckets, for the Meter's live counts
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
	v := max(int64(lat), 0)
	b := bucketOf(v)
	r.Hist.recordIn(v, b)
	r.buckets[r.pending] = int32(b)
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
	m.mu.Lock()
	if m.live == nil {
		m.live = make([]uint64, bucketCount)
	}
	for _, b := range r.buckets[:r.pending] {
		m.live[b]++
	}
	m.mu.Unlock()
	for {
		cur := m.latMax.Load()
		if r.latMax <= cur || m.latMax.CompareAndSwap(cur, r.latMax) {
			break
		}
	}
	r.records, r.bytes, r.latSum, r.latMax, r.pending = 0, 0, 0, 0, 0
}

// Track is one Meter shown on the progress line.
type Track struct {
	Label string // "produce", "consume", "e2e"
	Meter *Meter
	// Latency names what the meter's latencies are ("latency", "e2e");
	// empty when it records none.
	Latency string
	// OnSample, when set, is called with every Sample of the track, from
	// the progress goroutine, after the line is printed.
	OnSample func(Sample)
}

// Sample is what one progress line reported for one Track: the rates and
// latency percentiles of the interval since the previous line, and the p99
// of the whole run so far.
type Sample struct {
	Seconds       float64 `json:"t"`       // since the start of the run
	Records       int64   `json:"records"` // in total so far
	RecordsPerSec float64 `json:"records_per_sec"`
	MiBPerSec     float64 `json:"mib_per_sec"`
	Errors        int64   `json:"errors,omitempty"` // in total so far
	// Latencies in milliseconds; absent when the interval had none.
	P50      *float64 `json:"p50_ms,omitempty"`
	P99      *float64 `json:"p99_ms,omitempty"`
	Max      *float64 `json:"max_ms,omitempty"`
	P99SoFar *float64 `json:"p99_so_far_ms,omitempty"`
}

// maxSamples bounds what a Progress keeps: a day of one-second lines.
const maxSamples = 86_400

// Progress prints one line per interval with the rates since the previous
// line and keeps what it printed as Samples. Start it with StartProgress or
// StartTracks and stop it with Stop.
type Progress struct {
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	samples [][]Sample // [track][tick]
}

// StartProgress prints a progress line for m to w every interval until Stop
// is called. A zero or negative interval, or a nil w, prints nothing.
func StartProgress(w io.Writer, m *Meter, interval time.Duration, label string) *Progress {
	return StartTracks(w, interval, []Track{{Label: label, Meter: m, Latency: "latency"}})
}

// trackState is what the progress goroutine remembers of a Track between
// two lines.
type trackState struct {
	records, bytes, latCount, latSum int64
	maxSoFar                         int64
	live                             []uint64 // the live buckets at the previous line
	cur                              []uint64
}

// StartTracks prints one progress line for all tracks to w every interval
// until Stop is called, and keeps each track's Samples. A zero or negative
// interval prints nothing and keeps nothing; a nil w keeps the samples but
// prints nothing.
func StartTracks(w io.Writer, interval time.Duration, tracks []Track) *Progress {
	p := &Progress{stop: make(chan struct{}), samples: make([][]Sample, len(tracks))}
	if interval <= 0 {
		return p
	}
	states := make([]trackState, len(tracks))
	for i := range states {
		states[i].live = make([]uint64, bucketCount)
		states[i].cur = make([]uint64, bucketCount)
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		start := time.Now()
		last := start
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				secs := now.Sub(last).Seconds()
				parts := make([]string, len(tracks))
				tick := make([]Sample, len(tracks))
				for i, tr := range tracks {
					s, avg := states[i].sample(tr.Meter, secs)
					s.Seconds = now.Sub(start).Seconds()
					p.mu.Lock()
					if len(p.samples[i]) < maxSamples {
						p.samples[i] = append(p.samples[i], s)
					}
					p.mu.Unlock()
					parts[i] = formatSample(tr, s, avg, len(tracks) == 1)
					tick[i] = s
				}
				if w != nil {
					line := strings.Join(parts, " | ")
					if len(tracks) == 1 {
						line = fmt.Sprintf("%s %6.1fs: %s", tracks[0].Label, now.Sub(start).Seconds(), line)
					} else {
						line = fmt.Sprintf("%6.1fs: %s", now.Sub(start).Seconds(), line)
					}
					fmt.Fprintln(w, line)
				}
				for i, tr := range tracks {
					if tr.OnSample != nil {
						tr.OnSample(tick[i])
					}
				}
				last = now
			}
		}
	}()
	return p
}

// sample reads m and returns the interval's Sample (Seconds unset) and
// average latency in ms (NaN when there was none).
func (st *trackState) sample(m *Meter, secs float64) (Sample, float64) {
	records, bytes := m.records.Load(), m.bytes.Load()
	latCount, latSum := m.latCount.Load(), m.latSum.Load()
	latMax := m.latMax.Swap(0)
	m.mu.Lock()
	if m.live != nil {
		copy(st.cur, m.live)
	}
	m.mu.Unlock()
	var total, delta uint64
	for i, c := range st.cur {
		total += c
		delta += c - st.live[i]
	}
	s := Sample{
		Records:       records,
		RecordsPerSec: float64(records-st.records) / secs,
		MiBPerSec:     float64(bytes-st.bytes) / secs / (1 << 20),
		Errors:        m.errors.Load(),
	}
	avg := math.NaN()
	ms := func(ns int64) *float64 { v := float64(ns) / 1e6; return &v }
	if n := latCount - st.latCount; n > 0 {
		avg = float64(latSum-st.latSum) / float64(n) / 1e6
		s.Max = ms(latMax)
	}
	st.maxSoFar = max(st.maxSoFar, latMax)
	// Bucket bounds are clamped to the exact maxima, as Histogram does.
	clamp := func(v, limit int64) *float64 {
		if limit > 0 {
			v = min(v, limit)
		}
		return ms(v)
	}
	if delta > 0 {
		// The interval's buckets are the difference of two snapshots.
		diff := make([]uint64, len(st.cur))
		for i := range diff {
			diff[i] = st.cur[i] - st.live[i]
		}
		s.P50 = clamp(countsQuantile(diff, rankOf(0.50, delta)), latMax)
		s.P99 = clamp(countsQuantile(diff, rankOf(0.99, delta)), latMax)
	}
	if total > 0 {
		s.P99SoFar = clamp(countsQuantile(st.cur, rankOf(0.99, total)), st.maxSoFar)
	}
	st.records, st.bytes, st.latCount, st.latSum = records, bytes, latCount, latSum
	st.live, st.cur = st.cur, st.live
	return s, avg
}

// formatSample is one track's part of the progress line: the long form
// when it is the only track, else a short one.
func formatSample(tr Track, s Sample, avg float64, alone bool) string {
	var b strings.Builder
	if !alone {
		fmt.Fprintf(&b, "%s %8.0f records/s %7.2f MiB/s", tr.Label, s.RecordsPerSec, s.MiBPerSec)
		if tr.Latency != "" && s.P99 != nil {
			fmt.Fprintf(&b, ", %s p99 %s ms", tr.Latency, fmtMs(*s.P99))
		}
		if tr.Latency != "" && s.P99SoFar != nil {
			fmt.Fprintf(&b, " (so far %s)", fmtMs(*s.P99SoFar))
		}
		fmt.Fprintf(&b, ", %d total", s.Records)
		if s.Errors > 0 {
			fmt.Fprintf(&b, ", %d errors", s.Errors)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%10.0f records/s %8.2f MiB/s", s.RecordsPerSec, s.MiBPerSec)
	if tr.Latency != "" && s.P99 != nil {
		fmt.Fprintf(&b, ", %s", tr.Latency)
		if !math.IsNaN(avg) {
			fmt.Fprintf(&b, " avg %.3f", avg)
		}
		fmt.Fprintf(&b, " p99 %.3f", *s.P99)
		if s.Max != nil {
			fmt.Fprintf(&b, " max %.3f", *s.Max)
		}
		b.WriteString(" ms")
	}
	if tr.Latency != "" && s.P99SoFar != nil {
		fmt.Fprintf(&b, ", p99 so far %.3f ms", *s.P99SoFar)
	}
	fmt.Fprintf(&b, ", %d records total", s.Records)
	if s.Errors > 0 {
		fmt.Fprintf(&b, ", %d errors", s.Errors)
	}
	return b.String()
}

// Samples returns what the progress lines of track i reported; call it
// after Stop.
func (p *Progress) Samples(i int) []Sample {
	return p.samplesSoFar(i)
}

// samplesSoFar is Samples while the progress may still run.
func (p *Progress) samplesSoFar(i int) []Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.samples) {
		return nil
	}
	return slices.Clone(p.samples[i])
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

package perf

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, like HdrHistogram: values below 2^subBits are
// counted exactly, and every power-of-two range above that is split into
// 2^(subBits-1) equal buckets. A bucket's width is then at most 2^-(subBits-1)
// of the values it holds, so any reported percentile is within 0.2% of the
// true value (three significant digits), whatever the range.
//
// The counts array covers every non-negative int64, so memory is fixed
// (about 225 KiB) no matter how many values are recorded or how large they
// are: a 10-hour latency is counted as precisely as a 10-microsecond one.
// We considered bounding the range (say at an hour) to halve the array, but
// one histogram per producer or consumer is cheap and an out-of-range value
// that has to be clamped is a lie in the tail we care most about.
const (
	subBits     = 10
	subCount    = 1 << subBits  // values counted exactly: [0, subCount)
	halfCount   = subCount >> 1 // buckets per power of two above that
	maxShift    = 63 - subBits  // largest shift a positive int64 needs
	bucketCount = subCount + maxShift*halfCount
)

// Histogram counts int64 values (nanoseconds, when used for latency) in a
// fixed number of buckets. The zero value is not usable; use NewHistogram.
//
// A Histogram is not safe for concurrent use: give each recording goroutine
// its own and Merge them at the end. That keeps Record to a few instructions
// with no atomics, which matters when it runs once per record.
type Histogram struct {
	counts []uint64
	total  uint64
	sum    float64 // exact up to 2^53 ns (104 days) per value; float so it never overflows
	min    int64
	max    int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, bucketCount), min: math.MaxInt64}
}

// bucketOf returns the bucket index of v (v >= 0).
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	// The highest set bit is at position m-1; keep the top subBits bits.
	shift := bits.Len64(uint64(v)) - subBits
	return subCount + (shift-1)*halfCount + int(v>>uint(shift)) - halfCount
}

// bucketHigh returns the largest value that falls in bucket i.
func bucketHigh(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	j := i - subCount
	shift := j/halfCount + 1
	top := int64(j%halfCount + halfCount) // the top subBits bits of the values in the bucket
	return (top+1)<<uint(shift) - 1
}

// Record adds one value. Negative values (a clock stepping back between two
// machines' timestamps) are counted as zero.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// RecordDuration adds d in nanoseconds.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every value counted in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Reset empties the histogram, keeping its memory.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.total, h.sum, h.min, h.max = 0, 0, math.MaxInt64, 0
}

// Count returns how many values were recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Mean returns the exact mean of the recorded values, 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Min returns the smallest recorded value, exactly; 0 when empty.
func (h *Histogram) Min() int64 {
	if h.total == 0 {
		return 0
	}
	return h.min
}

// Max returns the largest recorded value, exactly; 0 when empty.
func (h *Histogram) Max() int64 { return h.max }

// Quantile returns the value at quantile q (0.99 for p99): the smallest
// bucket bound at or below which at least ceil(q*count) of the values lie,
// clamped to the exact minimum and maximum. Like HdrHistogram it reports a
// bucket's highest equivalent value, so it never understates a latency.
// It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(max(bucketHigh(i), h.min), h.max)
		}
	}
	return h.max
}

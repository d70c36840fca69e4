package perf

import (
	"math"
	"math/bits"
	"slices"
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
//
// On top of the buckets, a Histogram keeps the TailValues largest values it
// has seen, exactly. A quantile whose rank falls among them is reported
// exactly rather than as a bucket bound: the maximum always, p99.9 for up to
// 16.4 million values and p99 for up to 1.6 million (per histogram, and
// likewise after Merge). Past that, a quantile is the bucket bound above.
//
// (HdrHistogram's Go port, github.com/HdrHistogram/hdrhistogram-go, has the
// same bucket scheme but reports Min and Max as bucket bounds too, needs a
// range fixed in advance and fails values outside it; hence this one.)
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
	// tail is a min-heap of the TailValues largest values recorded;
	// sorted is its ascending copy, rebuilt on demand when dirty.
	tail   []int64
	sorted []int64
	dirty  bool
	total  uint64
	sum    float64 // exact up to 2^53 ns (104 days) per value; float so it never overflows
	min    int64
	max    int64
}

// TailValues is how many of the largest values a Histogram keeps exactly.
const TailValues = 1 << 14

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, bucketCount), tail: make([]int64, 0, TailValues), min: math.MaxInt64}
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
	h.recordIn(v, bucketOf(v))
}

// recordIn adds v (>= 0), whose bucket is b.
func (h *Histogram) recordIn(v int64, b int) {
	h.counts[b]++
	if len(h.tail) < TailValues || v > h.tail[0] {
		h.keep(v)
	}
	h.total++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// keep offers v to the tail heap: a push while it has room, else a
// replacement of the smallest kept value when v is larger.
func (h *Histogram) keep(v int64) {
	t := h.tail
	switch {
	case len(t) < TailValues:
		t = append(t, v)
		for i := len(t) - 1; i > 0; { // sift up
			parent := (i - 1) / 2
			if t[parent] <= t[i] {
				break
			}
			t[parent], t[i] = t[i], t[parent]
			i = parent
		}
		h.tail = t
	case v > t[0]:
		t[0] = v
		for i := 0; ; { // sift down
			l, small := 2*i+1, i
			if l < len(t) && t[l] < t[small] {
				small = l
			}
			if r := l + 1; r < len(t) && t[r] < t[small] {
				small = r
			}
			if small == i {
				break
			}
			t[i], t[small] = t[small], t[i]
			i = small
		}
	default:
		return
	}
	h.dirty = true
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
	for _, v := range o.tail {
		h.keep(v)
	}
	h.total += o.total
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Reset empties the histogram, keeping its memory.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.tail, h.sorted, h.dirty = h.tail[:0], h.sorted[:0], false
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
// value with at least ceil(q*count) of the values at or below it. When that
// rank is among the TailValues largest values it is exact; otherwise it is
// the highest value of the value's bucket, clamped to the exact minimum and
// maximum, so like HdrHistogram it never understates a latency. It returns
// 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := h.rank(q)
	if fromTop := h.total - rank + 1; fromTop <= uint64(len(h.tail)) {
		if h.dirty || len(h.sorted) != len(h.tail) {
			h.sorted = append(h.sorted[:0], h.tail...)
			slices.Sort(h.sorted)
			h.dirty = false
		}
		return h.sorted[uint64(len(h.sorted))-fromTop]
	}
	return min(max(countsQuantile(h.counts, rank), h.min), h.max)
}

// Exact reports whether Quantile(q) is the exact value rather than a bucket
// bound.
func (h *Histogram) Exact(q float64) bool {
	return h.total > 0 && h.total-h.rank(q)+1 <= uint64(len(h.tail))
}

// rank is the 1-based rank of quantile q among the values recorded.
func (h *Histogram) rank(q float64) uint64 {
	return rankOf(q, h.total)
}

func rankOf(q float64, total uint64) uint64 {
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(total)))
	return min(max(rank, 1), total)
}

// countsQuantile returns the highest value of the bucket holding the value
// of the given rank (1-based) in counts, or 0 when there are fewer values.
func countsQuantile(counts []uint64, rank uint64) int64 {
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			return bucketHigh(i)
		}
	}
	return 0
}

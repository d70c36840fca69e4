package perf

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactQuantile is the definition Quantile approximates: the smallest value
// with at least ceil(q*n) values at or below it.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// maxRelErr is the bucket width bound: 1 / 2^(subBits-1).
const maxRelErr = 1.0 / halfCount

func checkQuantiles(t *testing.T, name string, vals []int64) {
	t.Helper()
	h := NewHistogram()
	var sum float64
	for _, v := range vals {
		h.Record(v)
		sum += float64(v)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	if h.Count() != uint64(len(vals)) {
		t.Fatalf("%s: count %d, want %d", name, h.Count(), len(vals))
	}
	if h.Min() != sorted[0] || h.Max() != sorted[len(sorted)-1] {
		t.Fatalf("%s: min/max %d/%d, want %d/%d", name, h.Min(), h.Max(), sorted[0], sorted[len(sorted)-1])
	}
	if want := sum / float64(len(vals)); math.Abs(h.Mean()-want) > 1e-9*want {
		t.Fatalf("%s: mean %v, want %v", name, h.Mean(), want)
	}
	for _, q := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 1} {
		got, want := h.Quantile(q), exactQuantile(sorted, q)
		// Reported values are bucket upper bounds: never below the truth,
		// and above it by at most one bucket width.
		if got < want || float64(got-want) > maxRelErr*float64(want)+1 {
			t.Errorf("%s: q%.4f = %d, want %d (within %.2f%%, never below)", name, q, got, want, maxRelErr*100)
		}
	}
}

func TestHistogramQuantilesKnownData(t *testing.T) {
	// 1..100000: every quantile is known exactly.
	uniform := make([]int64, 100_000)
	for i := range uniform {
		uniform[i] = int64(i + 1)
	}
	checkQuantiles(t, "1..100000", uniform)

	h := NewHistogram()
	for _, v := range uniform {
		h.Record(v)
	}
	for q, want := range map[float64]int64{0.5: 50_000, 0.95: 95_000, 0.99: 99_000, 0.999: 99_900} {
		got := h.Quantile(q)
		if got < want || float64(got-want) > maxRelErr*float64(want) {
			t.Errorf("uniform q%v = %d, want %d", q, got, want)
		}
	}

	// Values below 1024 are counted exactly.
	small := []int64{5, 1, 3, 2, 4, 1000, 7, 7, 7, 1023}
	hs := NewHistogram()
	for _, v := range small {
		hs.Record(v)
	}
	sorted := slices.Clone(small)
	slices.Sort(sorted)
	for _, q := range []float64{0.1, 0.5, 0.7, 0.9, 1} {
		if got, want := hs.Quantile(q), exactQuantile(sorted, q); got != want {
			t.Errorf("small q%v = %d, want exactly %d", q, got, want)
		}
	}
}

func TestHistogramQuantilesLatencyShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Latency-like data in nanoseconds: a log-normal body around 300 µs
	// with a heavy tail out to seconds.
	lognormal := make([]int64, 200_000)
	for i := range lognormal {
		lognormal[i] = int64(math.Exp(rng.NormFloat64()*1.2 + math.Log(300e3)))
	}
	checkQuantiles(t, "lognormal", lognormal)

	// A bimodal mix: 99% fast, 1% slow, so p99 sits on the edge.
	bimodal := make([]int64, 100_000)
	for i := range bimodal {
		if i%100 == 0 {
			bimodal[i] = 50_000_000 + rng.Int64N(1_000_000)
		} else {
			bimodal[i] = 200_000 + rng.Int64N(50_000)
		}
	}
	checkQuantiles(t, "bimodal", bimodal)

	// Extremes: zero, huge, and the largest int64.
	checkQuantiles(t, "extremes", []int64{0, 1, 1 << 40, math.MaxInt64 / 3, math.MaxInt64})
}

func TestHistogramBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(v int64) {
		i := bucketOf(v)
		if i < 0 || i >= bucketCount {
			t.Fatalf("bucketOf(%d) = %d out of [0,%d)", v, i, bucketCount)
		}
		if hi := bucketHigh(i); hi < v {
			t.Fatalf("bucketHigh(bucketOf(%d)) = %d < value", v, hi)
		}
		if i > 0 && bucketHigh(i-1) >= v {
			t.Fatalf("previous bucket of %d ends at %d, not below it", v, bucketHigh(i-1))
		}
	}
	for v := range int64(5000) {
		check(v)
	}
	for range 100_000 {
		check(rng.Int64() >> rng.IntN(63))
	}
	check(math.MaxInt64)
	if got := bucketHigh(bucketCount - 1); got != math.MaxInt64 {
		t.Fatalf("last bucket ends at %d, want MaxInt64", got)
	}
}

func TestHistogramMergeResetNegative(t *testing.T) {
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 10_000 {
		v := rng.Int64N(10_000_000)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(NewHistogram()) // merging an empty histogram changes nothing
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged q%v = %d, recorded together %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != all.Count() || a.Max() != all.Max() || a.Min() != all.Min() {
		t.Errorf("merged count/min/max %d/%d/%d, want %d/%d/%d", a.Count(), a.Min(), a.Max(), all.Count(), all.Min(), all.Max())
	}

	a.Reset()
	if a.Count() != 0 || a.Quantile(0.5) != 0 || a.Max() != 0 || a.Min() != 0 || a.Mean() != 0 {
		t.Errorf("reset histogram not empty: count %d", a.Count())
	}
	a.Record(-5) // clock skew: counted as zero, never a panic
	if a.Count() != 1 || a.Max() != 0 {
		t.Errorf("negative value: count %d max %d, want 1 and 0", a.Count(), a.Max())
	}
	if LatencyOf(NewHistogram()) != nil {
		t.Error("LatencyOf(empty) should be nil")
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	v := int64(123_456)
	b.ReportAllocs()
	for i := range b.N {
		h.Record(v + int64(i&1023))
	}
}

// TestHistogramTailExact: the largest TailValues values are kept exactly,
// so the max always, and any quantile whose rank falls among them (p99.9 up
// to 16.4 M values), is the true value, not a bucket bound; Exact says
// which quantiles those are, and Merge keeps the property.
func TestHistogramTailExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	lognormal := func(n int) []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(math.Exp(rng.NormFloat64()*1.5 + math.Log(300e3)))
		}
		return v
	}
	qs := []float64{0, 0.001, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}

	// Fewer values than the tail holds: every quantile is exact.
	small := lognormal(TailValues - 1)
	h := NewHistogram()
	for _, v := range small {
		h.Record(v)
	}
	sorted := slices.Clone(small)
	slices.Sort(sorted)
	for _, q := range qs {
		if got, want := h.Quantile(q), exactQuantile(sorted, q); got != want || !h.Exact(q) {
			t.Errorf("%d values: q%v = %d (exact %v), want exactly %d", len(small), q, got, h.Exact(q), want)
		}
	}

	// 400,000 values: p99.9 (rank 400 from the top) and above are exact,
	// the median is a bucket bound within 0.2%.
	big := lognormal(400_000)
	h.Reset()
	a, b := NewHistogram(), NewHistogram()
	for i, v := range big {
		h.Record(v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	sorted = slices.Clone(big)
	slices.Sort(sorted)
	for _, hist := range []*Histogram{h, a} {
		for _, q := range []float64{0.99, 0.999, 0.9999, 1} {
			if got, want := hist.Quantile(q), exactQuantile(sorted, q); got != want || !hist.Exact(q) {
				t.Errorf("400k values: q%v = %d (exact %v), want exactly %d", q, got, hist.Exact(q), want)
			}
		}
		if hist.Max() != sorted[len(sorted)-1] {
			t.Errorf("max %d, want %d", hist.Max(), sorted[len(sorted)-1])
		}
		if hist.Exact(0.5) {
			t.Error("the median of 400k values claims to be exact")
		}
		got, want := hist.Quantile(0.5), exactQuantile(sorted, 0.5)
		if got < want || float64(got-want) > maxRelErr*float64(want) {
			t.Errorf("median %d, want %d within %.2f%%", got, want, maxRelErr*100)
		}
	}

	// A rising sequence replaces the kept values on every record; Reset
	// empties them.
	h.Reset()
	for v := range int64(100_000) {
		h.Record(v * 1000)
	}
	if got := h.Quantile(0.999); got != 99_899*1000 {
		t.Errorf("rising: p99.9 = %d, want %d", got, 99_899*1000)
	}
	h.Reset()
	if h.Exact(0.99) || h.Quantile(0.99) != 0 {
		t.Error("reset histogram still reports a tail")
	}
}

func BenchmarkHistogramRecordRising(b *testing.B) {
	h := NewHistogram()
	b.ReportAllocs()
	for i := range b.N {
		h.Record(int64(i)) // every value enters the tail
	}
}

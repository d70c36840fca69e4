package migration

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSkewHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, gen := range []func() int64{
		func() int64 { return int64(rng.IntN(50)) },                                            // exact range
		func() int64 { return int64(rng.NormFloat64()*2000) + 100 },                            // around zero, both signs
		func() int64 { return int64(math.Exp(rng.Float64()*20)) * (1 - 2*int64(rng.IntN(2))) }, // wide
	} {
		var h skewHist
		var all []int64
		for i := 0; i < 100_000; i++ {
			v := gen()
			h.add(v)
			all = append(all, v)
		}
		slices.Sort(all)
		for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 1} {
			rank := int(math.Ceil(q*float64(len(all)))) - 1
			want := all[max(rank, 0)]
			got := h.quantile(q)
			tol := max(int64(math.Abs(float64(want))/60), 1)
			if d := got - want; d > tol || d < -tol {
				t.Errorf("q%.2f = %d, exact %d", q, got, want)
			}
		}
		// Round trip through the checkpoint encoding.
		var back skewHist
		r := &reader{b: h.appendBinary(nil)}
		back.decode(r)
		if r.err != nil || back != h {
			t.Fatalf("round trip: %v", r.err)
		}
	}
	var h skewHist
	h.add(math.MinInt64)
	h.add(math.MaxInt64)
	if h.quantile(0) != math.MinInt64 || h.quantile(1) != math.MaxInt64 {
		t.Fatal("extremes")
	}
	if (&skewHist{}).quantile(0.5) != 0 {
		t.Fatal("empty")
	}
}

// A corrupt checkpoint (a damaged database) is an error, never a panic or
// a wild allocation; one that decodes is usable. (A deterministic stand-in
// for a fuzz target: this package's test binary links SQLite and kfake,
// which makes native fuzzing here crawl.)
func TestCheckpointCorruption(t *testing.T) {
	spec := genSpec("L", "R", false)
	spec.Headers = true
	e := testCore(t, spec, 10, 10)
	g := generate(40, time.UnixMilli(1_700_000_000_000), false)
	for i, r := range g.left[:20] {
		e.add(0, 0, int64(i), r.ts.UnixMilli(), r.key, r.value, nil)
	}
	for i, r := range g.right[:12] {
		e.add(1, 0, int64(i), r.ts.UnixMilli(), r.key, r.value, nil)
	}
	blob, err := e.encodeCheckpoint(nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	decoded := 0
	try := func(b []byte) {
		c := testCore(t, spec, 0, 0)
		if err := c.decodeCheckpoint(b); err != nil {
			return
		}
		decoded++
		c.expire()
		c.snapshot(time.Now())
		if _, err := c.encodeCheckpoint(nil); err != nil {
			t.Fatal(err)
		}
	}
	try(blob)
	if decoded != 1 {
		t.Fatal("the intact checkpoint did not decode")
	}
	for n := 0; n <= len(blob); n += 1 + n/8 {
		try(blob[:n])
	}
	for i := 0; i < 3000; i++ {
		b := append([]byte(nil), blob...)
		for k := 0; k < 1+rng.IntN(4); k++ {
			switch rng.IntN(3) {
			case 0:
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			case 1:
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			default:
				p := rng.IntN(len(b))
				b = append(b[:p], append([]byte{0xff, 0xff, 0xff, 0x7f}, b[p:]...)...)
			}
		}
		try(b)
	}
}

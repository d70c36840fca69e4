package migration

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
)

// skewHist is a bounded-memory histogram of signed integers (milliseconds of
// latency skew). Magnitudes below 128 are exact; above, buckets are
// log-linear with 64 sub-buckets per power of two, so a reported quantile is
// within 1.6% of the true value. Min and max are exact. The size is fixed
// (~60 KiB) whatever the number of values.
type skewHist struct {
	count    int64
	min, max int64
	neg, pos [histBuckets]uint64 // neg holds magnitudes of negative values
}

const (
	histExact   = 128
	histSub     = 64
	histBuckets = histExact + 57*histSub
)

func histIndex(v uint64) int {
	if v < histExact {
		return int(v)
	}
	e := bits.Len64(v) - 7 // >= 1
	m := v >> uint(e)      // in [64, 128)
	return histExact + (e-1)*histSub + int(m-histSub)
}

// histValue is a representative (midpoint) magnitude of bucket idx.
func histValue(idx int) uint64 {
	if idx < histExact {
		return uint64(idx)
	}
	e := (idx-histExact)/histSub + 1
	m := uint64((idx-histExact)%histSub + histSub)
	lo := m << uint(e)
	return lo + (uint64(1)<<uint(e))/2
}

func (h *skewHist) add(v int64) {
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if h.count == 0 || v > h.max {
		h.max = v
	}
	h.count++
	if v < 0 {
		h.neg[histIndex(uint64(-(v+1))+1)]++ // -(MinInt64) overflows; this does not
	} else {
		h.pos[histIndex(uint64(v))]++
	}
}

// quantile returns the value at quantile q in [0, 1]; 0 when empty.
func (h *skewHist) quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	clamp := func(v int64) int64 { return max(h.min, min(h.max, v)) }
	for i := histBuckets - 1; i >= 0; i-- {
		seen += h.neg[i]
		if seen >= rank {
			v := histValue(i)
			if v > math.MaxInt64 {
				return h.min
			}
			return clamp(-int64(v))
		}
	}
	for i := 0; i < histBuckets; i++ {
		seen += h.pos[i]
		if seen >= rank {
			v := histValue(i)
			if v > math.MaxInt64 {
				return h.max
			}
			return clamp(int64(v))
		}
	}
	return h.max
}

// appendBinary encodes the histogram sparsely.
func (h *skewHist) appendBinary(b []byte) []byte {
	b = binary.AppendVarint(b, h.count)
	b = binary.AppendVarint(b, h.min)
	b = binary.AppendVarint(b, h.max)
	for _, arr := range [2]*[histBuckets]uint64{&h.neg, &h.pos} {
		n := 0
		for _, c := range arr {
			if c != 0 {
				n++
			}
		}
		b = binary.AppendUvarint(b, uint64(n))
		for i, c := range arr {
			if c != 0 {
				b = binary.AppendUvarint(b, uint64(i))
				b = binary.AppendUvarint(b, c)
			}
		}
	}
	return b
}

var errCorruptCheckpoint = errors.New("migration: corrupt checkpoint")

func (h *skewHist) decode(r *reader) {
	*h = skewHist{}
	h.count = r.varint()
	h.min = r.varint()
	h.max = r.varint()
	for _, arr := range [2]*[histBuckets]uint64{&h.neg, &h.pos} {
		n := r.uvarint()
		if n > histBuckets {
			r.fail()
			return
		}
		for k := uint64(0); k < n; k++ {
			i := r.uvarint()
			c := r.uvarint()
			if i >= histBuckets {
				r.fail()
				return
			}
			arr[i] = c
		}
	}
}

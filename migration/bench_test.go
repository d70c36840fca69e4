package migration

import (
	"testing"
)

// BenchmarkCorePairs measures the engine alone (no Kafka): one op is one
// pair, both records added, JSON-path pairing, JSON equality with an
// ignored path, values ~190 bytes written in different member orders.
func BenchmarkCorePairs(b *testing.B) {
	for _, mode := range []struct {
		name   string
		key    string
		values string
		ignore []string
	}{
		{"key+bytes", "key", "bytes", nil},
		{"json-path+json", "json:order.id", "json", []string{"processed_at"}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			spec := DefaultSpec()
			spec.Left, spec.Right = "L", "R"
			spec.Key, spec.Values, spec.Ignore = mode.key, mode.values, mode.ignore
			e := testCore(b, spec, 0, 0)
			e.sides[0].parts[0].end, e.sides[1].parts[0].end = -1, -1
			const distinct = 4096
			type pair struct{ key, l, r []byte }
			vals := make([]pair, distinct)
			for i := range vals {
				l := leftValue(i, 12.5, "2025-01-01T00:00:00Z")
				r := rightValue(orderID(i), i, 12.5, "2025-01-01T00:00:01Z")
				if mode.values == "bytes" {
					r = l
				}
				vals[i] = pair{[]byte(orderID(i)), l, r}
			}
			b.SetBytes(int64(len(vals[0].l) + len(vals[0].r)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				v := vals[i%distinct]
				off := int64(i)
				// Left leads by a few records, as in a real stream.
				e.add(0, 0, off, off, v.key, v.l, nil)
				e.add(1, 0, off, off, v.key, v.r, nil)
				if i%256 == 0 {
					e.expire()
				}
			}
			b.StopTimer()
			if e.c.Mismatched != 0 {
				b.Fatalf("%d mismatched", e.c.Mismatched)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

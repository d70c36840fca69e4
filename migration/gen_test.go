package migration

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/migration/jsondiff"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The generator plays the two order services: the same input of n orders
// becomes ORDER (left) and ORDERNEW (right), the new service writing JSON
// with its members in another order, and with these injected differences:
//
//	#100  a changed field (order.total)                 -> 1 mismatched
//	#200  dropped on the right                          -> 1 missing right
//	extra an order only on the right                    -> 1 missing left
//	#300  written twice on the right                    -> 1 duplicate (right)
//	#400/#401 swapped on the right                      -> 1 out of order
//	#500  right partner 500ms late (window 1s)          -> matched, 1 out of order, skew max 500ms
//	#600  right partner 2.5s late (beyond the window)   -> 1 missing right + 1 missing left
//	#700  processed_at differs (an ignored path)        -> matched
//	#800  order.total differs by 0.0001 (tolerance 0.001) -> matched
//
// Timestamps advance 10ms per order and stay in order within each topic,
// the late partners being written where their timestamp puts them.

const (
	genStep   = 10 * time.Millisecond
	genWindow = time.Second
)

type genRecord struct {
	key     []byte
	value   []byte
	ts      time.Time
	headers []kgo.RecordHeader
}

type generated struct {
	left, right []genRecord
	want        Counters // outcome counters (records, pairs, differences)
	wantSkewMax time.Duration
	wantSkewMin time.Duration
}

func orderID(i int) string { return fmt.Sprintf("o-%05d", i) }

func leftValue(i int, total float64, processed string) []byte {
	return fmt.Appendf(nil, `{"order":{"id":%q,"customer":"c-%d","total":%s,"items":[{"sku":"A-%d","qty":%d}]},"processed_at":%q,"status":"NEW"}`,
		orderID(i), i%17, strconv.FormatFloat(total, 'f', -1, 64), i%5, 1+i%3, processed)
}

// rightValue is the same order as the new service writes it: members in
// another order and different spacing.
func rightValue(id string, i int, total float64, processed string) []byte {
	return fmt.Appendf(nil, `{"status": "NEW", "processed_at": %q, "order": {"items": [{"qty": %d, "sku": "A-%d"}], "total": %s, "customer": "c-%d", "id": %q}}`,
		processed, 1+i%3, i%5, strconv.FormatFloat(total, 'f', -1, 64), i%17, id)
}

// generate builds the topics. keyed puts the order id in the record key;
// otherwise the record key is nil and pairing must use json:order.id.
func generate(n int, base time.Time, keyed bool) generated {
	var g generated
	type rightRec struct {
		rec genRecord
		seq int
	}
	var right []rightRec
	key := func(id string) []byte {
		if keyed {
			return []byte(id)
		}
		return nil
	}
	tsOf := func(i int) time.Time { return base.Add(time.Duration(i) * genStep) }
	processed := func(i int) string { return tsOf(i).Add(3 * time.Millisecond).UTC().Format(time.RFC3339Nano) }
	for i := 0; i < n; i++ {
		total := float64(100+i) + 0.25
		id := orderID(i)
		g.left = append(g.left, genRecord{key: key(id), value: leftValue(i, total, processed(i)), ts: tsOf(i)})

		rts := tsOf(i)
		rtotal := total
		rproc := processed(i)
		switch i {
		case 100:
			rtotal = total + 1
		case 200:
			continue
		case 400:
			rts = tsOf(401)
		case 401:
			rts = tsOf(400)
		case 500:
			rts = tsOf(i).Add(500 * time.Millisecond)
		case 600:
			rts = tsOf(i).Add(2500 * time.Millisecond)
		case 700:
			rproc = tsOf(i).Add(time.Hour).UTC().Format(time.RFC3339Nano)
		case 800:
			rtotal = total + 0.0001
		}
		r := genRecord{key: key(id), value: rightValue(id, i, rtotal, rproc), ts: rts}
		right = append(right, rightRec{r, len(right)})
		if i == 300 {
			right = append(right, rightRec{r, len(right)})
		}
		if i == 250 {
			x := genRecord{key: key("o-extra"), value: rightValue("o-extra", 99999, 1, processed(i)), ts: tsOf(i).Add(5 * time.Millisecond)}
			right = append(right, rightRec{x, len(right)})
		}
	}
	// Sorting by timestamp puts the swapped #401 before #400 and the late
	// partners where their timestamps belong.
	sort.SliceStable(right, func(a, b int) bool {
		ta, tb := right[a].rec.ts, right[b].rec.ts
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return right[a].seq < right[b].seq
	})
	for _, r := range right {
		g.right = append(g.right, r.rec)
	}
	g.want = Counters{
		LeftRecords:     int64(n),
		RightRecords:    int64(n - 1 + 1 + 1),
		Matched:         int64(n - 3),
		Mismatched:      1,
		MissingRight:    2,
		MissingLeft:     2,
		DuplicatesRight: 1,
		OutOfOrder:      2,
	}
	g.wantSkewMax = 500 * time.Millisecond
	g.wantSkewMin = -genStep
	return g
}

// orderIDOf digs the order id out of a generated value (test helper).
func orderIDOf(r genRecord) []byte {
	var d jsondiff.Doc
	if d.Parse(r.value) != nil {
		return nil
	}
	p, _ := jsondiff.ParsePath("order.id")
	n := d.Lookup(&p)
	if n < 0 {
		return nil
	}
	k, _ := d.AppendKey(nil, n)
	return k
}

// genSpec is the spec the generator's expectations are written for.
func genSpec(left, right string, keyed bool) Spec {
	s := DefaultSpec()
	s.Left, s.Right = left, right
	if !keyed {
		s.Key = "json:order.id"
	}
	s.Values = "json"
	s.Ignore = []string{"processed_at"}
	s.Tolerance = 0.001
	s.Window = Duration(genWindow)
	s.Bounded = true
	return s
}

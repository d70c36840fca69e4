package migration

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// testCore makes a bounded core over in-memory "topics": one partition per
// side holding the given records at offsets 0...
func testCore(t testing.TB, spec Spec, nl, nr int) *core {
	t.Helper()
	cs, err := compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	e := newCore(cs, Limits{}, [2][]int64{{0}, {0}}, [2][]int64{{int64(nl)}, {int64(nr)}}, [2][]int64{{int64(nl)}, {int64(nr)}})
	e.samples.exampleLimit = 10
	return e
}

// feedInterleaved feeds both sides into e in chunks of random sizes chosen
// by rng, calling expire after each chunk like the runner does.
func feedInterleaved(e *core, g generated, rng *rand.Rand, maxChunk int) {
	var pos [2]int
	recs := [2][]genRecord{g.left, g.right}
	for pos[0] < len(recs[0]) || pos[1] < len(recs[1]) {
		s := rng.IntN(2)
		if pos[s] >= len(recs[s]) {
			s = 1 - s
		}
		n := 1 + rng.IntN(maxChunk)
		for k := 0; k < n && pos[s] < len(recs[s]); k++ {
			r := recs[s][pos[s]]
			e.add(s, 0, int64(pos[s]), r.ts.UnixMilli(), r.key, r.value, r.headers)
			pos[s]++
		}
		e.expire()
	}
	e.expire()
}

func outcome(c Counters) Counters {
	c.FirstPairMs, c.LastPairMs = 0, 0
	return c
}

func TestCoreGeneratedCountsAnyInterleaving(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, keyed := range []bool{true, false} {
		g := generate(1000, base, keyed)
		for seed := uint64(0); seed < 20; seed++ {
			rng := rand.New(rand.NewPCG(seed, 7))
			e := testCore(t, genSpec("ORDER", "ORDERNEW", keyed), len(g.left), len(g.right))
			feedInterleaved(e, g, rng, 1+int(seed)*40)
			if !e.done() {
				t.Fatalf("keyed=%v seed %d: not done", keyed, seed)
			}
			got := outcome(e.counters())
			if got != g.want {
				t.Fatalf("keyed=%v seed %d:\n got %+v\nwant %+v", keyed, seed, got, g.want)
			}
			sk := e.skewSummary()
			if sk.Max != g.wantSkewMax || sk.Min != g.wantSkewMin || sk.P50 != 0 || sk.Count != g.want.Compared() {
				t.Fatalf("keyed=%v seed %d: skew %+v", keyed, seed, sk)
			}
		}
	}
}

func TestCoreGeneratedExamples(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	g := generate(1000, base, false)
	e := testCore(t, genSpec("ORDER", "ORDERNEW", false), len(g.left), len(g.right))
	feedInterleaved(e, g, rand.New(rand.NewPCG(1, 2)), 50)
	ex := e.samples.examplesCopy()
	mm := ex[KindMismatch]
	if len(mm) != 1 || mm[0].Key != orderID(100) || len(mm[0].Fields) != 1 || mm[0].Fields[0].Path != "order.total" ||
		mm[0].Fields[0].Left != "200.25" || mm[0].Fields[0].Right != "201.25" {
		t.Fatalf("mismatch example: %+v", mm)
	}
	keys := func(k Kind) []string {
		var out []string
		for _, d := range ex[k] {
			out = append(out, d.Key)
		}
		return out
	}
	if got := strings.Join(keys(KindMissingRight), ","); got != orderID(200)+","+orderID(600) {
		t.Errorf("missing right keys %s", got)
	}
	if got := strings.Join(keys(KindMissingLeft), ","); got != "o-extra,"+orderID(600) {
		t.Errorf("missing left keys %s", got)
	}
	if d := ex[KindDuplicate]; len(d) != 1 || d[0].Key != orderID(300) || d[0].Side != SideRight {
		t.Errorf("duplicate example %+v", d)
	}
	if got := strings.Join(keys(KindOutOfOrder), ","); got != orderID(401)+","+orderID(501) {
		t.Errorf("out of order keys %s", got)
	}
}

// Without the ignore path, tolerance and JSON equality, the injected
// "equal" differences show up: the counts move exactly.
func TestCoreStrictnessKnobs(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	g := generate(1000, base, true)
	run := func(spec Spec) Counters {
		e := testCore(t, spec, len(g.left), len(g.right))
		feedInterleaved(e, g, rand.New(rand.NewPCG(3, 4)), 30)
		return outcome(e.counters())
	}
	spec := genSpec("L", "R", true)
	spec.Ignore = nil
	c := run(spec)
	if c.Mismatched != 2 || c.Matched != g.want.Matched-1 { // #700's processed_at
		t.Errorf("without ignore: %+v", c)
	}
	spec = genSpec("L", "R", true)
	spec.Tolerance = 0
	c = run(spec)
	if c.Mismatched != 2 || c.Matched != g.want.Matched-1 { // #800's total
		t.Errorf("without tolerance: %+v", c)
	}
	spec = genSpec("L", "R", true)
	spec.Values, spec.Ignore, spec.Tolerance = "bytes", nil, 0
	c = run(spec)
	if c.Matched != 0 || c.Mismatched != g.want.Compared() { // every value is written differently
		t.Errorf("exact bytes: %+v", c)
	}
}

func TestCoreHeaders(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right = "L", "R"
	spec.Headers = true
	spec.Ignore = []string{"header:trace"}
	e := testCore(t, spec, 3, 3)
	h := func(kv ...string) []kgo.RecordHeader {
		var out []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			out = append(out, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return out
	}
	// 1: same headers in another order, trace differs (ignored) -> matched
	e.add(0, 0, 0, 1000, []byte("a"), []byte("v"), h("x", "1", "y", "2", "trace", "t1"))
	e.add(1, 0, 0, 1000, []byte("a"), []byte("v"), h("y", "2", "trace", "t2", "x", "1"))
	// 2: a header value differs -> mismatched with a header field diff
	e.add(0, 0, 1, 1001, []byte("b"), []byte("v"), h("x", "1"))
	e.add(1, 0, 1, 1001, []byte("b"), []byte("v"), h("x", "2"))
	// 3: a header missing on the right
	e.add(1, 0, 2, 1002, []byte("c"), []byte("v"), nil)
	e.add(0, 0, 2, 1002, []byte("c"), []byte("v"), h("z", "9"))
	e.expire()
	c := e.counters()
	if c.Matched != 1 || c.Mismatched != 2 || !e.done() {
		t.Fatalf("%+v", c)
	}
	mm := e.samples.examples[KindMismatch.index()]
	if len(mm) != 2 || mm[0].Fields[0] != (FieldDiff{Path: "header:x", Left: `"1"`, Right: `"2"`}) ||
		mm[1].Fields[0] != (FieldDiff{Path: "header:z", Left: `"9"`}) {
		t.Fatalf("%+v", mm)
	}
}

func TestCoreRepeatedKeysPairInArrivalOrder(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right = "L", "R"
	e := testCore(t, spec, 3, 3)
	// Three versions of one key; the right side arrives first.
	for i, v := range []string{"v1", "v2", "v3"} {
		e.add(1, 0, int64(i), 1000+int64(i), []byte("k"), []byte(v), nil)
	}
	for i, v := range []string{"v1", "v2", "v3"} {
		e.add(0, 0, int64(i), 1000+int64(i), []byte("k"), []byte(v), nil)
	}
	e.expire()
	if c := e.counters(); c.Matched != 3 || c.Mismatched != 0 || c.Duplicates() != 0 || c.OutOfOrder != 0 {
		t.Fatalf("%+v", c)
	}
}

func TestCoreDuplicateOnLeftAndUnkeyed(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right = "L", "R"
	e := testCore(t, spec, 4, 2)
	e.add(0, 0, 0, 1000, []byte("k"), []byte("v"), nil)
	e.add(0, 0, 1, 1001, []byte("k"), []byte("v"), nil) // the old service wrote it twice
	e.add(0, 0, 2, 1002, nil, []byte("no key"), nil)
	e.add(0, 0, 3, 1003, []byte("j"), []byte("v"), nil)
	e.add(1, 0, 0, 1000, []byte("k"), []byte("v"), nil)
	e.add(1, 0, 1, 1003, []byte("j"), []byte("other"), nil)
	e.expire()
	c := e.counters()
	want := Counters{LeftRecords: 4, RightRecords: 2, Matched: 1, Mismatched: 1, DuplicatesLeft: 1, UnkeyedLeft: 1}
	if outcome(c) != want {
		t.Fatalf("got %+v\nwant %+v", outcome(c), want)
	}
}

// Identity: every record ends in exactly one outcome, at every moment.
func checkIdentity(t testing.TB, c Counters) {
	t.Helper()
	if l := c.Matched + c.Mismatched + c.MissingRight + c.DuplicatesLeft + c.UnkeyedLeft + c.PendingLeft; l != c.LeftRecords {
		t.Fatalf("left identity broken: %+v", c)
	}
	if r := c.Matched + c.Mismatched + c.MissingLeft + c.DuplicatesRight + c.UnkeyedRight + c.PendingRight; r != c.RightRecords {
		t.Fatalf("right identity broken: %+v", c)
	}
}

func TestCoreIdentityHoldsThroughout(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	g := generate(1000, base, true)
	e := testCore(t, genSpec("L", "R", true), len(g.left), len(g.right))
	rng := rand.New(rand.NewPCG(9, 9))
	var pos [2]int
	recs := [2][]genRecord{g.left, g.right}
	for pos[0] < len(recs[0]) || pos[1] < len(recs[1]) {
		s := rng.IntN(2)
		if pos[s] >= len(recs[s]) {
			s = 1 - s
		}
		r := recs[s][pos[s]]
		e.add(s, 0, int64(pos[s]), r.ts.UnixMilli(), r.key, r.value, nil)
		pos[s]++
		if rng.IntN(10) == 0 {
			e.expire()
		}
		checkIdentity(t, e.counters())
	}
	e.expire()
	checkIdentity(t, e.counters())
}

// The memory limit gives up the oldest pending records early and says so.
func TestCoreLimits(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right = "L", "R"
	cs, _ := compile(spec)
	e := newCore(cs, Limits{MaxPendingRecords: 100}, [2][]int64{{0}, {0}}, [2][]int64{{1000}, {1000}}, [2][]int64{{1000}, {1000}})
	for i := 0; i < 1000; i++ {
		e.add(0, 0, int64(i), int64(i), []byte(orderID(i)), []byte("v"), nil)
		e.expire()
		if e.sides[0].pending > 100 {
			t.Fatalf("pending %d over the limit", e.sides[0].pending)
		}
	}
	c := e.counters()
	if c.Evicted != 900 || c.MissingRight != 900 || c.PendingLeft != 100 {
		t.Fatalf("%+v", c)
	}
	checkIdentity(t, c)
}

// Checkpoint mid-way, restore into a fresh core, finish: same result as
// never stopping, for every cut point tried.
func TestCoreCheckpointRoundTrip(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	g := generate(1000, base, false)
	spec := genSpec("L", "R", false)
	spec.Headers = true
	for _, cut := range []int{0, 1, 150, 333, 601, 1000, 1500, 2001} {
		rng := rand.New(rand.NewPCG(uint64(cut), 1))
		e := testCore(t, spec, len(g.left), len(g.right))
		var pos [2]int
		recs := [2][]genRecord{g.left, g.right}
		step := func(e *core) {
			s := rng.IntN(2)
			if pos[s] >= len(recs[s]) {
				s = 1 - s
			}
			r := recs[s][pos[s]]
			e.add(s, 0, int64(pos[s]), r.ts.UnixMilli(), r.key, r.value, []kgo.RecordHeader{{Key: "h", Value: []byte("x")}})
			pos[s]++
			if rng.IntN(7) == 0 {
				e.expire()
			}
		}
		for k := 0; k < cut && (pos[0] < len(recs[0]) || pos[1] < len(recs[1])); k++ {
			step(e)
		}
		blob, err := e.encodeCheckpoint(nil)
		if err != nil {
			t.Fatal(err)
		}
		e2 := testCore(t, spec, 0, 0)
		if err := e2.decodeCheckpoint(blob); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if outcome(e2.counters()) != outcome(e.counters()) {
			t.Fatalf("cut %d: restored counters differ", cut)
		}
		if e2.nkeys != e.nkeys || e2.sides[0].pendingBytes != e.sides[0].pendingBytes || e2.sides[1].pendingBytes != e.sides[1].pendingBytes {
			t.Fatalf("cut %d: restored %d keys, pending bytes %d/%d; had %d, %d/%d", cut,
				e2.nkeys, e2.sides[0].pendingBytes, e2.sides[1].pendingBytes, e.nkeys, e.sides[0].pendingBytes, e.sides[1].pendingBytes)
		}
		for pos[0] < len(recs[0]) || pos[1] < len(recs[1]) {
			step(e2)
		}
		e2.expire()
		if got := outcome(e2.counters()); got != g.want {
			t.Fatalf("cut %d:\n got %+v\nwant %+v", cut, got, g.want)
		}
		if sk := e2.skewSummary(); sk.Max != g.wantSkewMax {
			t.Fatalf("cut %d: skew %+v", cut, sk)
		}
	}
}

func TestCoreNoAllocsWhenMatching(t *testing.T) {
	spec := DefaultSpec()
	spec.Left, spec.Right = "L", "R"
	spec.Values, spec.Key = "json", "json:order.id"
	spec.Ignore = []string{"processed_at"}
	e := testCore(t, spec, 1<<30, 1<<30)
	e.sides[0].parts[0].end, e.sides[1].parts[0].end = -1, -1
	vals := make([][2][]byte, 256)
	for i := range vals {
		vals[i] = [2][]byte{leftValue(i, 12.5, "p"), rightValue(orderID(i), i, 12.5, "q")}
	}
	var off int64
	step := func() {
		v := vals[off%256]
		e.add(0, 0, off, off, nil, v[0], nil)
		e.add(1, 0, off, off, nil, v[1], nil)
		off++
		if off%64 == 0 {
			e.expire()
		}
	}
	for i := 0; i < 10000; i++ { // warm the free lists and maps
		step()
	}
	allocs := testing.AllocsPerRun(10000, step)
	if allocs > 0.05 {
		t.Fatalf("%.3f allocations per pair", allocs)
	}
	if c := e.counters(); c.Mismatched != 0 || c.Matched < 20000 {
		t.Fatalf("%+v", c)
	}
}

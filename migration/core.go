package migration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/sluice-io/sluice/migration/jsondiff"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The core is the comparison as a pure state machine: records go in with
// add, time goes in with setNow, expire decides what has waited too long.
// It does no I/O and starts no goroutines, so tests drive it directly and
// the runner (runner.go) only feeds it. One goroutine owns a core.
//
// Time is record time. A side's watermark is the smallest, over its
// partitions, of the largest timestamp read from the partition (a finished
// partition of a bounded comparison counts as +inf; a caught-up partition of
// a continuous one counts as at least now minus idleGrace). A pending record
// with timestamp t expires when the other side's watermark passes t+window:
// every record that could still be its partner has then been read, provided
// timestamps do not go backwards within a partition. Two records pair only
// if their timestamps are within the window of each other, so the outcome
// does not depend on how reads of the two topics interleave.

// idleGrace is how far behind the wall clock a caught-up partition of a
// continuous comparison lets its watermark lag, to allow for records produced
// but not fetched yet.
const idleGrace = 2 * time.Second

// flowImbalance is how many more pending records one side may hold than the
// other before the runner stops reading it (unless the other side is idle).
const flowImbalance = 20_000

// sampleValueLimit clips values kept in differences.
const sampleValueLimit = 4 << 10

const (
	minTs = math.MinInt64
	maxTs = math.MaxInt64
)

// pendingRec is a record waiting for its partner. It sits in two doubly
// linked lists: its partition's (offset order, for expiry) and its key's on
// its side (arrival order, for pairing).
type pendingRec struct {
	side   uint8
	dup    bool // repeats the previous record of its key on its side
	valNil bool
	part   int32
	off    int64
	ts     int64
	roSeq  uint64 // left records: sequence of the reorder entry
	// buf holds key, value, then headers (see appendHeaders).
	buf          []byte
	keyLen       int32
	valLen       int32
	ks           *keyState
	pprev, pnext *pendingRec
	kprev, knext *pendingRec
}

func (r *pendingRec) key() []byte    { return r.buf[:r.keyLen] }
func (r *pendingRec) value() []byte  { return r.buf[r.keyLen : r.keyLen+r.valLen] }
func (r *pendingRec) hdrBuf() []byte { return r.buf[r.keyLen+r.valLen:] }
func (r *pendingRec) valueOrNil() []byte {
	if r.valNil {
		return nil
	}
	return r.value()
}

// keyState is what the core knows about one pairing key.
type keyState struct {
	hash     uint64
	key      []byte
	chain    *keyState // next key with the same map hash
	head     [2]*pendingRec
	tail     [2]*pendingRec
	npend    [2]int32
	hasLast  [2]bool
	lastTs   [2]int64
	lastHash [2]uint64 // canonical value hash of the last record, for duplicates
	gen      uint32    // bumped when the key goes idle or is freed
}

func (k *keyState) idle() bool { return k.npend[0] == 0 && k.npend[1] == 0 }

type idleEntry struct {
	ks  *keyState
	gen uint32
}

type partState struct {
	next       int64 // next offset to read
	end        int64 // bounded: stop before this offset; -1 when continuous
	hw         int64 // last known high watermark
	maxTs      int64 // largest timestamp read; minTs before the first
	head, tail *pendingRec
}

type sideState struct {
	parts        []partState
	pending      int
	pendingBytes int64
}

// roEntry is one left record in its partition's reorder queue.
type roEntry struct {
	state uint8 // roPending, roPaired or roUnpaired
	off   int64
	lts   int64
	rp    int32
	ro    int64
	rts   int64
	key   []byte
}

const (
	roPending = iota
	roPaired
	roUnpaired
)

// reorderQueue decides "out of order" for one left partition. Pairs are
// judged in left offset order, which needs every earlier left record of the
// partition resolved first; entries wait here until then.
type reorderQueue struct {
	ring     []roEntry
	head     int
	n        int
	seq0     uint64  // sequence of ring[head]
	prev     []int64 // per right partition: right offset of the previous pair, -1
	prevLeft []int64 // its left offset
}

func (q *reorderQueue) push(off, lts int64, key []byte, keepKey bool) uint64 {
	if q.n == len(q.ring) {
		grown := make([]roEntry, max(64, 2*len(q.ring)))
		for i := 0; i < q.n; i++ {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	e := &q.ring[(q.head+q.n)%len(q.ring)]
	e.state, e.off, e.lts, e.rp, e.ro, e.rts = roPending, off, lts, -1, -1, 0
	e.key = e.key[:0]
	if keepKey {
		e.key = append(e.key, key...)
	}
	seq := q.seq0 + uint64(q.n)
	q.n++
	return seq
}

func (q *reorderQueue) entry(seq uint64) *roEntry {
	return &q.ring[(q.head+int(seq-q.seq0))%len(q.ring)]
}

type core struct {
	spec *compiledSpec
	lim  Limits

	cmp    jsondiff.Comparer
	docA   jsondiff.Doc // the arriving record's value
	docB   jsondiff.Doc // the partner's value
	keyBuf []byte
	hA, hB []hdr

	sides    [2]sideState
	seed     maphash.Seed
	keys     []*keyState // hash table: buckets chained through keyState.chain; len is a power of two
	nkeys    int
	idleQ    []idleEntry
	idleHead int
	reorder  []*reorderQueue // by left partition

	c       Counters
	skew    skewHist
	samples sampler

	now      int64 // wall clock, ms; continuous comparisons only
	freeRecs []*pendingRec
	freeKeys []*keyState

	schemas schemaUses // Spec.Decode: writer schemas seen per side

	// onPair, when set, sees every pair as it is compared (preview).
	onPair func(d *Difference, equal bool)
	// onValue, when set, sees every record value that parsed as JSON
	// (preview: which paths the sampled values have).
	onValue func(side int, d *jsondiff.Doc)
}

// newCore makes a core for spec with the given partition counts and start
// positions. ends is nil for a continuous comparison; highs are the high
// watermarks at start.
func newCore(spec *compiledSpec, lim Limits, starts, ends, highs [2][]int64) *core {
	lim.setDefaults()
	e := &core{spec: spec, lim: lim, seed: maphash.MakeSeed(), keys: make([]*keyState, 1024)}
	e.cmp.Ignore = spec.ignore
	e.cmp.Tolerance = spec.Tolerance
	for s := 0; s < 2; s++ {
		e.sides[s].parts = make([]partState, len(starts[s]))
		for p := range starts[s] {
			ps := &e.sides[s].parts[p]
			ps.next, ps.end, ps.hw, ps.maxTs = starts[s][p], -1, highs[s][p], minTs
			if spec.Bounded {
				ps.end = ends[s][p]
			}
		}
	}
	e.initReorder()
	return e
}

func (e *core) initReorder() {
	e.reorder = make([]*reorderQueue, len(e.sides[0].parts))
	for i := range e.reorder {
		q := &reorderQueue{prev: make([]int64, len(e.sides[1].parts)), prevLeft: make([]int64, len(e.sides[1].parts))}
		for j := range q.prev {
			q.prev[j], q.prevLeft[j] = -1, -1
		}
		e.reorder[i] = q
	}
}

// hdr is a header viewed as bytes.
type hdr struct{ key, value []byte }

func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// partDone reports whether a bounded partition has been read to its end.
func (ps *partState) done() bool { return ps.end >= 0 && ps.next >= ps.end }

// wants reports whether a record at offset off of side/part is still to be
// processed (not beyond a bounded end, not already processed).
func (e *core) wants(side int, part int32, off int64) bool {
	if int(part) >= len(e.sides[side].parts) || part < 0 {
		return false
	}
	ps := &e.sides[side].parts[part]
	if off < ps.next {
		return false
	}
	return ps.end < 0 || off < ps.end
}

// skipTo moves a partition's position to off without reading a record (a
// control record, or records removed by retention or compaction).
func (e *core) skipTo(side int, part int32, off int64) {
	ps := &e.sides[side].parts[part]
	if off > ps.next {
		ps.next = off
		if ps.end >= 0 && ps.next > ps.end {
			ps.next = ps.end
		}
	}
}

// setHigh records a high watermark seen in a fetch.
func (e *core) setHigh(side int, part int32, hw int64) {
	if int(part) < len(e.sides[side].parts) && part >= 0 && hw > e.sides[side].parts[part].hw {
		e.sides[side].parts[part].hw = hw
	}
}

// add processes one record. The caller has checked wants.
func (e *core) add(side int, part int32, off, ts int64, key, value []byte, headers []kgo.RecordHeader) {
	ps := &e.sides[side].parts[part]
	ps.next = off + 1
	if ts > ps.maxTs {
		ps.maxTs = ts
	}
	if side == 0 {
		e.c.LeftRecords++
	} else {
		e.c.RightRecords++
	}
	spec := e.spec

	parsed := false
	if spec.jsonValues || spec.keyJSON {
		parsed = e.docA.Parse(value) == nil && value != nil
		if parsed && e.onValue != nil {
			e.onValue(side, &e.docA)
		}
	}
	var k []byte
	if spec.keyJSON {
		ok := false
		if parsed {
			if n := e.docA.Lookup(&spec.keyPath); n >= 0 {
				e.keyBuf, ok = e.docA.AppendKey(e.keyBuf[:0], n)
				k = e.keyBuf
			}
		}
		if !ok {
			e.unkeyed(side, part, off, ts, value, headers)
			return
		}
	} else {
		if key == nil {
			e.unkeyed(side, part, off, ts, value, headers)
			return
		}
		k = key
	}

	// The canonical hash of the value, for duplicate detection.
	var h uint64
	if spec.jsonValues && parsed {
		h = e.cmp.Hash(&e.docA)
	} else {
		h = jsondiff.HashBytes(jsondiff.HashSeed, value)
		if value == nil {
			h = jsondiff.Mix(h, 1)
		}
	}
	if spec.Headers {
		e.hA = e.viewHeaders(e.hA[:0], headers)
		h = jsondiff.Mix(h, e.hashHeaders(e.hA))
	}

	ks := e.lookupKey(k)
	window := spec.window
	dup := ks.hasLast[side] && absDiff(ts, ks.lastTs[side]) <= window && ks.lastHash[side] == h
	ks.hasLast[side], ks.lastTs[side], ks.lastHash[side] = true, ts, h

	var roSeq uint64
	if side == 0 {
		roSeq = e.reorder[part].push(off, ts, k, e.samples.want(KindOutOfOrder))
	}

	other := 1 - side
	for p := ks.head[other]; p != nil; p = p.knext {
		if absDiff(p.ts, ts) > window {
			continue // too far apart in time to be partners; p will expire
		}
		e.pair(side, part, off, ts, value, headers, parsed, roSeq, p)
		return
	}

	// No partner yet: wait for one.
	r := e.newRec()
	r.side, r.dup, r.part, r.off, r.ts, r.roSeq, r.ks = uint8(side), dup, part, off, ts, roSeq, ks
	r.valNil = value == nil
	r.buf = append(r.buf[:0], k...)
	r.buf = append(r.buf, value...)
	r.keyLen, r.valLen = int32(len(k)), int32(len(value))
	if spec.Headers {
		r.buf = appendHeaders(r.buf, headers)
	}
	// partition list, in offset order
	r.pprev = ps.tail
	if ps.tail != nil {
		ps.tail.pnext = r
	} else {
		ps.head = r
	}
	ps.tail = r
	// key list, in arrival order
	r.kprev = ks.tail[side]
	if ks.tail[side] != nil {
		ks.tail[side].knext = r
	} else {
		ks.head[side] = r
	}
	ks.tail[side] = r
	ks.npend[side]++
	st := &e.sides[side]
	st.pending++
	st.pendingBytes += int64(len(r.buf))
}

// absDiff is |a-b|, saturating instead of overflowing on absurd timestamps.
func absDiff(a, b int64) int64 {
	d := a - b
	if a < b {
		d = b - a
	}
	if d < 0 {
		return maxTs
	}
	return d
}

func (e *core) newRec() *pendingRec {
	if n := len(e.freeRecs); n > 0 {
		r := e.freeRecs[n-1]
		e.freeRecs = e.freeRecs[:n-1]
		return r
	}
	return &pendingRec{}
}

// unlink removes a pending record from its lists and recycles it. The key
// may become idle.
func (e *core) unlink(r *pendingRec) {
	side := int(r.side)
	ps := &e.sides[side].parts[r.part]
	if r.pprev != nil {
		r.pprev.pnext = r.pnext
	} else {
		ps.head = r.pnext
	}
	if r.pnext != nil {
		r.pnext.pprev = r.pprev
	} else {
		ps.tail = r.pprev
	}
	ks := r.ks
	if r.kprev != nil {
		r.kprev.knext = r.knext
	} else {
		ks.head[side] = r.knext
	}
	if r.knext != nil {
		r.knext.kprev = r.kprev
	} else {
		ks.tail[side] = r.kprev
	}
	ks.npend[side]--
	st := &e.sides[side]
	st.pending--
	st.pendingBytes -= int64(len(r.buf))
	if ks.idle() {
		ks.gen++
		e.idleQ = append(e.idleQ, idleEntry{ks, ks.gen})
	}
	buf := r.buf
	*r = pendingRec{buf: buf[:0]}
	if cap(buf) > 64<<10 {
		r.buf = nil // do not keep a rare huge value's buffer around
	}
	e.freeRecs = append(e.freeRecs, r)
}

// The key table is a chained hash table of its own rather than a Go map:
// keys come and go continuously (a sliding window over the topics), and a
// map under that churn was the most expensive thing on the hot path
// (probing past deleted slots). Chains are short (load factor <= 1) and
// deleting leaves nothing behind.

func (e *core) lookupKey(k []byte) *keyState {
	h := maphash.Bytes(e.seed, k)
	slot := &e.keys[h&uint64(len(e.keys)-1)]
	for ks := *slot; ks != nil; ks = ks.chain {
		if ks.hash == h && bytes.Equal(ks.key, k) {
			return ks
		}
	}
	var ks *keyState
	if n := len(e.freeKeys); n > 0 {
		ks = e.freeKeys[n-1]
		e.freeKeys = e.freeKeys[:n-1]
		gen, key := ks.gen, ks.key
		*ks = keyState{gen: gen, key: key[:0]}
	} else {
		ks = &keyState{}
	}
	ks.hash = h
	ks.key = append(ks.key, k...)
	ks.chain = *slot
	*slot = ks
	e.nkeys++
	if e.nkeys > len(e.keys) {
		e.growKeys()
	}
	return ks
}

func (e *core) growKeys() {
	old := e.keys
	e.keys = make([]*keyState, 2*len(old))
	mask := uint64(len(e.keys) - 1)
	for _, first := range old {
		for ks := first; ks != nil; {
			next := ks.chain
			slot := &e.keys[ks.hash&mask]
			ks.chain = *slot
			*slot = ks
			ks = next
		}
	}
}

func (e *core) dropKey(ks *keyState) {
	for p := &e.keys[ks.hash&uint64(len(e.keys)-1)]; *p != nil; p = &(*p).chain {
		if *p == ks {
			*p = ks.chain
			break
		}
	}
	e.nkeys--
	ks.gen++
	ks.chain = nil
	if cap(ks.key) > 1<<10 {
		ks.key = nil
	}
	e.freeKeys = append(e.freeKeys, ks)
}

// pair compares the arriving record with its pending partner p and resolves
// both.
func (e *core) pair(side int, part int32, off, ts int64, value []byte, headers []kgo.RecordHeader, parsed bool, roSeq uint64, p *pendingRec) {
	spec := e.spec
	// Orient: a is the arriving record, b the pending one.
	bval := p.valueOrNil()
	equal := true
	var leftDoc, rightDoc *jsondiff.Doc
	bothJSON := false
	if spec.jsonValues {
		bParsed := bval != nil && e.docB.Parse(bval) == nil
		if parsed && bParsed {
			bothJSON = true
			leftDoc, rightDoc = &e.docA, &e.docB
			if side == 1 {
				leftDoc, rightDoc = rightDoc, leftDoc
			}
			equal = e.cmp.Equal(leftDoc, rightDoc)
		} else {
			equal = bytes.Equal(value, bval) && (value == nil) == (bval == nil)
		}
	} else {
		equal = bytes.Equal(value, bval) && (value == nil) == (bval == nil)
	}
	headersEqual := true
	if spec.Headers {
		e.hA = e.viewHeaders(e.hA[:0], headers)
		e.hB = decodeHeaders(e.hB[:0], p.hdrBuf())
		hl, hr := e.hA, e.hB
		if side == 1 {
			hl, hr = hr, hl
		}
		headersEqual = e.headersEqual(hl, hr, nil)
	}

	var lts, rts, ro int64
	var lp, rp int32
	if side == 0 {
		lts, rts, lp, rp, ro = ts, p.ts, part, p.part, p.off
	} else {
		lts, rts, lp, rp, ro = p.ts, ts, p.part, part, off
	}
	skew := rts - lts
	e.skew.add(skew)
	if e.c.Compared() == 0 || lts < e.c.FirstPairMs {
		e.c.FirstPairMs = lts
	}
	if e.c.Compared() == 0 || lts > e.c.LastPairMs {
		e.c.LastPairMs = lts
	}
	match := equal && headersEqual
	if match {
		e.c.Matched++
	} else {
		e.c.Mismatched++
	}

	if (!match && e.samples.want(KindMismatch)) || e.onPair != nil {
		d := &Difference{Kind: KindMismatch, Seq: e.c.Mismatched, Key: jsondiff.ClipText(p.key(), 256), SkewMs: skew}
		arriving := e.recordInfo(part, off, ts, value, value == nil, nil)
		if spec.Headers {
			arriving.Headers = headersOut(e.viewHeaders(nil, headers))
		}
		pending := e.recordInfo(p.part, p.off, p.ts, p.value(), p.valNil, p.hdrBuf())
		d.Left, d.Right = arriving, pending
		if side == 1 {
			d.Left, d.Right = pending, arriving
		}
		if !equal {
			if bothJSON {
				d.Fields, d.FieldsOmitted = e.cmp.Diff(leftDoc, rightDoc)
			} else if spec.Values == "bytes" && e.exactDiffAsJSON(d) {
				// Shown field by field when both sides happen to be JSON.
			} else {
				lv, rv := d.Left.Value, d.Right.Value
				if d.Left.ValueNull {
					lv = "null (no value)"
				}
				if d.Right.ValueNull {
					rv = "null (no value)"
				}
				d.Fields = []FieldDiff{{Path: "$", Left: jsondiff.ClipText([]byte(lv), jsondiff.MaxDiffValue), Right: jsondiff.ClipText([]byte(rv), jsondiff.MaxDiffValue)}}
			}
		}
		if !headersEqual {
			hl, hr := e.hA, e.hB
			if side == 1 {
				hl, hr = hr, hl
			}
			var hd []FieldDiff
			e.headersEqual(hl, hr, &hd)
			d.Fields = append(d.Fields, hd...)
		}
		if e.onPair != nil {
			cp := *d
			if match {
				cp.Kind, cp.Seq = "", 0
			}
			e.onPair(&cp, match)
		}
		if !match && e.samples.want(KindMismatch) {
			e.samples.add(*d)
		}
	}

	if side == 0 {
		e.resolveReorder(lp, roSeq, rp, ro, rts)
	} else {
		e.resolveReorder(lp, p.roSeq, rp, ro, rts)
	}
	e.unlink(p)
}

// exactDiffAsJSON fills d.Fields with a field diff when exact-bytes values
// differ but both parse as JSON (for display only; the verdict is already
// "mismatch").
func (e *core) exactDiffAsJSON(d *Difference) bool {
	if d.Left.ValueTruncated || d.Right.ValueTruncated || d.Left.ValueNull || d.Right.ValueNull {
		return false
	}
	var a, b jsondiff.Doc
	if a.Parse([]byte(d.Left.Value)) != nil || b.Parse([]byte(d.Right.Value)) != nil {
		return false
	}
	var vc jsondiff.Comparer
	fields, omitted := vc.Diff(&a, &b)
	if len(fields) == 0 {
		// Same JSON, different bytes (member order, spacing).
		fields = []FieldDiff{{Path: "$", Left: jsondiff.ClipText([]byte(d.Left.Value), jsondiff.MaxDiffValue), Right: jsondiff.ClipText([]byte(d.Right.Value), jsondiff.MaxDiffValue)}}
		d.Note = "values are equal as JSON but differ as bytes"
	}
	d.Fields, d.FieldsOmitted = fields, omitted
	return true
}

func (e *core) recordInfo(part int32, off, ts int64, value []byte, null bool, hdrs []byte) *RecordInfo {
	ri := &RecordInfo{Partition: part, Offset: off, Timestamp: time.UnixMilli(ts).UTC(), ValueNull: null}
	ri.Value = string(value[:min(len(value), sampleValueLimit)])
	ri.ValueTruncated = len(value) > sampleValueLimit
	if hdrs != nil && e.spec.Headers {
		ri.Headers = headersOut(decodeHeaders(nil, hdrs))
	}
	return ri
}

func headersOut(hs []hdr) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: string(h.key), Value: jsondiff.ClipText(h.value, 1024)}
	}
	return out
}

func (e *core) unkeyed(side int, part int32, off, ts int64, value []byte, headers []kgo.RecordHeader) {
	var s Side
	if side == 0 {
		e.c.UnkeyedLeft++
		s = SideLeft
	} else {
		e.c.UnkeyedRight++
		s = SideRight
	}
	if !e.samples.want(KindUnkeyed) {
		return
	}
	d := Difference{Kind: KindUnkeyed, Seq: e.c.Unkeyed(), Side: s}
	ri := e.recordInfo(part, off, ts, value, value == nil, nil)
	if e.spec.Headers {
		ri.Headers = headersOut(e.viewHeaders(nil, headers))
	}
	if e.spec.keyJSON {
		d.Note = "value is not JSON or has no " + e.spec.keyPath.String()
	} else {
		d.Note = "record has a null key"
	}
	if side == 0 {
		d.Left = ri
	} else {
		d.Right = ri
	}
	e.samples.add(d)
}

// giveUp resolves a pending record that found no partner: duplicate or
// missing.
func (e *core) giveUp(r *pendingRec) {
	side := int(r.side)
	var kind Kind
	switch {
	case r.dup && side == 0:
		e.c.DuplicatesLeft++
		kind = KindDuplicate
	case r.dup:
		e.c.DuplicatesRight++
		kind = KindDuplicate
	case side == 0:
		e.c.MissingRight++
		kind = KindMissingRight
	default:
		e.c.MissingLeft++
		kind = KindMissingLeft
	}
	if e.samples.want(kind) {
		d := Difference{Kind: kind, Seq: e.c.countOf(kind), Key: jsondiff.ClipText(r.key(), 256)}
		ri := e.recordInfo(r.part, r.off, r.ts, r.value(), r.valNil, r.hdrBuf())
		if side == 0 {
			d.Left = ri
		} else {
			d.Right = ri
		}
		if kind == KindDuplicate {
			d.Side = SideLeft
			if side == 1 {
				d.Side = SideRight
			}
			d.Note = "unpaired; repeats the previous record of this key on the same side"
		}
		e.samples.add(d)
	}
	if side == 0 {
		e.resolveReorder(r.part, r.roSeq, -1, -1, 0)
	}
	e.unlink(r)
}

// resolveReorder settles the reorder entry seq of left partition lp (paired
// with right rp/ro when rp >= 0), then judges every settled entry at the
// head of the queue in offset order.
func (e *core) resolveReorder(lp int32, seq uint64, rp int32, ro, rts int64) {
	q := e.reorder[lp]
	en := q.entry(seq)
	if rp >= 0 {
		en.state, en.rp, en.ro, en.rts = roPaired, rp, ro, rts
	} else {
		en.state = roUnpaired
	}
	for q.n > 0 {
		h := &q.ring[q.head]
		if h.state == roPending {
			return
		}
		if h.state == roPaired {
			prev := q.prev[h.rp]
			if prev >= 0 && h.ro < prev {
				e.c.OutOfOrder++
				if e.samples.want(KindOutOfOrder) {
					e.samples.add(Difference{
						Kind: KindOutOfOrder, Seq: e.c.OutOfOrder, Key: jsondiff.ClipText(h.key, 256),
						Left:   &RecordInfo{Partition: lp, Offset: h.off, Timestamp: time.UnixMilli(h.lts).UTC()},
						Right:  &RecordInfo{Partition: h.rp, Offset: h.ro, Timestamp: time.UnixMilli(h.rts).UTC()},
						SkewMs: h.rts - h.lts,
						Note: fmt.Sprintf("right offset %d comes before right offset %d, the partner of the previous left record %d of partition %d",
							h.ro, prev, q.prevLeft[h.rp], lp),
					})
				}
			}
			q.prev[h.rp], q.prevLeft[h.rp] = h.ro, h.off
		}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.seq0++
	}
}

// setNow sets the wall clock used by continuous comparisons.
func (e *core) setNow(t time.Time) { e.now = t.UnixMilli() }

func (e *core) partWatermark(ps *partState) int64 {
	if ps.done() {
		return maxTs
	}
	if ps.end < 0 && ps.next >= ps.hw && e.now != 0 {
		return max(ps.maxTs, e.now-idleGrace.Milliseconds())
	}
	return ps.maxTs
}

// watermark is side's record-time watermark.
func (e *core) watermark(side int) int64 {
	w := int64(maxTs)
	for i := range e.sides[side].parts {
		w = min(w, e.partWatermark(&e.sides[side].parts[i]))
	}
	return w
}

// quiet reports whether side has nothing to read now: every partition done
// (bounded) or caught up (continuous).
func (e *core) quiet(side int) bool {
	for i := range e.sides[side].parts {
		ps := &e.sides[side].parts[i]
		if ps.done() {
			continue
		}
		if ps.end < 0 && ps.next >= ps.hw {
			continue
		}
		return false
	}
	return true
}

// done reports whether a bounded comparison has read both sides to the end.
func (e *core) done() bool {
	if !e.spec.Bounded {
		return false
	}
	for s := 0; s < 2; s++ {
		for i := range e.sides[s].parts {
			if !e.sides[s].parts[i].done() {
				return false
			}
		}
	}
	return true
}

// expired reports whether a record at ts has waited its window given the
// other side's watermark w.
func (e *core) expired(ts, w int64) bool {
	if w == maxTs {
		return true
	}
	if w == minTs {
		return false
	}
	lim := ts + e.spec.window
	if lim < ts { // overflow
		return false
	}
	return w > lim
}

// expire gives up on every pending record whose window has passed, forgets
// idle keys, and enforces the memory limits.
func (e *core) expire() {
	wl, wr := e.watermark(0), e.watermark(1)
	for s, w := range [2]int64{wr, wl} {
		for i := range e.sides[s].parts {
			ps := &e.sides[s].parts[i]
			for ps.head != nil && e.expired(ps.head.ts, w) {
				e.giveUp(ps.head)
			}
		}
	}
	e.forgetIdle(wl, wr)
	e.enforceLimits()
}

// forgetIdle drops keys with nothing pending whose last records are too old
// for any later record of the same side to be their duplicate.
func (e *core) forgetIdle(wl, wr int64) {
	w := [2]int64{wl, wr}
	for e.idleHead < len(e.idleQ) {
		en := e.idleQ[e.idleHead]
		ks := en.ks
		if en.gen != ks.gen || !ks.idle() {
			e.idleHead++ // stale: the key is busy again or already gone
			continue
		}
		old := true
		for s := 0; s < 2; s++ {
			if ks.hasLast[s] && !e.expired(ks.lastTs[s], w[s]) {
				old = false
			}
		}
		if !old {
			if e.nkeys <= e.lim.MaxKeys {
				break
			}
			e.c.KeysForgotten++
		}
		e.idleHead++
		e.dropKey(ks)
	}
	// Compact the queue now and then.
	if e.idleHead > 1024 && e.idleHead*2 > len(e.idleQ) {
		n := copy(e.idleQ, e.idleQ[e.idleHead:])
		clear(e.idleQ[n:])
		e.idleQ, e.idleHead = e.idleQ[:n], 0
	}
}

// enforceLimits gives up on the oldest pending records while over a limit.
func (e *core) enforceLimits() {
	for {
		pending := e.sides[0].pending + e.sides[1].pending
		bytes := e.sides[0].pendingBytes + e.sides[1].pendingBytes
		if pending <= e.lim.MaxPendingRecords && bytes <= e.lim.MaxPendingBytes {
			return
		}
		var oldest *pendingRec
		for s := 0; s < 2; s++ {
			for i := range e.sides[s].parts {
				if h := e.sides[s].parts[i].head; h != nil && (oldest == nil || h.ts < oldest.ts) {
					oldest = h
				}
			}
		}
		if oldest == nil {
			return
		}
		e.c.Evicted++
		e.giveUp(oldest)
	}
}

// flow says which sides the runner should stop reading for now: a side far
// ahead of the other in record time, or holding far more pending records,
// while the other still has records to deliver.
func (e *core) flow() (pauseLeft, pauseRight bool) {
	ahead := func(s int) bool {
		o := 1 - s
		if e.quiet(o) {
			return false
		}
		ws, wo := e.watermark(s), e.watermark(o)
		if ws != minTs && (wo == minTs || (wo != maxTs && ws > wo+e.spec.window)) {
			return true
		}
		return e.sides[s].pending-e.sides[o].pending > flowImbalance
	}
	pauseLeft, pauseRight = ahead(0), ahead(1)
	if pauseLeft && pauseRight {
		// Never stop both: keep reading the side behind in record time.
		if e.watermark(0) <= e.watermark(1) {
			pauseLeft = false
		} else {
			pauseRight = false
		}
	}
	return pauseLeft, pauseRight
}

// aheadPartitions returns the partitions of side the runner should stop
// fetching for now: those more than a window ahead, in record time, of the
// side's slowest partition that still has records to deliver. A consumer
// left alone may read one partition to its end before starting the next;
// the side's watermark (the minimum over partitions) would then stand still
// and nothing could expire or be forgotten until the last partition was
// read, so memory would grow with the topic. Keeping partitions within a
// window of each other bounds it.
func (e *core) aheadPartitions(side int, dst []int32) []int32 {
	slowest := int64(maxTs)
	active := 0
	for i := range e.sides[side].parts {
		ps := &e.sides[side].parts[i]
		if ps.done() || (ps.end < 0 && ps.next >= ps.hw) {
			continue
		}
		active++
		slowest = min(slowest, ps.maxTs)
	}
	if active < 2 {
		return dst
	}
	for i := range e.sides[side].parts {
		ps := &e.sides[side].parts[i]
		if ps.done() || ps.maxTs == minTs {
			continue
		}
		if slowest == minTs || ps.maxTs-slowest > e.spec.window {
			dst = append(dst, int32(i))
		}
	}
	return dst
}

// counters returns the counters with the pending gauges filled in.
func (e *core) counters() Counters {
	c := e.c
	c.PendingLeft, c.PendingRight = int64(e.sides[0].pending), int64(e.sides[1].pending)
	return c
}

func (e *core) skewSummary() Skew {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return Skew{
		Count: e.skew.count,
		Min:   ms(e.skew.quantile(0)),
		P50:   ms(e.skew.quantile(0.5)),
		P99:   ms(e.skew.quantile(0.99)),
		Max:   ms(e.skew.quantile(1)),
	}
}

func (e *core) progress(side int) []PartitionProgress {
	out := make([]PartitionProgress, len(e.sides[side].parts))
	for i := range e.sides[side].parts {
		ps := &e.sides[side].parts[i]
		out[i] = PartitionProgress{Partition: int32(i), Next: ps.next, End: ps.end, High: ps.hw}
	}
	return out
}

func (e *core) snapshot(now time.Time) Snapshot {
	return Snapshot{
		Counters: e.counters(),
		Skew:     e.skewSummary(),
		Left:     e.progress(0),
		Right:    e.progress(1),
		Examples: e.samples.examplesCopy(),
		Done:     e.done(),
		Taken:    now,

		Schemas:        e.schemas.list(),
		DecodeFailures: e.schemas.failures,
	}
}

// Headers: kept in a pending record's buffer as
// uvarint count, then per header uvarint len(key), key, varint len(value)
// (-1 for a null value), value.

func appendHeaders(b []byte, hs []kgo.RecordHeader) []byte {
	b = binary.AppendUvarint(b, uint64(len(hs)))
	for _, h := range hs {
		b = binary.AppendUvarint(b, uint64(len(h.Key)))
		b = append(b, h.Key...)
		if h.Value == nil {
			b = binary.AppendVarint(b, -1)
			continue
		}
		b = binary.AppendVarint(b, int64(len(h.Value)))
		b = append(b, h.Value...)
	}
	return b
}

// decodeHeaders reads headers written by appendHeaders. The buffer is ours,
// so it is well formed; a short buffer yields what could be read.
func decodeHeaders(dst []hdr, b []byte) []hdr {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return dst
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		kl, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < kl {
			return dst
		}
		key := b[k : k+int(kl)]
		b = b[k+int(kl):]
		vl, k2 := binary.Varint(b)
		if k2 <= 0 {
			return dst
		}
		b = b[k2:]
		var val []byte
		if vl >= 0 {
			if int64(len(b)) < vl {
				return dst
			}
			val = b[:vl]
			b = b[vl:]
		}
		dst = append(dst, hdr{key: key, value: val})
	}
	return dst
}

func (e *core) viewHeaders(dst []hdr, hs []kgo.RecordHeader) []hdr {
	for _, h := range hs {
		dst = append(dst, hdr{key: bytesOf(h.Key), value: h.Value})
	}
	return dst
}

func (e *core) headerIgnored(k []byte) bool {
	for _, n := range e.spec.ignoreHeaders {
		if n == string(k) {
			return true
		}
	}
	return false
}

// sortHeaders drops ignored headers and sorts the rest by key, keeping the
// order of repeated keys.
func (e *core) sortHeaders(hs []hdr) []hdr {
	w := 0
	for _, h := range hs {
		if !e.headerIgnored(h.key) {
			hs[w] = h
			w++
		}
	}
	hs = hs[:w]
	slices.SortStableFunc(hs, func(a, b hdr) int { return bytes.Compare(a.key, b.key) })
	return hs
}

func (e *core) hashHeaders(hs []hdr) uint64 {
	hs = e.sortHeaders(hs)
	h := uint64(jsondiff.HashSeed)
	for _, x := range hs {
		h = jsondiff.Mix(h, jsondiff.HashBytes(jsondiff.HashSeed, x.key))
		v := jsondiff.HashBytes(jsondiff.HashSeed, x.value)
		if x.value == nil {
			v = jsondiff.Mix(v, 1)
		}
		h = jsondiff.Mix(h, v)
	}
	return h
}

// headersEqual compares header lists as multimaps (order between different
// keys ignored, order of repeated keys kept). With out set, it appends a
// FieldDiff "header:<key>" per difference. It reorders l and r.
func (e *core) headersEqual(l, r []hdr, out *[]FieldDiff) bool {
	l, r = e.sortHeaders(l), e.sortHeaders(r)
	eq := true
	i, j := 0, 0
	rep := 0 // index among repeated keys
	var lastKey []byte
	note := func(key []byte, lv, rv []byte, lok, rok bool) {
		eq = false
		if out == nil {
			return
		}
		path := "header:" + string(key)
		if rep > 0 {
			path += "[" + strconv.Itoa(rep) + "]"
		}
		fd := FieldDiff{Path: path}
		if lok {
			fd.Left = strconv.Quote(jsondiff.ClipText(lv, jsondiff.MaxDiffValue))
		}
		if rok {
			fd.Right = strconv.Quote(jsondiff.ClipText(rv, jsondiff.MaxDiffValue))
		}
		*out = append(*out, fd)
	}
	for i < len(l) || j < len(r) {
		var key []byte
		switch {
		case j >= len(r) || (i < len(l) && bytes.Compare(l[i].key, r[j].key) < 0):
			key = l[i].key
		default:
			key = r[j].key
		}
		if bytes.Equal(key, lastKey) {
			rep++
		} else {
			rep, lastKey = 0, key
		}
		lok := i < len(l) && bytes.Equal(l[i].key, key)
		rok := j < len(r) && bytes.Equal(r[j].key, key)
		switch {
		case lok && rok:
			if !bytes.Equal(l[i].value, r[j].value) || (l[i].value == nil) != (r[j].value == nil) {
				note(key, l[i].value, r[j].value, true, true)
			}
			i++
			j++
		case lok:
			note(key, l[i].value, nil, true, false)
			i++
		default:
			note(key, nil, r[j].value, false, true)
			j++
		}
		if !eq && out == nil {
			return false
		}
	}
	return eq
}

package migration

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// A checkpoint is the whole state of a core, encoded in one blob: counters,
// the skew histogram, read positions, every pending record (key, value and
// headers), the keys remembered for duplicate detection, the reorder queues
// and the samples. It is written in one transaction together with the
// differences found since the previous checkpoint, so a comparison resumed
// from it continues exactly where the checkpoint was taken: positions and
// counts agree, nothing is counted twice and nothing pending is lost. The
// state is bounded by the window and Limits, so the blob is too.
//
// Layout (version 1): "SLMC", version byte, then the sections in the order
// of encodeCheckpoint, integers as varints, byte strings length-prefixed.

const checkpointVersion = 1

var checkpointMagic = []byte("SLMC")

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// reader decodes with a sticky error, so decoding code reads straight
// through and checks once.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errCorruptCheckpoint
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bool() bool { return r.byte() != 0 }

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// count reads a length that must be plausible for the remaining input (each
// element takes at least min bytes), so corrupt input cannot make us
// allocate wildly.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/max(min, 1)+1) {
		r.fail()
		return 0
	}
	return int(n)
}

func (e *core) counterFields() []*int64 {
	c := &e.c
	return []*int64{&c.LeftRecords, &c.RightRecords, &c.Matched, &c.Mismatched, &c.MissingRight, &c.MissingLeft,
		&c.DuplicatesLeft, &c.DuplicatesRight, &c.OutOfOrder, &c.UnkeyedLeft, &c.UnkeyedRight,
		&c.Evicted, &c.KeysForgotten, &c.FirstPairMs, &c.LastPairMs}
}

// encodeCheckpoint appends the core's state to b.
func (e *core) encodeCheckpoint(b []byte) ([]byte, error) {
	b = append(b, checkpointMagic...)
	b = append(b, checkpointVersion)
	for _, p := range e.counterFields() {
		b = binary.AppendVarint(b, *p)
	}
	b = e.skew.appendBinary(b)
	for s := 0; s < 2; s++ {
		parts := e.sides[s].parts
		b = binary.AppendUvarint(b, uint64(len(parts)))
		for i := range parts {
			ps := &parts[i]
			b = binary.AppendVarint(b, ps.next)
			b = binary.AppendVarint(b, ps.end)
			b = binary.AppendVarint(b, ps.hw)
			b = binary.AppendVarint(b, ps.maxTs)
		}
	}
	// Keys, each with its pending records in arrival order.
	index := make(map[*keyState]int, e.nkeys)
	b = binary.AppendUvarint(b, uint64(e.nkeys))
	for _, first := range e.keys {
		for ks := first; ks != nil; ks = ks.chain {
			index[ks] = len(index)
			b = appendBytes(b, ks.key)
			for s := 0; s < 2; s++ {
				b = appendBool(b, ks.hasLast[s])
				b = binary.AppendVarint(b, ks.lastTs[s])
				b = binary.AppendUvarint(b, ks.lastHash[s])
				b = binary.AppendUvarint(b, uint64(ks.npend[s]))
				for r := ks.head[s]; r != nil; r = r.knext {
					b = binary.AppendUvarint(b, uint64(r.part))
					b = binary.AppendVarint(b, r.off)
					b = binary.AppendVarint(b, r.ts)
					b = appendBool(b, r.dup)
					b = appendBool(b, r.valNil)
					b = binary.AppendUvarint(b, r.roSeq)
					b = binary.AppendUvarint(b, uint64(r.keyLen))
					b = binary.AppendUvarint(b, uint64(r.valLen))
					b = appendBytes(b, r.buf)
				}
			}
		}
	}
	if len(index) != e.nkeys {
		return nil, fmt.Errorf("migration: checkpoint: %d keys in the map, %d counted", len(index), e.nkeys)
	}
	// Idle keys in queue order.
	var idle []int
	for _, en := range e.idleQ[e.idleHead:] {
		if en.gen == en.ks.gen && en.ks.idle() {
			if i, ok := index[en.ks]; ok {
				idle = append(idle, i)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(idle)))
	for _, i := range idle {
		b = binary.AppendUvarint(b, uint64(i))
	}
	// Reorder queues.
	b = binary.AppendUvarint(b, uint64(len(e.reorder)))
	for _, q := range e.reorder {
		b = binary.AppendUvarint(b, q.seq0)
		b = binary.AppendUvarint(b, uint64(len(q.prev)))
		for i := range q.prev {
			b = binary.AppendVarint(b, q.prev[i])
			b = binary.AppendVarint(b, q.prevLeft[i])
		}
		b = binary.AppendUvarint(b, uint64(q.n))
		for i := 0; i < q.n; i++ {
			en := &q.ring[(q.head+i)%len(q.ring)]
			b = append(b, en.state)
			b = binary.AppendVarint(b, en.off)
			b = binary.AppendVarint(b, en.lts)
			b = binary.AppendVarint(b, int64(en.rp))
			b = binary.AppendVarint(b, en.ro)
			b = binary.AppendVarint(b, en.rts)
			b = appendBytes(b, en.key)
		}
	}
	// Samples.
	for i := range e.samples.stored {
		b = binary.AppendVarint(b, e.samples.stored[i])
	}
	ex, err := json.Marshal(e.samples.examples)
	if err != nil {
		return nil, fmt.Errorf("migration: checkpoint examples: %w", err)
	}
	b = appendBytes(b, ex)
	// Optional last section (a decoding comparison): the schemas used.
	if len(e.schemas.uses) > 0 || e.schemas.failures != [2]int64{} {
		su, err := json.Marshal(e.schemas.state())
		if err != nil {
			return nil, fmt.Errorf("migration: checkpoint schemas: %w", err)
		}
		b = appendBytes(b, su)
	}
	return b, nil
}

// decodeCheckpoint restores a core's state from blob. The core must be
// freshly made for the same spec; partition counts come from the blob.
func (e *core) decodeCheckpoint(blob []byte) error {
	r := &reader{b: blob}
	if len(blob) < 5 || string(blob[:4]) != string(checkpointMagic) {
		return fmt.Errorf("%w: bad magic", errCorruptCheckpoint)
	}
	if blob[4] != checkpointVersion {
		return fmt.Errorf("migration: checkpoint version %d is not supported (want %d)", blob[4], checkpointVersion)
	}
	r.b = blob[5:]
	for _, p := range e.counterFields() {
		*p = r.varint()
	}
	e.skew.decode(r)
	for s := 0; s < 2; s++ {
		n := r.count(4)
		e.sides[s] = sideState{parts: make([]partState, n)}
		for i := 0; i < n; i++ {
			ps := &e.sides[s].parts[i]
			ps.next, ps.end, ps.hw, ps.maxTs = r.varint(), r.varint(), r.varint(), r.varint()
		}
	}
	if r.err != nil {
		return r.err
	}
	e.initReorder()
	e.keys = make([]*keyState, 1024)
	e.nkeys = 0
	nkeys := r.count(8)
	keys := make([]*keyState, 0, nkeys)
	byPart := [2][][]*pendingRec{make([][]*pendingRec, len(e.sides[0].parts)), make([][]*pendingRec, len(e.sides[1].parts))}
	for k := 0; k < nkeys && r.err == nil; k++ {
		key := r.bytes()
		if r.err != nil {
			break
		}
		before := e.nkeys
		ks := e.lookupKey(key)
		if e.nkeys == before {
			return fmt.Errorf("%w: key repeated", errCorruptCheckpoint)
		}
		keys = append(keys, ks)
		for s := 0; s < 2; s++ {
			ks.hasLast[s] = r.bool()
			ks.lastTs[s] = r.varint()
			ks.lastHash[s] = r.uvarint()
			np := r.count(8)
			for i := 0; i < np && r.err == nil; i++ {
				rec := e.newRec()
				rec.side = uint8(s)
				part := r.uvarint()
				rec.off, rec.ts = r.varint(), r.varint()
				rec.dup, rec.valNil = r.bool(), r.bool()
				rec.roSeq = r.uvarint()
				kl, vl := r.uvarint(), r.uvarint()
				buf := r.bytes()
				if r.err != nil || part >= uint64(len(e.sides[s].parts)) || kl+vl > uint64(len(buf)) {
					return errCorruptCheckpoint
				}
				rec.part, rec.keyLen, rec.valLen = int32(part), int32(kl), int32(vl)
				rec.buf = append(rec.buf[:0], buf...)
				rec.ks = ks
				rec.kprev = ks.tail[s]
				if ks.tail[s] != nil {
					ks.tail[s].knext = rec
				} else {
					ks.head[s] = rec
				}
				ks.tail[s] = rec
				ks.npend[s]++
				e.sides[s].pending++
				e.sides[s].pendingBytes += int64(len(rec.buf))
				byPart[s][part] = append(byPart[s][part], rec)
			}
		}
	}
	if r.err != nil {
		return r.err
	}
	// Partition lists in offset order.
	for s := 0; s < 2; s++ {
		for p, recs := range byPart[s] {
			slices.SortFunc(recs, func(a, b *pendingRec) int { return cmp.Compare(a.off, b.off) })
			ps := &e.sides[s].parts[p]
			for _, rec := range recs {
				rec.pprev = ps.tail
				if ps.tail != nil {
					ps.tail.pnext = rec
				} else {
					ps.head = rec
				}
				ps.tail = rec
			}
		}
	}
	nidle := r.count(1)
	for i := 0; i < nidle && r.err == nil; i++ {
		k := r.uvarint()
		if k >= uint64(len(keys)) {
			return errCorruptCheckpoint
		}
		ks := keys[k]
		ks.gen++
		e.idleQ = append(e.idleQ, idleEntry{ks, ks.gen})
	}
	nq := r.count(2)
	if r.err == nil && nq != len(e.reorder) {
		return fmt.Errorf("%w: %d reorder queues for %d left partitions", errCorruptCheckpoint, nq, len(e.reorder))
	}
	for _, q := range e.reorder {
		if r.err != nil {
			break
		}
		q.seq0 = r.uvarint()
		np := r.count(2)
		if r.err == nil && np != len(q.prev) {
			return fmt.Errorf("%w: reorder queue for %d right partitions, have %d", errCorruptCheckpoint, np, len(q.prev))
		}
		for i := 0; i < np && r.err == nil; i++ {
			q.prev[i], q.prevLeft[i] = r.varint(), r.varint()
		}
		n := r.count(7)
		if r.err != nil {
			break
		}
		q.ring, q.head, q.n = make([]roEntry, max(64, n)), 0, n
		for i := 0; i < n && r.err == nil; i++ {
			en := &q.ring[i]
			en.state = r.byte()
			en.off, en.lts = r.varint(), r.varint()
			rp := r.varint()
			en.ro, en.rts = r.varint(), r.varint()
			en.key = append([]byte(nil), r.bytes()...)
			if en.state > roUnpaired || rp < -1 || rp >= int64(len(q.prev)) || (en.state == roPaired && rp < 0) {
				return errCorruptCheckpoint
			}
			en.rp = int32(rp)
		}
	}
	// Every pending left record must point at a pending reorder entry.
	for p, recs := range byPart[0] {
		q := e.reorder[p]
		for _, rec := range recs {
			if rec.roSeq < q.seq0 || rec.roSeq-q.seq0 >= uint64(q.n) || q.entry(rec.roSeq).state != roPending {
				return fmt.Errorf("%w: pending record without its reorder entry", errCorruptCheckpoint)
			}
		}
	}
	for i := range e.samples.stored {
		e.samples.stored[i] = r.varint()
	}
	ex := r.bytes()
	if r.err != nil {
		return r.err
	}
	var examples [numKinds][]Difference
	if err := json.Unmarshal(ex, &examples); err != nil {
		return fmt.Errorf("%w: examples: %v", errCorruptCheckpoint, err)
	}
	e.samples.examples = examples
	if len(r.b) != 0 {
		su := r.bytes()
		if r.err != nil {
			return r.err
		}
		if err := e.schemas.restore(su); err != nil {
			return fmt.Errorf("%w: schemas: %v", errCorruptCheckpoint, err)
		}
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errCorruptCheckpoint, len(r.b))
	}
	return nil
}

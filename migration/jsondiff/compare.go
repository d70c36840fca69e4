package jsondiff

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// FieldDiff is one difference between two JSON values: where, and the raw
// JSON text on each side. An empty Left or Right means the field is absent
// on that side (raw JSON text is never empty). Path "$" is the whole value.
type FieldDiff struct {
	Path  string `json:"path"`
	Left  string `json:"left"`
	Right string `json:"right"`
}

// MaxIgnorePaths bounds the ignore list: the comparer tracks which patterns
// are still matching with one bit each in a uint64.
const MaxIgnorePaths = 64

// MaxFieldDiffs bounds the field diffs recorded for one pair.
const MaxFieldDiffs = 50

// MaxDiffValue bounds the text kept for one side of a field diff.
const MaxDiffValue = 1024

type pathElem struct {
	name  []byte // member name, or nil for an array element
	index int
}

// Comparer compares two parsed JSON values with JSON semantics: object
// members in any order, numbers by value (within tolerance when set), strings
// after decoding escapes, ignored paths skipped. It is reused across records
// and allocates nothing on equal values once warm. A Comparer is not safe
// for concurrent use.
type Comparer struct {
	Ignore    []Path  // paths left out; at most MaxIgnorePaths
	Tolerance float64 // numbers within this absolute difference are equal

	a, b    *Doc
	emit    bool        // record field diffs rather than stop at the first
	diffs   []FieldDiff // recorded when emit
	omitted int         // diffs beyond MaxFieldDiffs
	stack   []int32     // sorted child indexes of the objects being walked
	path    []pathElem
	decA    []byte
	decB    []byte
}

// enter returns the ignore mask for a child reached from a node at depth
// (number of path segments so far) with the given mask, and whether the
// child is ignored entirely. name is nil for array element index.
func (c *Comparer) enter(mask uint64, depth int, name []byte, index int) (uint64, bool) {
	var out uint64
	for m := mask; m != 0; m &= m - 1 {
		i := trailingZeros(m)
		segs := c.Ignore[i].segs
		seg := &segs[depth]
		var ok bool
		if name != nil {
			ok = seg.matchesName(name)
		} else {
			ok = seg.matchesIndex(index)
		}
		if !ok {
			continue
		}
		if depth+1 == len(segs) {
			return 0, true
		}
		out |= 1 << i
	}
	return out, false
}

func trailingZeros(m uint64) int {
	n := 0
	for m&1 == 0 {
		m >>= 1
		n++
	}
	return n
}

func (c *Comparer) rootMask() uint64 {
	if len(c.Ignore) == 64 {
		return math.MaxUint64
	}
	return 1<<len(c.Ignore) - 1
}

// equal reports whether the values of a and b are equal.
func (c *Comparer) Equal(a, b *Doc) bool {
	c.a, c.b, c.emit = a, b, false
	c.stack, c.path = c.stack[:0], c.path[:0]
	return c.node(0, 0, c.rootMask(), 0)
}

// diff returns the field diffs between a and b (nil when equal), at most
// MaxFieldDiffs of them, and how many more there were.
func (c *Comparer) Diff(a, b *Doc) ([]FieldDiff, int) {
	c.a, c.b, c.emit = a, b, true
	c.stack, c.path = c.stack[:0], c.path[:0]
	c.diffs, c.omitted = nil, 0
	c.node(0, 0, c.rootMask(), 0)
	d := c.diffs
	c.diffs = nil
	return d, c.omitted
}

// node compares node ai of a with bi of b. depth is the path length.
func (c *Comparer) node(ai, bi int32, mask uint64, depth int) bool {
	a, b := c.a, c.b
	na, nb := &a.nodes[ai], &b.nodes[bi]
	ra, rb := a.raw(ai), b.raw(bi)
	if len(ra) == len(rb) && bytes.Equal(ra, rb) {
		return true
	}
	if na.kind != nb.kind {
		return c.record(ra, rb)
	}
	switch na.kind {
	case jNull, jTrue, jFalse:
		return true
	case jNumber:
		if numbersEqual(ra, rb, c.Tolerance) {
			return true
		}
		return c.record(ra, rb)
	case jString:
		if !na.esc && !nb.esc {
			return c.record(ra, rb) // raw bytes differ
		}
		c.decA, _ = appendUnquoted(c.decA[:0], a.strContents(ai))
		c.decB, _ = appendUnquoted(c.decB[:0], b.strContents(bi))
		if bytes.Equal(c.decA, c.decB) {
			return true
		}
		return c.record(ra, rb)
	case jArray:
		return c.array(ai, bi, mask, depth)
	default:
		return c.object(ai, bi, mask, depth)
	}
}

func (c *Comparer) array(ai, bi int32, mask uint64, depth int) bool {
	a, b := c.a, c.b
	eq := true
	ca, cb := a.nodes[ai].first, b.nodes[bi].first
	for i := 0; ca >= 0 || cb >= 0; i++ {
		childMask, ignored := c.enter(mask, depth, nil, i)
		if !ignored {
			c.path = append(c.path, pathElem{index: i})
			var same bool
			switch {
			case ca >= 0 && cb >= 0:
				same = c.node(ca, cb, childMask, depth+1)
			case ca >= 0:
				same = c.record(a.raw(ca), nil)
			default:
				same = c.record(nil, b.raw(cb))
			}
			c.path = c.path[:len(c.path)-1]
			if !same {
				eq = false
				if !c.emit {
					return false
				}
			}
		}
		if ca >= 0 {
			ca = a.nodes[ca].next
		}
		if cb >= 0 {
			cb = b.nodes[cb].next
		}
	}
	return eq
}

// sortedMembers pushes the members of object node i onto c.stack sorted by
// name, keeping only the last of members with the same name, and returns the
// bounds of the pushed run.
func (c *Comparer) sortedMembers(d *Doc, i int32) (int, int) {
	start := len(c.stack)
	for ch := d.nodes[i].first; ch >= 0; ch = d.nodes[ch].next {
		c.stack = append(c.stack, ch)
	}
	run := c.stack[start:]
	if len(run) > 1 {
		slices.SortFunc(run, func(x, y int32) int {
			if r := bytes.Compare(d.name(x), d.name(y)); r != 0 {
				return r
			}
			return cmp.Compare(x, y)
		})
		// Keep the last of each run of equal names (document order).
		w := 0
		for r := 0; r < len(run); r++ {
			if r+1 < len(run) && bytes.Equal(d.name(run[r]), d.name(run[r+1])) {
				continue
			}
			run[w] = run[r]
			w++
		}
		c.stack = c.stack[:start+w]
	}
	return start, len(c.stack)
}

func (c *Comparer) object(ai, bi int32, mask uint64, depth int) bool {
	a, b := c.a, c.b
	base := len(c.stack)
	sa, ea := c.sortedMembers(a, ai)
	sb, eb := c.sortedMembers(b, bi)
	eq := true
	i, j := sa, sb
	for i < ea || j < eb {
		var ca, cb int32 = -1, -1
		var name []byte
		switch {
		case i >= ea:
			cb = c.stack[j]
			name = b.name(cb)
			j++
		case j >= eb:
			ca = c.stack[i]
			name = a.name(ca)
			i++
		default:
			na, nb := a.name(c.stack[i]), b.name(c.stack[j])
			switch r := bytes.Compare(na, nb); {
			case r == 0:
				ca, cb, name = c.stack[i], c.stack[j], na
				i++
				j++
			case r < 0:
				ca, name = c.stack[i], na
				i++
			default:
				cb, name = c.stack[j], nb
				j++
			}
		}
		childMask, ignored := c.enter(mask, depth, name, 0)
		if ignored {
			continue
		}
		c.path = append(c.path, pathElem{name: name})
		var same bool
		switch {
		case ca >= 0 && cb >= 0:
			same = c.node(ca, cb, childMask, depth+1)
		case ca >= 0:
			same = c.record(a.raw(ca), nil)
		default:
			same = c.record(nil, b.raw(cb))
		}
		c.path = c.path[:len(c.path)-1]
		if !same {
			eq = false
			if !c.emit {
				break
			}
		}
	}
	c.stack = c.stack[:base]
	return eq
}

// record notes a difference at the current path and returns false.
func (c *Comparer) record(left, right []byte) bool {
	if !c.emit {
		return false
	}
	if len(c.diffs) >= MaxFieldDiffs {
		c.omitted++
		return false
	}
	c.diffs = append(c.diffs, FieldDiff{
		Path:  formatPath(c.path),
		Left:  ClipText(left, MaxDiffValue),
		Right: ClipText(right, MaxDiffValue),
	})
	return false
}

// numbersEqual compares two number literals: integers exactly, others as
// float64; with a tolerance, |l-r| <= tolerance.
func numbersEqual(x, y []byte, tolerance float64) bool {
	if bytes.Equal(x, y) {
		return true
	}
	if tolerance == 0 && isIntegerLiteral(x) && isIntegerLiteral(y) {
		return isZeroLiteral(x) && isZeroLiteral(y) // "-0" and "0"
	}
	fx, ok1 := parseNumber(x)
	fy, ok2 := parseNumber(y)
	if !ok1 || !ok2 {
		return false
	}
	if tolerance > 0 {
		return math.Abs(fx-fy) <= tolerance
	}
	return fx == fy
}

func isZeroLiteral(b []byte) bool {
	return string(b) == "0" || string(b) == "-0"
}

func formatPath(p []pathElem) string {
	if len(p) == 0 {
		return "$"
	}
	var sb strings.Builder
	for i, e := range p {
		if e.name == nil {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(e.index))
			sb.WriteByte(']')
			continue
		}
		if plainName(e.name) {
			if i > 0 {
				sb.WriteByte('.')
			}
			sb.Write(e.name)
			continue
		}
		sb.WriteByte('[')
		sb.WriteString(strconv.Quote(string(e.name)))
		sb.WriteByte(']')
	}
	return sb.String()
}

// plainName reports whether a member name can be written bare in a path.
func plainName(n []byte) bool {
	if len(n) == 0 || string(n) == "*" {
		return false
	}
	for _, c := range n {
		if c == '.' || c == '[' || c == ']' || c == '"' || c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}

// ClipText returns at most max bytes of b as a string, marking the cut.
func ClipText(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "…"
}

// Hashing for duplicate detection: a 64-bit hash of a value's canonical form
// (members in any order, last duplicate name wins, numbers by value, strings
// decoded, ignored paths skipped), so that values equal under the comparison
// without tolerance hash the same. The hash is stable across processes
// because it is stored in checkpoints.

// HashSeed is the starting value for HashBytes chains.
const HashSeed = 14695981039346656037

const (
	hashP1 = 0x9E3779B185EBCA87
	hashP2 = 0xC2B2AE3D27D4EB4F
	hashP3 = 0x165667B19E3779F9
	hashP4 = 0x85EBCA77C2B2AE63
)

// HashBytes hashes b, continuing from h, eight bytes at a time (the round
// of xxHash64, single lane). Deterministic across processes and builds: its
// results are stored in checkpoints.
func HashBytes(h uint64, b []byte) uint64 {
	h += uint64(len(b)) * hashP3
	for len(b) >= 8 {
		k := binary.LittleEndian.Uint64(b) * hashP2
		k = bits.RotateLeft64(k, 31) * hashP1
		h ^= k
		h = bits.RotateLeft64(h, 27)*hashP1 + hashP4
		b = b[8:]
	}
	if len(b) > 0 {
		var tail uint64
		for i, c := range b {
			tail |= uint64(c) << (8 * i)
		}
		k := (tail ^ uint64(len(b))<<59) * hashP2
		k = bits.RotateLeft64(k, 31) * hashP1
		h ^= k
		h = bits.RotateLeft64(h, 27)*hashP1 + hashP4
	}
	h ^= h >> 33
	h *= hashP2
	h ^= h >> 29
	h *= hashP3
	h ^= h >> 32
	return h
}

// Mix combines two hashes (splitmix64 finaliser on the sum).
func Mix(h, v uint64) uint64 {
	x := h ^ (v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2))
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hash returns the canonical hash of the whole value of d.
func (c *Comparer) Hash(d *Doc) uint64 {
	c.stack = c.stack[:0]
	return c.hashNode(d, 0, c.rootMask(), 0)
}

func (c *Comparer) hashNode(d *Doc, i int32, mask uint64, depth int) uint64 {
	n := &d.nodes[i]
	h := Mix(HashSeed, uint64(n.kind)+1)
	switch n.kind {
	case jNull, jTrue, jFalse:
		return h
	case jNumber:
		raw := d.raw(i)
		if f, ok := parseNumber(raw); ok {
			if f == 0 {
				f = 0 // -0
			}
			var buf [8]byte
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(f))
			return Mix(h, HashBytes(HashSeed, buf[:]))
		}
		return Mix(h, HashBytes(HashSeed, raw))
	case jString:
		if !n.esc {
			return Mix(h, HashBytes(HashSeed, d.strContents(i)))
		}
		c.decA, _ = appendUnquoted(c.decA[:0], d.strContents(i))
		return Mix(h, HashBytes(HashSeed, c.decA))
	case jArray:
		k := 0
		for ch := n.first; ch >= 0; ch = d.nodes[ch].next {
			childMask, ignored := c.enter(mask, depth, nil, k)
			if !ignored {
				h = Mix(h, uint64(k))
				h = Mix(h, c.hashNode(d, ch, childMask, depth+1))
			}
			k++
		}
		return h
	default:
		// An object hashes to the sum, over its members (the last of
		// repeated names), of mix(name, value): order does not matter, so
		// no sort is needed unless names repeat. Small objects check for
		// repeated names pairwise; others, and those with repeats, take
		// the sorted path, which sums the same terms.
		var sum uint64
		if n.count <= 16 {
			var names [16]uint64
			k, repeated := 0, false
			for ch := n.first; ch >= 0; ch = d.nodes[ch].next {
				nh := HashBytes(HashSeed, d.name(ch))
				for j := 0; j < k; j++ {
					repeated = repeated || names[j] == nh
				}
				names[k] = nh
				k++
			}
			if !repeated {
				k = 0
				for ch := n.first; ch >= 0; ch = d.nodes[ch].next {
					nh := names[k]
					k++
					childMask, ignored := c.enter(mask, depth, d.name(ch), 0)
					if !ignored {
						sum += Mix(nh, c.hashNode(d, ch, childMask, depth+1))
					}
				}
				return Mix(h, sum)
			}
		}
		base := len(c.stack)
		s, e := c.sortedMembers(d, i)
		for k := s; k < e; k++ {
			ch := c.stack[k]
			name := d.name(ch)
			childMask, ignored := c.enter(mask, depth, name, 0)
			if !ignored {
				sum += Mix(HashBytes(HashSeed, name), c.hashNode(d, ch, childMask, depth+1))
			}
		}
		c.stack = c.stack[:base]
		return Mix(h, sum)
	}
}

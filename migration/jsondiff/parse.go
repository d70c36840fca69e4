package jsondiff

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file is a small JSON reader built for comparing record values at a
// few hundred thousand pairs a second. encoding/json into interface{} costs
// ~30 allocations per value; here a value is parsed into a flat slice of
// nodes that point back into the input bytes, and the slice is reused from
// one record to the next, so a parse allocates nothing once warm.
//
// The parser validates the grammar (RFC 8259) and rejects trailing data. It
// does not validate UTF-8 inside strings: values are compared as bytes.

type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jNumber
	jString
	jArray
	jObject
)

// jnode is one JSON value. Children of arrays and objects are linked through
// next; an object member carries its name.
type jnode struct {
	kind  jkind
	esc   bool  // a string value that contains backslash escapes
	start int32 // the raw value is data[start:end]
	end   int32
	// name of an object member: data[nameStart:nameEnd], or, when the raw
	// name had escapes, arena[nameStart:nameEnd] (nameArena).
	nameStart, nameEnd int32
	nameArena          bool
	first              int32 // first child, -1 when none
	next               int32 // next sibling, -1 when last
	count              int32 // number of children
}

// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
const MaxDepth = 256

var (
	errJSONSyntax = errors.New("invalid JSON")
	errJSONDepth  = errors.New("JSON nested too deeply")
)

// Doc is a parsed value. Reset and reuse it with parse.
type Doc struct {
	data  []byte
	nodes []jnode
	arena []byte // decoded member names that had escapes
	pos   int
}

// parse parses data, which must stay unmodified while the doc is used.
func (d *Doc) Parse(data []byte) error {
	d.data = data
	d.nodes = d.nodes[:0]
	d.arena = d.arena[:0]
	d.pos = 0
	if len(data) > 1<<30 {
		return errJSONSyntax
	}
	d.skipSpace()
	if _, err := d.value(0); err != nil {
		return err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return errJSONSyntax
	}
	return nil
}

func (d *Doc) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value parses one value at d.pos and returns its node index.
func (d *Doc) value(depth int) (int32, error) {
	if depth > MaxDepth {
		return -1, errJSONDepth
	}
	if d.pos >= len(d.data) {
		return -1, errJSONSyntax
	}
	idx := int32(len(d.nodes))
	d.nodes = append(d.nodes, jnode{start: int32(d.pos), first: -1, next: -1, nameStart: -1, nameEnd: -1})
	switch c := d.data[d.pos]; {
	case c == '{':
		d.pos++
		d.nodes[idx].kind = jObject
		d.skipSpace()
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			break
		}
		prev := int32(-1)
		for {
			d.skipSpace()
			if d.pos >= len(d.data) || d.data[d.pos] != '"' {
				return -1, errJSONSyntax
			}
			ns, ne, esc, err := d.str()
			if err != nil {
				return -1, err
			}
			inArena := false
			if esc {
				// Decode the name once so comparisons can use bytes.
				a := len(d.arena)
				var ok bool
				d.arena, ok = appendUnquoted(d.arena, d.data[ns:ne])
				if !ok {
					return -1, errJSONSyntax
				}
				ns, ne, inArena = a, len(d.arena), true
			}
			d.skipSpace()
			if d.pos >= len(d.data) || d.data[d.pos] != ':' {
				return -1, errJSONSyntax
			}
			d.pos++
			d.skipSpace()
			child, err := d.value(depth + 1)
			if err != nil {
				return -1, err
			}
			m := &d.nodes[child]
			m.nameStart, m.nameEnd, m.nameArena = int32(ns), int32(ne), inArena
			d.link(idx, prev, child)
			prev = child
			d.skipSpace()
			if d.pos >= len(d.data) {
				return -1, errJSONSyntax
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == '}' {
				d.pos++
				break
			}
			return -1, errJSONSyntax
		}
	case c == '[':
		d.pos++
		d.nodes[idx].kind = jArray
		d.skipSpace()
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			break
		}
		prev := int32(-1)
		for {
			d.skipSpace()
			child, err := d.value(depth + 1)
			if err != nil {
				return -1, err
			}
			d.link(idx, prev, child)
			prev = child
			d.skipSpace()
			if d.pos >= len(d.data) {
				return -1, errJSONSyntax
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == ']' {
				d.pos++
				break
			}
			return -1, errJSONSyntax
		}
	case c == '"':
		_, _, esc, err := d.str()
		if err != nil {
			return -1, err
		}
		d.nodes[idx].kind = jString
		d.nodes[idx].esc = esc
	case c == '-' || (c >= '0' && c <= '9'):
		if !d.number() {
			return -1, errJSONSyntax
		}
		d.nodes[idx].kind = jNumber
	case c == 't':
		if !d.literal("true") {
			return -1, errJSONSyntax
		}
		d.nodes[idx].kind = jTrue
	case c == 'f':
		if !d.literal("false") {
			return -1, errJSONSyntax
		}
		d.nodes[idx].kind = jFalse
	case c == 'n':
		if !d.literal("null") {
			return -1, errJSONSyntax
		}
		d.nodes[idx].kind = jNull
	default:
		return -1, errJSONSyntax
	}
	d.nodes[idx].end = int32(d.pos)
	return idx, nil
}

func (d *Doc) link(parent, prev, child int32) {
	if prev < 0 {
		d.nodes[parent].first = child
	} else {
		d.nodes[prev].next = child
	}
	d.nodes[parent].count++
}

func (d *Doc) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return true
}

// str scans a string at d.pos (which is '"') and returns the bounds of its
// contents, without the quotes.
func (d *Doc) str() (start, end int, esc bool, err error) {
	d.pos++
	start = d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			end = d.pos
			d.pos++
			return start, end, esc, nil
		case c == '\\':
			esc = true
			d.pos++
			if d.pos >= len(d.data) {
				return 0, 0, false, errJSONSyntax
			}
			switch d.data[d.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos++
			case 'u':
				if len(d.data)-d.pos < 5 {
					return 0, 0, false, errJSONSyntax
				}
				for _, h := range d.data[d.pos+1 : d.pos+5] {
					if !isHex(h) {
						return 0, 0, false, errJSONSyntax
					}
				}
				d.pos += 5
			default:
				return 0, 0, false, errJSONSyntax
			}
		case c < 0x20:
			return 0, 0, false, errJSONSyntax
		default:
			d.pos++
		}
	}
	return 0, 0, false, errJSONSyntax
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans a number per the JSON grammar.
func (d *Doc) number() bool {
	p := d.pos
	b := d.data
	if p < len(b) && b[p] == '-' {
		p++
	}
	if p >= len(b) {
		return false
	}
	if b[p] == '0' {
		p++
	} else if b[p] >= '1' && b[p] <= '9' {
		for p < len(b) && isDigit(b[p]) {
			p++
		}
	} else {
		return false
	}
	if p < len(b) && b[p] == '.' {
		p++
		if p >= len(b) || !isDigit(b[p]) {
			return false
		}
		for p < len(b) && isDigit(b[p]) {
			p++
		}
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		if p >= len(b) || !isDigit(b[p]) {
			return false
		}
		for p < len(b) && isDigit(b[p]) {
			p++
		}
	}
	d.pos = p
	return true
}

// raw is the value's bytes as they appear in the input.
func (d *Doc) raw(i int32) []byte { return d.data[d.nodes[i].start:d.nodes[i].end] }

// name is the decoded member name of node i.
func (d *Doc) name(i int32) []byte {
	n := &d.nodes[i]
	if n.nameArena {
		return d.arena[n.nameStart:n.nameEnd]
	}
	return d.data[n.nameStart:n.nameEnd]
}

// strContents is the raw contents of a string node, without quotes, with
// escapes not decoded.
func (d *Doc) strContents(i int32) []byte {
	n := &d.nodes[i]
	return d.data[n.start+1 : n.end-1]
}

// appendUnquoted decodes the escapes of a JSON string's contents (without
// quotes) and appends the result to dst. It reports false on a bad escape.
func appendUnquoted(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return dst, false
		}
		switch s[i+1] {
		case '"', '\\', '/':
			dst = append(dst, s[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return dst, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
					if r2, ok := hex4(s[i+2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							i += 6
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, false
		}
		i += 2
	}
	return dst, true
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// isIntegerLiteral reports whether a number literal has no fraction or
// exponent.
func isIntegerLiteral(b []byte) bool {
	for _, c := range b {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// parseNumber converts a validated number literal without allocating.
func parseNumber(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	return f, err == nil
}

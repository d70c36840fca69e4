package jsondiff

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A path names a place inside a JSON value:
//
//	order.id            member "id" of member "order"
//	items[2].price      member "price" of the third element of "items"
//	items[*].price      ... of every element (also items[].price, items.*.price)
//	["a.b"].c           a member whose name contains a dot, JSON-quoted
//
// A numeric segment also matches an object member of that name, and * also
// matches any member name. Paths used for pairing must not contain wildcards.

type pathSeg struct {
	name     string // the member name; for [N] the decimal text of N
	index    int    // the array index, or -1 when the segment is not a number
	wildcard bool
}

type Path struct {
	text string
	segs []pathSeg
}

func (p Path) String() string { return p.text }

// ParsePath parses a path. An empty path is an error.
func ParsePath(s string) (Path, error) {
	p := Path{text: s}
	if strings.TrimSpace(s) == "" {
		return p, errors.New("empty path")
	}
	i := 0
	expectName := true // at start or after '.'
	for i < len(s) {
		switch c := s[i]; {
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return p, fmt.Errorf("path %q: unclosed [", s)
			}
			inner := s[i+1 : i+j]
			if strings.HasPrefix(inner, `"`) {
				// Find the closing quote honouring escapes; ']' may be inside.
				end := quotedEnd(s[i+1:])
				if end < 0 || i+1+end >= len(s) || s[i+1+end] != ']' {
					return p, fmt.Errorf("path %q: bad quoted segment", s)
				}
				var name string
				if err := json.Unmarshal([]byte(s[i+1:i+1+end]), &name); err != nil {
					return p, fmt.Errorf("path %q: bad quoted segment: %w", s, err)
				}
				p.segs = append(p.segs, pathSeg{name: name, index: -1})
				i += end + 2
			} else {
				switch inner {
				case "", "*":
					p.segs = append(p.segs, pathSeg{name: "*", index: -1, wildcard: true})
				default:
					n, err := strconv.Atoi(inner)
					if err != nil || n < 0 {
						return p, fmt.Errorf("path %q: [%s] is not an index, * or a quoted name", s, inner)
					}
					p.segs = append(p.segs, pathSeg{name: inner, index: n})
				}
				i += j + 1
			}
			expectName = false
		case c == '.':
			if expectName {
				return p, fmt.Errorf("path %q: empty segment", s)
			}
			expectName = true
			i++
		default:
			if !expectName && len(p.segs) > 0 {
				return p, fmt.Errorf("path %q: expected . or [ after a bracket", s)
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			name := s[i:j]
			seg := pathSeg{name: name, index: -1}
			if name == "*" {
				seg.wildcard = true
			} else if n, err := strconv.Atoi(name); err == nil && n >= 0 && strconv.Itoa(n) == name {
				seg.index = n
			}
			p.segs = append(p.segs, seg)
			i = j
			expectName = false
		}
	}
	if expectName {
		return p, fmt.Errorf("path %q: ends with .", s)
	}
	return p, nil
}

// quotedEnd returns the index just past the closing quote of the JSON string
// that starts s, or -1.
func quotedEnd(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

func (p Path) HasWildcard() bool {
	for _, s := range p.segs {
		if s.wildcard {
			return true
		}
	}
	return false
}

// matchesName reports whether segment s matches the object member name.
func (s *pathSeg) matchesName(name []byte) bool {
	return s.wildcard || s.name == string(name)
}

// matchesIndex reports whether segment s matches array index i.
func (s *pathSeg) matchesIndex(i int) bool {
	return s.wildcard || s.index == i
}

// lookup finds the node at path p in d (parsed), or -1. With duplicate member
// names the last one wins, as in most JSON decoders.
func (d *Doc) Lookup(p *Path) int32 {
	n := int32(0)
	if len(d.nodes) == 0 {
		return -1
	}
	for si := range p.segs {
		seg := &p.segs[si]
		node := &d.nodes[n]
		found := int32(-1)
		switch node.kind {
		case jObject:
			for c := node.first; c >= 0; c = d.nodes[c].next {
				if seg.matchesName(d.name(c)) {
					found = c
				}
			}
		case jArray:
			if seg.index >= 0 && seg.index < int(node.count) {
				c := node.first
				for k := 0; k < seg.index; k++ {
					c = d.nodes[c].next
				}
				found = c
			}
		}
		if found < 0 {
			return -1
		}
		n = found
	}
	return n
}

// appendKey appends the pairing key form of node i: a string's decoded
// contents, a number's or boolean's literal, the raw bytes of an array or
// object. It reports false for null, which pairs with nothing.
func (d *Doc) AppendKey(dst []byte, i int32) ([]byte, bool) {
	n := &d.nodes[i]
	switch n.kind {
	case jNull:
		return dst, false
	case jString:
		if !n.esc {
			return append(dst, d.strContents(i)...), true
		}
		out, ok := appendUnquoted(dst, d.strContents(i))
		return out, ok
	default:
		return append(dst, d.raw(i)...), true
	}
}

// Has reports whether d holds at least one value at path p; a wildcard
// segment matches any member or element. It does what the comparer's
// ignore matching does, for telling a user that a path matches nothing.
func (d *Doc) Has(p *Path) bool {
	if len(d.nodes) == 0 || len(p.segs) == 0 {
		return false
	}
	return d.has(0, p.segs)
}

func (d *Doc) has(n int32, segs []pathSeg) bool {
	if len(segs) == 0 {
		return true
	}
	seg := &segs[0]
	node := &d.nodes[n]
	switch node.kind {
	case jObject:
		for c := node.first; c >= 0; c = d.nodes[c].next {
			if seg.matchesName(d.name(c)) && d.has(c, segs[1:]) {
				return true
			}
		}
	case jArray:
		i := 0
		for c := node.first; c >= 0; c = d.nodes[c].next {
			if seg.matchesIndex(i) && d.has(c, segs[1:]) {
				return true
			}
			i++
		}
	}
	return false
}

// Generalize folds the array indexes of a field diff's path into [*]
// ("items[3].price" -> "items[*].price"), so the differences of every
// element count as one path, and the result is an ignore line that covers
// them all. Quoted names are kept as they are.
func Generalize(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '[' && i+1 < len(path) {
			if path[i+1] == '"' {
				end := quotedEnd(path[i+1:])
				if end > 0 {
					b.WriteString(path[i : i+1+end])
					i += end
					continue
				}
			}
			j := i + 1
			for j < len(path) && path[j] >= '0' && path[j] <= '9' {
				j++
			}
			if j > i+1 && j < len(path) && path[j] == ']' {
				b.WriteString("[*]")
				i = j
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Last is the path's last member name ("" when it ends with an index):
// what a path typed one level off most likely shares with the right one.
func (p Path) Last() string {
	if len(p.segs) == 0 {
		return ""
	}
	s := p.segs[len(p.segs)-1]
	if s.wildcard || s.index >= 0 && strconv.Itoa(s.index) == s.name {
		return ""
	}
	return s.name
}

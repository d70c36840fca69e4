package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	htmlpkg "html"
	"io"
	"strings"
)

// JSON as the console shows it: indented, in the value's own member order
// (a record's fields as its producer wrote them, not sorted), split into
// spans a stylesheet colours (keys, strings, numbers, literals). Strings
// are shown re-quoted from their decoded value, so the text is valid JSON
// equal to the original.

// Span is a piece of rendered JSON and its class: "k" key, "s" string, "n"
// number, "l" true/false/null, "p" punctuation and indentation.
type Span struct {
	Class string
	Text  string
}

// maxJSONDepth bounds the nesting pretty-printed; deeper values are shown
// as they are (indentation would grow with the square of the depth).
const maxJSONDepth = 64

// maxJSONOutput bounds the pretty-printed text.
const maxJSONOutput = 1 << 20

var errTooDeep = errors.New("nested too deep")

// JSONSpans pretty-prints b, keeping the order of object members. ok is
// false when b is not a single JSON value (or nests deeper than 64, or
// would print longer than 1 MiB): show it as text then.
func JSONSpans(b []byte) (spans []Span, ok bool) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	p := jsonPrinter{}
	if err := p.value(dec, 0); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return p.spans, true
}

// PrettyJSON is s indented in its own member order, or s itself when it is
// not JSON.
func PrettyJSON(s string) string {
	spans, ok := JSONSpans([]byte(s))
	if !ok {
		return s
	}
	var b strings.Builder
	for _, sp := range spans {
		b.WriteString(sp.Text)
	}
	return b.String()
}

type jsonPrinter struct {
	spans []Span
	size  int
}

func (p *jsonPrinter) emit(class, text string) error {
	p.size += len(text)
	if p.size > maxJSONOutput {
		return errors.New("too long")
	}
	// Adjacent punctuation merges into one span.
	if n := len(p.spans); n > 0 && class == "p" && p.spans[n-1].Class == "p" {
		p.spans[n-1].Text += text
		return nil
	}
	p.spans = append(p.spans, Span{class, text})
	return nil
}

func (p *jsonPrinter) newline(depth int) error {
	return p.emit("p", "\n"+strings.Repeat("  ", depth))
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// value prints the next value of dec at depth.
func (p *jsonPrinter) value(dec *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		open, close := string(t), "]"
		if t == '{' {
			close = "}"
		}
		if err := p.emit("p", open); err != nil {
			return err
		}
		first := true
		for dec.More() {
			if !first {
				if err := p.emit("p", ","); err != nil {
					return err
				}
			}
			first = false
			if err := p.newline(depth + 1); err != nil {
				return err
			}
			if t == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				if err := p.emit("k", quote(key)); err != nil {
					return err
				}
				if err := p.emit("p", ": "); err != nil {
					return err
				}
			}
			if err := p.value(dec, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		if !first {
			if err := p.newline(depth); err != nil {
				return err
			}
		}
		return p.emit("p", close)
	case string:
		return p.emit("s", quote(t))
	case json.Number:
		return p.emit("n", t.String())
	case bool:
		if t {
			return p.emit("l", "true")
		}
		return p.emit("l", "false")
	case nil:
		return p.emit("l", "null")
	}
	return errors.New("unexpected token")
}

// Marked is a piece of text and whether it matches the search (shown
// highlighted).
type Marked struct {
	Text  string
	Match bool
}

// MarkMatches splits s around each occurrence of needle (case-sensitive,
// as the server's search is); an empty needle marks nothing.
func MarkMatches(s, needle string) []Marked {
	if needle == "" || !strings.Contains(s, needle) {
		return []Marked{{Text: s}}
	}
	var out []Marked
	for {
		i := strings.Index(s, needle)
		if i < 0 {
			if s != "" {
				out = append(out, Marked{Text: s})
			}
			return out
		}
		if i > 0 {
			out = append(out, Marked{Text: s[:i]})
		}
		out = append(out, Marked{Text: needle, Match: true})
		s = s[i+len(needle):]
	}
}

// SpansHTML is spans as HTML: every text escaped, each span but
// punctuation in a <span class> for its colour, matches of needle in
// <mark>. One string rather than a component per span: a 64 KiB value
// has thousands of them.
func SpansHTML(spans []Span, needle string) string {
	var b strings.Builder
	for _, sp := range spans {
		if sp.Class == "p" {
			b.WriteString(htmlpkg.EscapeString(sp.Text))
			continue
		}
		b.WriteString(`<span class="`)
		b.WriteString(sp.Class)
		b.WriteString(`">`)
		writeMarked(&b, sp.Text, needle)
		b.WriteString(`</span>`)
	}
	return b.String()
}

// MarkedHTML is s escaped, with the matches of needle in <mark>.
func MarkedHTML(s, needle string) string {
	var b strings.Builder
	writeMarked(&b, s, needle)
	return b.String()
}

func writeMarked(b *strings.Builder, s, needle string) {
	for _, m := range MarkMatches(s, needle) {
		if m.Match {
			b.WriteString("<mark>")
			b.WriteString(htmlpkg.EscapeString(m.Text))
			b.WriteString("</mark>")
		} else {
			b.WriteString(htmlpkg.EscapeString(m.Text))
		}
	}
}

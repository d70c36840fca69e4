package comparisons

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/templates"
)

// Line is one line of a value shown in the side-by-side view. Mark is set
// on the lines of a field that differs.
type Line struct {
	Text string
	Mark bool
}

// maxViewNodes bounds the work of laying out one value (values are clipped
// at 4 KiB by the engine, so this is only a guard).
const maxViewNodes = 20000

// ValueLines lays out a record value for the side-by-side view: JSON is
// pretty-printed in its own member order, with the lines of every field
// whose path is in marks highlighted ("$" marks the whole value); other
// values are shown as text (or hex when not UTF-8), marked as a whole when
// "$" is in marks.
func ValueLines(ri *migration.RecordInfo, marks []string) []Line {
	if ri == nil {
		return nil
	}
	all := false
	set := make(map[string]bool, len(marks))
	for _, m := range marks {
		if m == "$" {
			all = true
		}
		set[m] = true
	}
	if ri.ValueNull {
		return []Line{{Text: "null (tombstone)", Mark: all}}
	}
	if !ri.ValueTruncated {
		if lines, err := prettyJSON([]byte(ri.Value), set); err == nil {
			if all {
				for i := range lines {
					lines[i].Mark = true
				}
			}
			return lines
		}
	}
	text, _ := templates.Payload([]byte(ri.Value), false, templates.FormatText)
	var out []Line
	for _, l := range strings.Split(text, "\n") {
		out = append(out, Line{Text: l, Mark: all})
	}
	if ri.ValueTruncated {
		out = append(out, Line{Text: "… (clipped at 4 KiB)"})
	}
	return out
}

// jsonPrinter walks a JSON value token by token, keeping member order and
// number literals as written.
type jsonPrinter struct {
	dec   *json.Decoder
	marks map[string]bool
	out   []Line
	nodes int
}

var errTooBig = errors.New("value too large to lay out")

func prettyJSON(data []byte, marks map[string]bool) ([]Line, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not UTF-8")
	}
	p := &jsonPrinter{dec: json.NewDecoder(bytes.NewReader(data)), marks: marks}
	p.dec.UseNumber()
	if err := p.value("$", "", 0, false, ""); err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return p.out, nil
}

// value prints one value at path. prefix is what precedes it on its first
// line ("name": ), marked says whether an enclosing field is marked, and
// suffix follows its last line ("," between members).
func (p *jsonPrinter) value(path, prefix string, depth int, marked bool, suffix string) error {
	p.nodes++
	if p.nodes > maxViewNodes || depth > 64 {
		return errTooBig
	}
	marked = marked || p.marks[path]
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	indent := strings.Repeat("  ", depth)
	switch t := tok.(type) {
	case json.Delim:
		open, close := string(t), "}"
		if t == '[' {
			close = "]"
		}
		if t == '}' || t == ']' {
			return errors.New("unexpected " + string(t))
		}
		first := len(p.out)
		p.out = append(p.out, Line{Text: indent + prefix + open, Mark: marked})
		n := 0
		for p.dec.More() {
			var childPath, childPrefix string
			if t == '{' {
				kt, err := p.dec.Token()
				if err != nil {
					return err
				}
				name, ok := kt.(string)
				if !ok {
					return errors.New("object member without a name")
				}
				childPath = memberPath(path, name)
				childPrefix = quote(name) + ": "
			} else {
				childPath = path + "[" + strconv.Itoa(n) + "]"
				if path == "$" {
					childPath = "[" + strconv.Itoa(n) + "]"
				}
			}
			if err := p.value(childPath, childPrefix, depth+1, marked, ","); err != nil {
				return err
			}
			n++
		}
		if _, err := p.dec.Token(); err != nil { // the closing delimiter
			return err
		}
		if n == 0 {
			p.out[first].Text += close + suffix
			return nil
		}
		// No comma after the last member.
		last := &p.out[len(p.out)-1]
		last.Text = strings.TrimSuffix(last.Text, ",")
		p.out = append(p.out, Line{Text: indent + close + suffix, Mark: marked})
	case string:
		p.out = append(p.out, Line{Text: indent + prefix + quote(t) + suffix, Mark: marked})
	case json.Number:
		p.out = append(p.out, Line{Text: indent + prefix + string(t) + suffix, Mark: marked})
	case bool:
		p.out = append(p.out, Line{Text: indent + prefix + strconv.FormatBool(t) + suffix, Mark: marked})
	case nil:
		p.out = append(p.out, Line{Text: indent + prefix + "null" + suffix, Mark: marked})
	}
	return nil
}

// memberPath is the path of member name under parent, written as the
// engine writes paths in its field diffs: a.b, a["x.y"], [0].c.
func memberPath(parent, name string) string {
	plain := name != "" && name != "*" && !strings.ContainsAny(name, ".[]\"\\")
	for i := 0; plain && i < len(name); i++ {
		if name[i] < 0x20 {
			plain = false
		}
	}
	if parent == "$" {
		parent = ""
	}
	if plain {
		if parent == "" {
			return name
		}
		return parent + "." + name
	}
	return parent + "[" + strconv.Quote(name) + "]"
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// HeaderMarked reports whether header name differs in fs.
func HeaderMarked(fs []migration.FieldDiff, name string) bool {
	for _, f := range fs {
		if f.Path == "header:"+name {
			return true
		}
	}
	return false
}

// Absent shows an empty field-diff side as "(absent)".
func Absent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

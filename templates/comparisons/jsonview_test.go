package comparisons

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-io/sluice/migration"
)

func lines(ls []Line) string {
	var b strings.Builder
	for _, l := range ls {
		if l.Mark {
			b.WriteString("* ")
		} else {
			b.WriteString("  ")
		}
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// The side-by-side view keeps member order and number literals, and marks
// exactly the lines of the fields the engine reported, by the engine's own
// path syntax.
func TestValueLines(t *testing.T) {
	cases := []struct {
		value string
		marks []string
		want  string
	}{
		{`{"b":1,"a":{"x":[1,2,{"y":true}],"e":{}},"n":1.50e0}`, []string{"a.x[2].y", "n"}, `  {
    "b": 1,
    "a": {
      "x": [
        1,
        2,
        {
*         "y": true
        }
      ],
      "e": {}
    },
*   "n": 1.50e0
  }
`},
		// A marked container marks all its lines; names with dots are quoted
		// in paths; strings keep their text, unescaped where JSON allows.
		{`{"a.b":{"c":"x<y"},"list":[]}`, []string{`["a.b"]`}, `  {
*   "a.b": {
*     "c": "x<y"
*   },
    "list": []
  }
`},
		{`[{"id":1},{"id":2}]`, []string{"[1].id"}, `  [
    {
      "id": 1
    },
    {
*     "id": 2
    }
  ]
`},
		{`{"a":null}`, []string{"$"}, `* {
*   "a": null
* }
`},
		{`not json at all`, []string{"$"}, "* not json at all\n"},
		{`plain`, nil, "  plain\n"},
		{`{"a":1} trailing`, nil, "  {\"a\":1} trailing\n"},
	}
	for _, tc := range cases {
		got := lines(ValueLines(&migration.RecordInfo{Value: tc.value}, tc.marks))
		if got != tc.want {
			t.Errorf("ValueLines(%s, %v):\n%s\nwant:\n%s", tc.value, tc.marks, got, tc.want)
		}
	}
	if got := lines(ValueLines(&migration.RecordInfo{ValueNull: true}, []string{"$"})); got != "* null (tombstone)\n" {
		t.Errorf("tombstone: %q", got)
	}
	if got := lines(ValueLines(&migration.RecordInfo{Value: `{"a":`, ValueTruncated: true}, nil)); !strings.Contains(got, "clipped at 4 KiB") {
		t.Errorf("clipped value: %q", got)
	}
	if ValueLines(nil, nil) != nil {
		t.Error("no record should give no lines")
	}
	// Bytes that are not UTF-8 are shown as hex.
	if got := lines(ValueLines(&migration.RecordInfo{Value: "\xff\xfe"}, nil)); !strings.Contains(got, "ff fe") {
		t.Errorf("binary value: %q", got)
	}
}

// FuzzValueLines: any record value lays out without panicking, as valid
// UTF-8, and JSON values keep every byte of their strings' content.
func FuzzValueLines(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"c"}]}`, `[]`, `"x"`, `{"a.b":1}`, "\xff", `{"a":1}{`, `[[[[[[[[[[`, `{"":{"":""}}`} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, value, mark string) {
		ls := ValueLines(&migration.RecordInfo{Value: value}, []string{mark, "$"[:len(mark)%2]})
		if value != "" && len(ls) == 0 {
			t.Fatalf("no lines for %q", value)
		}
		for _, l := range ls {
			if !utf8.ValidString(l.Text) {
				t.Fatalf("line %q of %q is not UTF-8", l.Text, value)
			}
		}
	})
}

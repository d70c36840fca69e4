package jsondiff

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustDoc(t testing.TB, s string) *Doc {
	t.Helper()
	var d Doc
	if err := d.Parse([]byte(s)); err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return &d
}

func TestParseValidity(t *testing.T) {
	good := []string{`0`, `-0`, `1.5e-3`, `"a\u00e9\n"`, `[]`, `{}`, ` {"a" : [1, {"b":null}], "c":true} `, `"\ud83d\ude00"`}
	bad := []string{``, ` `, `{`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `+1`, `"\x"`, `"a`, `tru`, `{"a" 1}`, `[1 2]`, `1 2`, "\"\x01\"", `{1:2}`, `-`, `1e`, `"\u12"`}
	for _, s := range good {
		var d Doc
		if err := d.Parse([]byte(s)); err != nil {
			t.Errorf("%q: %v", s, err)
		}
		if !json.Valid([]byte(s)) {
			t.Errorf("%q: test case not valid JSON", s)
		}
	}
	for _, s := range bad {
		var d Doc
		if err := d.Parse([]byte(s)); err == nil {
			t.Errorf("%q: parsed", s)
		}
	}
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	var d Doc
	if err := d.Parse([]byte(deep)); err == nil {
		t.Error("too deep parsed")
	}
}

func TestPathParse(t *testing.T) {
	for in, want := range map[string][]pathSeg{
		"order.id":       {{name: "order", index: -1}, {name: "id", index: -1}},
		"items[2].price": {{name: "items", index: -1}, {name: "2", index: 2}, {name: "price", index: -1}},
		"items[*].price": {{name: "items", index: -1}, {name: "*", index: -1, wildcard: true}, {name: "price", index: -1}},
		"items[].price":  {{name: "items", index: -1}, {name: "*", index: -1, wildcard: true}, {name: "price", index: -1}},
		"items.*.price":  {{name: "items", index: -1}, {name: "*", index: -1, wildcard: true}, {name: "price", index: -1}},
		`["a.b"].c`:      {{name: "a.b", index: -1}, {name: "c", index: -1}},
		`a["x]y"]`:       {{name: "a", index: -1}, {name: "x]y", index: -1}},
		"a.0":            {{name: "a", index: -1}, {name: "0", index: 0}},
	} {
		p, err := ParsePath(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if !reflect.DeepEqual(p.segs, want) {
			t.Errorf("%s: %+v", in, p.segs)
		}
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "a[", "a[x]", "a[-1]", `a["x]`, "a[1]b"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestLookupAndKey(t *testing.T) {
	d := mustDoc(t, `{"order":{"id":"o-1","n":42,"items":[{"id":7},{"id":8}],"id2":null,"e":"a\u0062"},"order":{"id":"last"}}`)
	key := func(path string) (string, bool) {
		p, err := ParsePath(path)
		if err != nil {
			t.Fatal(err)
		}
		n := d.Lookup(&p)
		if n < 0 {
			return "", false
		}
		k, ok := d.AppendKey(nil, n)
		return string(k), ok
	}
	// Duplicate "order": the last one wins.
	if k, ok := key("order.id"); !ok || k != "last" {
		t.Errorf("order.id = %q %v", k, ok)
	}
	d = mustDoc(t, `{"order":{"id":"o-1","n":42,"items":[{"id":7},{"id":8}],"id2":null,"e":"a\u0062"}}`)
	for path, want := range map[string]string{"order.id": "o-1", "order.n": "42", "order.items[1].id": "8", "order.e": "ab"} {
		if k, ok := key(path); !ok || k != want {
			t.Errorf("%s = %q %v, want %q", path, k, ok, want)
		}
	}
	for _, path := range []string{"order.id2", "order.missing", "order.items[2].id", "order.id.x"} {
		if k, ok := key(path); ok {
			t.Errorf("%s = %q, want no key", path, k)
		}
	}
}

func TestCompareAndDiff(t *testing.T) {
	cases := []struct {
		a, b   string
		ignore []string
		tol    float64
		diffs  []FieldDiff
	}{
		{a: `{"a":1,"b":[1,2]}`, b: `{"b":[1,2],"a":1}`},
		{a: `{"a":1.0}`, b: `{"a":1}`},
		{a: `{"a":-0}`, b: `{"a":0}`},
		{a: `{"a":"x\u0041"}`, b: `{"a":"xA"}`},
		{a: `{"a":12345678901234567890}`, b: `{"a":12345678901234567891}`,
			diffs: []FieldDiff{{Path: "a", Left: "12345678901234567890", Right: "12345678901234567891"}}},
		{a: `{"a":1.0001}`, b: `{"a":1}`, tol: 0.001},
		{a: `{"a":1.01}`, b: `{"a":1}`, tol: 0.001, diffs: []FieldDiff{{Path: "a", Left: "1.01", Right: "1"}}},
		{a: `{"t":"x","o":{"t":1,"u":2}}`, b: `{"t":"y","o":{"t":3,"u":2}}`, ignore: []string{"t", "o.t"}},
		{a: `{"i":[{"p":1,"q":1},{"p":2,"q":2}]}`, b: `{"i":[{"p":9,"q":1},{"p":8,"q":2}]}`, ignore: []string{"i[*].p"}},
		{a: `{"i":[{"p":1},{"p":2}]}`, b: `{"i":[{"p":1},{"p":3}]}`, ignore: []string{"i[0].p"},
			diffs: []FieldDiff{{Path: "i[1].p", Left: "2", Right: "3"}}},
		{a: `{"a":1,"b":2}`, b: `{"b":3,"c":4}`, diffs: []FieldDiff{
			{Path: "a", Left: "1"}, {Path: "b", Left: "2", Right: "3"}, {Path: "c", Right: "4"}}},
		{a: `[1,2,3]`, b: `[1,2]`, diffs: []FieldDiff{{Path: "[2]", Left: "3"}}},
		{a: `{"a":{"b":1}}`, b: `{"a":[1]}`, diffs: []FieldDiff{{Path: "a", Left: `{"b":1}`, Right: "[1]"}}},
		{a: `1`, b: `"1"`, diffs: []FieldDiff{{Path: "$", Left: "1", Right: `"1"`}}},
		{a: `{"a.b":1}`, b: `{"a.b":2}`, diffs: []FieldDiff{{Path: `["a.b"]`, Left: "1", Right: "2"}}},
		{a: `{"a":1,"a":2}`, b: `{"a":2}`},
		{a: `{"x":{"a":true}}`, b: `{"x":{"a":false}}`, diffs: []FieldDiff{{Path: "x.a", Left: "true", Right: "false"}}},
	}
	for _, c := range cases {
		var vc Comparer
		vc.Tolerance = c.tol
		for _, ig := range c.ignore {
			p, err := ParsePath(ig)
			if err != nil {
				t.Fatal(err)
			}
			vc.Ignore = append(vc.Ignore, p)
		}
		a, b := mustDoc(t, c.a), mustDoc(t, c.b)
		eq := vc.Equal(a, b)
		if eq != (len(c.diffs) == 0) {
			t.Errorf("%s vs %s: equal=%v", c.a, c.b, eq)
		}
		if eq != vc.Equal(b, a) {
			t.Errorf("%s vs %s: not symmetric", c.a, c.b)
		}
		got, _ := vc.Diff(a, b)
		if !reflect.DeepEqual(got, c.diffs) {
			t.Errorf("%s vs %s:\n got %+v\nwant %+v", c.a, c.b, got, c.diffs)
		}
		if eq && c.tol == 0 && vc.Hash(a) != vc.Hash(b) {
			t.Errorf("%s vs %s: equal but hashes differ", c.a, c.b)
		}
	}
}

func TestDiffLimit(t *testing.T) {
	var a, b strings.Builder
	a.WriteString("{")
	b.WriteString("{")
	for i := 0; i < 80; i++ {
		if i > 0 {
			a.WriteString(",")
			b.WriteString(",")
		}
		a.WriteString(`"f` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `":1`)
		b.WriteString(`"f` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `":2`)
	}
	a.WriteString("}")
	b.WriteString("}")
	var vc Comparer
	d, omitted := vc.Diff(mustDoc(t, a.String()), mustDoc(t, b.String()))
	if len(d) != MaxFieldDiffs || omitted != 80-MaxFieldDiffs {
		t.Fatalf("%d diffs, %d omitted", len(d), omitted)
	}
}

// FuzzJSONCompare feeds arbitrary bytes to the parser, the path lookup and
// the comparer: no panics, and the comparison's algebra holds.
func FuzzJSONCompare(f *testing.F) {
	f.Add([]byte(`{"order":{"id":"o-1","total":1.5}}`), []byte(`{"order":{"total":1.50,"id":"o-1"}}`), "order.id", "order.total")
	f.Add([]byte(`[1,{"a":"\u00e9"}]`), []byte(`[1,{"a":"é"}]`), "[1].a", "*")
	f.Add([]byte(`{"a":1,"a":2}`), []byte(`{"a":2}`), "a", "b[*]")
	f.Add([]byte(`"x`), []byte(`nul`), "", "[")
	f.Fuzz(func(t *testing.T, a, b []byte, keyPath, ignorePath string) {
		var da, db Doc
		errA, errB := da.Parse(a), db.Parse(b)
		if (errA == nil) != json.Valid(a) && !deepish(a) {
			t.Fatalf("parse(%q) = %v, json.Valid = %v", a, errA, json.Valid(a))
		}
		if p, err := ParsePath(keyPath); err == nil && errA == nil {
			if n := da.Lookup(&p); n >= 0 {
				da.AppendKey(nil, n)
			}
		}
		var vc Comparer
		if p, err := ParsePath(ignorePath); err == nil {
			vc.Ignore = []Path{p}
		}
		if errA != nil {
			return
		}
		if !vc.Equal(&da, &da) {
			t.Fatalf("%q not equal to itself", a)
		}
		if d, _ := vc.Diff(&da, &da); len(d) != 0 {
			t.Fatalf("%q differs from itself: %v", a, d)
		}
		if errB != nil {
			return
		}
		eq := vc.Equal(&da, &db)
		if eq != vc.Equal(&db, &da) {
			t.Fatalf("not symmetric: %q %q", a, b)
		}
		d, omitted := vc.Diff(&da, &db)
		if eq != (len(d) == 0 && omitted == 0) {
			t.Fatalf("equal=%v but diff %v: %q %q", eq, d, a, b)
		}
		if eq && vc.Hash(&da) != vc.Hash(&db) {
			t.Fatalf("equal but hashes differ: %q %q", a, b)
		}
		if eq && len(vc.Ignore) == 0 {
			// Our equality implies encoding/json's.
			var va, vb any
			if json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && !reflect.DeepEqual(va, vb) {
				t.Fatalf("equal here but not per encoding/json: %q %q", a, b)
			}
		}
	})
}

// deepish reports input nested beyond our depth limit (encoding/json allows
// more), where the two parsers may legitimately disagree.
func deepish(b []byte) bool {
	depth, maxd := 0, 0
	for _, c := range b {
		switch c {
		case '[', '{':
			depth++
			maxd = max(maxd, depth)
		case ']', '}':
			depth--
		}
	}
	return maxd > MaxDepth-2
}

func TestHasAndGeneralize(t *testing.T) {
	var d Doc
	if err := d.Parse([]byte(`{"meta":{"processed_at":"x"},"items":[{"sku":"a"},{"sku":"b","trace":1}],"a.b":{"c":2}}`)); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"meta.processed_at": true, "processed_at": false, "items[*].trace": true, "items[0].trace": false,
		"items[1].trace": true, `["a.b"].c`: true, "*.processed_at": true, "items": true, "nope": false,
	} {
		p, err := ParsePath(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Has(&p); got != want {
			t.Errorf("Has(%s) = %v, want %v", path, got, want)
		}
	}
	for in, want := range map[string]string{
		"items[3].price": "items[*].price", "a[1][22].b": "a[*][*].b", `["x[1]"].y[0]`: `["x[1]"].y[*]`, "header:trace-id": "header:trace-id", "$": "$",
	} {
		if got := Generalize(in); got != want {
			t.Errorf("Generalize(%s) = %s, want %s", in, got, want)
		}
	}
	p, _ := ParsePath("meta.processed_at")
	if p.Last() != "processed_at" {
		t.Error(p.Last())
	}
}

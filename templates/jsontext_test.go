package templates

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestJSONKeepsMemberOrder: pretty JSON shows members in the record's own
// order, coloured by kind, and stays valid JSON equal to the original.
func TestJSONKeepsMemberOrder(t *testing.T) {
	in := `{"zeta":1,"alpha":{"y":"é\u00e9<b>","b":[true,null,1.50e3]},"mid":[]}`
	spans, ok := JSONSpans([]byte(in))
	if !ok {
		t.Fatal("not pretty-printed")
	}
	var text strings.Builder
	var keys []string
	for _, s := range spans {
		text.WriteString(s.Text)
		if s.Class == "k" {
			keys = append(keys, s.Text)
		}
	}
	want := "{\n  \"zeta\": 1,\n  \"alpha\": {\n    \"y\": \"éé<b>\",\n    \"b\": [\n      true,\n      null,\n      1.50e3\n    ]\n  },\n  \"mid\": []\n}"
	if text.String() != want {
		t.Errorf("pretty JSON:\n%s\nwant:\n%s", text.String(), want)
	}
	if !reflect.DeepEqual(keys, []string{`"zeta"`, `"alpha"`, `"y"`, `"b"`, `"mid"`}) {
		t.Errorf("keys %v", keys)
	}
	var a, b any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal([]byte(text.String()), &b)
	if !reflect.DeepEqual(a, b) {
		t.Error("the pretty text is not the same JSON")
	}
	for _, bad := range []string{"", "nope", `{"a":1} {"b":2}`, strings.Repeat("[", 70) + strings.Repeat("]", 70)} {
		if _, ok := JSONSpans([]byte(bad)); ok {
			t.Errorf("%.20q pretty-printed", bad)
		}
	}
	if PrettyJSON(`{"b":1,"a":2}`) != "{\n  \"b\": 1,\n  \"a\": 2\n}" || PrettyJSON("text") != "text" {
		t.Error("PrettyJSON")
	}
}

func TestMarkMatches(t *testing.T) {
	got := MarkMatches("order-1001 and order-1002", "order-100")
	want := []Marked{{"order-100", true}, {"1 and ", false}, {"order-100", true}, {"2", false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v", got)
	}
	if got := MarkMatches("abc", ""); len(got) != 1 || got[0].Match {
		t.Errorf("%+v", got)
	}
}

// FuzzJSONSpans: any bytes either pretty-print to the same JSON value or
// are refused; nothing panics.
func FuzzJSONSpans(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,{"b":null}],"c":"\u2028"}`))
	f.Add([]byte(`[[[[]]]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		spans, ok := JSONSpans(b)
		if !ok {
			return
		}
		var text strings.Builder
		for _, s := range spans {
			text.WriteString(s.Text)
		}
		var x, y any
		if json.Unmarshal(b, &x) != nil || json.Unmarshal([]byte(text.String()), &y) != nil || !reflect.DeepEqual(x, y) {
			t.Fatalf("%q pretty-printed as %q", b, text.String())
		}
	})
}

// TestSpansHTMLEscapes: record contents never become markup.
func TestSpansHTMLEscapes(t *testing.T) {
	spans, _ := JSONSpans([]byte(`{"<script>":"</pre><b>x</b>","n":1}`))
	got := SpansHTML(spans, "<b>")
	want := "{\n  <span class=\"k\">&#34;&lt;script&gt;&#34;</span>: <span class=\"s\">&#34;&lt;/pre&gt;<mark>&lt;b&gt;</mark>x&lt;/b&gt;&#34;</span>,\n  <span class=\"k\">&#34;n&#34;</span>: <span class=\"n\">1</span>\n}"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if MarkedHTML("a<b>a", "a") != "<mark>a</mark>&lt;b&gt;<mark>a</mark>" {
		t.Error(MarkedHTML("a<b>a", "a"))
	}
}

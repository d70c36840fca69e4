package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func renderRecord(t *testing.T, format string, r *kgo.Record) string {
	t.Helper()
	render, err := recordFormatter(format, "\t")
	if err != nil {
		t.Fatalf("%q: %v", format, err)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := render(w, r); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	return b.String()
}

func TestRecordFormats(t *testing.T) {
	r := &kgo.Record{
		Topic: "orders", Partition: 2, Offset: 41, Timestamp: time.UnixMilli(1700000000123),
		Key: []byte("k1"), Value: []byte("hello"),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
	}
	for format, want := range map[string]string{
		"value":                        "hello\n",
		"kv":                           "k1\thello\n",
		`%t/%p@%o %T [%k]=%s %K/%S %h`: "orders/2@41 1700000000123 [k1]=hello 2/5 a=1,b=2",
		`100%% \t|\n\\x\q`:             "100% \t|\n\\x\\q",
		"json":                         `{"topic":"orders","partition":2,"offset":41,"timestamp":1700000000123,"key":"k1","value":"hello","headers":[{"key":"a","value":"1"},{"key":"b","value":"2"}]}` + "\n",
	} {
		if got := renderRecord(t, format, r); got != want {
			t.Errorf("%q:\n got %q\nwant %q", format, got, want)
		}
	}

	// Bytes that are not UTF-8 survive JSON as base64; a null key stays null.
	bin := &kgo.Record{Topic: "t", Value: []byte{0xff, 0x00, 0xfe}, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0xc3}}}}
	want := `{"topic":"t","partition":0,"offset":0,"timestamp":` + "-62135596800000" +
		`,"key":null,"value":null,"value_base64":"/wD+","headers":[{"key":"h","value":null,"value_base64":"ww=="}]}` + "\n"
	if got := renderRecord(t, "json", bin); got != want {
		t.Errorf("binary record:\n got %q\nwant %q", got, want)
	}

	for _, bad := range []string{"%z", "plain", "%"} {
		if _, err := recordFormatter(bad, "\t"); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// FuzzConsumeTemplate: any --format is either rejected or renders without
// panicking, and text without verbs or escapes renders as itself.
func FuzzConsumeTemplate(f *testing.F) {
	for _, s := range []string{"%s\\n", "%k=%s %h", "100%%", "\\t%t", "%", "x%"} {
		f.Add(s)
	}
	r := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}}
	f.Fuzz(func(t *testing.T, format string) {
		parts, err := parseTemplate(format)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, p := range parts {
			b.WriteString(p.lit)
		}
		if !strings.ContainsAny(format, "%\\") && b.String() != format {
			t.Fatalf("%q rendered its literal text as %q", format, b.String())
		}
		if strings.Contains(format, "%") {
			if render, err := recordFormatter(format, "\t"); err == nil {
				w := bufio.NewWriter(&bytes.Buffer{})
				render(w, r)
			}
		}
	})
}

package safecsv

import (
	"bytes"
	"encoding/csv"
	"testing"
)

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"=1+1":                     "'=1+1",
		"+cmd|' /C calc'!A0":       "'+cmd|' /C calc'!A0",
		"-2+3":                     "'-2+3",
		"@SUM(A1:A2)":              "'@SUM(A1:A2)",
		"\t=1":                     "'\t=1",
		"\r=1":                     "'\r=1",
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"-12":                      "-12",
		"+3.5":                     "+3.5",
		"-":                        "'-",
		"plain":                    "plain",
		"":                         "",
		"a=b":                      "a=b",
	} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every cell is quoted and made safe; encoding/csv reads the rows back,
// separators, quotes and line breaks inside cells included.
func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	rows := [][]string{{"kind", "value"}, {"=1+1", "a,\"b\"\nc"}, {"-12", ""}}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "\"kind\",\"value\"\n\"'=1+1\",\"a,\"\"b\"\"\nc\"\n\"-12\",\"\"\n"
	if buf.String() != want {
		t.Fatalf("CSV:\n%q\nwant\n%q", buf.String(), want)
	}
	back, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(back) != 3 || back[1][0] != "'=1+1" || back[1][1] != rows[1][1] {
		t.Fatalf("read back: %q %v", back, err)
	}
}

package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferenceFresh fails when docs/configuration.md is not what the
// tables give, with the command that regenerates it.
func TestReferenceFresh(t *testing.T) {
	var want bytes.Buffer
	if err := WriteReference(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", ReferencePath))
	if err != nil {
		t.Fatalf("%v; generate it with `make docs` (go run ./cmd/sluice config docs -o %s)", err, ReferencePath)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%s is stale: regenerate it with `make docs` (go run ./cmd/sluice config docs -o %s)", ReferencePath, ReferencePath)
	}
}

// TestReferenceNamesEveryKey: every key and topic config has its row,
// with its default.
func TestReferenceNamesEveryKey(t *testing.T) {
	var b bytes.Buffer
	WriteReference(&b)
	doc := b.String()
	for _, k := range append(Keys(), TopicKeys()...) {
		if row := "| `" + k.Name + "` | " + k.Type.String() + " | " + mdDefault(k.Default) + " |"; !strings.Contains(doc, row) {
			t.Errorf("no row %q", row)
		}
	}
}

// TestProperties: the sample file names every key once, with its default
// commented out unless set, loads, and wraps its comments.
func TestProperties(t *testing.T) {
	var b bytes.Buffer
	if err := WriteProperties(&b, map[string]string{"log.dirs": "/var/lib/sluice/kafka"}); err != nil {
		t.Fatal(err)
	}
	props, err := ReadProperties(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(props) != 1 || props[0].Key != "log.dirs" || props[0].Value != "/var/lib/sluice/kafka" {
		t.Fatalf("active settings %v, want log.dirs only", props)
	}
	b.Reset()
	WriteProperties(&b, nil)
	for _, line := range strings.Split(b.String(), "\n") {
		if len(line) > 80 && strings.HasPrefix(line, "# ") {
			t.Errorf("comment line longer than 80: %q", line)
		}
	}
	for _, k := range Keys() {
		if n := strings.Count(b.String(), "\n#"+k.Name+"="+k.Default+"\n"); n != 1 {
			t.Errorf("#%s=%s appears %d times", k.Name, k.Default, n)
		}
	}
	if err := WriteProperties(&b, map[string]string{"no.such.key": "1"}); err == nil {
		t.Error("an unknown key was written")
	}
}

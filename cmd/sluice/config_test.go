package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/config"
)

// TestConfigCommand: `sluice config docs` and `sluice config properties`
// write what package config generates, to standard output or to a file,
// and refuse what they do not understand.
func TestConfigCommand(t *testing.T) {
	var want bytes.Buffer
	config.WriteReference(&want)
	code, out, errs := runCLI(t, "", "", "config", "docs")
	if code != 0 || out != want.String() {
		t.Fatalf("config docs: exit %d, %d bytes, stderr %s", code, len(out), errs)
	}

	path := filepath.Join(t.TempDir(), "server.properties")
	code, _, errs = runCLI(t, "", "", "config", "properties", "-o", path, "--set", "log.dirs=/srv/kafka", "--set", "console.listen=")
	if code != 0 {
		t.Fatalf("config properties: exit %d: %s", code, errs)
	}
	want.Reset()
	config.WriteProperties(&want, map[string]string{"log.dirs": "/srv/kafka", "console.listen": ""})
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("config properties -o wrote %d bytes, want %d", len(got), want.Len())
	}
	if c, err := config.Load(path, nil); err != nil || c.LogDirs[0] != "/srv/kafka" || c.ConsoleListen != "" {
		t.Fatalf("the written file loads as %v, %v", c, err)
	}

	for _, args := range [][]string{
		{"config", "properties", "--set", "no.such.key=1"},
		{"config", "properties", "--set", "novalue"},
		{"config", "docs", "extra"},
		{"config", "explain"},
		{"config", "docs", "-o", filepath.Join(t.TempDir(), "missing", "dir", "x.md")},
	} {
		if code, _, errs := runCLI(t, "", "", args...); code == 0 || errs == "" {
			t.Errorf("%s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
	}
	if code, out, _ := runCLI(t, "", "", "config", "--help"); code != 0 || !strings.Contains(out, "properties") {
		t.Errorf("config --help: exit %d: %s", code, out)
	}
}

package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/buildinfo"
)

// captureStdout runs fn with os.Stdout going to a pipe and returns what it
// wrote.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	fn()
	w.Close()
	return <-done
}

// TestVersionFlag: `sluice --version` (and -version, -v, -V) prints what
// `sluice version` prints and exits 0, instead of "unknown command".
func TestVersionFlag(t *testing.T) {
	var want string
	out := captureStdout(t, func() {
		if code := realMain([]string{"version"}); code != 0 {
			t.Fatalf("sluice version: exit %d", code)
		}
	})
	want = out
	if !strings.HasPrefix(want, "sluice "+buildinfo.Version+" (commit ") {
		t.Fatalf("sluice version printed %q", want)
	}
	if !strings.Contains(want, "Apache-2.0") {
		t.Fatalf("sluice version does not name the licence: %q", want)
	}
	for _, arg := range []string{"--version", "-version", "-v", "-V"} {
		var code int
		got := captureStdout(t, func() { code = realMain([]string{arg}) })
		if code != 0 || got != want {
			t.Errorf("sluice %s: exit %d, printed %q; want exit 0 and %q", arg, code, got, want)
		}
	}
}

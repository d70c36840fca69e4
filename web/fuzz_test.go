package web

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/kafkaview"
)

// FuzzFormParsers feeds arbitrary text to the parsers of what browsers send
// (cursor, headers, times, config lines): none may panic, and what parses
// must round-trip or keep its invariants.
func FuzzFormParsers(f *testing.F) {
	for _, s := range []string{"0:12,1:40", "", "a:b", "3:-1", "trace-id: x\nsource: y", "k=v\n# c\nx = y", "2025-01-31T12:00:00", "1700000000000", ":", "\n\n:\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := parseCursor(s); err == nil {
			back, err := parseCursor(formatCursor(m))
			if err != nil || len(back) != len(m) {
				t.Fatalf("cursor %q does not round-trip: %v", s, err)
			}
			for p, o := range m {
				if back[p] != o || p < 0 || o < 0 {
					t.Fatalf("cursor %q: partition %d offset %d", s, p, o)
				}
			}
		}
		if hs, err := parseHeaders(s); err == nil {
			for _, h := range hs {
				if h.Key == "" || strings.ContainsAny(h.Key, "\n") {
					t.Fatalf("header with bad name %q from %q", h.Key, s)
				}
			}
		}
		if cfg, err := kafkaview.ParseConfigLines(s); err == nil {
			for k := range cfg {
				if k == "" || strings.Contains(k, "=") || strings.Contains(k, "\n") {
					t.Fatalf("config key %q from %q", k, s)
				}
			}
		}
		parseWhen(s, time.UTC)
		validZoneName(s)
		safe := safeNext(s)
		if !strings.HasPrefix(safe, "/") || strings.HasPrefix(safe, "//") || strings.HasPrefix(safe, "/\\") {
			t.Fatalf("safeNext(%q) = %q leaves the site", s, safe)
		}
	})
}

package templates

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-io/sluice/consoledb"
)

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	if v, u := Bytes(1536); v != "1.5" || u != "KiB" {
		t.Errorf("Bytes(1536) = %s %s", v, u)
	}
	if v, _ := Bytes(-1); v != "—" {
		t.Errorf("unknown size shown as %q", v)
	}
	for d, want := range map[time.Duration]string{0: "0 s", 500 * time.Microsecond: "<1 ms", 1500 * time.Millisecond: "2 s",
		90 * time.Second: "1 min 30 s", 3 * time.Hour: "3 h", 50 * time.Hour: "2 d 2 h"} {
		if got := Dur(d); got != want {
			t.Errorf("Dur(%v) = %q, want %q", d, got, want)
		}
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	ctx := WithRequest(context.Background(), &Request{Loc: paris})
	at := time.Date(2025, 1, 31, 12, 0, 0, 0, time.UTC)
	if got := TimeText(ctx, at); got != "2025-01-31 13:00:00" {
		t.Errorf("time in Paris: %s", got)
	}
	if s, _ := Payload([]byte(`{"a":1}`), false, FormatJSON); s != "{\n  \"a\": 1\n}" {
		t.Errorf("pretty JSON: %q", s)
	}
	if s, _ := Payload([]byte("not json"), false, FormatJSON); s != "not json" {
		t.Errorf("JSON fallback: %q", s)
	}
	if s, _ := Payload([]byte{0xff, 0x00, 'A'}, false, FormatText); !strings.HasPrefix(s, "00000000  ff 00 41") {
		t.Errorf("binary text falls back to hex: %q", s)
	}
}

// FuzzPayload: any bytes render in every format without panicking, as valid
// UTF-8, and hex dumps have one line per 16 bytes.
func FuzzPayload(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,{"b":null}]}`))
	f.Add([]byte{0, 1, 2, 0xff, 0xfe})
	f.Add([]byte("plain text"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fm := range []Format{FormatText, FormatJSON, FormatHex} {
			s, _ := Payload(b, false, fm)
			if !utf8.ValidString(s) {
				t.Fatalf("format %s produced invalid UTF-8", fm)
			}
			if fm == FormatHex && len(b) > 0 {
				if lines := strings.Count(s, "\n") + 1; lines != (len(b)+15)/16 {
					t.Fatalf("hex dump of %d bytes has %d lines", len(b), lines)
				}
			}
		}
	})
}

// TestChartFitsAndBreaks: a chart of a short history spans that history,
// not the whole range asked; points sampled less often than the console's
// interval still draw a line; every point has a tooltip; events inside the
// span become markers.
func TestChartFitsAndBreaks(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var pts []consoledb.LagPoint
	for i := 0; i < 20; i++ { // 10 minutes, every 30 s
		pts = append(pts, consoledb.LagPoint{At: now.Add(-10*time.Minute + time.Duration(i)*30*time.Second), Lag: int64(100 * i), LagTime: time.Duration(i) * time.Minute})
	}
	events := []ChartEvent{{At: now.Add(-5 * time.Minute), Kind: "fired", Label: "Alert fired"}, {At: now.Add(-5 * time.Hour), Kind: "reset"}}
	c := NewChartWithEvents(context.Background(), pts, now.Add(-6*time.Hour), now, 30*time.Second, events)
	if !c.Fitted || c.Since.Before(now.Add(-11*time.Minute)) || len(c.Bands) != 20 || len(c.Markers) != 1 {
		t.Fatalf("fitted %v since %v bands %d markers %d", c.Fitted, c.Since, len(c.Bands), len(c.Markers))
	}
	if !strings.Contains(c.Bands[3].Title, "300 records behind, 3 min behind") {
		t.Errorf("tooltip %q", c.Bands[3].Title)
	}
	if strings.Count(c.Line, "L") != 19 {
		t.Errorf("line %q", c.Line)
	}
	// Samples five minutes apart on a console sampling every 2 s: one line.
	var sparse []consoledb.LagPoint
	for i := 0; i < 10; i++ {
		sparse = append(sparse, consoledb.LagPoint{At: now.Add(-time.Hour + time.Duration(i)*5*time.Minute), Lag: 5})
	}
	if c := NewChart(context.Background(), sparse, now.Add(-time.Hour), now, 2*time.Second); strings.Count(c.Line, "L") != 9 {
		t.Errorf("sparse line %q", c.Line)
	}
	for v, want := range map[float64]float64{2000: 2400, 50: 60, 7200: 7200, 90000: 129600} {
		if top, _ := niceDurationScale(v); top != want {
			t.Errorf("niceDurationScale(%v) = %v, want %v", v, top, want)
		}
	}
}

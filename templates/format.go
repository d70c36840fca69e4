package templates

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-io/sluice/internal/human"
)

// Count formats n with thousands separators: 1234567 -> "1,234,567".
func Count[T ~int | ~int32 | ~int64](n T) string { return human.Count(int64(n)) }

// Plural is "1 record", "2 records", "1,200 records".
func Plural[T ~int | ~int32 | ~int64](n T, one, many string) string {
	return human.Plural(int64(n), one, many)
}

// UnitOf is the unit word for n things, for a figure whose number and
// unit are shown apart: "member" for 1, "members" otherwise (0 included).
func UnitOf[T ~int | ~int32 | ~int64](n T, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Bytes splits a byte count into a short number and a binary unit:
// 1536 -> ("1.5", "KiB"). Negative means unknown: ("—", "").
func Bytes(n int64) (string, string) { return human.Bytes(n) }

// BytesText is Bytes joined: "1.5 KiB".
func BytesText(n int64) string { return human.BytesText(n) }

// Rate formats a per-second rate with a short unit prefix: 1234.5 -> "1.2k".
func Rate(f float64) string { return human.Rate(f) }

// Dur formats a duration compactly, always with a unit: "0 s", "850 ms",
// "42 s", "3 min 20 s", "5 h 12 min", "3 d 4 h" (package human).
func Dur(d time.Duration) string { return human.Duration(d) }

// TimeText formats t in the viewer's zone: "2025-03-01 14:05:09".
func TimeText(ctx context.Context, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(RequestOf(ctx).Loc).Format("2006-01-02 15:04:05")
}

// TimeMillisText is TimeText with milliseconds, for record timestamps.
func TimeMillisText(ctx context.Context, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(RequestOf(ctx).Loc).Format("2006-01-02 15:04:05.000")
}

// ZoneAbbrev is the viewer's zone abbreviation at t, e.g. "CET".
func ZoneAbbrev(ctx context.Context, t time.Time) string {
	name, _ := t.In(RequestOf(ctx).Loc).Zone()
	return name
}

// Ago formats how long before now t was: "5 min ago".
func Ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	if d < 5*time.Second {
		return "just now"
	}
	return Dur(d.Truncate(time.Second)) + " ago"
}

// Format is how message keys and values are shown.
type Format string

const (
	FormatText Format = "text"
	FormatJSON Format = "json"
	FormatHex  Format = "hex"
)

// ParseFormat maps a query value to a Format (text by default).
func ParseFormat(s string) Format {
	switch Format(s) {
	case FormatJSON, FormatHex:
		return Format(s)
	}
	return FormatText
}

// maxShown bounds how much of one key or value a page shows.
const maxShown = 64 << 10

// Payload renders b for display in format f. It never fails: JSON that does
// not parse is shown as text, and text that is not UTF-8 is shown as hex.
// truncated reports whether b was cut to the display limit.
func Payload(b []byte, null bool, f Format) (s string, truncated bool) {
	if null {
		return "null", false
	}
	if len(b) > maxShown {
		b, truncated = b[:maxShown], true
	}
	switch f {
	case FormatHex:
		return hexDump(b), truncated
	case FormatJSON:
		var v any
		if !truncated && json.Unmarshal(b, &v) == nil {
			out, err := json.MarshalIndent(v, "", "  ")
			if err == nil {
				return string(out), false
			}
		}
	}
	if !utf8.Valid(b) {
		return hexDump(b), truncated
	}
	return string(b), truncated
}

// hexDump renders b as rows of 16 bytes: offset, hex, printable ASCII.
func hexDump(b []byte) string {
	var sb strings.Builder
	for off := 0; off < len(b); off += 16 {
		row := b[off:min(off+16, len(b))]
		fmt.Fprintf(&sb, "%08x  ", off)
		h := hex.EncodeToString(row)
		for i := 0; i < 16; i++ {
			if i*2 < len(h) {
				sb.WriteString(h[i*2 : i*2+2])
			} else {
				sb.WriteString("  ")
			}
			sb.WriteByte(' ')
			if i == 7 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(" |")
		for _, c := range row {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteString("|\n")
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// Itoa formats an integer.
func Itoa[T ~int | ~int32 | ~int64 | ~int16](n T) string { return strconv.FormatInt(int64(n), 10) }

// Join formats a list of int32 (replica ids) as "1, 2, 3".
func Join(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(parts, ", ")
}

// joinNames lists names separated by commas.
func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

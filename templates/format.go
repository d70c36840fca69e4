package templates

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Count formats n with thousands separators: 1234567 -> "1,234,567".
func Count[T ~int | ~int32 | ~int64](n T) string {
	v := int64(n)
	neg := v < 0
	s := strconv.FormatInt(v, 10)
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Bytes splits a byte count into a short number and a binary unit:
// 1536 -> ("1.5", "KiB"). Negative means unknown: ("—", "").
func Bytes(n int64) (string, string) {
	if n < 0 {
		return "—", ""
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10), "B"
	}
	if f >= 100 {
		return strconv.FormatFloat(f, 'f', 0, 64), units[i]
	}
	return strconv.FormatFloat(f, 'f', 1, 64), units[i]
}

// BytesText is Bytes joined: "1.5 KiB".
func BytesText(n int64) string {
	v, u := Bytes(n)
	if u == "" {
		return v
	}
	return v + " " + u
}

// Rate formats a per-second rate with a short unit prefix: 1234.5 -> "1.2k".
func Rate(f float64) string {
	switch {
	case math.IsNaN(f) || f < 0:
		return "—"
	case f >= 1e9:
		return strconv.FormatFloat(f/1e9, 'f', 1, 64) + "G"
	case f >= 1e6:
		return strconv.FormatFloat(f/1e6, 'f', 1, 64) + "M"
	case f >= 1e4:
		return strconv.FormatFloat(f/1e3, 'f', 0, 64) + "k"
	case f >= 1e3:
		return strconv.FormatFloat(f/1e3, 'f', 1, 64) + "k"
	case f >= 10 || f == 0:
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// Dur formats a duration compactly: "0", "850 ms", "42 s", "3 min 20 s",
// "5 h 12 min", "3 d 4 h".
func Dur(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	switch {
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + " s"
	case d < time.Hour:
		m := int(d / time.Minute)
		s := int((d % time.Minute) / time.Second)
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	case d < 48*time.Hour:
		h := int(d / time.Hour)
		m := int((d % time.Hour) / time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	days := int(d / (24 * time.Hour))
	h := int((d % (24 * time.Hour)) / time.Hour)
	if h == 0 {
		return fmt.Sprintf("%d d", days)
	}
	return fmt.Sprintf("%d d %d h", days, h)
}

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

// Package human formats numbers, sizes and durations for people: the
// console's pages and the texts the alert rules send (summaries, history).
// One home for these formats, so a duration reads "7 min 55 s" wherever it
// appears, never "7m55.636s" beside it.
package human

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Count formats n with thousands separators: 1234567 -> "1,234,567".
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/3 + 1)
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

// Plural is "1 record", "0 records", "1,200 records".
func Plural(n int64, one, many string) string {
	if n == 1 || n == -1 {
		return Count(n) + " " + one
	}
	return Count(n) + " " + many
}

// Duration formats a duration compactly, always with a unit: "0 s",
// "850 ms", "42 s", "3 min 20 s", "5 h 12 min", "3 d 4 h". Negative
// durations read as their absolute value with a leading minus.
func Duration(d time.Duration) string {
	if d < 0 {
		if d == math.MinInt64 {
			d++
		}
		return "-" + Duration(-d)
	}
	switch {
	case d == 0:
		return "0 s"
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatInt(int64((d+time.Second/2)/time.Second), 10) + " s"
	case d < time.Hour:
		d = d.Round(time.Second)
		if d >= time.Hour {
			return "1 h"
		}
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

// Bytes splits a byte count into a short number and a binary unit:
// 1536 -> ("1.5", "KiB"). Negative means unknown: ("—", "").
func Bytes(n int64) (string, string) {
	if n < 0 {
		return "—", ""
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
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

// Number formats a float without a needless fraction: 100 -> "100",
// 1234.5 -> "1,234.5".
func Number(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e18 {
		return Count(int64(f))
	}
	whole, frac := math.Modf(math.Abs(f))
	s := strconv.FormatFloat(frac, 'f', -1, 64)
	s = strings.TrimPrefix(s, "0")
	if len(s) > 4 {
		s = strconv.FormatFloat(math.Round(frac*1000)/1000, 'f', -1, 64)
		s = strings.TrimPrefix(s, "0")
	}
	out := Count(int64(whole)) + s
	if f < 0 {
		out = "-" + out
	}
	return out
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

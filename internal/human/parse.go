package human

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseMillis reads a duration as people write it in a config form and
// returns it in milliseconds: a plain whole number is milliseconds already
// (Kafka's own form, -1 included); otherwise a number with a unit, ms, s,
// m or min, h, d or w, possibly several ("1h30m"), e.g. "7d" -> 604800000.
func ParseMillis(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	units := []struct {
		name string
		ms   float64
	}{{"ms", 1}, {"min", 60e3}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}, {"d", 86400e3}, {"w", 7 * 86400e3}}
	rest := strings.ReplaceAll(strings.ToLower(s), " ", "")
	if rest == "" {
		return 0, errors.New("empty duration")
	}
	var total float64
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("%q is not a duration: write milliseconds, or e.g. 30s, 15min, 12h, 7d", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: write milliseconds, or e.g. 30s, 15min, 12h, 7d", s)
		}
		rest = rest[i:]
		found := false
		for _, u := range units {
			if strings.HasPrefix(rest, u.name) {
				total += n * u.ms
				rest = rest[len(u.name):]
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("%q is not a duration: the units are ms, s, min, h, d and w", s)
		}
	}
	if total > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return int64(math.Round(total)), nil
}

// ParseBytes reads a size as people write it: a plain whole number is
// bytes (-1 included); otherwise a number with a unit, B, KiB, MiB, GiB,
// TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. "1GiB" ->
// 1073741824, "1.5 MB" -> 1500000.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t := strings.ReplaceAll(s, " ", "")
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	if i == 0 || err != nil {
		return 0, fmt.Errorf("%q is not a size: write bytes, or e.g. 512KiB, 100MB, 1GiB", s)
	}
	mult := map[string]float64{"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[strings.ToLower(t[i:])]
	if mult == 0 {
		return 0, fmt.Errorf("%q is not a size: the units are B, KiB, MiB, GiB, TiB, KB, MB, GB and TB", s)
	}
	v := n * mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(math.Round(v)), nil
}

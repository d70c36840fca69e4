package human

import "testing"

func TestParseMillisAndBytes(t *testing.T) {
	for in, want := range map[string]int64{"604800000": 604800000, "-1": -1, "7d": 604800000, "1h30m": 5400000, "15 min": 900000,
		"500ms": 500, "1.5s": 1500, "2w": 1209600000, "9223372036854775807": 9223372036854775807} {
		if got, err := ParseMillis(in); err != nil || got != want {
			t.Errorf("ParseMillis(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "7 days", "d", "1x", "1e400d", "-7d"} {
		if _, err := ParseMillis(bad); err == nil {
			t.Errorf("ParseMillis(%q) accepted", bad)
		}
	}
	for in, want := range map[string]int64{"1073741824": 1073741824, "-1": -1, "1GiB": 1 << 30, "1 GiB": 1 << 30, "512KiB": 512 << 10,
		"1.5MB": 1500000, "100mb": 100000000, "2g": 2 << 30} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "1 XB", "1e30GiB", "-1GiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
}

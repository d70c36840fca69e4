package alerts

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-io/sluice/alerting"
)

// The rule form's own parsers read whatever a browser sends: they never
// panic, never return a non-finite threshold, and a duration shown in the
// form (formatDuration) reads back as itself.
func FuzzRuleFormParsers(f *testing.F) {
	for _, s := range []string{"", "0", "90", "5m", "1h30m", "1,000", "10GiB", "500 MB", "-1", "NaN", "Inf", "1e400", "10m", "lots", "3.5", "1_000_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseDuration(s); err == nil {
			back, err := parseDuration(formatDuration(d))
			if err != nil || back != d {
				t.Fatalf("%q -> %v -> %q -> %v, %v", s, d, formatDuration(d), back, err)
			}
		}
		for _, ki := range alerting.Kinds() {
			v, err := parseThreshold(ki.Kind, s)
			if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
				t.Fatalf("parseThreshold(%s, %q) = %v", ki.Kind, s, v)
			}
		}
	})
}

func TestFormParsers(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "0": 0, "90": 90 * time.Second, "5m": 5 * time.Minute, "1h 30m": 90 * time.Minute, "0.5": 500 * time.Millisecond} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"soon", "5 parsecs", "-", "1e300"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		kind alerting.Kind
		in   string
		want float64
	}{
		{alerting.KindLagRecords, "1,000", 1000},
		{alerting.KindLagRecords, "2_500", 2500},
		{alerting.KindDiskFreeBytes, "10GiB", 10 << 30},
		{alerting.KindDiskFreeBytes, "500 MB", 500e6},
		{alerting.KindLagSeconds, "10m", 600},
		{alerting.KindLagSeconds, "45", 45},
		{alerting.KindUnderReplicated, "", 0},
	} {
		if got, err := parseThreshold(tc.kind, tc.in); err != nil || got != tc.want {
			t.Errorf("parseThreshold(%s, %q) = %v, %v; want %v", tc.kind, tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		kind alerting.Kind
		in   string
	}{{alerting.KindLagRecords, ""}, {alerting.KindLagRecords, "10GiB"}, {alerting.KindDiskFreeBytes, "10 parsecs"}, {alerting.KindLagSeconds, "soon"}} {
		if _, err := parseThreshold(tc.kind, tc.in); err == nil {
			t.Errorf("parseThreshold(%s, %q) accepted", tc.kind, tc.in)
		}
	}
}

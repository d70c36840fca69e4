package human

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 s", 500 * time.Microsecond: "<1 ms", 850 * time.Millisecond: "850 ms", 1500 * time.Millisecond: "2 s",
		42 * time.Second: "42 s", 90 * time.Second: "1 min 30 s", 7*time.Minute + 55636*time.Millisecond: "7 min 56 s",
		59*time.Minute + 59600*time.Millisecond: "1 h", 3 * time.Hour: "3 h", 5*time.Hour + 12*time.Minute: "5 h 12 min",
		50 * time.Hour: "2 d 2 h", 72 * time.Hour: "3 d", -90 * time.Second: "-1 min 30 s",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCountPluralNumber(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	if Plural(1, "record", "records") != "1 record" || Plural(0, "record", "records") != "0 records" || Plural(1200, "record", "records") != "1,200 records" {
		t.Error("plural")
	}
	for f, want := range map[float64]string{100: "100", 1234.5: "1,234.5", 0.25: "0.25", -3: "-3", 2.123456: "2.123"} {
		if got := Number(f); got != want {
			t.Errorf("Number(%v) = %q, want %q", f, got, want)
		}
	}
	if BytesText(1536) != "1.5 KiB" || BytesText(0) != "0 B" || BytesText(-1) != "—" {
		t.Error("bytes")
	}
}

package kafkaperf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// rateUnits are the byte rates ParseRate accepts, per second.
var rateUnits = []struct {
	suffix string
	bytes  float64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3}, {"B", 1},
}

// ParseRate reads a rate: records per second (a number; -1 or 0 for no
// cap, returned as -1), or bytes per second of record values with a unit
// ("20MiB/s", "500KiB", "1GB/s"), turned into records/s of recordSize-byte
// records.
func ParseRate(s string, recordSize int) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "/s")
	for _, u := range rateUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return 0, fmt.Errorf("%q: want records/s or a positive byte rate such as 20MiB/s", s)
		}
		if recordSize <= 0 {
			return 0, fmt.Errorf("%q is a byte rate, which needs a positive record size", s)
		}
		return v * u.bytes / float64(recordSize), nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q: want records/s (-1: no cap) or a byte rate such as 20MiB/s", s)
	}
	if v <= 0 {
		return -1, nil
	}
	return v, nil
}

package comparisons

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/templates"
)

// FuzzSpecFromForm: whatever a browser sends, the form either names what
// is wrong or yields a spec the engine accepts — never a panic, never a
// spec that fails later at Create.
func FuzzSpecFromForm(f *testing.F) {
	f.Add("ORDER", "ORDERNEW", "json", "order.id", "json", "processed_at\nheader:x", "0.5", "on", "time", "2025-03-01T10:00", "30s", "bounded", "1", "24h", "-1")
	f.Add("a", "b", "key", "", "bytes", "", "", "", "earliest", "", "", "continuous", "", "", "")
	f.Add("a", "a", "json", "a[*]", "json", "items[", "NaN", "", "latest", "x", "0s", "x", "0", "-1s", "-2")
	f.Fuzz(func(t *testing.T, left, right, pairing, keyPath, values, ignore, tolerance, headers, start, startTime, window, mode, minRecords, minSpan, limit string) {
		form := templates.NewForm("left", left, "right", right, "pairing", pairing, "key_path", keyPath, "values", values,
			"ignore", ignore, "tolerance", tolerance, "headers", headers, "start", start, "start_time", startTime, "window", window,
			"mode", mode, "min_records", minRecords, "min_span", minSpan, "max_missing", limit, "max_duplicates", limit,
			"max_out_of_order", limit, "max_unkeyed", limit)
		for k, v := range form.Values {
			if k != "ignore" {
				form.Values[k] = strings.TrimSpace(v)
			}
		}
		spec := specFromForm(&form, time.UTC)
		if form.OK() {
			if err := spec.Validate(); err != nil {
				t.Fatalf("form accepted, engine refuses: %v (spec %+v)", err, spec)
			}
		} else if len(form.Errors) == 0 && form.Err == "" {
			t.Fatal("form refused without saying why")
		}
	})
}

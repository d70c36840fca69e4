package migration

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestVerdictRules(t *testing.T) {
	ok := Counters{LeftRecords: 1000, RightRecords: 1000, Matched: 1000, FirstPairMs: 0, LastPairMs: 3_600_000}
	crit := Criteria{MinRecords: 1000, MinSpan: Duration(time.Hour), MaxMissing: 2, MaxDuplicates: 0, MaxOutOfOrder: -1}
	if v := Evaluate(crit, Snapshot{Counters: ok}); !v.Ready || v.Summary != ReadySummary || len(v.Failed) != 0 {
		t.Fatalf("%+v", v)
	}
	mm := Difference{Kind: KindMismatch, Seq: 1, Key: "k"}
	cases := []struct {
		name   string
		change func(c *Counters)
		failed []Rule
	}{
		{"too few", func(c *Counters) { c.Matched = 999 }, []Rule{RuleMinRecords}},
		{"too short", func(c *Counters) { c.LastPairMs = 3_599_999 }, []Rule{RuleMinSpan}},
		{"one mismatch", func(c *Counters) { c.Matched, c.Mismatched = 999, 1 }, []Rule{RuleMismatch}},
		{"missing within allowance", func(c *Counters) { c.MissingRight, c.MissingLeft = 1, 1 }, nil},
		{"missing beyond allowance", func(c *Counters) { c.MissingRight, c.MissingLeft = 2, 1 }, []Rule{RuleMissing}},
		{"duplicate", func(c *Counters) { c.DuplicatesRight = 1 }, []Rule{RuleDuplicates}},
		{"out of order is not limited", func(c *Counters) { c.OutOfOrder = 50 }, nil},
		{"unkeyed", func(c *Counters) { c.UnkeyedLeft = 1 }, []Rule{RuleUnkeyed}},
		{"several", func(c *Counters) { c.Matched, c.Mismatched, c.DuplicatesLeft = 10, 1, 3 }, []Rule{RuleMinRecords, RuleMismatch, RuleDuplicates}},
	}
	for _, tc := range cases {
		c := ok
		tc.change(&c)
		v := Evaluate(crit, Snapshot{Counters: c, Examples: map[Kind][]Difference{KindMismatch: {mm}}})
		if v.Ready != (len(tc.failed) == 0) || len(v.Failed) != len(tc.failed) {
			t.Errorf("%s: %+v", tc.name, v)
			continue
		}
		for i := range tc.failed {
			if v.Failed[i] != tc.failed[i] {
				t.Errorf("%s: failed %v, want %v", tc.name, v.Failed, tc.failed)
			}
		}
		if !v.Ready && !strings.HasPrefix(v.Summary, "not ready: ") {
			t.Errorf("%s: summary %q", tc.name, v.Summary)
		}
		hasMM := len(v.Examples) > 0 && v.Examples[0].Key == "k"
		if hasMM != (c.Mismatched > 0) {
			t.Errorf("%s: examples %+v", tc.name, v.Examples)
		}
	}
	// The zero Criteria is strict and needs one pair.
	if v := Evaluate(Criteria{}, Snapshot{}); v.Ready || v.Failed[0] != RuleMinRecords {
		t.Fatalf("%+v", v)
	}
}

func TestMetricsNames(t *testing.T) {
	s := Snapshot{Counters: Counters{Matched: 5, Mismatched: 2, MissingLeft: 1}, Skew: Skew{Max: 1500 * time.Millisecond}}
	v := Evaluate(Criteria{}, s)
	ms := Metrics(s, v)
	if len(ms) != len(MetricNames) {
		t.Fatal(len(ms))
	}
	for name, want := range map[string]float64{"mismatched": 2, "compared": 7, "missing_left": 1, "skew_max_seconds": 1.5, "ready": 0} {
		if got, ok := MetricValue(s, v, name); !ok || got != want {
			t.Errorf("%s = %v %v", name, got, ok)
		}
	}
	if _, ok := MetricValue(s, v, "nope"); ok {
		t.Error("unknown metric found")
	}
}

type fixedStatuses []Status

func (f fixedStatuses) Statuses() []Status { return f }

func TestCollector(t *testing.T) {
	st := Status{Stored: Stored{ID: 7, Name: "orders", State: StateRunning}}
	st.Snapshot.Counters = Counters{Matched: 10, Mismatched: 1}
	st.Snapshot.Skew.P99 = 2 * time.Second
	st.Verdict = Evaluate(Criteria{}, st.Snapshot)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fixedStatuses{st}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" || l.GetName() == "quantile" {
					key += "/" + l.GetValue()
				}
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"sluice_migration_records/matched": 10, "sluice_migration_records/mismatched": 1, "sluice_migration_ready": 0,
		"sluice_migration_running": 1, "sluice_migration_skew_seconds/0.99": 2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
}

func TestReportAndExport(t *testing.T) {
	d := Difference{Kind: KindMismatch, Seq: 1, Key: "o-1",
		Left:   &RecordInfo{Partition: 0, Offset: 5, Timestamp: time.UnixMilli(0).UTC(), Value: `{"a":1}`},
		Right:  &RecordInfo{Partition: 1, Offset: 6, Timestamp: time.UnixMilli(10).UTC(), Value: `{"a":2}`},
		Fields: []FieldDiff{{Path: "a", Left: "1", Right: "2"}, {Path: "b", Right: `"x,y"`}}, SkewMs: 10}
	snap := Snapshot{Counters: Counters{Matched: 3, Mismatched: 1, LeftRecords: 4, RightRecords: 4}, Examples: map[Kind][]Difference{KindMismatch: {d}}}
	spec := DefaultSpec()
	spec.Left, spec.Right = "ORDER", "ORDERNEW"
	r := NewReport(spec, snap)
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Verdict: Not ready: no_mismatch (want 0, got 1)", `mismatch #1 key "o-1"`, "a: 1 -> 2", `b: (absent) -> "x,y"`, "FAIL no_mismatch"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Verdict.Ready || back.Snapshot.Counters.Mismatched != 1 {
		t.Fatalf("%v %+v", err, back)
	}
	var cs bytes.Buffer
	if err := WriteDifferencesCSV(&cs, []Difference{d}, true); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(rows) != 2 || len(rows[1]) != len(DifferenceCSVHeader) || rows[1][13] != "a: 1 -> 2\nb:  -> \"x,y\"" {
		t.Fatalf("%q %v", rows, err)
	}
}

func TestSpecValidation(t *testing.T) {
	good := DefaultSpec()
	good.Left, good.Right = "A", "B"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(s *Spec){
		"no left":             func(s *Spec) { s.Left = "" },
		"same":                func(s *Spec) { s.Right = "A" },
		"key mode":            func(s *Spec) { s.Key = "value" },
		"key wildcard":        func(s *Spec) { s.Key = "json:items[*].id" },
		"values":              func(s *Spec) { s.Values = "xml" },
		"ignore without json": func(s *Spec) { s.Ignore = []string{"a"} },
		"header w/o headers":  func(s *Spec) { s.Ignore = []string{"header:x"} },
		"tolerance":           func(s *Spec) { s.Values, s.Tolerance = "json", -1 },
		"tolerance w/o json":  func(s *Spec) { s.Tolerance = 0.1 },
		"start":               func(s *Spec) { s.Start = "tomorrow" },
		"window":              func(s *Spec) { s.Window = Duration(time.Microsecond) },
		"negative span":       func(s *Spec) { s.Criteria.MinSpan = -1 },
		"too many ignore paths": func(s *Spec) {
			s.Values = "json"
			for i := 0; i < 65; i++ {
				s.Ignore = append(s.Ignore, "f"+strings.Repeat("x", i))
			}
		},
	} {
		s := good
		mod(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := good
	s.Start = "2025-03-01T10:00:00Z"
	cs, err := compile(s)
	if err != nil || cs.startMode != startTime || cs.startMilli != time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("%v %+v", err, cs)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil || time.Duration(d) != 90*time.Second {
		t.Fatal(d, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Fatal("bad duration accepted")
	}
}

// TestDifferencesCSVIsFormulaSafe: keys, values and field diffs that a
// producer chose to look like spreadsheet formulas are written as text
// (a leading '), every cell quoted, as the console's exports are; plain
// numbers stay numbers, and the file reads back as CSV.
func TestDifferencesCSVIsFormulaSafe(t *testing.T) {
	d := Difference{Kind: KindMismatch, Seq: 1, Key: "@SUM(A1)",
		Left:   &RecordInfo{Partition: 0, Offset: 7, Timestamp: time.Unix(0, 0).UTC(), Value: `=HYPERLINK("http://evil.example","open")`},
		Right:  &RecordInfo{Partition: 0, Offset: 8, Timestamp: time.Unix(0, 0).UTC(), Value: "+cmd|' /C calc'!A0"},
		Fields: []FieldDiff{{Path: "-x", Left: "1", Right: "2"}}, SkewMs: -12, Note: "-"}
	var cs bytes.Buffer
	if err := WriteDifferencesCSV(&cs, []Difference{d}, true); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(cs.Bytes())).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("%q %v", rows, err)
	}
	row := rows[1]
	for i, want := range map[int]string{3: "'@SUM(A1)", 7: `'=HYPERLINK("http://evil.example","open")`, 11: "'+cmd|' /C calc'!A0",
		12: "-12", 13: "'-x: 1 -> 2", 14: "'-"} {
		if row[i] != want {
			t.Errorf("%s = %q, want %q", DifferenceCSVHeader[i], row[i], want)
		}
	}
	if !bytes.HasPrefix(cs.Bytes(), []byte(`"kind","seq","side"`)) {
		t.Errorf("cells not all quoted: %q", cs.String())
	}
}

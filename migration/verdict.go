package migration

import (
	"fmt"
	"time"
)

// Rule names one condition of the verdict.
type Rule string

// The verdict's rules, checked in this order.
const (
	RuleMinRecords Rule = "min_records"      // at least Criteria.MinRecords pairs compared
	RuleMinSpan    Rule = "min_span"         // the compared pairs cover at least Criteria.MinSpan of record time
	RuleMismatch   Rule = "no_mismatch"      // no pair differs
	RuleMissing    Rule = "max_missing"      // missing right + missing left <= Criteria.MaxMissing
	RuleDuplicates Rule = "max_duplicates"   // duplicates <= Criteria.MaxDuplicates
	RuleOutOfOrder Rule = "max_out_of_order" // pairs out of order <= Criteria.MaxOutOfOrder
	RuleUnkeyed    Rule = "max_unkeyed"      // unkeyed records <= Criteria.MaxUnkeyed
)

// RuleResult is one rule checked against the numbers.
type RuleResult struct {
	Rule   Rule   `json:"rule"`
	Passed bool   `json:"passed"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Kinds  []Kind `json:"kinds,omitempty"` // the kinds of difference behind a failure
}

// Verdict says whether the right topic can replace the left one.
type Verdict struct {
	Ready bool `json:"ready"`
	// Summary is "ready to cut over" or "not ready: " and the failed rules.
	Summary  string       `json:"summary"`
	Rules    []RuleResult `json:"rules"`
	Failed   []Rule       `json:"failed,omitempty"`
	Examples []Difference `json:"examples,omitempty"` // the first examples of each failing kind
}

// ReadySummary is the Summary of a ready verdict.
const ReadySummary = "ready to cut over"

// maxVerdictExamples is how many examples of each failing kind the verdict
// carries.
const maxVerdictExamples = 3

// Evaluate applies criteria to the numbers of s. Pending records (still
// inside their window) count for nothing yet.
func Evaluate(criteria Criteria, s Snapshot) Verdict {
	c := s.Counters
	minRecords := max(criteria.MinRecords, 1)
	var v Verdict
	add := func(rule Rule, ok bool, want, got string, kinds ...Kind) {
		v.Rules = append(v.Rules, RuleResult{Rule: rule, Passed: ok, Want: want, Got: got, Kinds: kinds})
		if !ok {
			v.Failed = append(v.Failed, rule)
		}
	}
	limit := func(rule Rule, max, got int64, kinds ...Kind) {
		if max < 0 {
			add(rule, true, "any", fmt.Sprint(got), kinds...)
			return
		}
		add(rule, got <= max, fmt.Sprintf("<= %d", max), fmt.Sprint(got), kinds...)
	}
	add(RuleMinRecords, c.Compared() >= minRecords, fmt.Sprintf(">= %d", minRecords), fmt.Sprint(c.Compared()))
	add(RuleMinSpan, c.Span() >= time.Duration(criteria.MinSpan), ">= "+time.Duration(criteria.MinSpan).String(), c.Span().String())
	add(RuleMismatch, c.Mismatched == 0, "0", fmt.Sprint(c.Mismatched), KindMismatch)
	limit(RuleMissing, criteria.MaxMissing, c.Missing(), KindMissingRight, KindMissingLeft)
	limit(RuleDuplicates, criteria.MaxDuplicates, c.Duplicates(), KindDuplicate)
	limit(RuleOutOfOrder, criteria.MaxOutOfOrder, c.OutOfOrder, KindOutOfOrder)
	limit(RuleUnkeyed, criteria.MaxUnkeyed, c.Unkeyed(), KindUnkeyed)

	v.Ready = len(v.Failed) == 0
	if v.Ready {
		v.Summary = ReadySummary
		return v
	}
	v.Summary = "not ready:"
	for i, r := range v.Rules {
		if r.Passed {
			continue
		}
		if len(v.Summary) > len("not ready:") {
			v.Summary += ";"
		}
		v.Summary += fmt.Sprintf(" %s (want %s, got %s)", r.Rule, r.Want, r.Got)
		for _, k := range v.Rules[i].Kinds {
			ex := s.Examples[k]
			v.Examples = append(v.Examples, ex[:min(len(ex), maxVerdictExamples)]...)
		}
	}
	return v
}

// Metric is one named number of a comparison, for alert rules and gauges.
type Metric struct {
	Name  string
	Value float64
}

// MetricNames are the names Metrics returns, in order. Alert rules on a
// comparison refer to these.
var MetricNames = []string{
	"left_records", "right_records", "compared", "matched", "mismatched",
	"missing_right", "missing_left", "duplicates_left", "duplicates_right",
	"out_of_order", "unkeyed_left", "unkeyed_right", "pending_left", "pending_right",
	"evicted", "remaining", "skew_p50_seconds", "skew_p99_seconds", "skew_max_seconds", "ready",
}

// Metrics returns the numbers of s and v under MetricNames.
func Metrics(s Snapshot, v Verdict) []Metric {
	c := s.Counters
	ready := 0.0
	if v.Ready {
		ready = 1
	}
	vals := []float64{
		float64(c.LeftRecords), float64(c.RightRecords), float64(c.Compared()), float64(c.Matched), float64(c.Mismatched),
		float64(c.MissingRight), float64(c.MissingLeft), float64(c.DuplicatesLeft), float64(c.DuplicatesRight),
		float64(c.OutOfOrder), float64(c.UnkeyedLeft), float64(c.UnkeyedRight), float64(c.PendingLeft), float64(c.PendingRight),
		float64(c.Evicted), float64(s.Remaining()), s.Skew.P50.Seconds(), s.Skew.P99.Seconds(), s.Skew.Max.Seconds(), ready,
	}
	out := make([]Metric, len(MetricNames))
	for i, n := range MetricNames {
		out[i] = Metric{Name: n, Value: vals[i]}
	}
	return out
}

// Metric returns the value of one named metric.
func MetricValue(s Snapshot, v Verdict, name string) (float64, bool) {
	for _, m := range Metrics(s, v) {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

package migration

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/safecsv"
)

// Report is everything the CLI prints and the console's detail page shows.
type Report struct {
	Spec     Spec     `json:"spec"`
	Snapshot Snapshot `json:"snapshot"`
	Verdict  Verdict  `json:"verdict"`
}

// NewReport evaluates the verdict of s under spec's criteria.
func NewReport(spec Spec, s Snapshot) Report {
	if cs, err := compile(spec); err == nil {
		spec = cs.Spec // with defaults filled in
	}
	return Report{Spec: spec, Snapshot: s, Verdict: Evaluate(spec.Criteria, s)}
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as aligned text for a terminal.
func (r Report) WriteText(w io.Writer) error {
	s := r.Snapshot
	c := s.Counters
	var b strings.Builder
	fmt.Fprintf(&b, "Comparison %s (left) vs %s (right)\n", r.Spec.Left, r.Spec.Right)
	mode := "continuous"
	if r.Spec.Bounded {
		mode = "bounded"
	}
	fmt.Fprintf(&b, "  pairing %s, values %s, window %s, start %s, %s", r.Spec.Key, r.Spec.Values, r.Spec.Window, r.Spec.Start, mode)
	if len(r.Spec.Ignore) > 0 {
		fmt.Fprintf(&b, ", ignore %s", strings.Join(r.Spec.Ignore, " "))
	}
	if r.Spec.Tolerance > 0 {
		fmt.Fprintf(&b, ", tolerance %g", r.Spec.Tolerance)
	}
	if r.Spec.Headers {
		b.WriteString(", headers compared")
	}
	if r.Spec.Decode {
		b.WriteString(", wire-format values decoded")
	}
	b.WriteString("\n\n")
	row := func(name string, v int64) { fmt.Fprintf(&b, "  %-30s %12d\n", name, v) }
	row("left records", c.LeftRecords)
	row("right records", c.RightRecords)
	row("compared pairs", c.Compared())
	row("matched", c.Matched)
	row("mismatched", c.Mismatched)
	row("missing on the right", c.MissingRight)
	row("missing on the left (extra)", c.MissingLeft)
	row("duplicates left", c.DuplicatesLeft)
	row("duplicates right", c.DuplicatesRight)
	row("pairs out of order", c.OutOfOrder)
	row("unkeyed left", c.UnkeyedLeft)
	row("unkeyed right", c.UnkeyedRight)
	row("pending left", c.PendingLeft)
	row("pending right", c.PendingRight)
	if c.Evicted > 0 {
		row("given up early (memory limit)", c.Evicted)
	}
	fmt.Fprintf(&b, "\n  latency skew (right - left): p50 %s  p99 %s  max %s  (min %s, %d pairs)\n",
		s.Skew.P50, s.Skew.P99, s.Skew.Max, s.Skew.Min, s.Skew.Count)
	fmt.Fprintf(&b, "  record time covered: %s\n\n", c.Span())
	if len(s.Schemas) > 0 || s.DecodeFailures != [2]int64{} {
		b.WriteString("Writer schemas:\n")
		for _, u := range s.Schemas {
			fmt.Fprintf(&b, "  %-5s %s version %d (id %d, %s): %d records\n", u.Side, u.Subject, u.Version, u.ID, u.Type, u.Records)
		}
		if f := s.DecodeFailures; f != [2]int64{} {
			fmt.Fprintf(&b, "  not decoded (compared as bytes): %d left, %d right\n", f[0], f[1])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Verdict: %s\n", strings.ToUpper(r.Verdict.Summary[:1])+r.Verdict.Summary[1:])
	for _, rr := range r.Verdict.Rules {
		mark := "ok  "
		if !rr.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-17s want %s, got %s\n", mark, rr.Rule, rr.Want, rr.Got)
	}
	if len(r.Verdict.Examples) > 0 {
		b.WriteString("\nFirst examples:\n")
		for _, d := range r.Verdict.Examples {
			writeDifferenceText(&b, d)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeDifferenceText(b *strings.Builder, d Difference) {
	fmt.Fprintf(b, "  %s #%d", d.Kind, d.Seq)
	if d.Key != "" {
		fmt.Fprintf(b, " key %q", d.Key)
	}
	if d.Side != "" {
		fmt.Fprintf(b, " (%s)", d.Side)
	}
	b.WriteString("\n")
	pos := func(name string, ri *RecordInfo) {
		if ri != nil {
			fmt.Fprintf(b, "    %-5s partition %d offset %d at %s\n", name, ri.Partition, ri.Offset, ri.Timestamp.Format(time.RFC3339Nano))
		}
	}
	pos("left", d.Left)
	pos("right", d.Right)
	for _, f := range d.Fields {
		l, r := f.Left, f.Right
		if l == "" {
			l = "(absent)"
		}
		if r == "" {
			r = "(absent)"
		}
		fmt.Fprintf(b, "    %s: %s -> %s\n", f.Path, l, r)
	}
	if d.FieldsOmitted > 0 {
		fmt.Fprintf(b, "    ... and %d more fields\n", d.FieldsOmitted)
	}
	if d.Note != "" {
		fmt.Fprintf(b, "    %s\n", d.Note)
	}
}

// WriteDifferencesJSON writes differences as a JSON array.
func WriteDifferencesJSON(w io.Writer, diffs []Difference) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if diffs == nil {
		diffs = []Difference{}
	}
	return enc.Encode(diffs)
}

// DifferenceCSVHeader is the header row of WriteDifferencesCSV.
var DifferenceCSVHeader = []string{"kind", "seq", "side", "key",
	"left_partition", "left_offset", "left_timestamp", "left_value",
	"right_partition", "right_offset", "right_timestamp", "right_value",
	"skew_ms", "fields", "note"}

// WriteDifferencesCSV writes differences as CSV, one row each, with the
// field diffs in one column as "path: left -> right" lines. Keys and values
// are whatever producers wrote, so every cell is quoted and one that a
// spreadsheet would run as a formula is written as text (package safecsv).
func WriteDifferencesCSV(w io.Writer, diffs []Difference, header bool) error {
	cw := safecsv.NewWriter(w)
	if header {
		if err := cw.Write(DifferenceCSVHeader); err != nil {
			return err
		}
	}
	side := func(ri *RecordInfo) []string {
		if ri == nil {
			return []string{"", "", "", ""}
		}
		return []string{strconv.Itoa(int(ri.Partition)), strconv.FormatInt(ri.Offset, 10),
			ri.Timestamp.Format(time.RFC3339Nano), ri.Value}
	}
	for _, d := range diffs {
		var fields strings.Builder
		for i, f := range d.Fields {
			if i > 0 {
				fields.WriteByte('\n')
			}
			fmt.Fprintf(&fields, "%s: %s -> %s", f.Path, f.Left, f.Right)
		}
		row := []string{string(d.Kind), strconv.FormatInt(d.Seq, 10), string(d.Side), d.Key}
		row = append(row, side(d.Left)...)
		row = append(row, side(d.Right)...)
		row = append(row, strconv.FormatInt(d.SkewMs, 10), fields.String(), d.Note)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	return cw.Flush()
}

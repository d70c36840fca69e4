package comparisons

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/migration/jsondiff"
	"github.com/sluice-io/sluice/templates"
)

// The create form: every option of migration.Spec, checked field by field
// here so that each mistake comes back next to its field with what was
// typed, then checked again by the engine (Spec.Validate) as the last word.

var formFields = []string{
	"name", "left", "right", "pairing", "key_path", "values", "tolerance", "ignore", "headers",
	"start", "start_time", "window", "mode",
	"min_records", "min_span", "max_missing", "max_duplicates", "max_out_of_order", "max_unkeyed",
}

// defaultForm is the form pre-filled with migration.DefaultSpec.
func defaultForm() templates.Form {
	d := migration.DefaultSpec()
	f := templates.NewForm(
		"pairing", "key", "values", d.Values, "start", d.Start, "window", d.Window.String(), "mode", "bounded",
		"min_records", strconv.FormatInt(d.Criteria.MinRecords, 10), "min_span", "",
		"max_missing", strconv.FormatInt(d.Criteria.MaxMissing, 10),
		"max_duplicates", strconv.FormatInt(d.Criteria.MaxDuplicates, 10),
		"max_out_of_order", strconv.FormatInt(d.Criteria.MaxOutOfOrder, 10),
		"max_unkeyed", strconv.FormatInt(d.Criteria.MaxUnkeyed, 10),
	)
	if !d.Bounded {
		f.Set("mode", "continuous")
	}
	return f
}

// readForm copies the submitted fields (trimmed) into a form.
func readForm(c *fiber.Ctx) templates.Form {
	f := templates.NewForm()
	for _, k := range formFields {
		v := c.FormValue(k)
		if k != "ignore" {
			v = strings.TrimSpace(v)
		}
		f.Set(k, v)
	}
	return f
}

// specFromForm builds the Spec the form describes, recording an error on
// each field that is wrong. Start times are read in loc, the viewer's zone.
func specFromForm(f *templates.Form, loc *time.Location) migration.Spec {
	s := migration.DefaultSpec()
	s.Left, s.Right = f.Get("left"), f.Get("right")
	if s.Left == "" {
		f.Fail("left", "Enter the reference topic, e.g. ORDER.")
	}
	if s.Right == "" {
		f.Fail("right", "Enter the topic to compare with it, e.g. ORDERNEW.")
	}
	if s.Left != "" && s.Left == s.Right {
		f.Fail("right", "The right topic must differ from the left one.")
	}

	switch f.Get("pairing") {
	case "key", "":
		s.Key = "key"
		if f.Get("key_path") != "" {
			f.Fail("key_path", "Pairing is by record key: choose \"A field of the JSON value\" to pair by this path, or clear it.")
		}
	case "json":
		p := f.Get("key_path")
		if p == "" {
			f.Fail("key_path", "Enter the JSON path of the field that pairs records, e.g. order.id.")
			break
		}
		s.Key = "json:" + p
		if err := (migration.Spec{Left: "l", Right: "r", Key: s.Key}).Validate(); err != nil {
			f.Fail("key_path", strings.TrimPrefix(err.Error(), "key: "))
		}
	default:
		f.Fail("pairing", "Choose the record key or a field of the JSON value.")
	}

	switch f.Get("values") {
	case "bytes", "":
		s.Values = "bytes"
	case "json":
		s.Values = "json"
	default:
		f.Fail("values", "Choose exact bytes or JSON.")
	}
	jsonValues := s.Values == "json"

	if t := f.Get("tolerance"); t != "" {
		v, err := strconv.ParseFloat(t, 64)
		switch {
		case err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			f.Fail("tolerance", "Enter a number of 0 or more, e.g. 0.001, or leave empty.")
		case v > 0 && !jsonValues:
			f.Fail("tolerance", "A tolerance needs values compared as JSON.")
		default:
			s.Tolerance = v
		}
	}

	s.Headers = f.Checked("headers")
	var ignore []string
	for i, line := range strings.Split(f.Get("ignore"), "\n") {
		p := strings.TrimSpace(line)
		if p == "" {
			continue
		}
		where := fmt.Sprintf("Line %d (%s): ", i+1, p)
		if name, ok := strings.CutPrefix(p, "header:"); ok {
			switch {
			case name == "":
				f.Fail("ignore", where+"header: needs a header name.")
			case !s.Headers:
				f.Fail("ignore", where+"ignoring a header needs \"Compare record headers too\".")
			}
		} else if !jsonValues {
			f.Fail("ignore", where+"ignoring a JSON path needs values compared as JSON.")
		} else if err := (migration.Spec{Left: "l", Right: "r", Values: "json", Ignore: []string{p}}).Validate(); err != nil {
			f.Fail("ignore", where+strings.TrimPrefix(err.Error(), "ignore: "))
		}
		ignore = append(ignore, p)
	}
	if n := countPaths(ignore); n > jsondiff.MaxIgnorePaths {
		f.Fail("ignore", fmt.Sprintf("At most %d JSON paths can be ignored (%d given).", jsondiff.MaxIgnorePaths, n))
	}
	s.Ignore = ignore

	switch f.Get("start") {
	case "earliest", "":
		s.Start = "earliest"
	case "latest":
		s.Start = "latest"
	case "time":
		t, err := parseLocal(f.Get("start_time"), loc)
		if err != nil {
			f.Fail("start_time", err.Error())
		} else {
			s.Start = t.UTC().Format(time.RFC3339Nano)
		}
	default:
		f.Fail("start", "Choose the earliest records, now, or a time.")
	}

	if w := f.Get("window"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < time.Millisecond || d > 7*24*time.Hour {
			f.Fail("window", "Enter a duration from 1ms to 168h, e.g. 30s or 5m.")
		} else {
			s.Window = migration.Duration(d)
		}
	}

	switch f.Get("mode") {
	case "bounded", "":
		s.Bounded = true
	case "continuous":
		s.Bounded = false
	default:
		f.Fail("mode", "Choose bounded or continuous.")
	}

	crit := &s.Criteria
	crit.MinRecords = intField(f, "min_records", crit.MinRecords, 1, "Enter a whole number of pairs, 1 or more.")
	if v := f.Get("min_span"); v != "" && v != "0" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			f.Fail("min_span", "Enter a duration such as 1h or 24h, or 0 for no minimum.")
		} else {
			crit.MinSpan = migration.Duration(d)
		}
	}
	const limitHelp = "Enter a whole number, 0 or more, or -1 to allow any number."
	crit.MaxMissing = intField(f, "max_missing", crit.MaxMissing, -1, limitHelp)
	crit.MaxDuplicates = intField(f, "max_duplicates", crit.MaxDuplicates, -1, limitHelp)
	crit.MaxOutOfOrder = intField(f, "max_out_of_order", crit.MaxOutOfOrder, -1, limitHelp)
	crit.MaxUnkeyed = intField(f, "max_unkeyed", crit.MaxUnkeyed, -1, limitHelp)

	if f.OK() {
		// The engine has the last word; map what it says onto the field.
		if err := s.Validate(); err != nil {
			failEngine(f, err)
		}
	}
	return s
}

func countPaths(ps []string) int {
	n := 0
	for _, p := range ps {
		if !strings.HasPrefix(p, "header:") {
			n++
		}
	}
	return n
}

// intField reads an integer field of at least lo; empty keeps def.
func intField(f *templates.Form, name string, def, lo int64, help string) int64 {
	v := f.Get(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo {
		f.Fail(name, help)
		return def
	}
	return n
}

// parseLocal reads a datetime-local value (seconds optional) in loc.
func parseLocal(v string, loc *time.Location) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("enter the time to start from")
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05.999", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("enter a date and time such as 2025-03-01T14:05:00 (in %s)", loc)
}

// failEngine puts an engine validation error next to the field it is
// about, or on the whole form.
func failEngine(f *templates.Form, err error) {
	msg := err.Error()
	prefixes := []struct{ prefix, field string }{
		{"both a left and a right topic", "left"},
		{"the left and right topics", "right"},
		{"key", "key_path"},
		{"values", "values"},
		{"ignore", "ignore"},
		{"tolerance", "tolerance"},
		{"start", "start_time"},
		{"window", "window"},
		{"min span", "min_span"},
		{"name", "name"},
	}
	for _, p := range prefixes {
		if strings.HasPrefix(msg, p.prefix) {
			f.Fail(p.field, msg)
			return
		}
	}
	f.Err = templates.Sentence(msg)
}

// formFromSpec fills the form from a spec (the create form pre-filled from
// an existing comparison).
func formFromSpec(name string, s migration.Spec, loc *time.Location) templates.Form {
	f := defaultForm()
	f.Set("name", name)
	f.Set("left", s.Left)
	f.Set("right", s.Right)
	if p, ok := strings.CutPrefix(s.Key, "json:"); ok {
		f.Set("pairing", "json")
		f.Set("key_path", p)
	}
	f.Set("values", s.Values)
	if s.Tolerance > 0 {
		f.Set("tolerance", strconv.FormatFloat(s.Tolerance, 'g', -1, 64))
	}
	f.Set("ignore", strings.Join(s.Ignore, "\n"))
	if s.Headers {
		f.Set("headers", "on")
	}
	switch s.Start {
	case "earliest", "latest":
		f.Set("start", s.Start)
	default:
		if t, err := time.Parse(time.RFC3339Nano, s.Start); err == nil {
			f.Set("start", "time")
			f.Set("start_time", t.In(loc).Format("2006-01-02T15:04:05"))
		}
	}
	f.Set("window", time.Duration(s.Window).String())
	if !s.Bounded {
		f.Set("mode", "continuous")
	}
	c := s.Criteria
	f.Set("min_records", strconv.FormatInt(max(c.MinRecords, 1), 10))
	if c.MinSpan > 0 {
		f.Set("min_span", time.Duration(c.MinSpan).String())
	}
	f.Set("max_missing", strconv.FormatInt(c.MaxMissing, 10))
	f.Set("max_duplicates", strconv.FormatInt(c.MaxDuplicates, 10))
	f.Set("max_out_of_order", strconv.FormatInt(c.MaxOutOfOrder, 10))
	f.Set("max_unkeyed", strconv.FormatInt(c.MaxUnkeyed, 10))
	return f
}

// Package comparisons holds the console pages of migration comparisons
// (ORDER vs ORDERNEW): the list, the create form with its preview, the
// detail page with live counters, the verdict and the differences, and the
// delete confirmation. The handlers are in web/comparisons; these are
// templ components built from the console's shared ones (package
// templates), plus a small stylesheet of their own (comparisons.css, one
// of package static's assets).
//
// The generated *_templ.go files are committed; `go tool templ generate`
// refreshes them.
package comparisons

import (
	"html"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/templates"
)

// ListView is the list of comparisons.
type ListView struct {
	Rows []migration.Status
	Err  string
	// Poll is the refresh interval of the table while a comparison runs
	// (0: no refresh).
	Poll time.Duration
}

// FormView is the create form, with the preview of the first pairs when
// asked for.
type FormView struct {
	Form      templates.Form
	Topics    []string // the cluster's topics, offered in the topic fields
	TopicsErr string   // why the topics could not be listed
	Zone      string   // the viewer's zone, in which start times are typed

	// Previewed is true when the form was sent with "Preview".
	Previewed  bool
	Preview    migration.PreviewResult
	PreviewErr string
	PreviewN   int
	// EditID is the comparison being edited (0: a new one).
	EditID int64
	// PathsUnconfirmed: the form was sent to create, but some of its paths
	// match none of the values the preview read; it asks again.
	PathsUnconfirmed bool
}

// Action is where the form posts.
func (v FormView) Action() string {
	if v.EditID != 0 {
		return URL(v.EditID) + "/edit"
	}
	return "/comparisons"
}

// DetailView is one comparison's page.
type DetailView struct {
	Status migration.Status
	// Kind filters the differences table ("" for every kind).
	Kind    migration.Kind
	Diffs   []migration.Difference
	Pager   templates.Pager
	DiffErr string
	// Poll is the refresh interval of the live numbers (0 when the
	// comparison does not run).
	Poll time.Duration
	// Paths are the most frequent paths of the stored mismatches, found in
	// PathsOf of them.
	Paths   []migration.PathCount
	PathsOf int
}

// CanIgnore reports whether path can be added to spec's ignore list: the
// comparison compares JSON (or path is a header with headers compared),
// and the path is not ignored yet.
func CanIgnore(s migration.Spec, path string) bool {
	if path == "$" {
		return false
	}
	for _, ig := range s.Ignore {
		if ig == path {
			return false
		}
	}
	if strings.HasPrefix(path, "header:") {
		return s.Headers
	}
	return s.Values == "json"
}

// DeleteView is the delete confirmation.
type DeleteView struct {
	Status migration.Status
}

// URL is the address of comparison id's page.
func URL(id int64) string { return "/comparisons/" + strconv.FormatInt(id, 10) }

// DiffsURL is the differences table of comparison id filtered to kind, at
// page (1-based).
func DiffsURL(id int64, kind migration.Kind, page int) string {
	u := URL(id)
	var q []string
	if kind != "" {
		q = append(q, "kind="+string(kind))
	}
	if page > 1 {
		q = append(q, "page="+strconv.Itoa(page))
	}
	if len(q) > 0 {
		u += "?" + strings.Join(q, "&")
	}
	return u + "#differences"
}

// ExportURL downloads comparison id's differences of kind ("" for all) in
// format json or csv.
func ExportURL(id int64, kind migration.Kind, format string) string {
	u := URL(id) + "/export?format=" + format
	if kind != "" {
		u += "&kind=" + string(kind)
	}
	return u
}

// KindLabel names a kind of difference for people.
func KindLabel(k migration.Kind) string {
	switch k {
	case migration.KindMismatch:
		return "Mismatched"
	case migration.KindMissingRight:
		return "Missing on the right"
	case migration.KindMissingLeft:
		return "Missing on the left (extra)"
	case migration.KindDuplicate:
		return "Duplicate"
	case migration.KindOutOfOrder:
		return "Out of order"
	case migration.KindUnkeyed:
		return "Unkeyed"
	case "":
		return "All kinds"
	}
	return string(k)
}

// KindCount is the total count of kind k in c (not only the stored
// examples).
func KindCount(c migration.Counters, k migration.Kind) int64 {
	switch k {
	case migration.KindMismatch:
		return c.Mismatched
	case migration.KindMissingRight:
		return c.MissingRight
	case migration.KindMissingLeft:
		return c.MissingLeft
	case migration.KindDuplicate:
		return c.Duplicates()
	case migration.KindOutOfOrder:
		return c.OutOfOrder
	case migration.KindUnkeyed:
		return c.Unkeyed()
	}
	return c.Mismatched + c.Missing() + c.Duplicates() + c.OutOfOrder + c.Unkeyed()
}

// RuleLabel says what a verdict rule checks.
func RuleLabel(r migration.Rule) string {
	switch r {
	case migration.RuleMinRecords:
		return "Enough pairs compared"
	case migration.RuleMinSpan:
		return "Enough record time covered"
	case migration.RuleMismatch:
		return "No pair differs"
	case migration.RuleMissing:
		return "Missing records within the limit"
	case migration.RuleDuplicates:
		return "Duplicates within the limit"
	case migration.RuleOutOfOrder:
		return "Pairs out of order within the limit"
	case migration.RuleUnkeyed:
		return "Unkeyed records within the limit"
	}
	return string(r)
}

// RuleValue is a verdict rule's wanted or got figure with the unit of
// what the rule counts ("0 pairs", ">= 1000 pairs", "0 msgs"); a figure
// that already ends in a unit (a duration) is left as it is.
func RuleValue(r migration.Rule, s string) string {
	if s == "" || s[len(s)-1] < '0' || s[len(s)-1] > '9' {
		return s
	}
	switch r {
	case migration.RuleMinRecords, migration.RuleMismatch, migration.RuleOutOfOrder:
		return s + " pairs"
	case migration.RuleMissing, migration.RuleDuplicates, migration.RuleUnkeyed:
		return s + " msgs"
	}
	return s
}

// StateKind is the badge colour of a comparison state.
func StateKind(s migration.State) string {
	switch s {
	case migration.StateRunning:
		return "info"
	case migration.StateFinished:
		return "ok"
	case migration.StateFailed:
		return "bad"
	}
	return ""
}

// Settled reports whether the numbers of st can no longer change: the
// verdict is final rather than "so far".
func Settled(st migration.Status) bool {
	return st.State == migration.StateFinished || st.Snapshot.Done
}

// VerdictText is the verdict's headline.
func VerdictText(st migration.Status) string {
	v := "Not ready"
	if st.Verdict.Ready {
		v = "Ready to cut over"
	}
	if !Settled(st) {
		v += " so far"
	}
	return v
}

// FailedRules lists the failed rules of a verdict, comma-separated.
func FailedRules(v migration.Verdict) string {
	s := make([]string, len(v.Failed))
	for i, r := range v.Failed {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// Mode says whether a spec is bounded or continuous.
func Mode(s migration.Spec) string {
	if s.Bounded {
		return "bounded (to the end offsets at start)"
	}
	return "continuous"
}

// Pairing describes how a spec pairs records.
func Pairing(s migration.Spec) string {
	if p, ok := strings.CutPrefix(s.Key, "json:"); ok {
		return "JSON field " + p
	}
	return "record key"
}

// ValuesText describes how a spec compares values.
func ValuesText(s migration.Spec) string {
	if s.Values == "json" {
		t := "JSON equality"
		if s.Tolerance > 0 {
			t += ", numbers within ±" + strconv.FormatFloat(s.Tolerance, 'g', -1, 64)
		}
		return t
	}
	return "exact bytes"
}

// StartTime is the instant a spec starts at, when it starts at a time.
func StartTime(s migration.Spec) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s.Start); err == nil {
		return t, true
	}
	if ms, err := strconv.ParseInt(s.Start, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	return time.Time{}, false
}

// Limit formats a verdict limit: -1 is "any".
func Limit(n int64) string {
	if n < 0 {
		return "any"
	}
	return templates.Count(n)
}

// SkewDur formats a skew, which may be negative (the right record came
// first).
func SkewDur(d time.Duration) string {
	if d < 0 {
		return "−" + templates.Dur(-d)
	}
	return templates.Dur(d)
}

// Remaining is what is left to read: records to the end (bounded) or the
// lag (continuous).
func Remaining(st migration.Status) int64 { return st.Snapshot.Remaining() }

// Fields lists the field-diff paths of d, for highlighting.
func Fields(fs []migration.FieldDiff) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Path
	}
	return out
}

// Kinds are the filter choices of the differences table.
func Kinds() []migration.Kind {
	return append([]migration.Kind{""}, migration.Kinds...)
}

func differing(ps []migration.PreviewPair) []migration.PreviewPair {
	var out []migration.PreviewPair
	for _, p := range ps {
		if !p.Equal {
			out = append(out, p)
		}
	}
	return out
}

func equal(ps []migration.PreviewPair) []migration.PreviewPair {
	var out []migration.PreviewPair
	for _, p := range ps {
		if p.Equal {
			out = append(out, p)
		}
	}
	return out
}

// PathRole names a path's use in the spec.
func PathRole(role string) string {
	if role == "pairing" {
		return "The pairing path"
	}
	return "The ignored path"
}

// pathWarningHTML says that a path of the spec matched none of the values
// the preview read, and what it was probably meant to be (escaped HTML).
func pathWarningHTML(u migration.PathUse) string {
	esc := html.EscapeString
	mono := func(s string) string { return `<span class="mono">` + esc(s) + `</span>` }
	var b strings.Builder
	b.WriteString("<strong>" + esc(PathRole(u.Role)) + " " + mono(u.Path) + " matches none of the " +
		esc(templates.Plural(u.Sampled[0]+u.Sampled[1], "value", "values")) + " read</strong> (" +
		esc(templates.Count(u.Sampled[0])) + " left, " + esc(templates.Count(u.Sampled[1])) + " right).")
	switch {
	case len(u.Suggest) > 0:
		b.WriteString(" Did you mean ")
		for i, sg := range u.Suggest {
			if i > 0 {
				b.WriteString(" or ")
			}
			b.WriteString(mono(sg))
		}
		b.WriteString("? It differs in the pairs below.")
	case u.Role == "ignore":
		b.WriteString(" Ignoring it changes nothing: check its spelling and nesting.")
	default:
		b.WriteString(" No record can be paired by it.")
	}
	return b.String()
}

// Package schemas holds the console pages of the built-in schema registry:
// the subjects list, a subject's page with its versions, the side-by-side
// diff of two versions, the compatibility check of a draft and the delete
// forms. The handlers are in web/schemas.
//
// The generated *_templ.go files are committed; `go tool templ generate`
// refreshes them.
package schemas

import (
	"net/url"
	"strconv"

	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/templates"
)

// SubjectsView is the subjects list.
type SubjectsView struct {
	Subjects []schemareg.SubjectInfo
	Global   string // the global compatibility level
	Query    string // the filter typed (a substring of the subject)
	Total    int    // subjects before the filter
	// Topics maps a subject to the topic it names by TopicNameStrategy
	// (<topic>-key, <topic>-value) when that topic exists.
	Topics map[string]string
}

// SubjectView is one subject's page.
type SubjectView struct {
	Subject  string
	Versions []schemareg.SchemaValue // every version, soft-deleted included, oldest first
	Compat   string                  // the level in force
	Shown    *schemareg.SchemaValue  // the version shown
	Text     string                  // Shown's schema, indented when it is JSON
	Topic    string                  // the topic the subject names (TopicNameStrategy), if it exists
	Diff     *DiffView               // the diff asked for, if any
	Check    templates.Form          // the draft check form: type, schema, against
	Result   *CheckResult            // the draft check's answer, once sent
	// CanDelete: the user may delete (operators and admins).
	CanDelete bool
	// Leader is the registry leader's address when this host does not take
	// writes (deletes are forwarded there).
	Leader string
}

// DiffView is the side-by-side diff of two versions.
type DiffView struct {
	From, To int
	Rows     []DiffRow
	Changed  int  // rows that differ
	TooLarge bool // the schemas were too long to diff here
}

// DiffRow is a line of the side-by-side diff: Kind is "same", "change",
// "del" (only on the left) or "ins" (only on the right).
type DiffRow struct {
	Kind          string
	Left, Right   string
	LeftN, RightN int // line numbers, 0 where the side has no line
}

// CheckResult is the registry's answer to a draft.
type CheckResult struct {
	Compatible bool
	Against    string // "every version the level requires" or "version N"
	Level      string
	Messages   []string
	Err        string // the draft did not parse, or the subject is unknown
}

// SubjectURL is the address of a subject's page.
func SubjectURL(subject string) string { return "/schemas/" + url.PathEscape(subject) }

// VersionURL shows version v of subject.
func VersionURL(subject string, v int) string {
	return SubjectURL(subject) + "?version=" + strconv.Itoa(v)
}

// DiffURL shows the diff from version from to version to.
func DiffURL(subject string, from, to int) string {
	return SubjectURL(subject) + "?version=" + strconv.Itoa(to) + "&diff=" + strconv.Itoa(from)
}

// TypeText is a schema type as people write it.
func TypeText(t string) string {
	switch t {
	case "", "AVRO":
		return "Avro"
	case "PROTOBUF":
		return "Protobuf"
	case "JSON":
		return "JSON Schema"
	}
	return t
}

// TypeOptions are the choices of the draft form's type field.
var TypeOptions = []templates.Option{{Value: "AVRO", Label: "Avro"}, {Value: "PROTOBUF", Label: "Protobuf"}, {Value: "JSON", Label: "JSON Schema"}}

func rowClass(kind string) string {
	if kind == "same" {
		return "ln"
	}
	return "ln mark"
}

func lineNo(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

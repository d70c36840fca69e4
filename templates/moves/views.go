// Package moves holds the console's partition moves page. The handlers are
// in web/moves.
//
// The generated *_templ.go files are committed; `go tool templ generate`
// refreshes them.
package moves

import (
	"github.com/sluice-io/sluice/reassign"
	"github.com/sluice-io/sluice/templates"
)

// View is the partition moves page: the moves in progress with their
// progress, and the forms that start one.
type View struct {
	Progress ProgressView
	// Brokers are the live brokers; Topics the cluster's topics, for the
	// forms.
	Brokers []int32
	Topics  []string
	// Form is the move form posted last (kind, topic, brokers, rf,
	// broker, throttle), with its errors; Kind tells which of the three.
	Form templates.Form
}

// ProgressView is the part of the page the browser refreshes.
type ProgressView struct {
	Moves []Move
	// Copied and Total are the bytes of every move (Total -1 when a broker
	// did not report its log sizes).
	Copied, Total int64
	// Throttled are the topics whose throttle the console removes once
	// their moves end.
	Throttled []string
	// Err says why the moves could not be read.
	Err string
}

// Percent is the whole progress, 0-100.
func (v ProgressView) Percent() int {
	return reassign.Progress{Total: v.Total, Copied: v.Copied}.Percent()
}

// Move is one partition being moved.
type Move struct {
	reassign.Progress
}

// PreviewView is what a move will do, before it is confirmed.
type PreviewView struct {
	// Title names the move ("Drain broker 3").
	Title string
	// Form are the fields that computed the plan, posted again to start
	// it, with Hash, the plan's fingerprint (the start is refused when the
	// plan computed then differs: the cluster changed meanwhile).
	Form templates.Form
	Hash string
	// Steps are the partitions that move; Bytes the bytes to copy in all
	// (-1 when a broker did not report its log sizes).
	Steps []reassign.Step
	Bytes int64
	// Throttle is the rate asked for, bytes per second (0: none).
	Throttle int64
	// Note explains why the page shows again (the plan changed).
	Note string
}

// Summary is the preview in one sentence.
func (v PreviewView) Summary() string {
	s := templates.Plural(len(v.Steps), "partition moves", "partitions move")
	if v.Bytes >= 0 {
		s += "; " + templates.BytesText(v.Bytes) + " to copy"
	}
	if v.Throttle > 0 {
		return s + ", throttled to " + templates.BytesText(v.Throttle) + "/s."
	}
	return s + ", unthrottled: the copy may use the brokers' whole network and disk bandwidth."
}

// fieldsOf is f when it is the form of kind, else an empty form (each of
// the three forms shows its own values and errors only).
func fieldsOf(f templates.Form, kind string) templates.Form {
	if f.Get("kind") == kind {
		return f
	}
	return templates.NewForm()
}

func topicOptions(topics []string) []templates.Option {
	out := make([]templates.Option, 0, len(topics))
	for _, t := range topics {
		out = append(out, templates.Option{Value: t, Label: t})
	}
	return out
}

func brokerOptions(brokers []int32) []templates.Option {
	out := make([]templates.Option, 0, len(brokers))
	for _, b := range brokers {
		s := templates.Itoa(b)
		out = append(out, templates.Option{Value: s, Label: "broker " + s})
	}
	return out
}

func leaderText(id int32) string {
	if id < 0 {
		return "none"
	}
	return templates.Itoa(id)
}

func joinStrings(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

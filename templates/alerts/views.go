// Package alerts holds the templ pages of the console's alerting section:
// open alerts, rules and their form, history, notifiers and the delivery
// log. The handlers live in web/alerts; these components only render the
// views below, composed from package templates' layout, tables and form
// fields.
package alerts

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
)

// Section is the tab of the alert pages being shown.
type Section string

// The tabs.
const (
	SectionOpen       Section = "open"
	SectionRules      Section = "rules"
	SectionHistory    Section = "history"
	SectionNotifiers  Section = "notifiers"
	SectionDeliveries Section = "deliveries"
	SectionSilences   Section = "silences"
)

type tab struct {
	section Section
	label   string
	href    string
}

var tabs = []tab{
	{SectionOpen, "Open alerts", "/alerts"},
	{SectionRules, "Rules", "/alerts/rules"},
	{SectionSilences, "Silences", "/alerts/silences"},
	{SectionHistory, "History", "/alerts/history"},
	{SectionNotifiers, "Notifiers", "/alerts/notifiers"},
	{SectionDeliveries, "Delivery log", "/alerts/deliveries"},
}

// Evaluation is how the rules are evaluated, for the status line.
type Evaluation struct {
	// Evaluating is true when this console evaluates the rules (it does the
	// cluster's background work).
	Evaluating bool
	Interval   time.Duration
	Status     alerting.EvaluatorStatus
}

// MarshalJSON writes the evaluation in snake_case like every JSON answer,
// its interval in milliseconds.
func (e Evaluation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Evaluating bool                     `json:"evaluating"`
		IntervalMS int64                    `json:"interval_ms"`
		Status     alerting.EvaluatorStatus `json:"status"`
	}{e.Evaluating, e.Interval.Milliseconds(), e.Status})
}

// OpenView is the open (pending and firing) alerts.
type OpenView struct {
	Eval      Evaluation
	Alerts    []alerting.Alert
	Rules     int // rules stored
	Notifiers int // notifiers stored
	Err       string
}

// Firing counts the firing alerts.
func (v OpenView) Firing() int {
	n := 0
	for _, a := range v.Alerts {
		if a.State == alerting.StateFiring {
			n++
		}
	}
	return n
}

// OpenCount is a rule's open alerts.
type OpenCount struct{ Pending, Firing int }

// RulesView is the rules list.
type RulesView struct {
	Rules     []alerting.Rule
	Notifiers map[int64]string // names by id
	Open      map[int64]OpenCount
	Err       string
}

// RuleView is a rule's page (or the new-rule page when Rule.ID is 0): its
// form, and for a stored rule its open alerts and recent history.
type RuleView struct {
	Rule      alerting.Rule
	Form      templates.Form
	Selected  map[int64]bool // notifiers ticked in the form
	Notifiers []alerting.Notifier
	Alerts    []alerting.Alert
	History   []alerting.HistoryEntry
	// Preview is the rule evaluated now, before saving (the preview
	// button).
	Preview *PreviewView
}

// PreviewView is a rule's preview: its subjects and values now.
type PreviewView struct {
	Rule    alerting.Rule
	Result  *alerting.RulePreview // nil when the form has errors
	FormErr bool
}

// OverviewPanelView is the alerts panel of the overview.
type OverviewPanelView struct {
	Alerts []alerting.Alert
	Rules  int
	Err    string
}

// SilencesView is the silences page with its form.
type SilencesView struct {
	Silences  []alerting.Silence
	Rules     []alerting.Rule
	Form      templates.Form
	Durations []templates.Option
	Zone      string
	Now       time.Time
	Err       string
}

// New reports whether the page creates a rule.
func (v RuleView) New() bool { return v.Rule.ID == 0 }

// HistoryView is the history of alert state changes.
type HistoryView struct {
	Entries []alerting.HistoryEntry
	Rules   []alerting.Rule // for the filter
	RuleID  int64
	Subject string
	NextURL string
	Err     string
}

// NotifiersView is the notifiers list with the form that adds one.
type NotifiersView struct {
	Notifiers []alerting.Notifier
	Last      map[int64]alerting.Delivery // latest delivery of each notifier
	Form      templates.Form
	Err       string
}

// NotifierView is a notifier's page: its settings form, the test button and
// its deliveries.
type NotifierView struct {
	Notifier   alerting.Notifier
	Form       templates.Form
	Deliveries []alerting.Delivery
	Rules      []alerting.Rule // rules that use it
}

// DeliveriesView is the delivery log.
type DeliveriesView struct {
	Deliveries []alerting.Delivery
	Notifiers  []alerting.Notifier // for the filter
	NotifierID int64
	Status     string
	RuleID     int64
	NextURL    string
	Err        string
}

// RuleURL is the page of rule id.
func RuleURL(id int64) string { return "/alerts/rules/" + strconv.FormatInt(id, 10) }

// NotifierURL is the page of notifier id.
func NotifierURL(id int64) string { return "/alerts/notifiers/" + strconv.FormatInt(id, 10) }

// SubjectURL links an alert's subject ("group:billing") to its console
// page; "" when the console has no page for it.
func SubjectURL(subject string) string {
	typ, name, _ := strings.Cut(subject, ":")
	switch typ {
	case "group":
		return templates.GroupURL(name)
	case "topic":
		return templates.TopicURL(name)
	case "broker", "logdir":
		return "/brokers"
	case "registry":
		return "/schemas"
	}
	return ""
}

// SubjectName is the subject without its type.
func SubjectName(subject string) string {
	if _, name, ok := strings.Cut(subject, ":"); ok {
		return name
	}
	return subject
}

// SubjectType is the subject's type (group, topic, broker, logdir,
// comparison, client, registry).
func SubjectType(subject string) string {
	typ, _, _ := strings.Cut(subject, ":")
	return typ
}

// SeverityKind maps a severity to a badge colour.
func SeverityKind(s alerting.Severity) string {
	switch s {
	case alerting.SeverityCritical, alerting.SeverityError:
		return "bad"
	case alerting.SeverityWarning:
		return "warn"
	}
	return "info"
}

// EventKind maps a history event to a badge colour.
func EventKind(e string) string {
	switch e {
	case alerting.EventFiring:
		return "bad"
	case alerting.EventPending, alerting.EventFlapping:
		return "warn"
	case alerting.EventResolved:
		return "ok"
	}
	return ""
}

// DeliveryKind maps a delivery status to a badge colour.
func DeliveryKind(status string) string {
	switch status {
	case alerting.DeliveryDelivered:
		return "ok"
	case alerting.DeliveryFailed:
		return "bad"
	}
	return "warn"
}

// KindTitle is the title of kind k ("Consumer lag (records)").
func KindTitle(k alerting.Kind) string {
	if ki, ok := kindInfo(k); ok {
		return ki.Title
	}
	return string(k)
}

func kindInfo(k alerting.Kind) (alerting.KindInfo, bool) {
	for _, ki := range alerting.Kinds() {
		if ki.Kind == k {
			return ki, true
		}
	}
	return alerting.KindInfo{}, false
}

// ThresholdText is a rule's condition in words ("> 1,000 records").
func ThresholdText(r alerting.Rule) string {
	ki, ok := kindInfo(r.Kind)
	if !ok {
		return ""
	}
	switch r.Kind {
	case alerting.KindGroupStatus:
		return "status ≥ " + r.MinStatus.String()
	case alerting.KindBrokerDown:
		return "unreachable"
	case alerting.KindProduceStopped:
		return "no records produced"
	case alerting.KindDiskFreeBytes:
		return "free < " + templates.BytesText(int64(r.Threshold))
	case alerting.KindDiskFreePercent:
		return "free < " + FormatNumber(r.Threshold) + " %"
	case alerting.KindLagSeconds:
		return "> " + templates.Dur(time.Duration(r.Threshold*float64(time.Second)))
	case alerting.KindHangingTxn:
		return "open > " + templates.Dur(time.Duration(r.Threshold*float64(time.Second)))
	case alerting.KindReassignStuck:
		return "no progress for " + templates.Dur(time.Duration(r.Threshold*float64(time.Second)))
	case alerting.KindClientThrottled:
		return "throttled > " + FormatNumber(r.Threshold) + " s per second"
	}
	return "> " + FormatNumber(r.Threshold) + " " + ki.Threshold
}

// FormatNumber shows a threshold without a needless fraction.
func FormatNumber(f float64) string {
	if f == float64(int64(f)) {
		return templates.Count(int64(f))
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// ScopeText describes a rule's scope.
func ScopeText(r alerting.Rule) string {
	var parts []string
	if r.Scope.Pattern != "" {
		parts = append(parts, "name matches "+r.Scope.Pattern)
	}
	if r.Scope.Topic != "" {
		parts = append(parts, "topic "+r.Scope.Topic)
	}
	if r.Scope.Listener != "" {
		parts = append(parts, "listener "+r.Scope.Listener)
	}
	if len(parts) == 0 {
		ki, _ := kindInfo(r.Kind)
		if ki.Subject == "registry" {
			return "the schema registry (every host)"
		}
		return "every " + nonEmpty(ki.Subject, "subject")
	}
	return strings.Join(parts, ", ")
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// NotifierNames lists the names of ids (unknown ids by number).
func NotifierNames(ids []int64, names map[int64]string) string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if n, ok := names[id]; ok {
			out = append(out, n)
		} else {
			out = append(out, "#"+strconv.FormatInt(id, 10))
		}
	}
	return strings.Join(out, ", ")
}

// Pair is one detail of an alert, as text.
type Pair struct{ Key, Value string }

// DetailPairs flattens an alert's details for display, sorted by key;
// nested values are shown as compact JSON.
func DetailPairs(details map[string]any) []Pair {
	keys := make([]string, 0, len(details))
	for k := range details {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Pair, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := details[k].(type) {
		case string:
			v = x
		case float64:
			v = FormatNumber(x)
		case bool, int, int64:
			v = fmt.Sprint(x)
		default:
			b, err := json.Marshal(x)
			if err != nil {
				v = fmt.Sprint(x)
			} else {
				v = string(b)
			}
		}
		if len(v) > 300 {
			v = v[:300] + "…"
		}
		out = append(out, Pair{k, v})
	}
	return out
}

// KindOptions are the rule kinds for the form's select.
func KindOptions() []templates.Option {
	var out []templates.Option
	for _, ki := range alerting.Kinds() {
		out = append(out, templates.Option{Value: string(ki.Kind), Label: ki.Title})
	}
	return out
}

// SeverityOptions are the severities for the form's select.
func SeverityOptions() []templates.Option {
	var out []templates.Option
	for _, s := range alerting.Severities() {
		out = append(out, templates.Option{Value: string(s), Label: string(s)})
	}
	return out
}

func minStatusOptions() []templates.Option {
	return []templates.Option{
		{Value: "WARN", Label: "WARN — lag never falls (and every ERR)"},
		{Value: "ERR", Label: "ERR — a partition is STOP, STALL or REWIND"},
	}
}

func notifierTypeOptions() []templates.Option {
	return []templates.Option{
		{Value: string(alerting.NotifierPagerDuty), Label: "PagerDuty (Events API v2)"},
		{Value: string(alerting.NotifierWebhook), Label: "Webhook (Alertmanager payload, version 4)"},
	}
}

// NotifierTypeText names a notifier type.
func NotifierTypeText(t alerting.NotifierType) string {
	switch t {
	case alerting.NotifierPagerDuty:
		return "PagerDuty"
	case alerting.NotifierWebhook:
		return "Webhook"
	}
	return string(t)
}

func thresholdHint() string {
	var parts []string
	for _, ki := range alerting.Kinds() {
		if ki.Threshold != "" {
			parts = append(parts, ki.Title+": "+ki.Threshold)
		}
	}
	return "Unit by kind — " + strings.Join(parts, "; ") + ". Sizes may carry a unit (10GiB, 500MB), and thresholds in seconds a duration (10m). Kinds without a threshold ignore it."
}

func secretHint(n alerting.Notifier, isNew bool) string {
	if !isNew && n.HasSecret {
		return "Stored: " + n.SecretHint + ". Leave empty to keep it; type a new one to replace it. It is never shown again."
	}
	return "PagerDuty: the integration's routing key (required). Webhook: optional, sent as “Authorization: Bearer <token>”. Stored encrypted and never shown again."
}

func boolText(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func historyFilterURL(ruleID int64) string {
	return "/alerts/history?rule=" + strconv.FormatInt(ruleID, 10)
}

func deliveriesFilterURL(key string, id int64) string {
	return "/alerts/deliveries?" + url.Values{key: {strconv.FormatInt(id, 10)}}.Encode()
}

func ruleOptions(rules []alerting.Rule) []templates.Option {
	out := []templates.Option{{Value: "", Label: "Every rule"}}
	for _, r := range rules {
		out = append(out, templates.Option{Value: strconv.FormatInt(r.ID, 10), Label: r.Name})
	}
	return out
}

func notifierOptions(ns []alerting.Notifier) []templates.Option {
	out := []templates.Option{{Value: "", Label: "Every notifier"}}
	for _, n := range ns {
		out = append(out, templates.Option{Value: strconv.FormatInt(n.ID, 10), Label: n.Name})
	}
	return out
}

func id64(id int64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatInt(id, 10)
}

func durText(d time.Duration) string {
	if d == 0 {
		return "at once"
	}
	return templates.Dur(d)
}

func sortedErrors(m map[string]string) []Pair {
	out := make([]Pair, 0, len(m))
	for k, v := range m {
		out = append(out, Pair{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func selectedNotifiers(v RuleView) []alerting.Notifier {
	var out []alerting.Notifier
	for _, n := range v.Notifiers {
		if v.Selected[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

func deliveryStatusOptions() []templates.Option {
	return []templates.Option{
		{Value: "", Label: "Any"},
		{Value: alerting.DeliveryDelivered, Label: "delivered"},
		{Value: alerting.DeliveryFailed, Label: "failed"},
		{Value: alerting.DeliveryPending, Label: "pending"},
	}
}

// plural is "1 rule", "2 rules".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return templates.Count(n) + " " + many
}

// Firing counts the firing alerts of a panel.
func (v OverviewPanelView) Firing() int {
	n := 0
	for _, a := range v.Alerts {
		if a.State == alerting.StateFiring {
			n++
		}
	}
	return n
}

// SilenceURL is the silence form filled in for rule ruleID on subject.
func SilenceURL(ruleID int64, subject string) string {
	return "/alerts/silences?" + url.Values{"rule": {strconv.FormatInt(ruleID, 10)}, "subject": {subject}}.Encode() + "#new-silence"
}

// KindUnit is the unit of kind k's threshold ("" when it has none).
func KindUnit(k alerting.Kind) string {
	ki, _ := kindInfo(k)
	return ki.Threshold
}

// listenerKinds lists the kinds (space-separated, for data-kinds) that may
// be limited to a listener.
func listenerKinds() string {
	var out []string
	for _, ki := range alerting.Kinds() {
		if ki.ListenerScope {
			out = append(out, string(ki.Kind))
		}
	}
	return strings.Join(out, " ")
}

// kindsWith lists the kinds (space-separated, for data-kinds) that have a
// threshold, or that may be limited to a topic.
func kindsWith(threshold, topic bool) string {
	var out []string
	for _, ki := range alerting.Kinds() {
		if threshold && ki.Threshold != "" || topic && ki.TopicScope {
			out = append(out, string(ki.Kind))
		}
	}
	return strings.Join(out, " ")
}

func ruleOptionsAny(rules []alerting.Rule) []templates.Option {
	out := []templates.Option{{Value: "", Label: "Any rule (a subject below)"}}
	for _, r := range rules {
		out = append(out, templates.Option{Value: strconv.FormatInt(r.ID, 10), Label: r.Name})
	}
	return out
}

func silenceScope(x alerting.Silence) string {
	switch {
	case x.RuleID != 0 && x.Subject != "":
		return "rule " + nonEmpty(x.RuleName, "#"+strconv.FormatInt(x.RuleID, 10)) + " on " + x.Subject
	case x.RuleID != 0:
		return "every alert of rule " + nonEmpty(x.RuleName, "#"+strconv.FormatInt(x.RuleID, 10))
	}
	return "every alert about " + x.Subject
}

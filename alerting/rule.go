package alerting

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-io/sluice/config"
)

// Kind is what a rule watches.
type Kind string

// The rule kinds.
const (
	KindLagRecords        Kind = "lag_records"        // a group's total lag in records above Threshold
	KindLagSeconds        Kind = "lag_seconds"        // a group's largest lag in time above Threshold seconds
	KindGroupStatus       Kind = "group_status"       // Burrow-style status at least MinStatus
	KindUnderReplicated   Kind = "under_replicated"   // a topic's under-replicated partitions above Threshold
	KindOfflinePartitions Kind = "offline_partitions" // a topic's partitions without a leader above Threshold
	KindBrokerDown        Kind = "broker_down"        // a registered broker not reachable
	KindProduceStopped    Kind = "produce_stopped"    // a topic that was receiving records receives none
	KindDiskFreeBytes     Kind = "disk_free_bytes"    // a log dir's free bytes below Threshold
	KindDiskFreePercent   Kind = "disk_free_percent"  // a log dir's free space below Threshold percent
	KindComparison        Kind = "comparison"         // a migration comparison's mismatched+missing records above Threshold

	// Kinds on the brokers' own metrics (MetricsSource).
	KindAuthFailures       Kind = "auth_failures"       // a broker's failed authentications per minute above Threshold
	KindAuthzDenials       Kind = "authz_denials"       // a broker's authorization denials per minute above Threshold
	KindClientThrottled    Kind = "client_throttled"    // a client (user+client_id) throttled more than Threshold seconds per second
	KindHangingTxn         Kind = "hanging_transaction" // a transaction open longer than Threshold seconds
	KindReassignStuck      Kind = "reassignment_stuck"  // a reassignment whose bytes remaining did not move for Threshold seconds
	KindSchemaIncompatible Kind = "schema_incompatible" // schema compatibility check failures per minute above Threshold
)

// KindInfo describes a kind for the console's rule form.
type KindInfo struct {
	Kind        Kind
	Title       string
	Description string
	// Subject is what one alert of the kind is about: "group", "topic",
	// "broker", "logdir", "comparison", "client" (USER/CLIENT_ID) or
	// "registry" (the schema registry). Scope.Pattern matches its name.
	Subject string
	// Threshold names the threshold's unit; empty when the kind has none.
	Threshold string
	// TopicScope is true when Scope.Topic may be set.
	TopicScope bool
	// ListenerScope is true when Scope.Listener may be set.
	ListenerScope bool
	// Source is the input the kind needs: "lag", "health", "disk",
	// "comparisons", "broker_metrics".
	Source string
}

var kinds = []KindInfo{
	{KindLagRecords, "Consumer lag (records)", "A group's total lag over the scoped partitions is above the threshold.", "group", "records", true, false, sourceLag},
	{KindLagSeconds, "Consumer lag (time)", "A group's largest time lag over the scoped partitions is above the threshold.", "group", "seconds", true, false, sourceLag},
	{KindGroupStatus, "Consumer group status", "Burrow-style evaluation of a window of commits per partition: WARN when lag never falls, ERR when a partition is STOP, STALL or REWIND.", "group", "", true, false, sourceLag},
	{KindUnderReplicated, "Under-replicated partitions", "A topic has more partitions whose ISR is smaller than their replica set than the threshold (0: any).", "topic", "partitions", true, false, sourceHealth},
	{KindOfflinePartitions, "Offline partitions", "A topic has more partitions without a live leader than the threshold (0: any).", "topic", "partitions", true, false, sourceHealth},
	{KindBrokerDown, "Broker down", "A broker of the cluster is not reachable.", "broker", "", false, false, sourceHealth},
	{KindProduceStopped, "Produce stopped", "A topic that was receiving records has received none (its produce rate dropped to zero).", "topic", "", true, false, sourceHealth},
	{KindDiskFreeBytes, "Log dir free space (bytes)", "A log directory has fewer free bytes than the threshold.", "logdir", "bytes", false, false, sourceDisk},
	{KindDiskFreePercent, "Log dir free space (percent)", "A log directory has less free space than the threshold percentage.", "logdir", "percent", false, false, sourceDisk},
	{KindComparison, "Migration comparison differences", "A comparison found more mismatched plus missing records than the threshold (0: any).", "comparison", "records", false, false, sourceComparisons},
	{KindAuthFailures, "Authentication failures", "A broker refuses more logins per minute than the threshold (wrong or unknown credentials, failed TLS handshakes; 0: any), on one listener or all.", "broker", "failures per minute", false, true, sourceBrokerMetrics},
	{KindAuthzDenials, "Authorization denials", "A broker denies more requests per minute than the threshold because an ACL does not allow them (0: any).", "broker", "denials per minute", false, false, sourceBrokerMetrics},
	{KindClientThrottled, "Client throttled", "A client (user and client id) is throttled by its quotas for more than the threshold of each second on some broker (1: all the time); with For, throttled for longer than that.", "client", "seconds throttled per second", false, false, sourceBrokerMetrics},
	{KindHangingTxn, "Hanging transaction", "The oldest transaction a broker coordinates has been open longer than the threshold (a producer gone, or a transaction its coordinator lost track of).", "broker", "seconds", false, false, sourceBrokerMetrics},
	{KindReassignStuck, "Reassignment stuck", "A broker has partition moves with bytes left to copy, and that number has not changed for the threshold.", "broker", "seconds without progress", false, false, sourceBrokerMetrics},
	{KindSchemaIncompatible, "Schema compatibility failures", "The schema registry refuses more schemas per minute than the threshold as incompatible (registrations and explicit checks, every host; 0: any).", "registry", "failures per minute", false, false, sourceBrokerMetrics},
}

// Kinds lists every rule kind, in the order a form should offer them.
func Kinds() []KindInfo { return append([]KindInfo(nil), kinds...) }

func kindInfo(k Kind) (KindInfo, bool) {
	for _, ki := range kinds {
		if ki.Kind == k {
			return ki, true
		}
	}
	return KindInfo{}, false
}

// Severity is PagerDuty's severity scale, also used as the webhook's
// severity label.
type Severity string

// The severities.
const (
	SeverityCritical Severity = "critical"
	SeverityError    Severity = "error"
	SeverityWarning  Severity = "warning"
	SeverityInfo     Severity = "info"
)

// Severities lists the severities, worst first.
func Severities() []Severity {
	return []Severity{SeverityCritical, SeverityError, SeverityWarning, SeverityInfo}
}

// Scope narrows what a rule looks at.
type Scope struct {
	// Pattern is a glob on the subject's name (group, topic, broker id, log
	// dir path, comparison name): * any run of characters, ? one character.
	// Empty matches everything.
	Pattern string `json:"pattern"`
	// Topic limits lag and topic rules to one topic.
	Topic string `json:"topic"`
	// Listener limits an authentication failures rule to one listener
	// (its name, e.g. SASL_SSL or EXTERNAL). Empty: every listener.
	Listener string `json:"listener,omitempty"`
}

// Rule is one alert rule.
type Rule struct {
	ID          int64    `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Kind        Kind     `json:"kind"`
	Enabled     bool     `json:"enabled"`
	Severity    Severity `json:"severity"`
	// For is how long the condition must hold before the alert fires
	// (for_ms in JSON).
	For time.Duration `json:"-"`
	// ClearFor is how long the condition must stay clear before a firing
	// alert resolves (hysteresis against flapping; clear_for_ms in JSON).
	ClearFor time.Duration `json:"-"`
	Scope    Scope         `json:"scope"`
	// Threshold's unit depends on Kind (see KindInfo.Threshold).
	Threshold float64 `json:"threshold"`
	// MinStatus is the least group status that fires a group_status rule:
	// StatusWarn (default) or StatusErr.
	MinStatus   Status    `json:"min_status,omitempty"`
	NotifierIDs []int64   `json:"notifier_ids"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Version is the rule's version in the console's replicated state
	// (consoledb.RowVersion): Rule sets it, and UpdateRule refuses an
	// edit whose Version is not the current one (*consoledb.StaleError).
	// 0: not checked.
	Version int64 `json:"version"`
}

// MarshalJSON writes the rule with its durations in milliseconds.
func (r Rule) MarshalJSON() ([]byte, error) {
	type plain Rule
	return json.Marshal(struct {
		plain
		ForMS      int64 `json:"for_ms"`
		ClearForMS int64 `json:"clear_for_ms"`
	}{plain(r), r.For.Milliseconds(), r.ClearFor.Milliseconds()})
}

// ValidationError lists what is wrong with a rule or notifier, by form field
// name (name, kind, severity, for, clear_for, scope_pattern, scope_topic, scope_listener,
// threshold, min_status, notifiers; for notifiers: name, type, url, secret).
type ValidationError struct {
	Fields map[string]string
}

func (e *ValidationError) Error() string {
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("invalid: ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", k, e.Fields[k])
	}
	return b.String()
}

func (e *ValidationError) add(field, msg string) {
	if e.Fields == nil {
		e.Fields = map[string]string{}
	}
	if _, ok := e.Fields[field]; !ok {
		e.Fields[field] = msg
	}
}

func (e *ValidationError) orNil() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// maxDuration bounds For and ClearFor: a week is already more than any
// sensible damping.
const maxDuration = 7 * 24 * time.Hour

// Normalize trims text fields and fills defaults (severity warning,
// MinStatus WARN for group_status).
func (r *Rule) Normalize() {
	r.Name = strings.TrimSpace(r.Name)
	r.Description = strings.TrimSpace(r.Description)
	r.Scope.Pattern = strings.TrimSpace(r.Scope.Pattern)
	r.Scope.Topic = strings.TrimSpace(r.Scope.Topic)
	// Kafka's listener names are case-insensitive (ListenerName.normalised).
	r.Scope.Listener = strings.ToUpper(strings.TrimSpace(r.Scope.Listener))
	if r.Severity == "" {
		r.Severity = SeverityWarning
	}
	if r.Kind == KindGroupStatus && r.MinStatus == StatusNotFound {
		r.MinStatus = StatusWarn
	}
	if r.Scope.Pattern == "*" {
		r.Scope.Pattern = ""
	}
}

// Validate reports every problem with the rule at once. Whether its
// notifiers exist is checked when it is stored.
func (r *Rule) Validate() error {
	var v ValidationError
	switch {
	case r.Name == "":
		v.add("name", "required")
	case utf8.RuneCountInString(r.Name) > 200:
		v.add("name", "at most 200 characters")
	}
	if len(r.Description) > 2000 {
		v.add("description", "at most 2000 characters")
	}
	ki, ok := kindInfo(r.Kind)
	if !ok {
		v.add("kind", fmt.Sprintf("unknown kind %q", r.Kind))
	}
	switch r.Severity {
	case SeverityCritical, SeverityError, SeverityWarning, SeverityInfo:
	default:
		v.add("severity", fmt.Sprintf("must be critical, error, warning or info, not %q", r.Severity))
	}
	if r.For < 0 || r.For > maxDuration {
		v.add("for", "must be between 0 and 168h")
	}
	if r.ClearFor < 0 || r.ClearFor > maxDuration {
		v.add("clear_for", "must be between 0 and 168h")
	}
	if r.Scope.Pattern != "" {
		if _, err := compileGlob(r.Scope.Pattern); err != nil {
			v.add("scope_pattern", err.Error())
		}
	}
	if r.Scope.Topic != "" {
		if ok && !ki.TopicScope {
			v.add("scope_topic", fmt.Sprintf("a %s rule cannot be limited to a topic", r.Kind))
		} else if err := validTopic(r.Scope.Topic); err != nil {
			v.add("scope_topic", err.Error())
		}
	}
	if r.Scope.Listener != "" {
		if ok && !ki.ListenerScope {
			v.add("scope_listener", fmt.Sprintf("a %s rule cannot be limited to a listener", r.Kind))
		} else if !listenerName.MatchString(r.Scope.Listener) {
			v.add("scope_listener", "not a listener name (letters, digits, '_' and '-', at most 100)")
		}
	}
	t := r.Threshold
	if math.IsNaN(t) || math.IsInf(t, 0) {
		v.add("threshold", "must be a number")
	} else {
		switch r.Kind {
		case KindLagRecords, KindUnderReplicated, KindOfflinePartitions, KindComparison:
			if t < 0 || t != math.Trunc(t) {
				v.add("threshold", "must be a whole number, 0 or more")
			}
		case KindLagSeconds, KindHangingTxn, KindReassignStuck:
			if t <= 0 {
				v.add("threshold", "must be more than 0 seconds")
			}
		case KindAuthFailures, KindAuthzDenials, KindSchemaIncompatible:
			if t < 0 {
				v.add("threshold", "must be 0 or more per minute")
			}
		case KindClientThrottled:
			if t <= 0 {
				v.add("threshold", "must be more than 0 seconds per second (1: throttled all the time)")
			}
		case KindDiskFreeBytes:
			if t <= 0 {
				v.add("threshold", "must be more than 0 bytes")
			}
		case KindDiskFreePercent:
			if t <= 0 || t >= 100 {
				v.add("threshold", "must be between 0 and 100 percent")
			}
		case KindGroupStatus, KindBrokerDown, KindProduceStopped:
			if t != 0 {
				v.add("threshold", fmt.Sprintf("a %s rule has no threshold", r.Kind))
			}
		}
	}
	if r.Kind == KindGroupStatus {
		if r.MinStatus != StatusWarn && r.MinStatus != StatusErr {
			v.add("min_status", "must be WARN or ERR")
		}
	} else if r.MinStatus != StatusNotFound {
		v.add("min_status", "only group_status rules have a minimum status")
	}
	seen := map[int64]bool{}
	for _, id := range r.NotifierIDs {
		if id <= 0 || seen[id] {
			v.add("notifiers", "invalid or repeated notifier")
		}
		seen[id] = true
	}
	return v.orNil()
}

// listenerName is what Kafka accepts as a listener name in listeners.
var listenerName = regexp.MustCompile(`^[A-Z0-9_-]{1,100}$`)

func validTopic(t string) error {
	if config.ValidateTopicName(t) != nil {
		return errors.New("not a valid topic name (letters, digits, '.', '_', '-'; at most 249)")
	}
	return nil
}

// compileGlob turns a glob (* and ?) into an anchored regexp; every other
// character is literal.
func compileGlob(p string) (*regexp.Regexp, error) {
	if len(p) > 500 {
		return nil, errors.New("pattern longer than 500 characters")
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// matcher is a compiled scope.
type matcher struct {
	re    *regexp.Regexp // nil: any name
	topic string
}

func newMatcher(s Scope) matcher {
	m := matcher{topic: s.Topic}
	if s.Pattern != "" {
		m.re, _ = compileGlob(s.Pattern) // validated on store
		if m.re == nil {
			m.re = regexp.MustCompile(`^$.`) // matches nothing
		}
	}
	return m
}

func (m matcher) name(n string) bool { return m.re == nil || m.re.MatchString(n) }

func (m matcher) topicOK(t string) bool { return m.topic == "" || m.topic == t }

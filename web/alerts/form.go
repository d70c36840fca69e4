package alerts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/templates"
	views "github.com/sluice-io/sluice/templates/alerts"
)

// The rule form (new and edit pages, create and update posts). Fields are
// parsed here first — durations, numbers, sizes — so a typo comes back next
// to its field with what was typed kept; then the rule is checked with the
// engine's own Validate, and the engine's refusal on store (a name taken, a
// notifier deleted meanwhile) is mapped back onto the form the same way.

var ruleFields = []string{"name", "description", "kind", "severity", "threshold", "min_status", "for", "clear_for", "scope_pattern", "scope_topic", "scope_listener", "enabled"}

type notifierLister interface {
	Notifiers(ctx context.Context) ([]alerting.Notifier, error)
}

type ruleForm struct{ eng notifierLister }

// newRuleForm is the form of a new rule.
func newRuleForm() templates.Form {
	return templates.NewForm("kind", string(alerting.KindLagRecords), "severity", string(alerting.SeverityWarning),
		"for", "5m", "clear_for", "2m", "min_status", "WARN", "enabled", "1")
}

// formOf is the form of a stored rule.
func formOf(r alerting.Rule) (templates.Form, map[int64]bool) {
	f := templates.NewForm(
		"name", r.Name, "description", r.Description, "kind", string(r.Kind), "severity", string(r.Severity),
		"for", formatDuration(r.For), "clear_for", formatDuration(r.ClearFor),
		"scope_pattern", r.Scope.Pattern, "scope_topic", r.Scope.Topic, "scope_listener", r.Scope.Listener, "min_status", "WARN")
	if ki, ok := kindOf(r.Kind); ok && ki.Threshold != "" {
		f.Set("threshold", strconv.FormatFloat(r.Threshold, 'f', -1, 64))
	}
	if r.Kind == alerting.KindGroupStatus {
		f.Set("min_status", r.MinStatus.String())
	}
	if r.Enabled {
		f.Set("enabled", "1")
	}
	if r.Version > 0 {
		// The version the edit is based on: a save after another host
		// changed the rule is refused (stale), not applied over it.
		f.Set("version", strconv.FormatInt(r.Version, 10))
	}
	sel := map[int64]bool{}
	for _, id := range r.NotifierIDs {
		sel[id] = true
	}
	return f, sel
}

// parse reads the posted rule form into a rule, recording every problem in
// the form: its own parse errors first, then the engine's validation.
func (h ruleForm) parse(c *fiber.Ctx) (alerting.Rule, templates.Form, map[int64]bool) {
	f := templates.NewForm()
	for _, k := range ruleFields {
		f.Set(k, formValue(c, k))
	}
	if checked(c, "enabled") {
		f.Set("enabled", "1")
	} else {
		f.Set("enabled", "")
	}
	version, _ := strconv.ParseInt(formValue(c, "version"), 10, 64)
	if version > 0 {
		f.Set("version", strconv.FormatInt(version, 10))
	}
	r := alerting.Rule{
		Name:        f.Get("name"),
		Description: f.Get("description"),
		Kind:        alerting.Kind(f.Get("kind")),
		Severity:    alerting.Severity(f.Get("severity")),
		Enabled:     f.Get("enabled") == "1",
		Scope:       alerting.Scope{Pattern: f.Get("scope_pattern"), Topic: f.Get("scope_topic")},
		Version:     max(version, 0),
	}
	var err error
	if r.For, err = parseDuration(f.Get("for")); err != nil {
		f.Fail("for", err.Error())
	}
	if r.ClearFor, err = parseDuration(f.Get("clear_for")); err != nil {
		f.Fail("clear_for", err.Error())
	}
	ki, known := kindOf(r.Kind)
	// Only the kinds that may be limited to a listener read the field, so
	// switching the kind does not leave a stale value in the way.
	if known && ki.ListenerScope {
		r.Scope.Listener = f.Get("scope_listener")
	}
	if known && ki.Threshold != "" {
		if r.Threshold, err = parseThreshold(r.Kind, f.Get("threshold")); err != nil {
			f.Fail("threshold", err.Error())
		}
	}
	// A kind without a threshold or a minimum status ignores those fields,
	// so switching the kind does not leave a stale value in the way.
	if r.Kind == alerting.KindGroupStatus {
		if r.MinStatus, err = alerting.ParseStatus(nonEmpty(f.Get("min_status"), "WARN")); err != nil {
			f.Fail("min_status", "choose WARN or ERR")
		}
	}
	sel := map[int64]bool{}
	for _, raw := range c.Request().PostArgs().PeekMulti("notifiers") {
		id, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || id <= 0 {
			f.Fail("notifiers", "unknown notifier "+strconv.Quote(string(raw)))
			continue
		}
		if !sel[id] {
			r.NotifierIDs = append(r.NotifierIDs, id)
		}
		sel[id] = true
	}
	r.Normalize()
	if err := r.Validate(); err != nil {
		applyValidation(&f, err)
	}
	return r, f, sel
}

// view is the rule page with the notifiers to choose from.
func (h ruleForm) view(c *fiber.Ctx, r alerting.Rule, f templates.Form, sel map[int64]bool) (views.RuleView, error) {
	ns, err := h.eng.Notifiers(c.UserContext())
	if err != nil {
		return views.RuleView{}, engineError(err, "notifiers")
	}
	return views.RuleView{Rule: r, Form: f, Selected: sel, Notifiers: ns}, nil
}

func kindOf(k alerting.Kind) (alerting.KindInfo, bool) {
	for _, ki := range alerting.Kinds() {
		if ki.Kind == k {
			return ki, true
		}
	}
	return alerting.KindInfo{}, false
}

// parseDuration reads "0", "90" (seconds), "30s", "5m", "1h30m".
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 || n > 1e7 {
			return 0, errors.New("must be between 0 and 168h")
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write e.g. 30s, 5m or 1h30m", s)
	}
	return d, nil
}

// formatDuration is the inverse of parseDuration, without Go's trailing
// zero units ("5m", not "5m0s").
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseThreshold reads a threshold in the unit of kind k: a plain number,
// with thousands separators allowed; a size with a unit for byte
// thresholds; a duration for lag in seconds.
func parseThreshold(k alerting.Kind, s string) (float64, error) {
	if s == "" {
		switch k {
		case alerting.KindUnderReplicated, alerting.KindOfflinePartitions, alerting.KindComparison,
			alerting.KindAuthFailures, alerting.KindAuthzDenials, alerting.KindSchemaIncompatible:
			return 0, nil // 0: any
		}
		return 0, errors.New("required for this kind")
	}
	plain := strings.NewReplacer(",", "", "_", "", " ", "").Replace(s)
	if v, err := strconv.ParseFloat(plain, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
		return v, nil
	}
	switch k {
	case alerting.KindDiskFreeBytes:
		i := strings.IndexFunc(plain, func(r rune) bool { return unicode.IsLetter(r) })
		if i > 0 {
			n, err := strconv.ParseFloat(plain[:i], 64)
			if mult, ok := sizeUnits[strings.ToLower(plain[i:])]; ok && err == nil {
				return math.Round(n * mult), nil
			}
		}
		return 0, fmt.Errorf("%q is not a size: write bytes, or e.g. 10GiB or 500MB", s)
	case alerting.KindLagSeconds, alerting.KindHangingTxn, alerting.KindReassignStuck:
		if d, err := time.ParseDuration(plain); err == nil {
			return d.Seconds(), nil
		}
		return 0, fmt.Errorf("%q is not a number of seconds (or a duration such as 10m)", s)
	}
	return 0, fmt.Errorf("%q is not a number", s)
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// describeRule is the audit detail of a rule.
func describeRule(r alerting.Rule) string {
	d := fmt.Sprintf("kind=%s severity=%s for=%s clear_for=%s", r.Kind, r.Severity, formatDuration(r.For), formatDuration(r.ClearFor))
	if r.Threshold != 0 {
		d += " threshold=" + strconv.FormatFloat(r.Threshold, 'f', -1, 64)
	}
	if r.Kind == alerting.KindGroupStatus {
		d += " min_status=" + r.MinStatus.String()
	}
	if r.Scope.Pattern != "" {
		d += " pattern=" + r.Scope.Pattern
	}
	if r.Scope.Topic != "" {
		d += " topic=" + r.Scope.Topic
	}
	if r.Scope.Listener != "" {
		d += " listener=" + r.Scope.Listener
	}
	ids := make([]string, len(r.NotifierIDs))
	for i, id := range r.NotifierIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	d += " notifiers=[" + strings.Join(ids, ",") + "] enabled=" + strconv.FormatBool(r.Enabled)
	return d
}

// ---- the notifier form ----

var notifierFields = []string{"name", "type", "url", "enabled", "send_resolved", "clear_secret"}

func newNotifierForm() templates.Form {
	return templates.NewForm("type", string(alerting.NotifierPagerDuty), "enabled", "1", "send_resolved", "1")
}

func notifierFormOf(n alerting.Notifier) templates.Form {
	f := templates.NewForm("name", n.Name, "type", string(n.Type), "url", n.URL)
	if n.Enabled {
		f.Set("enabled", "1")
	}
	if n.SendResolved {
		f.Set("send_resolved", "1")
	}
	if n.Version > 0 {
		// The version the edit is based on, as for rules (formOf).
		f.Set("version", strconv.FormatInt(n.Version, 10))
	}
	return f
}

// parseNotifier reads the posted notifier form. The secret goes into the
// input only, never into the form that is rendered back.
func parseNotifier(c *fiber.Ctx) (alerting.NotifierInput, templates.Form) {
	f := templates.NewForm()
	for _, k := range notifierFields {
		f.Set(k, formValue(c, k))
	}
	for _, k := range []string{"enabled", "send_resolved", "clear_secret"} {
		if checked(c, k) {
			f.Set(k, "1")
		} else {
			f.Set(k, "")
		}
	}
	in := alerting.NotifierInput{
		Name:         f.Get("name"),
		Type:         alerting.NotifierType(f.Get("type")),
		URL:          f.Get("url"),
		Secret:       formValue(c, "secret"),
		ClearSecret:  f.Get("clear_secret") == "1",
		Enabled:      f.Get("enabled") == "1",
		SendResolved: f.Get("send_resolved") == "1",
	}
	if v, _ := strconv.ParseInt(formValue(c, "version"), 10, 64); v > 0 {
		in.Version = v
		f.Set("version", strconv.FormatInt(v, 10))
	}
	return in, f
}

// describeNotifier is the audit detail of a notifier change; it says only
// whether the secret changed, and shows the URL masked.
func describeNotifier(in alerting.NotifierInput, creating bool) string {
	secret := "kept"
	switch {
	case in.Secret != "" && creating:
		secret = "set"
	case in.Secret != "":
		secret = "replaced"
	case in.ClearSecret:
		secret = "removed"
	case creating:
		secret = "none"
	}
	return fmt.Sprintf("type=%s url=%s enabled=%t send_resolved=%t secret=%s", in.Type, alerting.MaskURL(in.URL), in.Enabled, in.SendResolved, secret)
}

func asValidation(err error) (*alerting.ValidationError, bool) {
	var ve *alerting.ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}

func isNotFound(err error) bool { return errors.Is(err, alerting.ErrNotFound) }

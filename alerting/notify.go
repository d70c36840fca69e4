package alerting

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"

	"github.com/sluice-io/sluice/internal/buildinfo"
)

const (
	actionTrigger     = "trigger"
	actionResolve     = "resolve"
	actionAcknowledge = "acknowledge" // PagerDuty only: webhooks have no such event
)

// job is one notification for one notifier: everything needed to build the
// payload. The notifier's URL and secret are read when it is sent, so an edit
// takes effect for notifications still queued.
type job struct {
	outboxID    int64 // the alert_outbox row; 0 for a test event
	notifierID  int64
	action      string
	test        bool
	ruleID      int64
	ruleName    string
	description string
	kind        Kind
	severity    Severity
	subject     string
	dedupKey    string
	summary     string
	details     map[string]any
	labels      map[string]string
	links       []Link
	startsAt    time.Time
	endsAt      time.Time // zero while firing
	ackedAt     time.Time // acknowledge: when
}

// RetryPolicy is how deliveries are retried: on HTTP 429, 5xx and network
// errors, never on other 4xx answers.
type RetryPolicy struct {
	// MaxAttempts per notification, first try included (default 6).
	MaxAttempts int
	// Backoff is the wait before attempt n+1 after attempt n failed
	// (n from 1); default DefaultBackoff. Tests inject a fast one.
	Backoff func(attempt int) time.Duration
	// MaxRetryAfter caps a Retry-After header from a 429 or 503 (default 5m).
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one HTTP attempt (default 10s).
	AttemptTimeout time.Duration
}

func (p *RetryPolicy) ensureDefaults() {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 6
	}
	if p.Backoff == nil {
		p.Backoff = DefaultBackoff
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 5 * time.Minute
	}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = 10 * time.Second
	}
}

// DefaultBackoff doubles from 1s up to 2 minutes, with "equal jitter": a
// random wait between half and all of the doubled value, so many Sluice
// instances hit by the same outage do not retry in step.
func DefaultBackoff(attempt int) time.Duration {
	return ExponentialBackoff(time.Second, 2*time.Minute)(attempt)
}

// ExponentialBackoff returns a backoff of base·2^(attempt-1), capped at max,
// with equal jitter.
func ExponentialBackoff(base, max time.Duration) func(int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		half := d / 2
		return half + rand.N(half+1)
	}
}

// ---- PagerDuty Events API v2 ----

// pdEvent is the body of POST /v2/enqueue.
type pdEvent struct {
	RoutingKey  string     `json:"routing_key"`
	EventAction string     `json:"event_action"`
	DedupKey    string     `json:"dedup_key"`
	Payload     *pdPayload `json:"payload,omitempty"`
	Links       []Link     `json:"links,omitempty"`
	Client      string     `json:"client,omitempty"`
	ClientURL   string     `json:"client_url,omitempty"`
}

type pdPayload struct {
	Summary       string         `json:"summary"`
	Source        string         `json:"source"`
	Severity      string         `json:"severity"`
	Timestamp     string         `json:"timestamp,omitempty"`
	Component     string         `json:"component,omitempty"`
	Group         string         `json:"group,omitempty"`
	Class         string         `json:"class,omitempty"`
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

// maxSummary is PagerDuty's limit on payload.summary, in characters.
const maxSummary = 1024

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// pagerDutyBody is the Events API v2 event of j. A trigger carries the
// payload: summary, source (this host), severity, when the condition
// began, the subject as component, the cluster as group (the cluster id,
// so two clusters on one service are told apart) and the rule kind as
// class. Acknowledge and resolve carry only the routing key, the dedup key
// and the action.
func (s *Service) pagerDutyBody(routingKey string, j job) ([]byte, error) {
	ev := pdEvent{RoutingKey: routingKey, EventAction: j.action, DedupKey: j.dedupKey}
	if j.action == actionTrigger {
		_, name, _ := strings.Cut(j.subject, ":")
		details := map[string]any{}
		for k, v := range j.details {
			details[k] = v
		}
		details["rule"] = j.ruleName
		details["rule_id"] = j.ruleID
		details["subject"] = j.subject
		if j.description != "" {
			details["description"] = j.description
		}
		ev.Payload = &pdPayload{
			Summary:       truncateRunes(j.summary, maxSummary),
			Source:        s.cfg.Source,
			Severity:      string(j.severity),
			Timestamp:     j.startsAt.UTC().Format(time.RFC3339Nano),
			Component:     name,
			Group:         s.cfg.Cluster,
			Class:         string(j.kind),
			CustomDetails: details,
		}
		ev.Links = j.links
		ev.Client = s.cfg.Client
		ev.ClientURL = s.cfg.BaseURL
	}
	return json.Marshal(ev)
}

// ---- Alertmanager webhook, version 4 ----

type amMessage struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []amAlert         `json:"alerts"`
}

type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

func labelSet(m map[string]string) model.LabelSet {
	ls := make(model.LabelSet, len(m))
	for k, v := range m {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return ls
}

func (s *Service) webhookBody(receiver string, j job) ([]byte, error) {
	status := "firing"
	if j.action == actionResolve {
		status = "resolved"
	}
	labels := map[string]string{}
	for k, v := range j.labels {
		labels[k] = v
	}
	annotations := map[string]string{"summary": j.summary}
	if j.description != "" {
		annotations["description"] = j.description
	}
	if len(j.details) > 0 {
		if b, err := json.Marshal(j.details); err == nil {
			annotations["details"] = string(b)
		}
	}
	// Group by everything that identifies the incident (rule and subject), so
	// receivers that deduplicate on groupKey see one incident per rule and
	// subject, like PagerDuty's dedup_key.
	group := map[string]string{}
	for k, v := range labels {
		if k != "severity" {
			group[k] = v
		}
	}
	generator := ""
	if len(j.links) > 0 {
		generator = j.links[0].Href
	}
	msg := amMessage{
		Version:           "4",
		GroupKey:          "{}:" + labelSet(group).String(),
		Status:            status,
		Receiver:          receiver,
		GroupLabels:       group,
		CommonLabels:      labels,
		CommonAnnotations: annotations,
		ExternalURL:       s.cfg.BaseURL,
		Alerts: []amAlert{{
			Status:       status,
			Labels:       labels,
			Annotations:  annotations,
			StartsAt:     j.startsAt.UTC(),
			EndsAt:       j.endsAt.UTC(),
			GeneratorURL: generator,
			Fingerprint:  labelSet(labels).Fingerprint().String(),
		}},
	}
	if j.endsAt.IsZero() {
		msg.Alerts[0].EndsAt = time.Time{}
	}
	return json.Marshal(msg)
}

// ---- delivery ----

// maxResponse is how much of a receiver's answer the delivery log keeps.
const maxResponse = 2048

// errRetryable marks a failed attempt worth retrying.
var errRetryable = errors.New("retryable")

// send delivers j to notifier n, retrying per the policy, and records the
// delivery in the log. It returns the final log entry.
func (s *Service) send(ctx context.Context, n Notifier, secret string, secretErr error, j job) Delivery {
	d := Delivery{
		CreatedAt:    s.now(),
		NotifierID:   n.ID,
		NotifierName: n.Name,
		NotifierType: n.Type,
		RuleID:       j.ruleID,
		DedupKey:     j.dedupKey,
		Action:       j.action,
		Test:         j.test,
		Status:       DeliveryPending,
	}
	var body []byte
	var err error
	switch {
	case secretErr != nil:
		err = secretErr
	case n.Type == NotifierPagerDuty:
		if secret == "" {
			err = errors.New("no routing key stored")
		} else {
			body, err = s.pagerDutyBody(secret, j)
		}
	case n.Type == NotifierWebhook:
		body, err = s.webhookBody(n.Name, j)
	default:
		err = fmt.Errorf("unknown notifier type %q", n.Type)
	}
	return s.deliver(ctx, n, secret, body, err, d)
}

// deliver posts body to n (err: the body could not be made, a failed
// delivery), retrying per the policy, with the log row d written at the
// start (pending) and at the end.
func (s *Service) deliver(ctx context.Context, n Notifier, secret string, body []byte, err error, d Delivery) Delivery {
	d.Request = redact(string(body), secret)
	// The log row exists from the start, so a long retry shows as pending.
	logCtx := context.WithoutCancel(ctx)
	if err := s.insertDelivery(logCtx, &d); err != nil {
		s.log.Error("delivery log", "err", err)
	}
	finish := func() Delivery {
		d.FinishedAt = s.now()
		d.Response = redact(d.Response, secret)
		d.Error = redact(d.Error, secret)
		if d.ID != 0 {
			if err := s.finishDelivery(logCtx, &d); err != nil {
				s.log.Error("delivery log", "err", err)
			}
		}
		s.metrics.NotificationDone(string(n.Type), d.Status == DeliveryDelivered)
		lvl := s.log.Info
		if d.Status != DeliveryDelivered {
			lvl = s.log.Warn
		}
		lvl("notification "+d.Status, "notifier", n.Name, "type", n.Type, "action", d.Action,
			"dedup_key", d.DedupKey, "attempts", d.Attempts, "http_status", d.HTTPStatus, "err", d.Error)
		return d
	}
	if err != nil {
		d.Status, d.Error = DeliveryFailed, err.Error()
		return finish()
	}

	pol := s.cfg.Retry
	for attempt := 1; ; attempt++ {
		d.Attempts = attempt
		s.metrics.NotificationAttempt(string(n.Type))
		retryAfter, err := s.attempt(ctx, n, secret, body, &d)
		if err == nil {
			d.Status, d.Error = DeliveryDelivered, ""
			return finish()
		}
		d.Error = err.Error()
		if !errors.Is(err, errRetryable) || attempt >= pol.MaxAttempts || ctx.Err() != nil {
			d.Status = DeliveryFailed
			return finish()
		}
		wait := pol.Backoff(attempt)
		if retryAfter > wait {
			wait = min(retryAfter, pol.MaxRetryAfter)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			d.Status = DeliveryFailed
			d.Error += "; gave up: " + ctx.Err().Error()
			return finish()
		case <-t.C:
		}
	}
}

// ErrNotRetryable is returned when retrying a delivery that did not fail.
var ErrNotRetryable = errors.New("alerting: only a failed delivery can be sent again")

// redactedKey is what the delivery log stores in place of a routing key.
const redactedKey = "[redacted]"

// RetryDelivery sends a failed delivery's request again, now, to its
// notifier's current URL with its current key (the log stores the request
// with the key redacted), and logs it as a new delivery that names the one
// it repeats. Like SendTest it retries per the policy within ctx.
func (s *Service) RetryDelivery(ctx context.Context, id int64) (Delivery, error) {
	old, err := s.Delivery(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	if old.Status != DeliveryFailed {
		return Delivery{}, ErrNotRetryable
	}
	n, secret, serr := s.notifierWithSecret(ctx, old.NotifierID)
	if serr != nil && n.ID == 0 {
		return Delivery{}, serr
	}
	body := []byte(old.Request)
	if serr == nil && n.Type == NotifierPagerDuty && old.Request != "" {
		if secret == "" {
			serr = errors.New("no routing key stored")
		} else {
			quoted, _ := json.Marshal(secret)
			body = bytes.Replace(body, []byte(`"routing_key":"`+redactedKey+`"`), append([]byte(`"routing_key":`), quoted...), 1)
		}
	}
	if serr == nil && old.Request == "" {
		serr = errors.New("the delivery log has no request to send again (it was logged before Sluice kept requests)")
	}
	d := Delivery{
		CreatedAt: s.now(), NotifierID: n.ID, NotifierName: n.Name, NotifierType: n.Type, RuleID: old.RuleID,
		DedupKey: old.DedupKey, Action: old.Action, Test: old.Test, Status: DeliveryPending, RetryOf: old.ID,
	}
	return s.deliver(ctx, n, secret, body, serr, d), nil
}

// attempt makes one HTTP request. A nil error means delivered; an error
// wrapping errRetryable may be retried, after retryAfter if the receiver
// asked for it.
func (s *Service) attempt(ctx context.Context, n Notifier, secret string, body []byte, d *Delivery) (retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Retry.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("request: %w", maskURLError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Sluice/"+buildinfo.Version)
	if n.Type == NotifierWebhook && secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		d.HTTPStatus, d.Response = 0, ""
		err = maskURLError(err)
		if errors.Is(err, ErrTargetRefused) {
			return 0, err // the address will not change by retrying
		}
		return 0, fmt.Errorf("%w: %v", errRetryable, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	d.HTTPStatus = resp.StatusCode
	d.Response = truncateRunes(strings.ToValidUTF8(string(raw), "?"), maxResponse)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return 0, nil
	case code == http.StatusTooManyRequests || code >= 500:
		if v, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && v > 0 {
			retryAfter = time.Duration(v) * time.Second
		}
		return retryAfter, fmt.Errorf("%w: HTTP %d", errRetryable, code)
	case code >= 300 && code < 400:
		// The client does not follow redirects (see target.go): a receiver
		// that moved must be entered with its new URL.
		return 0, fmt.Errorf("HTTP %d: %w; enter the receiver's final URL", code, errRedirect)
	default:
		return 0, fmt.Errorf("HTTP %d: not retried", code)
	}
}

// redact removes a secret from text that goes to the log or the database.
func redact(text, secret string) string {
	if secret == "" || text == "" {
		return text
	}
	return strings.ReplaceAll(text, secret, redactedKey)
}

package alerting

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-io/sluice/consoledb"
)

// migrations is the alerting component's schema, applied with
// consoledb.Migrate(ctx, "alerting", migrations). Append only. Times are
// Unix milliseconds.
var migrations = []string{
	`CREATE TABLE alert_notifiers (
		id            INTEGER PRIMARY KEY,
		name          TEXT NOT NULL UNIQUE,
		type          TEXT NOT NULL,
		url           TEXT NOT NULL,
		secret        BLOB,                       -- AES-256-GCM nonce||ciphertext; NULL when none
		secret_hint   TEXT NOT NULL DEFAULT '',
		enabled       INTEGER NOT NULL DEFAULT 1,
		send_resolved INTEGER NOT NULL DEFAULT 1,
		created_at    INTEGER NOT NULL,
		updated_at    INTEGER NOT NULL
	);
	CREATE TABLE alert_rules (
		id            INTEGER PRIMARY KEY,
		name          TEXT NOT NULL UNIQUE,
		description   TEXT NOT NULL DEFAULT '',
		kind          TEXT NOT NULL,
		enabled       INTEGER NOT NULL,
		severity      TEXT NOT NULL,
		for_ms        INTEGER NOT NULL,
		clear_for_ms  INTEGER NOT NULL,
		scope_pattern TEXT NOT NULL DEFAULT '',
		scope_topic   TEXT NOT NULL DEFAULT '',
		threshold     REAL NOT NULL DEFAULT 0,
		min_status    INTEGER NOT NULL DEFAULT 0,
		created_at    INTEGER NOT NULL,
		updated_at    INTEGER NOT NULL
	);
	CREATE TABLE alert_rule_notifiers (
		rule_id     INTEGER NOT NULL REFERENCES alert_rules(id) ON DELETE CASCADE,
		notifier_id INTEGER NOT NULL REFERENCES alert_notifiers(id) ON DELETE CASCADE,
		PRIMARY KEY (rule_id, notifier_id)
	);
	CREATE TABLE alert_states (
		rule_id      INTEGER NOT NULL,
		subject      TEXT NOT NULL,
		dedup_key    TEXT NOT NULL,
		state        TEXT NOT NULL,               -- pending | firing
		active_since INTEGER NOT NULL,
		fired_at     INTEGER NOT NULL DEFAULT 0,
		clear_since  INTEGER NOT NULL DEFAULT 0,
		flapping     INTEGER NOT NULL DEFAULT 0,
		history      INTEGER NOT NULL DEFAULT 0,  -- last conditions, newest in bit 0
		history_len  INTEGER NOT NULL DEFAULT 0,
		summary      TEXT NOT NULL DEFAULT '',
		details      TEXT NOT NULL DEFAULT '{}',
		labels       TEXT NOT NULL DEFAULT '{}',
		links        TEXT NOT NULL DEFAULT '[]',
		last_eval    INTEGER NOT NULL,
		PRIMARY KEY (rule_id, subject)
	);
	CREATE TABLE alert_history (
		id        INTEGER PRIMARY KEY,
		at        INTEGER NOT NULL,
		rule_id   INTEGER NOT NULL,
		rule_name TEXT NOT NULL,
		subject   TEXT NOT NULL,
		dedup_key TEXT NOT NULL,
		event     TEXT NOT NULL,
		severity  TEXT NOT NULL,
		summary   TEXT NOT NULL,
		details   TEXT NOT NULL DEFAULT '{}'
	);
	CREATE INDEX alert_history_rule ON alert_history(rule_id, id);
	CREATE TABLE alert_deliveries (
		id            INTEGER PRIMARY KEY,
		created_at    INTEGER NOT NULL,
		finished_at   INTEGER NOT NULL DEFAULT 0,
		notifier_id   INTEGER NOT NULL,
		notifier_name TEXT NOT NULL,
		notifier_type TEXT NOT NULL,
		rule_id       INTEGER NOT NULL DEFAULT 0,
		dedup_key     TEXT NOT NULL,
		action        TEXT NOT NULL,              -- trigger | resolve
		test          INTEGER NOT NULL DEFAULT 0,
		status        TEXT NOT NULL,              -- pending | delivered | failed
		attempts      INTEGER NOT NULL DEFAULT 0,
		http_status   INTEGER NOT NULL DEFAULT 0,
		response      TEXT NOT NULL DEFAULT '',
		error         TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX alert_deliveries_notifier ON alert_deliveries(notifier_id, id);`,
	// 2: notifications owed (a transactional outbox): written with the
	// alert state changes that cause them, deleted once delivered, so a
	// console that takes over delivers what the previous one did not.
	`CREATE TABLE alert_outbox (
		id          INTEGER PRIMARY KEY,
		notifier_id INTEGER NOT NULL,
		job         TEXT NOT NULL,               -- the notification, JSON (outboxJob)
		created_at  INTEGER NOT NULL
	);`,
	// 3: acknowledgements and silences; whether an alert's trigger went
	// out (a silence holds it back) and its current value in words; the
	// value that cleared an alert and how long it lasted; the request body
	// of each delivery (secrets redacted) and which delivery a retry repeats.
	`ALTER TABLE alert_states ADD COLUMN notified INTEGER NOT NULL DEFAULT 0;
	UPDATE alert_states SET notified = 1 WHERE state = 'firing';
	ALTER TABLE alert_states ADD COLUMN value TEXT NOT NULL DEFAULT '';
	CREATE TABLE alert_acks (
		rule_id   INTEGER NOT NULL,
		subject   TEXT NOT NULL,
		dedup_key TEXT NOT NULL,
		acked_by  TEXT NOT NULL,
		acked_at  INTEGER NOT NULL,
		comment   TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (rule_id, subject)
	);
	CREATE TABLE alert_silences (
		id         INTEGER PRIMARY KEY,
		rule_id    INTEGER NOT NULL DEFAULT 0,   -- 0: every rule
		subject    TEXT NOT NULL DEFAULT '',     -- '': every subject
		comment    TEXT NOT NULL DEFAULT '',
		created_by TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		ended_by   TEXT NOT NULL DEFAULT '',
		ended_at   INTEGER NOT NULL DEFAULT 0    -- ended before it expired
	);
	CREATE INDEX alert_silences_expiry ON alert_silences(expires_at);
	ALTER TABLE alert_history ADD COLUMN value TEXT NOT NULL DEFAULT '';
	ALTER TABLE alert_history ADD COLUMN duration_ms INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE alert_history ADD COLUMN actor TEXT NOT NULL DEFAULT '';
	ALTER TABLE alert_deliveries ADD COLUMN request TEXT NOT NULL DEFAULT '';
	ALTER TABLE alert_deliveries ADD COLUMN retry_of INTEGER NOT NULL DEFAULT 0;`,
	// 4: the listener an authentication failures rule is limited to.
	`ALTER TABLE alert_rules ADD COLUMN scope_listener TEXT NOT NULL DEFAULT '';`,
}

// The alerting tables shared by every host of a cluster (see
// consoledb.Replicate): acknowledgements and silences too, so an alert
// acknowledged or silenced on one host is so on every host and across a
// failover. The delivery log (alert_deliveries, with each request and
// which delivery a retry repeats) stays on the host that delivered.
var (
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_rules"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_notifiers"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_rule_notifiers"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_states"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_history"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_outbox"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_acks"})
	_ = consoledb.Replicate(consoledb.Table{Name: "alert_silences"})
)

// ErrNotFound is returned for a rule, notifier or alert that does not exist.
var ErrNotFound = errors.New("alerting: not found")

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// ---- rules ----

const ruleCols = `id, name, description, kind, enabled, severity, for_ms, clear_for_ms, scope_pattern, scope_topic, threshold, min_status, created_at, updated_at, scope_listener`

func scanRule(row consoledb.Scanner) (Rule, error) {
	var r Rule
	var enabled int
	var forMS, clearMS, created, updated int64
	var minStatus int
	err := row.Scan(&r.ID, &r.Name, &r.Description, &r.Kind, &enabled, &r.Severity, &forMS, &clearMS,
		&r.Scope.Pattern, &r.Scope.Topic, &r.Threshold, &minStatus, &created, &updated, &r.Scope.Listener)
	r.Enabled = enabled != 0
	r.For = time.Duration(forMS) * time.Millisecond
	r.ClearFor = time.Duration(clearMS) * time.Millisecond
	r.MinStatus = Status(minStatus)
	r.CreatedAt, r.UpdatedAt = fromMS(created), fromMS(updated)
	return r, err
}

// Rules lists every rule, by name.
func (s *Service) Rules(ctx context.Context) ([]Rule, error) {
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT `+ruleCols+` FROM alert_rules ORDER BY name`, scanRule)
	if err != nil {
		return nil, fmt.Errorf("alerting: list rules: %w", err)
	}
	links, err := consoledb.QueryAll(ctx, s.db, `SELECT rule_id, notifier_id FROM alert_rule_notifiers
		WHERE notifier_id IN (SELECT id FROM alert_notifiers) ORDER BY rule_id, notifier_id`,
		func(row consoledb.Scanner) (link [2]int64, err error) {
			err = row.Scan(&link[0], &link[1])
			return link, err
		})
	if err != nil {
		return nil, fmt.Errorf("alerting: list rule notifiers: %w", err)
	}
	byID := make(map[int64]int, len(out))
	for i, r := range out {
		byID[r.ID] = i
	}
	for _, l := range links {
		if i, ok := byID[l[0]]; ok {
			out[i].NotifierIDs = append(out[i].NotifierIDs, l[1])
		}
	}
	return out, nil
}

// Rule returns one rule.
func (s *Service) Rule(ctx context.Context, id int64) (Rule, error) {
	r, err := scanRule(s.db.QueryRowContext(ctx, `SELECT `+ruleCols+` FROM alert_rules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Rule{}, fmt.Errorf("alerting: rule %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Rule{}, fmt.Errorf("alerting: rule %d: %w", id, err)
	}
	r.NotifierIDs, err = consoledb.QueryAll(ctx, s.db, `SELECT notifier_id FROM alert_rule_notifiers
		WHERE rule_id = ? AND notifier_id IN (SELECT id FROM alert_notifiers) ORDER BY notifier_id`,
		scanInt64, id)
	if err != nil {
		return Rule{}, fmt.Errorf("alerting: rule %d: %w", id, err)
	}
	v, err := consoledb.RowVersion(ctx, s.db, "alert_rules", id)
	if err != nil {
		return Rule{}, fmt.Errorf("alerting: rule %d: %w", id, err)
	}
	r.Version = v.Version
	return r, nil
}

func scanInt64(row consoledb.Scanner) (n int64, err error) {
	err = row.Scan(&n)
	return n, err
}

// CreateRule validates and stores a new rule. Invalid input returns a
// *ValidationError naming the fields.
func (s *Service) CreateRule(ctx context.Context, r Rule) (Rule, error) {
	r.Normalize()
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	now := s.now()
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO alert_rules(name, description, kind, enabled, severity, for_ms, clear_for_ms,
			scope_pattern, scope_topic, threshold, min_status, created_at, updated_at, scope_listener) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			r.Name, r.Description, r.Kind, b2i(r.Enabled), r.Severity, r.For.Milliseconds(), r.ClearFor.Milliseconds(),
			r.Scope.Pattern, r.Scope.Topic, r.Threshold, int(r.MinStatus), ms(now), ms(now), r.Scope.Listener)
		if isUnique(err) {
			return &ValidationError{Fields: map[string]string{"name": "a rule with this name exists"}}
		}
		if err != nil {
			return err
		}
		r.ID, _ = res.LastInsertId()
		return setRuleNotifiers(ctx, tx, r.ID, r.NotifierIDs)
	})
	if err != nil {
		return Rule{}, storeErr("create rule", err)
	}
	r.CreatedAt, r.UpdatedAt = fromMS(ms(now)), fromMS(ms(now))
	if v, err := consoledb.RowVersion(ctx, s.db, "alert_rules", r.ID); err == nil {
		r.Version = v.Version
	}
	s.log.Info("alert rule created", "rule", r.ID, "name", r.Name, "kind", r.Kind)
	return r, nil
}

// storeErr wraps a store failure, leaving the errors callers tell apart
// (validation, not found, stale, unavailable) recognisable.
func storeErr(what string, err error) error {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("alerting: %s: %w", what, err)
}

func setRuleNotifiers(ctx context.Context, tx *sql.Tx, ruleID int64, ids []int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_rule_notifiers WHERE rule_id = ?`, ruleID); err != nil {
		return fmt.Errorf("alerting: rule notifiers: %w", err)
	}
	for _, nid := range ids {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM alert_notifiers WHERE id = ?`, nid).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return &ValidationError{Fields: map[string]string{"notifiers": fmt.Sprintf("notifier %d does not exist", nid)}}
		}
		if err != nil {
			return fmt.Errorf("alerting: rule notifiers: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_rule_notifiers(rule_id, notifier_id) VALUES(?, ?)`, ruleID, nid); err != nil {
			return fmt.Errorf("alerting: rule notifiers: %w", err)
		}
	}
	return nil
}

// UpdateRule replaces a rule's settings. Alerts already open for it keep
// their dedup keys; changing the kind or scope resolves subjects that no
// longer apply at the next evaluation.
func (s *Service) UpdateRule(ctx context.Context, r Rule) (Rule, error) {
	r.Normalize()
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	now := s.now()
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		if err := consoledb.CheckVersion(ctx, tx, "alert_rules", r.Version, r.ID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE alert_rules SET name=?, description=?, kind=?, enabled=?, severity=?, for_ms=?, clear_for_ms=?,
			scope_pattern=?, scope_topic=?, threshold=?, min_status=?, updated_at=?, scope_listener=? WHERE id=?`,
			r.Name, r.Description, r.Kind, b2i(r.Enabled), r.Severity, r.For.Milliseconds(), r.ClearFor.Milliseconds(),
			r.Scope.Pattern, r.Scope.Topic, r.Threshold, int(r.MinStatus), ms(now), r.Scope.Listener, r.ID)
		if isUnique(err) {
			return &ValidationError{Fields: map[string]string{"name": "a rule with this name exists"}}
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("rule %d: %w", r.ID, ErrNotFound)
		}
		return setRuleNotifiers(ctx, tx, r.ID, r.NotifierIDs)
	})
	if err != nil {
		return Rule{}, storeErr(fmt.Sprintf("update rule %d", r.ID), err)
	}
	s.log.Info("alert rule updated", "rule", r.ID, "name", r.Name)
	return s.Rule(ctx, r.ID)
}

// SetRuleEnabled enables or disables a rule. A disabled rule's firing alerts
// resolve at the next evaluation.
func (s *Service) SetRuleEnabled(ctx context.Context, id int64, enabled bool) error {
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE alert_rules SET enabled=?, updated_at=? WHERE id=?`, b2i(enabled), ms(s.now()), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("rule %d: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return storeErr(fmt.Sprintf("enable rule %d", id), err)
	}
	s.log.Info("alert rule enabled changed", "rule", id, "enabled", enabled)
	return nil
}

// DeleteRule deletes a rule. Its firing alerts are resolved at once with
// their notifiers (so no incident stays open), and its history is kept.
func (s *Service) DeleteRule(ctx context.Context, id int64) error {
	r, err := s.Rule(ctx, id)
	if err != nil {
		return err
	}
	// Hold the evaluator off while the rule's states are resolved and removed.
	s.evalMu.Lock()
	defer s.evalMu.Unlock()
	states, err := s.loadStates(ctx, id)
	if err != nil {
		return err
	}
	now := s.now()
	resolved := 0
	err = s.db.Change(ctx, func(tx *sql.Tx) error {
		resolved = 0
		for _, st := range states {
			ended := *st
			ended.Summary = truncateRunes(r.Name+": the rule was deleted", maxSummary)
			row := historyRow{at: now, rule: r, st: &ended, event: EventCancelled, value: st.Value, duration: now.Sub(st.ActiveSince)}
			if st.State == StateFiring {
				row.event = EventResolved
				resolved++
				if st.Notified {
					if err := s.queueNotify(ctx, tx, r, st, actionResolve, now); err != nil {
						return err
					}
				}
			}
			if err := insertHistory(ctx, tx, row); err != nil {
				return err
			}
		}
		for _, q := range []string{`DELETE FROM alert_states WHERE rule_id = ?`, `DELETE FROM alert_acks WHERE rule_id = ?`,
			`DELETE FROM alert_silences WHERE rule_id = ?`, `DELETE FROM alert_rules WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return storeErr(fmt.Sprintf("delete rule %d", id), err)
	}
	s.kick()
	s.log.Info("alert rule deleted", "rule", id, "name", r.Name, "resolved", resolved)
	return nil
}

// ---- notifiers ----

// NotifierType is how a notifier delivers.
type NotifierType string

// The notifier types.
const (
	NotifierPagerDuty NotifierType = "pagerduty" // PagerDuty Events API v2
	NotifierWebhook   NotifierType = "webhook"   // Alertmanager webhook payload, version 4
)

// DefaultPagerDutyURL is PagerDuty's Events API v2 endpoint.
const DefaultPagerDutyURL = "https://events.pagerduty.com/v2/enqueue"

// Notifier is a stored notifier as the console shows it: its secret is never
// returned, only whether there is one and its hint.
type Notifier struct {
	ID           int64        `json:"id"`
	Name         string       `json:"name"`
	Type         NotifierType `json:"type"`
	URL          string       `json:"url"`
	Enabled      bool         `json:"enabled"`
	SendResolved bool         `json:"send_resolved"` // webhook: also send resolved notifications (PagerDuty always resolves)
	HasSecret    bool         `json:"has_secret"`
	SecretHint   string       `json:"secret_hint"` // e.g. "••••9f3a"
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	Version      int64        `json:"version"` // in the console's replicated state (set by Notifier)
}

// NotifierInput is what the notifier form submits.
type NotifierInput struct {
	Name string
	Type NotifierType
	// URL is the endpoint; empty means DefaultPagerDutyURL for PagerDuty.
	URL string
	// Secret is the PagerDuty routing (integration) key, or an optional bearer
	// token for a webhook. On update, empty keeps the stored secret.
	Secret string
	// ClearSecret removes a webhook's stored token on update.
	ClearSecret bool
	// KeepSecretOnRetarget lets an update that changes the URL or the type
	// keep the stored secret without entering it again. Without it such an
	// update must carry the secret (or clear a webhook's token), so whoever
	// may edit a notifier but does not know its key cannot send the key to
	// an endpoint of their choosing. The console sets it for admins.
	KeepSecretOnRetarget bool
	Enabled              bool
	SendResolved         bool
	// Version, when not 0, is the notifier's version the edit is based on
	// (Notifier.Version): an update of another version is refused
	// (*consoledb.StaleError).
	Version int64
}

func (in *NotifierInput) normalize() {
	in.Name = strings.TrimSpace(in.Name)
	in.URL = strings.TrimSpace(in.URL)
	in.Secret = strings.TrimSpace(in.Secret)
	if in.Type == NotifierPagerDuty && in.URL == "" {
		in.URL = DefaultPagerDutyURL
	}
}

func (in *NotifierInput) validate(creating, hasSecret bool) error {
	var v ValidationError
	switch {
	case in.Name == "":
		v.add("name", "required")
	case utf8.RuneCountInString(in.Name) > 100:
		v.add("name", "at most 100 characters")
	}
	if in.Type != NotifierPagerDuty && in.Type != NotifierWebhook {
		v.add("type", fmt.Sprintf("must be pagerduty or webhook, not %q", in.Type))
	}
	if u, err := url.Parse(in.URL); in.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("url", "must be an http:// or https:// URL")
	}
	if strings.IndexFunc(in.Secret, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 || len(in.Secret) > 512 {
		v.add("secret", "must be printable, without spaces, at most 512 characters")
	}
	if in.Type == NotifierPagerDuty && in.Secret == "" && (creating || !hasSecret || in.ClearSecret) {
		v.add("secret", "the PagerDuty integration (routing) key is required")
	}
	if in.Type == NotifierPagerDuty && in.Secret != "" && !routingKey.MatchString(in.Secret) {
		v.add("secret", fmt.Sprintf("a PagerDuty routing (integration) key is 32 letters and digits; this one has %d characters", utf8.RuneCountInString(in.Secret)))
	}
	return v.orNil()
}

// routingKey is the form of a PagerDuty Events API v2 routing key: the
// integration key of a service or a ruleset, 32 characters.
var routingKey = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)

const notifierCols = `id, name, type, url, enabled, send_resolved, secret IS NOT NULL, secret_hint, created_at, updated_at`

func scanNotifier(row consoledb.Scanner) (Notifier, error) {
	var n Notifier
	var enabled, sendResolved, hasSecret int
	var created, updated int64
	err := row.Scan(&n.ID, &n.Name, &n.Type, &n.URL, &enabled, &sendResolved, &hasSecret, &n.SecretHint, &created, &updated)
	n.Enabled, n.SendResolved, n.HasSecret = enabled != 0, sendResolved != 0, hasSecret != 0
	n.CreatedAt, n.UpdatedAt = fromMS(created), fromMS(updated)
	return n, err
}

// Notifiers lists the notifiers, by name.
func (s *Service) Notifiers(ctx context.Context) ([]Notifier, error) {
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT `+notifierCols+` FROM alert_notifiers ORDER BY name`, scanNotifier)
	if err != nil {
		return nil, fmt.Errorf("alerting: list notifiers: %w", err)
	}
	return out, nil
}

// Notifier returns one notifier (without its secret).
func (s *Service) Notifier(ctx context.Context, id int64) (Notifier, error) {
	n, err := scanNotifier(s.db.QueryRowContext(ctx, `SELECT `+notifierCols+` FROM alert_notifiers WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Notifier{}, fmt.Errorf("alerting: notifier %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Notifier{}, fmt.Errorf("alerting: notifier %d: %w", id, err)
	}
	v, err := consoledb.RowVersion(ctx, s.db, "alert_notifiers", id)
	if err != nil {
		return Notifier{}, fmt.Errorf("alerting: notifier %d: %w", id, err)
	}
	n.Version = v.Version
	return n, nil
}

// CreateNotifier validates and stores a notifier; its secret is encrypted.
func (s *Service) CreateNotifier(ctx context.Context, in NotifierInput) (Notifier, error) {
	in.normalize()
	if err := in.validate(true, false); err != nil {
		return Notifier{}, err
	}
	var sealed []byte
	hint := ""
	if in.Secret != "" {
		sealed, hint = s.sealer.seal(in.Secret), secretHint(in.Secret)
	}
	now := ms(s.now())
	var id int64
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO alert_notifiers(name, type, url, secret, secret_hint, enabled, send_resolved, created_at, updated_at)
			VALUES(?,?,?,?,?,?,?,?,?)`, in.Name, in.Type, in.URL, sealed, hint, b2i(in.Enabled), b2i(in.SendResolved), now, now)
		if isUnique(err) {
			return &ValidationError{Fields: map[string]string{"name": "a notifier with this name exists"}}
		}
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return Notifier{}, storeErr("create notifier", err)
	}
	s.log.Info("notifier created", "notifier", id, "name", in.Name, "type", in.Type)
	return s.Notifier(ctx, id)
}

// UpdateNotifier changes a notifier. An empty Secret keeps the stored one.
func (s *Service) UpdateNotifier(ctx context.Context, id int64, in NotifierInput) (Notifier, error) {
	old, err := s.Notifier(ctx, id)
	if err != nil {
		return Notifier{}, err
	}
	in.normalize()
	if err := in.validate(false, old.HasSecret); err != nil {
		return Notifier{}, err
	}
	if old.HasSecret && in.Secret == "" && !in.ClearSecret && !in.KeepSecretOnRetarget && (in.URL != old.URL || in.Type != old.Type) {
		msg := "the endpoint or type changed: enter the key again, it is only sent where it was entered for"
		if in.Type == NotifierWebhook {
			msg = "the endpoint or type changed: enter the token again (or remove it), it is only sent where it was entered for"
		}
		return Notifier{}, &ValidationError{Fields: map[string]string{"secret": msg}}
	}
	q := `UPDATE alert_notifiers SET name=?, type=?, url=?, enabled=?, send_resolved=?, updated_at=?`
	args := []any{in.Name, in.Type, in.URL, b2i(in.Enabled), b2i(in.SendResolved), ms(s.now())}
	switch {
	case in.Secret != "":
		q += `, secret=?, secret_hint=?`
		args = append(args, s.sealer.seal(in.Secret), secretHint(in.Secret))
	case in.ClearSecret:
		q += `, secret=NULL, secret_hint=''`
	}
	args = append(args, id)
	err = s.db.Change(ctx, func(tx *sql.Tx) error {
		if err := consoledb.CheckVersion(ctx, tx, "alert_notifiers", in.Version, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, q+` WHERE id=?`, args...)
		if isUnique(err) {
			return &ValidationError{Fields: map[string]string{"name": "a notifier with this name exists"}}
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("notifier %d: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return Notifier{}, storeErr(fmt.Sprintf("update notifier %d", id), err)
	}
	s.log.Info("notifier updated", "notifier", id, "name", in.Name, "secret_changed", in.Secret != "" || in.ClearSecret)
	return s.Notifier(ctx, id)
}

// DeleteNotifier deletes a notifier; rules stop using it. Its delivery log
// is kept.
func (s *Service) DeleteNotifier(ctx context.Context, id int64) error {
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM alert_notifiers WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("notifier %d: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return storeErr(fmt.Sprintf("delete notifier %d", id), err)
	}
	s.log.Info("notifier deleted", "notifier", id)
	return nil
}

// notifierWithSecret loads a notifier and decrypts its secret, for sending.
func (s *Service) notifierWithSecret(ctx context.Context, id int64) (Notifier, string, error) {
	n, err := s.Notifier(ctx, id)
	if err != nil {
		return Notifier{}, "", err
	}
	var sealed []byte
	if err := s.db.QueryRowContext(ctx, `SELECT secret FROM alert_notifiers WHERE id = ?`, id).Scan(&sealed); err != nil {
		return Notifier{}, "", fmt.Errorf("alerting: notifier %d: %w", id, err)
	}
	if sealed == nil {
		return n, "", nil
	}
	secret, err := s.sealer.open(sealed)
	if err != nil {
		return n, "", fmt.Errorf("notifier %q: %w", n.Name, err)
	}
	return n, secret, nil
}

// ---- alerts, history, deliveries ----

// State is an alert's state.
type State string

// The states of an alert. Resolved alerts are history, not state.
const (
	StatePending State = "pending"
	StateFiring  State = "firing"
)

// The events of the history.
const (
	EventPending   = "pending"   // the condition started to hold
	EventCancelled = "cancelled" // it stopped holding before For passed
	EventFiring    = "firing"    // For passed: notifiers triggered
	EventResolved  = "resolved"  // the condition cleared for ClearFor (or the rule went away): notifiers resolved
	EventFlapping  = "flapping"  // the condition changes too often: notifications held
	EventSteady    = "steady"    // flapping stopped
	// EventAcknowledged: an operator acknowledged the firing alert
	// (PagerDuty got an acknowledge event).
	EventAcknowledged = "acknowledged"
)

// Link points back to the console.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// Alert is an open (pending or firing) alert.
type Alert struct {
	RuleID   int64    `json:"rule_id"`
	RuleName string   `json:"rule_name"`
	Kind     Kind     `json:"kind"`
	Severity Severity `json:"severity"`
	// Subject is "<type>:<name>" (group:billing, topic:orders, broker:3, ...).
	Subject     string    `json:"subject"`
	DedupKey    string    `json:"dedup_key"`
	State       State     `json:"state"`
	ActiveSince time.Time `json:"active_since"`         // the condition has held since
	FiredAt     time.Time `json:"fired_at,omitzero"`    // zero while pending
	ClearSince  time.Time `json:"clear_since,omitzero"` // firing, condition clear since (waiting ClearFor); zero otherwise
	Flapping    bool      `json:"flapping"`
	// Notified: the trigger went out (a silence or flapping may hold it).
	Notified bool              `json:"notified"`
	Summary  string            `json:"summary"`
	Value    string            `json:"value"` // the value at the last round, in words
	Details  map[string]any    `json:"details"`
	Labels   map[string]string `json:"labels"`
	Links    []Link            `json:"links"`
	LastEval time.Time         `json:"last_eval"`
	// AckedBy is who acknowledged the alert ("" when nobody has), AckedAt
	// when, AckComment what they wrote.
	AckedBy    string    `json:"acked_by,omitempty"`
	AckedAt    time.Time `json:"acked_at,omitzero"`
	AckComment string    `json:"ack_comment,omitempty"`
	// Silence is the active silence that covers the alert, if any.
	Silence *Silence `json:"silence,omitempty"`
}

// Alerts lists the open alerts, firing first, then by rule name and subject.
func (s *Service) Alerts(ctx context.Context) ([]Alert, error) {
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT st.rule_id, r.name, r.kind, r.severity, st.subject, st.dedup_key, st.state,
		st.active_since, st.fired_at, st.clear_since, st.flapping, st.summary, st.details, st.labels, st.links, st.last_eval,
		st.notified, st.value, coalesce(a.acked_by, ''), coalesce(a.acked_at, 0), coalesce(a.comment, '')
		FROM alert_states st JOIN alert_rules r ON r.id = st.rule_id
		LEFT JOIN alert_acks a ON a.rule_id = st.rule_id AND a.subject = st.subject
		ORDER BY st.state = 'firing' DESC, r.name, st.subject`, func(row consoledb.Scanner) (Alert, error) {
		var a Alert
		var since, fired, clear, last, acked int64
		var flapping, notified int
		var details, labels, links string
		if err := row.Scan(&a.RuleID, &a.RuleName, &a.Kind, &a.Severity, &a.Subject, &a.DedupKey, &a.State,
			&since, &fired, &clear, &flapping, &a.Summary, &details, &labels, &links, &last,
			&notified, &a.Value, &a.AckedBy, &acked, &a.AckComment); err != nil {
			return Alert{}, err
		}
		a.ActiveSince, a.FiredAt, a.ClearSince, a.LastEval, a.AckedAt = fromMS(since), fromMS(fired), fromMS(clear), fromMS(last), fromMS(acked)
		a.Flapping, a.Notified = flapping != 0, notified != 0
		json.Unmarshal([]byte(details), &a.Details)
		json.Unmarshal([]byte(labels), &a.Labels)
		json.Unmarshal([]byte(links), &a.Links)
		return a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("alerting: list alerts: %w", err)
	}
	if len(out) > 0 {
		silences, err := s.activeSilences(ctx, s.now())
		if err != nil {
			return nil, err
		}
		for i := range out {
			if x := silences.match(out[i].RuleID, out[i].Subject); x != nil {
				cp := *x
				out[i].Silence = &cp
			}
		}
	}
	return out, nil
}

// HistoryEntry is one state change of an alert.
type HistoryEntry struct {
	ID       int64          `json:"id"`
	At       time.Time      `json:"at"`
	RuleID   int64          `json:"rule_id"`
	RuleName string         `json:"rule_name"`
	Subject  string         `json:"subject"`
	DedupKey string         `json:"dedup_key"`
	Event    string         `json:"event"` // EventPending, EventFiring, ...
	Severity Severity       `json:"severity"`
	Summary  string         `json:"summary"`
	Details  map[string]any `json:"details"`
	// Value is the rule's value for the subject at the event: for
	// resolved and cancelled entries, the value that cleared it.
	Value string `json:"value,omitempty"`
	// Duration is, for resolved, cancelled and acknowledged entries, how
	// long the alert had been open (since its condition began); DurationMS
	// is the same in milliseconds, for JSON.
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	// Actor is who acknowledged.
	Actor string `json:"actor,omitempty"`
}

// HistoryQuery filters History. Zero fields do not filter; Limit defaults
// to 100 (at most 1000). BeforeID pages backwards: pass the last ID seen.
type HistoryQuery struct {
	RuleID   int64
	Subject  string
	BeforeID int64
	Limit    int
}

// History lists alert state changes, newest first.
func (s *Service) History(ctx context.Context, q HistoryQuery) ([]HistoryEntry, error) {
	where, args := []string{"1=1"}, []any{}
	if q.RuleID != 0 {
		where, args = append(where, "rule_id = ?"), append(args, q.RuleID)
	}
	if q.Subject != "" {
		where, args = append(where, "subject = ?"), append(args, q.Subject)
	}
	if q.BeforeID != 0 {
		where, args = append(where, "id < ?"), append(args, q.BeforeID)
	}
	args = append(args, limit(q.Limit))
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT id, at, rule_id, rule_name, subject, dedup_key, event, severity, summary, details,
		value, duration_ms, actor FROM alert_history WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, func(row consoledb.Scanner) (HistoryEntry, error) {
		var h HistoryEntry
		var at, dur int64
		var details string
		if err := row.Scan(&h.ID, &at, &h.RuleID, &h.RuleName, &h.Subject, &h.DedupKey, &h.Event, &h.Severity, &h.Summary, &details,
			&h.Value, &dur, &h.Actor); err != nil {
			return HistoryEntry{}, err
		}
		h.At, h.Duration, h.DurationMS = fromMS(at), time.Duration(dur)*time.Millisecond, dur
		json.Unmarshal([]byte(details), &h.Details)
		return h, nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("alerting: history: %w", err)
	}
	return out, nil
}

// SubjectEvents lists the history entries of every rule about subject
// between since and until, oldest first, at most 500: the markers of a
// subject's timeline (fired, resolved, acknowledged).
func (s *Service) SubjectEvents(ctx context.Context, subject string, since, until time.Time) ([]HistoryEntry, error) {
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT id, at, rule_id, rule_name, subject, dedup_key, event, severity, summary, '{}',
		value, duration_ms, actor FROM alert_history WHERE subject = ? AND at >= ? AND at < ? AND event IN ('firing', 'resolved', 'acknowledged')
		ORDER BY at LIMIT 500`, func(row consoledb.Scanner) (HistoryEntry, error) {
		var h HistoryEntry
		var at, dur int64
		var details string
		if err := row.Scan(&h.ID, &at, &h.RuleID, &h.RuleName, &h.Subject, &h.DedupKey, &h.Event, &h.Severity, &h.Summary, &details,
			&h.Value, &dur, &h.Actor); err != nil {
			return HistoryEntry{}, err
		}
		h.At, h.Duration, h.DurationMS = fromMS(at), time.Duration(dur)*time.Millisecond, dur
		return h, nil
	}, subject, ms(since), ms(until))
	if err != nil {
		return nil, fmt.Errorf("alerting: events of %s: %w", subject, err)
	}
	return out, nil
}

func limit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}

// Delivery is one notification's delivery log entry.
type Delivery struct {
	ID           int64        `json:"id"`
	CreatedAt    time.Time    `json:"created_at"`
	FinishedAt   time.Time    `json:"finished_at,omitzero"`
	NotifierID   int64        `json:"notifier_id"`
	NotifierName string       `json:"notifier_name"`
	NotifierType NotifierType `json:"notifier_type"`
	RuleID       int64        `json:"rule_id"` // 0 for test events
	DedupKey     string       `json:"dedup_key"`
	Action       string       `json:"action"` // trigger, acknowledge or resolve
	Test         bool         `json:"test"`
	Status       string       `json:"status"` // pending, delivered or failed
	Attempts     int          `json:"attempts"`
	HTTPStatus   int          `json:"http_status"` // of the last attempt; 0 when none answered
	Response     string       `json:"response"`    // body of the last answer, truncated, secrets removed
	Error        string       `json:"error"`
	// Request is the body that was sent, with the routing key replaced by
	// "[redacted]".
	Request string `json:"request"`
	// RetryOf is the delivery this one repeats (the delivery log's retry
	// button); 0 for a first delivery.
	RetryOf int64 `json:"retry_of,omitempty"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// DeliveryQuery filters Deliveries like HistoryQuery.
type DeliveryQuery struct {
	NotifierID int64
	RuleID     int64
	Status     string
	BeforeID   int64
	Limit      int
}

// Deliveries lists the delivery log, newest first.
func (s *Service) Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error) {
	where, args := []string{"1=1"}, []any{}
	if q.NotifierID != 0 {
		where, args = append(where, "notifier_id = ?"), append(args, q.NotifierID)
	}
	if q.RuleID != 0 {
		where, args = append(where, "rule_id = ?"), append(args, q.RuleID)
	}
	if q.Status != "" {
		where, args = append(where, "status = ?"), append(args, q.Status)
	}
	if q.BeforeID != 0 {
		where, args = append(where, "id < ?"), append(args, q.BeforeID)
	}
	args = append(args, limit(q.Limit))
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT `+deliveryCols+`
		FROM alert_deliveries WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, scanDelivery, args...)
	if err != nil {
		return nil, fmt.Errorf("alerting: deliveries: %w", err)
	}
	return out, nil
}

const deliveryCols = `id, created_at, finished_at, notifier_id, notifier_name, notifier_type, rule_id,
		dedup_key, action, test, status, attempts, http_status, response, error, request, retry_of`

func scanDelivery(row consoledb.Scanner) (Delivery, error) {
	var d Delivery
	var created, finished int64
	var test int
	err := row.Scan(&d.ID, &created, &finished, &d.NotifierID, &d.NotifierName, &d.NotifierType, &d.RuleID,
		&d.DedupKey, &d.Action, &test, &d.Status, &d.Attempts, &d.HTTPStatus, &d.Response, &d.Error, &d.Request, &d.RetryOf)
	d.CreatedAt, d.FinishedAt, d.Test = fromMS(created), fromMS(finished), test != 0
	return d, err
}

// Delivery returns one entry of the delivery log.
func (s *Service) Delivery(ctx context.Context, id int64) (Delivery, error) {
	d, err := scanDelivery(s.db.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM alert_deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Delivery{}, fmt.Errorf("alerting: delivery %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("alerting: delivery %d: %w", id, err)
	}
	return d, nil
}

func (s *Service) insertDelivery(ctx context.Context, d *Delivery) error {
	res, err := s.db.ExecContext(ctx, `INSERT INTO alert_deliveries(created_at, finished_at, notifier_id, notifier_name, notifier_type,
		rule_id, dedup_key, action, test, status, attempts, http_status, response, error, request, retry_of) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		ms(d.CreatedAt), ms(d.FinishedAt), d.NotifierID, d.NotifierName, d.NotifierType, d.RuleID, d.DedupKey, d.Action,
		b2i(d.Test), d.Status, d.Attempts, d.HTTPStatus, d.Response, d.Error, d.Request, d.RetryOf)
	if err != nil {
		return fmt.Errorf("alerting: delivery log: %w", err)
	}
	d.ID, _ = res.LastInsertId()
	return nil
}

func (s *Service) finishDelivery(ctx context.Context, d *Delivery) error {
	_, err := s.db.ExecContext(ctx, `UPDATE alert_deliveries SET finished_at=?, status=?, attempts=?, http_status=?, response=?, error=? WHERE id=?`,
		ms(d.FinishedAt), d.Status, d.Attempts, d.HTTPStatus, d.Response, d.Error, d.ID)
	if err != nil {
		return fmt.Errorf("alerting: delivery log: %w", err)
	}
	return nil
}

// prune keeps the newest keep rows of history (shared) and of this host's
// delivery log.
func (s *Service) prune(ctx context.Context, keep int) error {
	const q = ` WHERE id <= (SELECT id FROM %[1]s ORDER BY id DESC LIMIT 1 OFFSET ?)`
	if err := s.db.Change(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`DELETE FROM alert_history`+q, "alert_history"), keep)
		return err
	}); err != nil {
		return fmt.Errorf("alerting: prune alert_history: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(`DELETE FROM alert_deliveries`+q, "alert_deliveries"), keep); err != nil {
		return fmt.Errorf("alerting: prune alert_deliveries: %w", err)
	}
	return nil
}

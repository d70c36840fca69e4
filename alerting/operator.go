package alerting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-io/sluice/consoledb"
)

// What an operator does with alerts besides writing rules: acknowledge a
// firing alert (PagerDuty gets an acknowledge event), silence a rule or a
// subject for a while (triggers are held back until the silence ends),
// preview a rule against the cluster before saving it, and read every
// consumer group's Burrow status. Acknowledgements and silences are rows of
// their own tables (alert_acks keyed by rule and subject, alert_silences by
// id), written only by the functions below.

// ---- group statuses ----

// GroupHealth is a consumer group's Burrow status as the last evaluation
// round computed it, over all of its partitions.
type GroupHealth struct {
	Status Status `json:"status"`
	// Partitions counts the group's partitions by status, OK included.
	Partitions map[string]int `json:"partitions"`
}

func groupStatuses(lag []GroupLag, part map[windowKey]Status) map[string]GroupHealth {
	out := make(map[string]GroupHealth, len(lag))
	for _, g := range lag {
		if g.Err != nil {
			continue
		}
		h := GroupHealth{Partitions: map[string]int{}}
		statuses := make([]Status, 0, len(g.Partitions))
		for _, p := range g.Partitions {
			st := part[windowKey{g.Group, p.Topic, p.Partition}]
			if st == StatusNotFound {
				st = StatusOK // no commit to judge yet
			}
			statuses = append(statuses, st)
			h.Partitions[st.String()]++
		}
		h.Status = GroupStatus(statuses)
		out[g.Group] = h
	}
	return out
}

func (s *Service) setGroupStatuses(m map[string]GroupHealth, at time.Time) {
	s.smu.Lock()
	s.groups, s.groupsAt = m, at
	s.smu.Unlock()
}

// GroupStatuses returns every consumer group's Burrow status from the last
// evaluation round (the same evaluation group_status rules use) and when
// that was; nil before the first round, and on a console that does not
// evaluate. The map must not be modified.
func (s *Service) GroupStatuses() (map[string]GroupHealth, time.Time) {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.groups, s.groupsAt
}

// ---- acknowledgements ----

// ErrNotFiring is returned when acknowledging an alert that is not firing
// (pending, or gone).
var ErrNotFiring = errors.New("alerting: only a firing alert can be acknowledged")

// maxComment bounds the comment of an acknowledgement or a silence.
const maxComment = 500

// Acknowledge records that by has seen the firing alert of rule ruleID on
// subject and is on it. The PagerDuty notifiers of the rule that were sent
// its trigger get an acknowledge event (same dedup_key); webhooks have no
// such event. Acknowledging again changes nothing. The acknowledgement ends
// with the alert: the next incident of the rule and subject starts
// unacknowledged.
func (s *Service) Acknowledge(ctx context.Context, ruleID int64, subject, by, comment string) error {
	comment = strings.TrimSpace(comment)
	if utf8.RuneCountInString(comment) > maxComment {
		return &ValidationError{Fields: map[string]string{"comment": fmt.Sprintf("at most %d characters", maxComment)}}
	}
	r, err := s.Rule(ctx, ruleID)
	if err != nil {
		return err
	}
	now := s.now()
	var st *alertState
	acked := false
	// The state is read inside the change (under the console's write lock,
	// caught up), so an evaluation round cannot resolve the alert between
	// the check and the insert. The acknowledge event goes through the
	// notification outbox like the round's, so the console that delivers
	// sends it, whichever host the operator acknowledged on.
	err = s.db.Change(ctx, func(tx *sql.Tx) error {
		acked = false
		var err error
		st, err = scanState(tx.QueryRowContext(ctx, `SELECT rule_id, subject, dedup_key, state, active_since, fired_at, clear_since,
			flapping, history, history_len, summary, details, labels, links, last_eval, notified, value
			FROM alert_states WHERE rule_id = ? AND subject = ?`, ruleID, subject))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("alerting: alert of rule %d on %s: %w", ruleID, subject, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if st.State != StateFiring {
			return ErrNotFiring
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO alert_acks(rule_id, subject, dedup_key, acked_by, acked_at, comment) VALUES(?,?,?,?,?,?)
			ON CONFLICT(rule_id, subject) DO NOTHING`, ruleID, subject, st.DedupKey, by, ms(now), comment)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // acknowledged already
		}
		acked = true
		summary := r.Name + ": acknowledged by " + by
		if comment != "" {
			summary += " (" + comment + ")"
		}
		if err := insertHistory(ctx, tx, historyRow{at: now, rule: r, st: st, event: EventAcknowledged, summary: truncateRunes(summary, maxSummary),
			value: st.Value, duration: now.Sub(st.ActiveSince), actor: by}); err != nil {
			return err
		}
		if st.Notified {
			return s.queueNotify(ctx, tx, r, st, actionAcknowledge, now)
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotFiring) {
		return err
	}
	if err != nil {
		return storeErr("acknowledge", err)
	}
	if !acked {
		return nil
	}
	s.log.Info("alert acknowledged", "rule", ruleID, "subject", subject, "by", by)
	if st.Notified {
		s.kick()
	}
	return nil
}

// ---- silences ----

// Silence holds back the triggers of a rule's alerts (RuleID), of every
// alert about a subject (Subject), or of one rule on one subject, until it
// expires or is ended. Alerts still show, marked silenced; a silenced alert
// that still fires when the silence ends is notified then. Resolves of
// alerts already notified are never held back.
type Silence struct {
	ID        int64     `json:"id"`
	RuleID    int64     `json:"rule_id"`   // 0: every rule
	RuleName  string    `json:"rule_name"` // filled when listed
	Subject   string    `json:"subject"`   // "": every subject
	Comment   string    `json:"comment"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	EndedBy   string    `json:"ended_by,omitempty"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Active reports whether the silence holds triggers back at now.
func (x Silence) Active(now time.Time) bool { return x.EndedAt.IsZero() && now.Before(x.ExpiresAt) }

// Matches reports whether the silence covers rule ruleID on subject.
func (x Silence) Matches(ruleID int64, subject string) bool {
	return (x.RuleID == 0 || x.RuleID == ruleID) && (x.Subject == "" || x.Subject == subject)
}

// MaxSilence is the longest a silence may last.
const MaxSilence = 30 * 24 * time.Hour

var subjectTypes = []string{"group", "topic", "broker", "logdir", "comparison"}

// CreateSilence validates and stores a silence. Invalid input returns a
// *ValidationError with Fields rule, subject, expires and comment.
func (s *Service) CreateSilence(ctx context.Context, x Silence) (Silence, error) {
	now := s.now()
	x.Subject = strings.TrimSpace(x.Subject)
	x.Comment = strings.TrimSpace(x.Comment)
	var v ValidationError
	if x.RuleID == 0 && x.Subject == "" {
		v.add("rule", "choose a rule, a subject, or both")
	}
	if x.RuleID < 0 {
		v.add("rule", "unknown rule")
	} else if x.RuleID > 0 {
		if _, err := s.Rule(ctx, x.RuleID); errors.Is(err, ErrNotFound) {
			v.add("rule", fmt.Sprintf("rule %d does not exist", x.RuleID))
		} else if err != nil {
			return Silence{}, err
		}
	}
	if x.Subject != "" {
		typ, name, ok := strings.Cut(x.Subject, ":")
		switch {
		case !ok || name == "" || !containsString(subjectTypes, typ):
			v.add("subject", "write type:name, e.g. group:billing or topic:orders (types: "+strings.Join(subjectTypes, ", ")+")")
		case len(x.Subject) > 1000 || !utf8.ValidString(x.Subject):
			v.add("subject", "at most 1000 characters")
		}
	}
	switch {
	case !x.ExpiresAt.After(now):
		v.add("expires", "must be in the future")
	case x.ExpiresAt.Sub(now) > MaxSilence:
		v.add("expires", "at most 30 days from now")
	}
	if utf8.RuneCountInString(x.Comment) > maxComment {
		v.add("comment", fmt.Sprintf("at most %d characters", maxComment))
	}
	if err := v.orNil(); err != nil {
		return Silence{}, err
	}
	x.CreatedAt, x.EndedAt, x.EndedBy = now, time.Time{}, ""
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO alert_silences(rule_id, subject, comment, created_by, created_at, expires_at)
			VALUES(?,?,?,?,?,?)`, x.RuleID, x.Subject, x.Comment, x.CreatedBy, ms(now), ms(x.ExpiresAt))
		if err != nil {
			return err
		}
		x.ID, _ = res.LastInsertId()
		return nil
	})
	if err != nil {
		return Silence{}, storeErr("create silence", err)
	}
	s.log.Info("alert silence created", "silence", x.ID, "rule", x.RuleID, "subject", x.Subject, "expires", x.ExpiresAt, "by", x.CreatedBy)
	return s.silence(ctx, x.ID)
}

// EndSilence ends a silence before it expires; the triggers it held back go
// out at the next evaluation round.
func (s *Service) EndSilence(ctx context.Context, id int64, by string) error {
	var n int64
	now := s.now()
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE alert_silences SET ended_at = ?, ended_by = ? WHERE id = ? AND ended_at = 0 AND expires_at > ?`,
			ms(now), by, id, ms(now))
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return storeErr(fmt.Sprintf("end silence %d", id), err)
	}
	if n == 0 {
		if _, err := s.silence(ctx, id); err != nil {
			return err
		}
		return nil // over already
	}
	s.log.Info("alert silence ended", "silence", id, "by", by)
	return nil
}

const silenceCols = `x.id, x.rule_id, coalesce(r.name, ''), x.subject, x.comment, x.created_by, x.created_at, x.expires_at, x.ended_by, x.ended_at`

func scanSilence(row consoledb.Scanner) (Silence, error) {
	var x Silence
	var created, expires, ended int64
	err := row.Scan(&x.ID, &x.RuleID, &x.RuleName, &x.Subject, &x.Comment, &x.CreatedBy, &created, &expires, &x.EndedBy, &ended)
	x.CreatedAt, x.ExpiresAt, x.EndedAt = fromMS(created), fromMS(expires), fromMS(ended)
	return x, err
}

func (s *Service) silence(ctx context.Context, id int64) (Silence, error) {
	x, err := scanSilence(s.db.QueryRowContext(ctx, `SELECT `+silenceCols+` FROM alert_silences x LEFT JOIN alert_rules r ON r.id = x.rule_id
		WHERE x.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Silence{}, fmt.Errorf("alerting: silence %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Silence{}, fmt.Errorf("alerting: silence %d: %w", id, err)
	}
	return x, nil
}

// Silences lists silences, the active ones first (soonest to expire
// first), then the recent others, newest first; at most limit (default 100,
// at most 1000).
func (s *Service) Silences(ctx context.Context, limitN int) ([]Silence, error) {
	now := ms(s.now())
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT `+silenceCols+` FROM alert_silences x LEFT JOIN alert_rules r ON r.id = x.rule_id
		ORDER BY (x.ended_at = 0 AND x.expires_at > ?) DESC,
		CASE WHEN x.ended_at = 0 AND x.expires_at > ? THEN x.expires_at ELSE -x.id END
		LIMIT ?`, scanSilence, now, now, limit(limitN))
	if err != nil {
		return nil, fmt.Errorf("alerting: list silences: %w", err)
	}
	return out, nil
}

// silenceSet is the silences active in one round.
type silenceSet []Silence

// match returns the silence covering rule ruleID on subject, or nil.
func (ss silenceSet) match(ruleID int64, subject string) *Silence {
	for i := range ss {
		if ss[i].Matches(ruleID, subject) {
			return &ss[i]
		}
	}
	return nil
}

func (s *Service) activeSilences(ctx context.Context, now time.Time) (silenceSet, error) {
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT `+silenceCols+` FROM alert_silences x LEFT JOIN alert_rules r ON r.id = x.rule_id
		WHERE x.ended_at = 0 AND x.expires_at > ? ORDER BY x.expires_at DESC`, scanSilence, ms(now))
	if err != nil {
		return nil, fmt.Errorf("alerting: active silences: %w", err)
	}
	return out, nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ---- previewing a rule ----

// SubjectValue is a rule's value for one subject now.
type SubjectValue struct {
	Subject string `json:"subject"`
	Value   string `json:"value"`   // "210 records", "WARN", "down"
	Summary string `json:"summary"` // the sentence a notification would carry
	Holds   bool   `json:"holds"`   // the condition holds now
	State   State  `json:"state,omitempty"`
}

// RulePreview is what a rule would see if it were evaluated now.
type RulePreview struct {
	Subjects []SubjectValue `json:"subjects"` // holding first, then by subject; at most MaxPreviewSubjects
	Total    int            `json:"total"`    // subjects in scope
	Holding  int            `json:"holding"`  // of which the condition holds
	// SourceError is set when the rule's input could not be read.
	SourceError string `json:"source_error,omitempty"`
	// Note says what the preview cannot know (a status needing a few
	// rounds of commits, a produce rate needing two rounds).
	Note string `json:"note,omitempty"`
}

// MaxPreviewSubjects bounds the subjects a preview lists.
const MaxPreviewSubjects = 200

// PreviewRule evaluates r against the cluster now, without storing
// anything or notifying: each subject in its scope with its value and
// whether the condition holds. Invalid rules return a *ValidationError. A
// group_status rule reads the Burrow windows the evaluator keeps, so it
// sees what the next round would.
func (s *Service) PreviewRule(ctx context.Context, r Rule) (RulePreview, error) {
	r.Normalize()
	if err := r.Validate(); err != nil {
		return RulePreview{}, err
	}
	ki, _ := kindInfo(r.Kind)
	r.Enabled = true
	var pv RulePreview
	in := s.eval.gather(ctx, map[string]bool{ki.Source: true})
	if err := in.errs[ki.Source]; err != nil {
		pv.SourceError = err.Error()
		pv.Subjects = []SubjectValue{}
		return pv, nil
	}
	var states map[string]*alertState
	if r.ID != 0 {
		sts, err := s.loadStates(ctx, r.ID)
		if err != nil {
			return RulePreview{}, err
		}
		states = make(map[string]*alertState, len(sts))
		for _, st := range sts {
			states[st.Subject] = st
		}
	}
	now := s.now()
	s.eval.mu.Lock()
	s.eval.derive(&in, []Rule{r}, nil, now, true)
	obs := s.eval.observe(r, &in, states, now)
	noWindows := len(s.eval.windows.m) == 0
	s.eval.mu.Unlock()
	switch {
	case r.Kind == KindGroupStatus && noWindows:
		pv.Note = "Group statuses need a few evaluation rounds of commits; until then every group reads OK."
	case ki.Source == sourceBrokerMetrics && ki.Kind != KindHangingTxn:
		pv.Note = "Rates and progress are measured between evaluation rounds: a host the evaluator has read only once reads “not measured yet”, and a reassignment counts as stuck only after it was seen unchanged for the threshold."
	case r.Kind == KindProduceStopped:
		pv.Note = "A topic counts as stopped only after the evaluator has seen it receive records; a topic seen for the first time reads “not measured yet”."
	}
	for _, h := range in.hosts {
		if h.Err != nil {
			pv.Note = strings.TrimSpace(pv.Note + " " + fmt.Sprintf("Broker %d is left out: %v.", h.Broker, h.Err))
		}
	}
	for _, o := range obs {
		if o.unknown {
			continue
		}
		sv := SubjectValue{Subject: o.subject, Value: o.value, Summary: o.summary, Holds: o.holds}
		if st := states[o.subject]; st != nil {
			sv.State = st.State
		}
		pv.Subjects = append(pv.Subjects, sv)
		if o.holds {
			pv.Holding++
		}
	}
	pv.Total = len(pv.Subjects)
	sort.Slice(pv.Subjects, func(i, j int) bool {
		a, b := pv.Subjects[i], pv.Subjects[j]
		if a.Holds != b.Holds {
			return a.Holds
		}
		return a.Subject < b.Subject
	})
	if len(pv.Subjects) > MaxPreviewSubjects {
		pv.Subjects = pv.Subjects[:MaxPreviewSubjects]
	}
	if pv.Subjects == nil {
		pv.Subjects = []SubjectValue{}
	}
	return pv, nil
}

// OpenCounts counts the firing alerts and, of them, those nobody has
// acknowledged: the Alerts navigation entry's badge (a quick query, run on
// every page).
func (s *Service) OpenCounts(ctx context.Context) (firing, unacknowledged int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), count(*) - count(a.rule_id) FROM alert_states st
		LEFT JOIN alert_acks a ON a.rule_id = st.rule_id AND a.subject = st.subject WHERE st.state = 'firing'`).Scan(&firing, &unacknowledged)
	if err != nil {
		return 0, 0, fmt.Errorf("alerting: count alerts: %w", err)
	}
	return firing, unacknowledged, nil
}

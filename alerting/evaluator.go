package alerting

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/metrics"
)

// Flap damping: the last flapWindow conditions of every rule+subject are
// kept; when they changed flapStart times or more, the alert is flapping and
// its notified state is frozen (a firing alert stays firing, a quiet one
// stays quiet) until the changes fall to flapStop or fewer.
const (
	flapWindow = 10
	flapStart  = 3
	flapStop   = 1
)

// alertState is one rule+subject alert, as stored in alert_states.
type alertState struct {
	RuleID      int64
	Subject     string
	DedupKey    string
	State       State
	ActiveSince time.Time
	FiredAt     time.Time
	ClearSince  time.Time
	Flapping    bool
	History     uint32 // conditions, newest in bit 0
	HistoryLen  int
	Summary     string
	Details     map[string]any
	Labels      map[string]string
	Links       []Link
	LastEval    time.Time
}

// observation is a subject whose condition holds in this round.
type observation struct {
	subject string
	summary string
	details map[string]any
	labels  map[string]string
	links   []Link
	// unknown: the source could not say (per-group error); leave the
	// subject's alert as it is.
	unknown bool
}

// flap tracks the conditions of subjects that have no stored state (a
// resolved alert that may come back).
type flap struct {
	history  uint32
	n        int
	flapping bool
}

type flapKey struct {
	rule    int64
	subject string
}

// evaluator is the state the evaluation rounds carry between them. Owned by
// whoever holds Service.evalMu.
type evaluator struct {
	s       *Service
	windows *windows
	flaps   map[flapKey]*flap

	// produce_stopped bookkeeping, per topic
	prevIn     map[string]int64
	lastChange map[string]time.Time
	armed      map[string]bool

	rounds int
}

func newEvaluator(s *Service) *evaluator {
	return &evaluator{
		s:          s,
		windows:    newWindows(s.cfg.BurrowWindow, s.cfg.Interval/2),
		flaps:      map[flapKey]*flap{},
		prevIn:     map[string]int64{},
		lastChange: map[string]time.Time{},
		armed:      map[string]bool{},
	}
}

// inputs is what the sources said in one round.
type inputs struct {
	lag         []GroupLag
	health      Health
	disk        []LogDir
	comparisons []Comparison
	errs        map[string]error

	partStatus map[windowKey]Status // group_status: Burrow status per group partition
	stopped    map[string]int       // produce_stopped: 1 stopped, 0 producing, -1 unknown
}

// EvaluateNow runs one evaluation round now (the loop calls it every
// Interval; tests and an "evaluate now" button may call it too).
func (s *Service) EvaluateNow(ctx context.Context) error {
	s.evalMu.Lock()
	defer s.evalMu.Unlock()
	return s.eval.round(ctx)
}

type notification struct {
	rule   Rule
	st     alertState
	action string
	at     time.Time
}

func (e *evaluator) round(ctx context.Context) error {
	s := e.s
	start := s.now()
	now := start
	rules, err := s.Rules(ctx)
	if err != nil {
		return err
	}
	need := map[string]bool{}
	enabled := 0
	for _, r := range rules {
		if r.Enabled {
			enabled++
			if ki, ok := kindInfo(r.Kind); ok {
				need[ki.Source] = true
			}
		}
	}
	states, err := s.loadStates(ctx, 0)
	if err != nil {
		return err
	}
	byRule := map[int64]map[string]*alertState{}
	for _, st := range states {
		if byRule[st.RuleID] == nil {
			byRule[st.RuleID] = map[string]*alertState{}
		}
		byRule[st.RuleID][st.Subject] = st
	}
	in := e.fetch(ctx, need, rules, byRule, now)

	// The round's state changes and the notifications they cause are one
	// change of the replicated state; while the console topic is away it
	// is committed here (and republished later), so alerting goes on.
	// The flap memory is kept apart and only adopted once the change is
	// made, so a retried round steps from the same memory.
	flaps := make(map[flapKey]*flap, len(e.flaps))
	for k, f := range e.flaps {
		c := *f
		flaps[k] = &c
	}
	saved := e.flaps
	var fired int
	err = s.db.Change(ctx, func(tx *sql.Tx) error {
		e.flaps = make(map[flapKey]*flap, len(flaps))
		for k, f := range flaps {
			c := *f
			e.flaps[k] = &c
		}
		var err error
		fired, err = e.apply(ctx, tx, rules, byRule, &in, now)
		return err
	}, consoledb.LocalFallback())
	if err != nil {
		e.flaps = saved
		return fmt.Errorf("alerting: evaluate: %w", err)
	}
	if fired > 0 {
		s.kick()
	}

	pending, firing := 0, 0
	if all, err := s.loadStates(ctx, 0); err == nil {
		for _, st := range all {
			if st.State == StateFiring {
				firing++
			} else {
				pending++
			}
		}
	}
	took := s.now().Sub(start)
	var failed []string
	srcErrs := map[string]string{}
	for src, err := range in.errs {
		failed = append(failed, src)
		srcErrs[src] = err.Error()
	}
	sort.Strings(failed)
	s.metrics.Evaluated(took, failed...)
	s.metrics.SetAlerts(pending, firing)
	s.smu.Lock()
	s.status = EvaluatorStatus{LastRun: start, LastDuration: took, SourceErrors: srcErrs, Rules: enabled, Pending: pending, Firing: firing}
	s.smu.Unlock()
	if len(failed) > 0 {
		s.log.Warn("alert sources failed", "errors", srcErrs)
	}
	e.rounds++
	if e.rounds%100 == 0 {
		if err := s.prune(ctx, s.cfg.Keep); err != nil {
			s.log.Warn("prune alert history", "err", err)
		}
	}
	return nil
}

// apply steps every rule's alerts with the round's inputs, writing states,
// history and notifications in tx; it returns how many notifications it
// queued.
func (e *evaluator) apply(ctx context.Context, tx *sql.Tx, rules []Rule, byRule map[int64]map[string]*alertState, in *inputs, now time.Time) (int, error) {
	s := e.s
	// Subjects with only a flap history are stepped too, so their history
	// ages with every round.
	flapSubjects := map[int64][]string{}
	for k := range e.flaps {
		flapSubjects[k.rule] = append(flapSubjects[k.rule], k.subject)
	}
	var out []notification
	ruleIDs := map[int64]bool{}
	for _, r := range rules {
		ruleIDs[r.ID] = true
		sts := cloneStates(byRule[r.ID])
		if !r.Enabled {
			for _, st := range sts {
				n, err := e.retire(ctx, tx, r, st, now)
				if err != nil {
					return 0, err
				}
				out = append(out, n...)
			}
			continue
		}
		ki, ok := kindInfo(r.Kind)
		if !ok {
			continue
		}
		if in.errs[ki.Source] != nil {
			continue // the source failed: leave this rule's alerts as they are
		}
		obs := e.observe(r, in, sts, now)
		subjects := make([]string, 0, len(obs)+len(sts))
		for k := range obs {
			subjects = append(subjects, k)
		}
		for k := range sts {
			if _, ok := obs[k]; !ok {
				subjects = append(subjects, k)
			}
		}
		for _, k := range flapSubjects[r.ID] {
			if _, ok := obs[k]; !ok && sts[k] == nil {
				subjects = append(subjects, k)
			}
		}
		sort.Strings(subjects)
		for _, subj := range subjects {
			n, err := e.step(ctx, tx, r, sts[subj], subj, obs[subj], now)
			if err != nil {
				return 0, err
			}
			out = append(out, n...)
		}
	}
	for id, sts := range byRule {
		if !ruleIDs[id] {
			for subj := range sts {
				if err := deleteState(ctx, tx, id, subj); err != nil {
					return 0, err
				}
			}
		}
	}
	// Forget flap histories that have been all-clear for a full window.
	for k, f := range e.flaps {
		if !ruleIDs[k.rule] {
			delete(e.flaps, k)
			continue
		}
		if f.history&(1<<flapWindow-1) == 0 && f.n >= flapWindow && !f.flapping {
			delete(e.flaps, k)
		}
	}
	for _, n := range out {
		st := n.st
		if err := s.queueNotify(ctx, tx, n.rule, &st, n.action, n.at); err != nil {
			return 0, err
		}
	}
	return len(out), nil
}

// cloneStates copies a rule's states, so that a round whose change is
// retried steps from the states as loaded.
func cloneStates(in map[string]*alertState) map[string]*alertState {
	out := make(map[string]*alertState, len(in))
	for k, st := range in {
		c := *st
		out[k] = &c
	}
	return out
}

// fetch asks each needed source once.
func (e *evaluator) fetch(ctx context.Context, need map[string]bool, rules []Rule, byRule map[int64]map[string]*alertState, now time.Time) inputs {
	s := e.s
	in := inputs{errs: map[string]error{}}
	call := func(name string, configured bool, fn func(ctx context.Context) error) {
		if !need[name] {
			return
		}
		if !configured {
			in.errs[name] = errors.New("source not configured")
			return
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.SourceTimeout)
		defer cancel()
		if err := fn(cctx); err != nil {
			in.errs[name] = err
		}
	}
	src := s.cfg.Sources
	call(sourceLag, src.Lag != nil, func(ctx context.Context) (err error) { in.lag, err = src.Lag.Lag(ctx); return })
	call(sourceHealth, src.Health != nil, func(ctx context.Context) (err error) { in.health, err = src.Health.Health(ctx); return })
	call(sourceDisk, src.Disk != nil, func(ctx context.Context) (err error) { in.disk, err = src.Disk.LogDirs(ctx); return })
	call(sourceComparisons, src.Comparisons != nil, func(ctx context.Context) (err error) {
		in.comparisons, err = src.Comparisons.Comparisons(ctx)
		return
	})

	if s.cfg.ExportLag != nil && need[sourceLag] && in.errs[sourceLag] == nil {
		exportLag(s.cfg.ExportLag, in.lag, now)
	}
	burrow, produce := false, false
	for _, r := range rules {
		if r.Enabled && r.Kind == KindGroupStatus {
			burrow = true
		}
		if r.Enabled && r.Kind == KindProduceStopped {
			produce = true
			for subj := range byRule[r.ID] {
				if typ, name := splitSubject(subj); typ == "topic" {
					e.armed[name] = true // it was stopped before a restart
				}
			}
		}
	}
	if burrow && in.errs[sourceLag] == nil {
		in.partStatus = map[windowKey]Status{}
		e.windows.beginRound()
		for _, g := range in.lag {
			if g.Err != nil {
				continue
			}
			for _, p := range g.Partitions {
				if p.Err != nil {
					continue // not read this round: its window waits
				}
				win := e.windows.observe(g.Group, g.Members, p, now)
				in.partStatus[windowKey{g.Group, p.Topic, p.Partition}] = PartitionStatus(win.entries, p.Lag, now)
			}
		}
		e.windows.endRound()
	}
	if produce && in.errs[sourceHealth] == nil {
		in.stopped = map[string]int{}
		seen := map[string]bool{}
		for _, t := range in.health.Topics {
			seen[t.Topic] = true
			prev, ok := e.prevIn[t.Topic]
			e.prevIn[t.Topic] = t.MessagesIn
			switch {
			case !ok:
				in.stopped[t.Topic] = -1
				e.lastChange[t.Topic] = now
			case t.MessagesIn > prev:
				e.armed[t.Topic] = true
				e.lastChange[t.Topic] = now
				in.stopped[t.Topic] = 0
			case t.MessagesIn < prev: // recreated or truncated: start over
				e.armed[t.Topic] = false
				e.lastChange[t.Topic] = now
				in.stopped[t.Topic] = 0
			case e.armed[t.Topic]:
				in.stopped[t.Topic] = 1
			default:
				in.stopped[t.Topic] = 0
			}
		}
		for t := range e.prevIn {
			if !seen[t] {
				delete(e.prevIn, t)
				delete(e.armed, t)
				delete(e.lastChange, t)
			}
		}
	}
	return in
}

// step moves one rule+subject alert given whether its condition holds (o
// not nil) and returns the notifications to send once the round commits.
func (e *evaluator) step(ctx context.Context, tx *sql.Tx, r Rule, st *alertState, subject string, o *observation, now time.Time) ([]notification, error) {
	if o != nil && o.unknown {
		return nil, nil
	}
	cond := o != nil
	// Flap history lives in the state while there is one, else in memory.
	fk := flapKey{r.ID, subject}
	f := e.flaps[fk]
	if f == nil {
		f = &flap{}
		if st != nil {
			f.history, f.n, f.flapping = st.History, st.HistoryLen, st.Flapping
		}
		e.flaps[fk] = f
	}
	f.history <<= 1
	if cond {
		f.history |= 1
	}
	f.history &= 1<<flapWindow - 1
	f.n = min(f.n+1, flapWindow)
	changes := 0
	if f.n > 1 {
		changes = bits.OnesCount32((f.history ^ f.history>>1) & (1<<(f.n-1) - 1))
	}
	wasFlapping := f.flapping
	flapping := changes >= flapStart || (wasFlapping && changes > flapStop)
	f.flapping = flapping

	var out []notification
	if st == nil {
		if !cond {
			return nil, nil
		}
		st = &alertState{
			RuleID:      r.ID,
			Subject:     subject,
			DedupKey:    e.s.dedupKey(r.ID, subject),
			State:       StatePending,
			ActiveSince: now,
		}
		st.apply(o)
		if r.For > 0 || flapping {
			if err := insertHistory(ctx, tx, now, r, st, EventPending); err != nil {
				return nil, err
			}
		}
	} else if cond {
		st.apply(o)
		st.ClearSince = time.Time{}
	}
	st.History, st.HistoryLen, st.LastEval = f.history, f.n, now
	st.Flapping = flapping
	if flapping != wasFlapping {
		ev := EventSteady
		if flapping {
			ev = EventFlapping
		}
		if err := insertHistory(ctx, tx, now, r, st, ev); err != nil {
			return nil, err
		}
	}

	switch {
	case st.State == StatePending && !cond:
		if err := insertHistory(ctx, tx, now, r, st, EventCancelled); err != nil {
			return nil, err
		}
		return nil, deleteState(ctx, tx, r.ID, subject)
	case st.State == StatePending && now.Sub(st.ActiveSince) >= r.For && !flapping:
		st.State, st.FiredAt = StateFiring, now
		if err := insertHistory(ctx, tx, now, r, st, EventFiring); err != nil {
			return nil, err
		}
		out = append(out, notification{r, *st, actionTrigger, now})
	case st.State == StateFiring && !cond:
		if st.ClearSince.IsZero() {
			st.ClearSince = now
		}
		if now.Sub(st.ClearSince) >= r.ClearFor && !flapping {
			if err := insertHistory(ctx, tx, now, r, st, EventResolved); err != nil {
				return nil, err
			}
			// Keep the flap history in memory: if it comes straight back it
			// counts towards flapping.
			return []notification{{r, *st, actionResolve, now}}, deleteState(ctx, tx, r.ID, subject)
		}
	}
	return out, upsertState(ctx, tx, st)
}

// retire ends the alerts of a disabled rule at once.
func (e *evaluator) retire(ctx context.Context, tx *sql.Tx, r Rule, st *alertState, now time.Time) ([]notification, error) {
	delete(e.flaps, flapKey{r.ID, st.Subject})
	if err := deleteState(ctx, tx, r.ID, st.Subject); err != nil {
		return nil, err
	}
	if st.State != StateFiring {
		return nil, insertHistory(ctx, tx, now, r, st, EventCancelled)
	}
	if err := insertHistory(ctx, tx, now, r, st, EventResolved); err != nil {
		return nil, err
	}
	return []notification{{r, *st, actionResolve, now}}, nil
}

func (st *alertState) apply(o *observation) {
	st.Summary, st.Details, st.Labels, st.Links = o.summary, o.details, o.labels, o.links
}

// dedupKey is the one key of a rule+subject incident: PagerDuty's dedup_key
// (at most 255 characters; longer ones are hashed).
func (s *Service) dedupKey(ruleID int64, subject string) string {
	prefix := "sluice/"
	if s.cfg.Cluster != "" {
		prefix += s.cfg.Cluster + "/"
	}
	k := fmt.Sprintf("%srule-%d/%s", prefix, ruleID, subject)
	if len(k) <= 255 {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return fmt.Sprintf("%srule-%d/%x", prefix[:min(len(prefix), 150)], ruleID, sum[:16])
}

func splitSubject(s string) (typ, name string) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i], s[i+1:]
		}
	}
	return "", s
}

// ---- persistence of states and history ----

func (s *Service) loadStates(ctx context.Context, ruleID int64) ([]*alertState, error) {
	q := `SELECT rule_id, subject, dedup_key, state, active_since, fired_at, clear_since, flapping, history, history_len,
		summary, details, labels, links, last_eval FROM alert_states`
	var args []any
	if ruleID != 0 {
		q += ` WHERE rule_id = ?`
		args = append(args, ruleID)
	}
	out, err := consoledb.QueryAll(ctx, s.db, q, func(row consoledb.Scanner) (*alertState, error) {
		st := &alertState{}
		var since, fired, clear, last int64
		var flapping int
		var details, labels, links string
		if err := row.Scan(&st.RuleID, &st.Subject, &st.DedupKey, &st.State, &since, &fired, &clear, &flapping,
			&st.History, &st.HistoryLen, &st.Summary, &details, &labels, &links, &last); err != nil {
			return nil, err
		}
		st.ActiveSince, st.FiredAt, st.ClearSince, st.LastEval = fromMS(since), fromMS(fired), fromMS(clear), fromMS(last)
		st.Flapping = flapping != 0
		json.Unmarshal([]byte(details), &st.Details)
		json.Unmarshal([]byte(labels), &st.Labels)
		json.Unmarshal([]byte(links), &st.Links)
		return st, nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("alerting: load alert states: %w", err)
	}
	return out, nil
}

func mustJSON(v any, empty string) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	return string(b)
}

func upsertState(ctx context.Context, tx *sql.Tx, st *alertState) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO alert_states(rule_id, subject, dedup_key, state, active_since, fired_at, clear_since,
		flapping, history, history_len, summary, details, labels, links, last_eval) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(rule_id, subject) DO UPDATE SET dedup_key=excluded.dedup_key, state=excluded.state,
		active_since=excluded.active_since, fired_at=excluded.fired_at, clear_since=excluded.clear_since,
		flapping=excluded.flapping, history=excluded.history, history_len=excluded.history_len, summary=excluded.summary,
		details=excluded.details, labels=excluded.labels, links=excluded.links, last_eval=excluded.last_eval`,
		st.RuleID, st.Subject, st.DedupKey, st.State, ms(st.ActiveSince), ms(st.FiredAt), ms(st.ClearSince),
		b2i(st.Flapping), st.History, st.HistoryLen, st.Summary, mustJSON(st.Details, "{}"), mustJSON(st.Labels, "{}"),
		mustJSON(st.Links, "[]"), ms(st.LastEval))
	if err != nil {
		return fmt.Errorf("alerting: save alert state: %w", err)
	}
	return nil
}

func deleteState(ctx context.Context, tx *sql.Tx, ruleID int64, subject string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_states WHERE rule_id = ? AND subject = ?`, ruleID, subject); err != nil {
		return fmt.Errorf("alerting: delete alert state: %w", err)
	}
	return nil
}

func insertHistory(ctx context.Context, tx *sql.Tx, now time.Time, r Rule, st *alertState, event string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO alert_history(at, rule_id, rule_name, subject, dedup_key, event, severity, summary, details)
		VALUES(?,?,?,?,?,?,?,?,?)`, ms(now), r.ID, r.Name, st.Subject, st.DedupKey, event, r.Severity, st.Summary, mustJSON(st.Details, "{}"))
	if err != nil {
		return fmt.Errorf("alerting: alert history: %w", err)
	}
	return nil
}

// ---- rule conditions ----

func (e *evaluator) labels(r Rule, kv ...string) map[string]string {
	l := map[string]string{
		"alertname": r.Name,
		"severity":  string(r.Severity),
		"rule_id":   strconv.FormatInt(r.ID, 10),
		"kind":      string(r.Kind),
	}
	if e.s.cfg.Cluster != "" {
		l["cluster"] = e.s.cfg.Cluster
	}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

func (e *evaluator) links(r Rule, page, text string) []Link {
	base := e.s.cfg.BaseURL
	if base == "" {
		return nil
	}
	out := []Link{{Href: fmt.Sprintf("%s/alerts/rules/%d", base, r.ID), Text: "Rule " + r.Name + " in the Sluice console"}}
	if page != "" {
		out = append(out, Link{Href: base + page, Text: text})
	}
	return out
}

func (e *evaluator) observe(r Rule, in *inputs, states map[string]*alertState, now time.Time) map[string]*observation {
	m := newMatcher(r.Scope)
	obs := map[string]*observation{}
	add := func(subject, summary string, details map[string]any, labels map[string]string, links []Link) {
		details["threshold"] = r.Threshold
		obs[subject] = &observation{subject: subject, summary: truncateRunes(r.Name+": "+summary, maxSummary), details: details, labels: labels, links: links}
	}
	switch r.Kind {
	case KindLagRecords, KindLagSeconds, KindGroupStatus:
		for _, g := range in.lag {
			if !m.name(g.Group) {
				continue
			}
			subject := "group:" + g.Group
			if g.Err != nil {
				obs[subject] = &observation{unknown: true}
				continue
			}
			var total int64
			var maxTime time.Duration
			var parts []PartitionLag
			var statuses []Status
			byStatus := map[string]int{}
			unread := 0 // partitions in scope whose lag could not be read
			for _, p := range g.Partitions {
				if !m.topicOK(p.Topic) {
					continue
				}
				if p.Err != nil {
					unread++
					continue
				}
				parts = append(parts, p)
				total += max(p.Lag, 0)
				maxTime = max(maxTime, p.LagTime)
				if r.Kind == KindGroupStatus {
					st := in.partStatus[windowKey{g.Group, p.Topic, p.Partition}]
					statuses = append(statuses, st)
					if st != StatusOK {
						byStatus[st.String()]++
					}
				}
			}
			// A read that missed partitions proves nothing by itself: the
			// condition holds if the partitions read are enough, else the
			// round does not know (the alert stays as it is).
			unknownUnlessAdded := func() {
				if unread > 0 && obs[subject] == nil {
					obs[subject] = &observation{unknown: true}
				}
			}
			if len(parts) == 0 {
				unknownUnlessAdded()
				continue
			}
			sort.Slice(parts, func(i, j int) bool { return parts[i].Lag > parts[j].Lag })
			top := map[string]int64{}
			for _, p := range parts[:min(len(parts), 10)] {
				if p.Lag > 0 {
					top[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Lag
				}
			}
			details := map[string]any{
				"group": g.Group, "state": g.State, "members": g.Members, "partitions": len(parts),
				"total_lag": total, "max_lag_seconds": maxTime.Seconds(), "top_partitions_by_lag": top,
			}
			lbl := []string{"group", g.Group}
			if r.Scope.Topic != "" {
				lbl = append(lbl, "topic", r.Scope.Topic)
			}
			links := e.links(r, "/groups/"+url.PathEscape(g.Group), "Consumer group "+g.Group)
			switch r.Kind {
			case KindLagRecords:
				if float64(total) > r.Threshold {
					add(subject, fmt.Sprintf("consumer group %q is %d records behind (threshold %d)", g.Group, total, int64(r.Threshold)),
						details, e.labels(r, lbl...), links)
				}
			case KindLagSeconds:
				if maxTime.Seconds() > r.Threshold {
					add(subject, fmt.Sprintf("consumer group %q is %s behind (threshold %s)", g.Group,
						maxTime.Round(time.Second), (time.Duration(r.Threshold*float64(time.Second))).Round(time.Second)),
						details, e.labels(r, lbl...), links)
				}
			case KindGroupStatus:
				gs := GroupStatus(statuses)
				if gs >= r.MinStatus && gs > StatusOK {
					details["status"] = gs.String()
					details["partitions_by_status"] = byStatus
					details["min_status"] = r.MinStatus.String()
					add(subject, fmt.Sprintf("consumer group %q is %s (%s), total lag %d", g.Group, gs, statusCounts(byStatus), total),
						details, e.labels(r, lbl...), links)
				}
			}
			unknownUnlessAdded()
		}
	case KindUnderReplicated, KindOfflinePartitions:
		for _, t := range in.health.Topics {
			if !m.name(t.Topic) || !m.topicOK(t.Topic) {
				continue
			}
			bad, what := t.UnderReplicated, "under-replicated"
			if r.Kind == KindOfflinePartitions {
				bad, what = t.Offline, "offline"
			}
			if float64(len(bad)) > r.Threshold {
				add("topic:"+t.Topic, fmt.Sprintf("topic %q has %d %s partitions of %d", t.Topic, len(bad), what, t.Partitions),
					map[string]any{"topic": t.Topic, "partitions": t.Partitions, what + "_partitions": bad, "count": len(bad)},
					e.labels(r, "topic", t.Topic), e.links(r, "/topics/"+url.PathEscape(t.Topic), "Topic "+t.Topic))
			}
		}
	case KindBrokerDown:
		for _, b := range in.health.Brokers {
			id := strconv.Itoa(int(b.ID))
			if b.Up || !m.name(id) {
				continue
			}
			add("broker:"+id, fmt.Sprintf("broker %d (%s) is down", b.ID, b.Addr),
				map[string]any{"broker": b.ID, "addr": b.Addr},
				e.labels(r, "broker", id), e.links(r, "/brokers/"+id, "Broker "+id))
		}
	case KindProduceStopped:
		for _, t := range in.health.Topics {
			if !m.name(t.Topic) || !m.topicOK(t.Topic) {
				continue
			}
			subject := "topic:" + t.Topic
			switch in.stopped[t.Topic] {
			case -1:
				if states[subject] != nil {
					obs[subject] = &observation{unknown: true}
				}
			case 1:
				quiet := now.Sub(e.lastChange[t.Topic]).Round(time.Second)
				add(subject, fmt.Sprintf("topic %q has received no records for %s", t.Topic, quiet),
					map[string]any{"topic": t.Topic, "messages_in": t.MessagesIn, "quiet_seconds": quiet.Seconds()},
					e.labels(r, "topic", t.Topic), e.links(r, "/topics/"+url.PathEscape(t.Topic), "Topic "+t.Topic))
			}
		}
	case KindDiskFreeBytes, KindDiskFreePercent:
		for _, d := range in.disk {
			if !m.name(d.Path) {
				continue
			}
			pct := 0.0
			if d.TotalBytes > 0 {
				pct = float64(d.FreeBytes) * 100 / float64(d.TotalBytes)
			}
			low := float64(d.FreeBytes) < r.Threshold
			limit := formatBytes(uint64(r.Threshold))
			if r.Kind == KindDiskFreePercent {
				low = d.TotalBytes > 0 && pct < r.Threshold
				limit = fmt.Sprintf("%g%%", r.Threshold)
			}
			if !low {
				continue
			}
			id := strconv.Itoa(int(d.Broker))
			add(fmt.Sprintf("logdir:%d:%s", d.Broker, d.Path),
				fmt.Sprintf("log dir %s on broker %d has %s free (%.1f%%), threshold %s", d.Path, d.Broker, formatBytes(d.FreeBytes), pct, limit),
				map[string]any{"broker": d.Broker, "path": d.Path, "free_bytes": d.FreeBytes, "total_bytes": d.TotalBytes, "free_percent": pct},
				e.labels(r, "broker", id, "log_dir", d.Path), e.links(r, "/brokers/"+id, "Broker "+id))
		}
	case KindComparison:
		for _, c := range in.comparisons {
			if !m.name(c.Name) {
				continue
			}
			diff := c.Mismatched + c.MissingInTarget + c.MissingInSource
			if float64(diff) <= r.Threshold {
				continue
			}
			add("comparison:"+c.Name,
				fmt.Sprintf("comparison %q (%s vs %s) found %d mismatched records, %d missing in %s, %d missing in %s",
					c.Name, c.SourceTopic, c.TargetTopic, c.Mismatched, c.MissingInTarget, c.TargetTopic, c.MissingInSource, c.SourceTopic),
				map[string]any{"comparison": c.Name, "source_topic": c.SourceTopic, "target_topic": c.TargetTopic,
					"compared": c.Compared, "mismatched": c.Mismatched, "missing_in_target": c.MissingInTarget,
					"missing_in_source": c.MissingInSource, "running": c.Running},
				e.labels(r, "comparison", c.Name), e.links(r, fmt.Sprintf("/comparisons/%d", c.ID), "Comparison "+c.Name))
		}
	}
	return obs
}

func statusCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d %s", m[k], k)
	}
	if out == "" {
		return "no partition flagged"
	}
	return out
}

func formatBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func exportLag(l *metrics.Lag, groups []GroupLag, at time.Time) {
	out := make([]metrics.GroupLag, 0, len(groups))
	for _, g := range groups {
		if g.Err != nil {
			continue
		}
		mg := metrics.GroupLag{Group: g.Group, Members: g.Members, Partitions: make([]metrics.PartitionLag, 0, len(g.Partitions))}
		for _, p := range g.Partitions {
			if p.Err != nil {
				continue
			}
			mg.Partitions = append(mg.Partitions, metrics.PartitionLag{Topic: p.Topic, Partition: p.Partition, Lag: p.Lag, LagTime: p.LagTime})
		}
		out = append(out, mg)
	}
	l.Update(out, at)
}

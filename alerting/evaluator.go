package alerting

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/human"
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
	// Notified is set once the trigger went out; a silence or flapping
	// holds it back, and only a notified alert sends a resolve.
	Notified bool
	// Value is the rule's value for the subject at the last round, in
	// words ("210 records"), also while the alert clears.
	Value string
}

// observation is what one round saw of one subject of a rule: its value,
// and whether the rule's condition holds for it.
type observation struct {
	subject string
	holds   bool
	value   string // the value in words: "210 records", "7 min 55 s", "WARN", "down"
	summary string // the rule's sentence about the subject with its value
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
	s     *Service
	flaps map[flapKey]*flap

	// mu guards what a rule preview reads while a round may run: the
	// Burrow windows and the produce_stopped bookkeeping. A round holds it
	// from derive to the end of its rule loop, but not while it waits on
	// the sources.
	mu      sync.Mutex
	windows *windows

	// produce_stopped bookkeeping, per topic
	prevIn     map[string]int64
	lastChange map[string]time.Time
	armed      map[string]bool

	// the broker metrics' counters and gauges between rounds
	metrics *metricMemory

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
		metrics:    newMetricMemory(),
	}
}

// inputs is what the sources said in one round.
type inputs struct {
	lag         []GroupLag
	health      Health
	disk        []LogDir
	comparisons []Comparison
	hosts       []HostMetrics // broker metrics, per host
	errs        map[string]error

	partStatus map[windowKey]Status // group_status: Burrow status per group partition
	stopped    map[string]int       // produce_stopped: 1 stopped, 0 producing, -1 unknown
	metrics    []hostRound          // broker metrics with their rates
}

// EvaluateNow runs one evaluation round now (the loop calls it every
// Interval; tests and an "evaluate now" button may call it too).
func (s *Service) EvaluateNow(ctx context.Context) error {
	s.evalMu.Lock()
	defer s.evalMu.Unlock()
	return s.eval.round(ctx)
}

// EvaluateWhileLeading runs one evaluation round when this console leads
// (does the cluster's background work), and otherwise stands by (see
// Standby): the Burrow-style group status, whose windows of commits move
// with each round, is evaluated on the leading console only. The loop of
// the console that may lead calls it every Interval.
func (s *Service) EvaluateWhileLeading(ctx context.Context, leading bool) error {
	if !leading {
		s.Standby()
		return nil
	}
	return s.EvaluateNow(ctx)
}

// Standby drops what the evaluation rounds carried between them: the
// Burrow windows of commits, the produce_stopped bookkeeping, the flap
// memory, and every group's status from the last round. A console that
// stops leading calls it, so it shows no group status it no longer
// evaluates, and should it lead again it starts from fresh windows rather
// than from commits seen before another console took over.
func (s *Service) Standby() {
	s.evalMu.Lock()
	defer s.evalMu.Unlock()
	e := s.eval
	e.mu.Lock()
	if len(e.windows.m) > 0 || len(e.prevIn) > 0 || len(e.flaps) > 0 {
		e.windows = newWindows(s.cfg.BurrowWindow, s.cfg.Interval/2)
		e.flaps = map[flapKey]*flap{}
		e.prevIn = map[string]int64{}
		e.lastChange = map[string]time.Time{}
		e.armed = map[string]bool{}
	}
	e.mu.Unlock()
	s.setGroupStatuses(nil, time.Time{})
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
	// Every group's Burrow status is kept whenever lag can be read, for the
	// console's group list, rule or no rule.
	if s.cfg.Sources.Lag != nil {
		need[sourceLag] = true
	}
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
	silences, err := s.activeSilences(ctx, now)
	if err != nil {
		return err
	}
	in := e.gather(ctx, need)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.derive(&in, rules, byRule, now, false)
	if in.errs[sourceLag] == nil && need[sourceLag] {
		s.setGroupStatuses(groupStatuses(in.lag, in.partStatus), now)
	}

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
		fired, err = e.apply(ctx, tx, rules, byRule, &in, silences, now)
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
	// A host whose metrics could not be read fails its own subjects only;
	// it is reported as a failure of the source, by host.
	hostFailed := false
	for _, h := range in.hosts {
		if h.Err != nil {
			hostFailed = true
			srcErrs[fmt.Sprintf("%s (broker %d)", sourceBrokerMetrics, h.Broker)] = h.Err.Error()
		}
	}
	if hostFailed && in.errs[sourceBrokerMetrics] == nil {
		failed = append(failed, sourceBrokerMetrics)
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
func (e *evaluator) apply(ctx context.Context, tx *sql.Tx, rules []Rule, byRule map[int64]map[string]*alertState, in *inputs, silences silenceSet, now time.Time) (int, error) {
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
		// A subject is stepped when its condition holds, when it has an
		// alert, or when it has a flap history; the others only have a value.
		subjects := make([]string, 0, len(sts)+8)
		for k, o := range obs {
			if o.holds || sts[k] != nil || e.flaps[flapKey{r.ID, k}] != nil {
				subjects = append(subjects, k)
			}
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
			n, err := e.step(ctx, tx, r, sts[subj], subj, obs[subj], now, silences.match(r.ID, subj) != nil)
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

// gather asks each needed source once.
func (e *evaluator) gather(ctx context.Context, need map[string]bool) inputs {
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
	call(sourceBrokerMetrics, src.BrokerMetrics != nil, func(ctx context.Context) (err error) {
		in.hosts, err = src.BrokerMetrics.BrokerMetrics(ctx)
		return
	})
	return in
}

// derive computes what the rules need beyond the sources' answers: the
// Burrow status of every group partition and whether each topic stopped
// receiving records. A round (readOnly false) moves the Burrow windows and
// the produce bookkeeping; a preview (readOnly true) only reads them.
func (e *evaluator) derive(in *inputs, rules []Rule, byRule map[int64]map[string]*alertState, now time.Time, readOnly bool) {
	s := e.s
	if !readOnly && s.cfg.ExportLag != nil && in.lag != nil && in.errs[sourceLag] == nil {
		exportLag(s.cfg.ExportLag, in.lag, now)
	}
	produce := false
	for _, r := range rules {
		if r.Enabled && r.Kind == KindProduceStopped {
			produce = true
			if readOnly {
				continue
			}
			for subj := range byRule[r.ID] {
				if typ, name := splitSubject(subj); typ == "topic" {
					e.armed[name] = true // it was stopped before a restart
				}
			}
		}
	}
	if in.lag != nil && in.errs[sourceLag] == nil {
		in.partStatus = map[windowKey]Status{}
		if !readOnly {
			e.windows.beginRound()
		}
		for _, g := range in.lag {
			if g.Err != nil {
				continue
			}
			for _, p := range g.Partitions {
				if p.Err != nil {
					continue // not read this round: its window waits
				}
				k := windowKey{g.Group, p.Topic, p.Partition}
				var win *window
				if readOnly {
					win = e.windows.m[k]
				} else {
					win = e.windows.observe(g.Group, g.Members, p, now)
				}
				if win == nil {
					in.partStatus[k] = StatusNotFound
					continue
				}
				in.partStatus[k] = PartitionStatus(win.entries, p.Lag, now)
			}
		}
		if !readOnly {
			e.windows.endRound()
		}
	}
	if in.hosts != nil && in.errs[sourceBrokerMetrics] == nil {
		in.metrics = e.metrics.derive(in.hosts, now, readOnly)
	}
	if (produce || readOnly) && in.errs[sourceHealth] == nil {
		in.stopped = map[string]int{}
		seen := map[string]bool{}
		for _, t := range in.health.Topics {
			seen[t.Topic] = true
			prev, ok := e.prevIn[t.Topic]
			if readOnly {
				switch {
				case !ok:
					in.stopped[t.Topic] = -1
				case t.MessagesIn != prev:
					in.stopped[t.Topic] = 0
				case e.armed[t.Topic]:
					in.stopped[t.Topic] = 1
				default:
					in.stopped[t.Topic] = 0
				}
				continue
			}
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
		if !readOnly {
			for t := range e.prevIn {
				if !seen[t] {
					delete(e.prevIn, t)
					delete(e.armed, t)
					delete(e.lastChange, t)
				}
			}
		}
	}
}

// step moves one rule+subject alert given what the round observed of the
// subject (o nil: the source no longer reports it) and returns the
// notifications to send once the round commits. silenced holds a trigger
// back (not a resolve: closing an incident is never noise).
func (e *evaluator) step(ctx context.Context, tx *sql.Tx, r Rule, st *alertState, subject string, o *observation, now time.Time, silenced bool) ([]notification, error) {
	if o != nil && o.unknown {
		return nil, nil
	}
	cond := o != nil && o.holds
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
			if err := insertHistory(ctx, tx, historyRow{at: now, rule: r, st: st, event: EventPending, value: o.value}); err != nil {
				return nil, err
			}
		}
	} else if cond {
		st.apply(o)
		st.ClearSince = time.Time{}
	}
	if o != nil {
		st.Value = o.value
	}
	st.History, st.HistoryLen, st.LastEval = f.history, f.n, now
	st.Flapping = flapping
	if flapping != wasFlapping {
		ev := EventSteady
		if flapping {
			ev = EventFlapping
		}
		if err := insertHistory(ctx, tx, historyRow{at: now, rule: r, st: st, event: ev, value: st.Value}); err != nil {
			return nil, err
		}
	}

	switch {
	case st.State == StatePending && !cond:
		if err := insertHistory(ctx, tx, historyRow{at: now, rule: r, st: st, event: EventCancelled, summary: clearedSummary(r, subject, o),
			value: st.Value, duration: now.Sub(st.ActiveSince)}); err != nil {
			return nil, err
		}
		return nil, deleteState(ctx, tx, r.ID, subject)
	case st.State == StatePending && now.Sub(st.ActiveSince) >= r.For && !flapping:
		st.State, st.FiredAt = StateFiring, now
		if err := insertHistory(ctx, tx, historyRow{at: now, rule: r, st: st, event: EventFiring, value: st.Value}); err != nil {
			return nil, err
		}
	case st.State == StateFiring && !cond:
		if st.ClearSince.IsZero() {
			st.ClearSince = now
		}
		if now.Sub(st.ClearSince) >= r.ClearFor && !flapping {
			resolved := *st
			resolved.Summary = clearedSummary(r, subject, o)
			if err := insertHistory(ctx, tx, historyRow{at: now, rule: r, st: &resolved, event: EventResolved,
				value: st.Value, duration: now.Sub(st.ActiveSince)}); err != nil {
				return nil, err
			}
			// Keep the flap history in memory: if it comes straight back it
			// counts towards flapping.
			// The resolve carries the alert as it fired (Alertmanager's
			// receivers match a resolved alert by its labels and
			// annotations); the history entry has the value that cleared it.
			if st.Notified {
				out = append(out, notification{r, *st, actionResolve, now})
			}
			return out, deleteState(ctx, tx, r.ID, subject)
		}
	}
	// A firing alert's trigger goes out once, when neither a silence nor
	// flapping holds it back; a silence that ends while the condition still
	// holds lets it out at the next round.
	if st.State == StateFiring && !st.Notified && st.ClearSince.IsZero() && !flapping && !silenced {
		st.Notified = true
		out = append(out, notification{r, *st, actionTrigger, now})
	}
	return out, upsertState(ctx, tx, st)
}

// clearedSummary is the history's sentence for an alert that stopped
// holding: the rule's sentence with the value that cleared it, or why there
// is none.
func clearedSummary(r Rule, subject string, o *observation) string {
	if o != nil && o.summary != "" {
		return o.summary
	}
	typ, name := splitSubject(subject)
	return truncateRunes(fmt.Sprintf("%s: %s %q is no longer reported", r.Name, nonEmptyString(typ, "subject"), name), maxSummary)
}

func nonEmptyString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// retire ends the alerts of a disabled rule at once.
func (e *evaluator) retire(ctx context.Context, tx *sql.Tx, r Rule, st *alertState, now time.Time) ([]notification, error) {
	delete(e.flaps, flapKey{r.ID, st.Subject})
	if err := deleteState(ctx, tx, r.ID, st.Subject); err != nil {
		return nil, err
	}
	ended := *st
	ended.Summary = truncateRunes(r.Name+": the rule was disabled", maxSummary)
	row := historyRow{at: now, rule: r, st: &ended, event: EventCancelled, value: st.Value, duration: now.Sub(st.ActiveSince)}
	if st.State != StateFiring {
		return nil, insertHistory(ctx, tx, row)
	}
	row.event = EventResolved
	if err := insertHistory(ctx, tx, row); err != nil {
		return nil, err
	}
	if !st.Notified {
		return nil, nil
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
		summary, details, labels, links, last_eval, notified, value FROM alert_states`
	var args []any
	if ruleID != 0 {
		q += ` WHERE rule_id = ?`
		args = append(args, ruleID)
	}
	out, err := consoledb.QueryAll(ctx, s.db, q, scanState, args...)
	if err != nil {
		return nil, fmt.Errorf("alerting: load alert states: %w", err)
	}
	return out, nil
}

func scanState(row consoledb.Scanner) (*alertState, error) {
	st := &alertState{}
	var since, fired, clear, last int64
	var flapping, notified int
	var details, labels, links string
	if err := row.Scan(&st.RuleID, &st.Subject, &st.DedupKey, &st.State, &since, &fired, &clear, &flapping,
		&st.History, &st.HistoryLen, &st.Summary, &details, &labels, &links, &last, &notified, &st.Value); err != nil {
		return nil, err
	}
	st.ActiveSince, st.FiredAt, st.ClearSince, st.LastEval = fromMS(since), fromMS(fired), fromMS(clear), fromMS(last)
	st.Flapping, st.Notified = flapping != 0, notified != 0
	json.Unmarshal([]byte(details), &st.Details)
	json.Unmarshal([]byte(labels), &st.Labels)
	json.Unmarshal([]byte(links), &st.Links)
	return st, nil
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
		flapping, history, history_len, summary, details, labels, links, last_eval, notified, value) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(rule_id, subject) DO UPDATE SET dedup_key=excluded.dedup_key, state=excluded.state,
		active_since=excluded.active_since, fired_at=excluded.fired_at, clear_since=excluded.clear_since,
		flapping=excluded.flapping, history=excluded.history, history_len=excluded.history_len, summary=excluded.summary,
		details=excluded.details, labels=excluded.labels, links=excluded.links, last_eval=excluded.last_eval,
		notified=excluded.notified, value=excluded.value`,
		st.RuleID, st.Subject, st.DedupKey, st.State, ms(st.ActiveSince), ms(st.FiredAt), ms(st.ClearSince),
		b2i(st.Flapping), st.History, st.HistoryLen, st.Summary, mustJSON(st.Details, "{}"), mustJSON(st.Labels, "{}"),
		mustJSON(st.Links, "[]"), ms(st.LastEval), b2i(st.Notified), st.Value)
	if err != nil {
		return fmt.Errorf("alerting: save alert state: %w", err)
	}
	return nil
}

// deleteState removes an alert that ended, and its acknowledgement: the
// next incident of the same rule and subject starts unacknowledged.
func deleteState(ctx context.Context, tx *sql.Tx, ruleID int64, subject string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_states WHERE rule_id = ? AND subject = ?`, ruleID, subject); err != nil {
		return fmt.Errorf("alerting: delete alert state: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_acks WHERE rule_id = ? AND subject = ?`, ruleID, subject); err != nil {
		return fmt.Errorf("alerting: delete acknowledgement: %w", err)
	}
	return nil
}

// historyRow is one history entry to write: the alert as it is, the event,
// and for an ending alert the value that cleared it and how long it lasted.
type historyRow struct {
	at       time.Time
	rule     Rule
	st       *alertState
	event    string
	summary  string // "" : the alert's summary
	value    string
	duration time.Duration
	actor    string // who acknowledged or silenced
}

func insertHistory(ctx context.Context, tx *sql.Tx, h historyRow) error {
	summary := h.summary
	if summary == "" {
		summary = h.st.Summary
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO alert_history(at, rule_id, rule_name, subject, dedup_key, event, severity, summary, details,
		value, duration_ms, actor) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`, ms(h.at), h.rule.ID, h.rule.Name, h.st.Subject, h.st.DedupKey, h.event,
		h.rule.Severity, summary, mustJSON(h.st.Details, "{}"), h.value, h.duration.Milliseconds(), h.actor)
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

// observe computes the rule's value for every subject in scope and whether
// its condition holds. Details, labels and links, which only notifications
// need, are built for the subjects whose condition holds.
func (e *evaluator) observe(r Rule, in *inputs, states map[string]*alertState, now time.Time) map[string]*observation {
	m := newMatcher(r.Scope)
	obs := map[string]*observation{}
	add := func(subject string, holds bool, value, summary string, extra extraFunc) {
		o := &observation{subject: subject, holds: holds, value: value, summary: truncateRunes(r.Name+": "+summary, maxSummary)}
		if holds && extra != nil {
			o.details, o.labels, o.links = extra()
			o.details["threshold"] = r.Threshold
		}
		obs[subject] = o
	}
	switch r.Kind {
	case KindLagRecords, KindLagSeconds, KindGroupStatus:
		for _, g := range in.lag {
			if !m.name(g.Group) {
				continue
			}
			subject := "group:" + g.Group
			if g.Err != nil {
				obs[subject] = &observation{subject: subject, unknown: true}
				continue
			}
			var total int64
			var maxTime time.Duration
			var statuses []Status
			parts := 0
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
				parts++
				total += max(p.Lag, 0)
				maxTime = max(maxTime, p.LagTime)
				if r.Kind == KindGroupStatus {
					st := in.partStatus[windowKey{g.Group, p.Topic, p.Partition}]
					statuses = append(statuses, st)
					if st != StatusOK && st != StatusNotFound {
						byStatus[st.String()]++
					}
				}
			}
			// A read that missed partitions proves nothing by itself: the
			// condition holds if the partitions read are enough, else the
			// round does not know (the alert stays as it is).
			unknownUnlessHolds := func() {
				if unread > 0 && (obs[subject] == nil || !obs[subject].holds) {
					obs[subject] = &observation{subject: subject, unknown: true}
				}
			}
			if parts == 0 {
				unknownUnlessHolds()
				continue
			}
			extra := func() (map[string]any, map[string]string, []Link) {
				var scoped []PartitionLag
				for _, p := range g.Partitions {
					if m.topicOK(p.Topic) && p.Err == nil {
						scoped = append(scoped, p)
					}
				}
				sort.Slice(scoped, func(i, j int) bool { return scoped[i].Lag > scoped[j].Lag })
				top := map[string]int64{}
				for _, p := range scoped[:min(len(scoped), 10)] {
					if p.Lag > 0 {
						top[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Lag
					}
				}
				details := map[string]any{
					"group": g.Group, "state": g.State, "members": g.Members, "partitions": parts,
					"total_lag": total, "max_lag_seconds": maxTime.Seconds(), "top_partitions_by_lag": top,
				}
				lbl := []string{"group", g.Group}
				if r.Scope.Topic != "" {
					lbl = append(lbl, "topic", r.Scope.Topic)
				}
				if r.Kind == KindGroupStatus {
					details["status"] = GroupStatus(statuses).String()
					details["partitions_by_status"] = byStatus
					details["min_status"] = r.MinStatus.String()
				}
				return details, e.labels(r, lbl...), e.links(r, "/groups/"+url.PathEscape(g.Group), "Consumer group "+g.Group)
			}
			behind := human.Plural(total, "record", "records")
			switch r.Kind {
			case KindLagRecords:
				add(subject, float64(total) > r.Threshold, behind,
					fmt.Sprintf("consumer group %q is %s behind (threshold %s)", g.Group, behind, human.Number(r.Threshold)), extra)
			case KindLagSeconds:
				d := human.Duration(maxTime)
				add(subject, maxTime.Seconds() > r.Threshold, d,
					fmt.Sprintf("consumer group %q is %s behind (threshold %s)", g.Group, d, human.Duration(time.Duration(r.Threshold*float64(time.Second)))), extra)
			case KindGroupStatus:
				gs := GroupStatus(statuses)
				holds := gs >= r.MinStatus && gs > StatusOK
				add(subject, holds, gs.String(),
					fmt.Sprintf("consumer group %q is %s (%s), total lag %s", g.Group, gs, statusCounts(byStatus), behind), extra)
			}
			unknownUnlessHolds()
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
			value := fmt.Sprintf("%d %s", len(bad), what)
			add("topic:"+t.Topic, float64(len(bad)) > r.Threshold, value,
				fmt.Sprintf("topic %q has %d %s partitions of %d", t.Topic, len(bad), what, t.Partitions),
				func() (map[string]any, map[string]string, []Link) {
					return map[string]any{"topic": t.Topic, "partitions": t.Partitions, what + "_partitions": bad, "count": len(bad)},
						e.labels(r, "topic", t.Topic), e.links(r, "/topics/"+url.PathEscape(t.Topic), "Topic "+t.Topic)
				})
		}
	case KindBrokerDown:
		for _, b := range in.health.Brokers {
			id := strconv.Itoa(int(b.ID))
			if !m.name(id) {
				continue
			}
			state := "up"
			if !b.Up {
				state = "down"
			}
			add("broker:"+id, !b.Up, state, fmt.Sprintf("broker %d (%s) is %s", b.ID, b.Addr, state),
				func() (map[string]any, map[string]string, []Link) {
					return map[string]any{"broker": b.ID, "addr": b.Addr}, e.labels(r, "broker", id), e.links(r, "/brokers/"+id, "Broker "+id)
				})
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
					obs[subject] = &observation{subject: subject, unknown: true}
				} else {
					add(subject, false, "not measured yet", fmt.Sprintf("topic %q has not been watched long enough to tell", t.Topic), nil)
				}
			case 1:
				quiet := now.Sub(e.lastChange[t.Topic])
				add(subject, true, "quiet for "+human.Duration(quiet), fmt.Sprintf("topic %q has received no records for %s", t.Topic, human.Duration(quiet)),
					func() (map[string]any, map[string]string, []Link) {
						return map[string]any{"topic": t.Topic, "messages_in": t.MessagesIn, "quiet_seconds": quiet.Round(time.Second).Seconds()},
							e.labels(r, "topic", t.Topic), e.links(r, "/topics/"+url.PathEscape(t.Topic), "Topic "+t.Topic)
					})
			default:
				add(subject, false, "receiving records", fmt.Sprintf("topic %q is receiving records", t.Topic), nil)
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
				limit = human.Number(r.Threshold) + " %"
			}
			id := strconv.Itoa(int(d.Broker))
			value := fmt.Sprintf("%s free (%.1f %%)", formatBytes(d.FreeBytes), pct)
			add(fmt.Sprintf("logdir:%d:%s", d.Broker, d.Path), low, value,
				fmt.Sprintf("log dir %s on broker %d has %s, threshold %s", d.Path, d.Broker, value, limit),
				func() (map[string]any, map[string]string, []Link) {
					return map[string]any{"broker": d.Broker, "path": d.Path, "free_bytes": d.FreeBytes, "total_bytes": d.TotalBytes, "free_percent": pct},
						e.labels(r, "broker", id, "log_dir", d.Path), e.links(r, "/brokers/"+id, "Broker "+id)
				})
		}
	case KindAuthFailures, KindAuthzDenials, KindClientThrottled, KindHangingTxn, KindReassignStuck, KindSchemaIncompatible:
		e.observeMetrics(r, in, m, states, now, obs, add)
	case KindComparison:
		for _, c := range in.comparisons {
			if !m.name(c.Name) {
				continue
			}
			diff := c.Mismatched + c.MissingInTarget + c.MissingInSource
			add("comparison:"+c.Name, float64(diff) > r.Threshold, human.Plural(diff, "difference", "differences"),
				fmt.Sprintf("comparison %q (%s vs %s) found %s, %s missing in %s, %s missing in %s",
					c.Name, c.SourceTopic, c.TargetTopic, human.Plural(c.Mismatched, "mismatched record", "mismatched records"),
					human.Count(c.MissingInTarget), c.TargetTopic, human.Count(c.MissingInSource), c.SourceTopic),
				func() (map[string]any, map[string]string, []Link) {
					return map[string]any{"comparison": c.Name, "source_topic": c.SourceTopic, "target_topic": c.TargetTopic,
							"compared": c.Compared, "mismatched": c.Mismatched, "missing_in_target": c.MissingInTarget,
							"missing_in_source": c.MissingInSource, "running": c.Running},
						e.labels(r, "comparison", c.Name), e.links(r, fmt.Sprintf("/comparisons/%d", c.ID), "Comparison "+c.Name)
				})
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
	return human.BytesText(int64(min(b, math.MaxInt64)))
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

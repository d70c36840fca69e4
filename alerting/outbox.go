package alerting

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

// Notifications go through a transactional outbox (alert_outbox, a
// replicated table): the evaluation round, or a rule's deletion, writes the
// notifications its state changes cause in the same change as the states;
// the console that delivers (the leading one) queues outbox rows in id order
// per notifier, and deletes each once delivered or given up. A console that
// takes over finds what the previous one left and delivers it, so a page is
// neither lost across a failover nor sent again once its deletion reached
// the log (at least once: a delivery just before a kill -9 may go twice;
// PagerDuty deduplicates by dedup_key).

// outboxJob is a job as an outbox row keeps it.
type outboxJob struct {
	Action      string            `json:"action"`
	RuleID      int64             `json:"rule_id"`
	RuleName    string            `json:"rule_name"`
	Description string            `json:"description,omitempty"`
	Kind        Kind              `json:"kind"`
	Severity    Severity          `json:"severity"`
	Subject     string            `json:"subject"`
	DedupKey    string            `json:"dedup_key"`
	Summary     string            `json:"summary"`
	Details     map[string]any    `json:"details,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Links       []Link            `json:"links,omitempty"`
	StartsAt    time.Time         `json:"starts_at"`
	EndsAt      time.Time         `json:"ends_at,omitzero"`
	AckedAt     time.Time         `json:"acked_at,omitzero"` // acknowledge: when
}

// queueNotify writes, in tx, one outbox row per notifier of rule r about
// st.
func (s *Service) queueNotify(ctx context.Context, tx *sql.Tx, r Rule, st *alertState, action string, at time.Time) error {
	j := outboxJob{
		Action: action, RuleID: r.ID, RuleName: r.Name, Description: r.Description, Kind: r.Kind, Severity: r.Severity,
		Subject: st.Subject, DedupKey: st.DedupKey, Summary: st.Summary, Details: st.Details, Labels: st.Labels, Links: st.Links,
		StartsAt: st.ActiveSince,
	}
	if action == actionResolve {
		j.EndsAt = at
	}
	if action == actionAcknowledge {
		j.AckedAt = at
	}
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("alerting: outbox: %w", err)
	}
	for _, nid := range r.NotifierIDs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_outbox(id, notifier_id, job, created_at) VALUES(?,?,?,?)`,
			s.db.NewID(), nid, string(b), ms(at)); err != nil {
			return fmt.Errorf("alerting: outbox: %w", err)
		}
	}
	return nil
}

// kick asks the dispatcher to look at the outbox now.
func (s *Service) kick() {
	select {
	case s.kicks <- struct{}{}:
	default:
	}
}

// delivers reports whether this console delivers notifications now.
func (s *Service) delivers() bool { return s.cfg.Leader == nil || s.cfg.Leader() }

// dispatch runs until Close: while this console delivers, it queues every
// outbox row not queued yet (at each kick and every second); when it stops
// delivering, it forgets what it queued (another console delivers it).
func (s *Service) dispatch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if s.delivers() {
			if err := s.queueOutbox(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Warn("notification outbox", "err", err)
			}
		} else {
			s.qmu.Lock()
			clear(s.queued)
			s.qmu.Unlock()
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.kicks:
		case <-t.C:
		}
	}
}

func (s *Service) queueOutbox(ctx context.Context) error {
	type row struct {
		id, notifier int64
		job          string
	}
	rows, err := consoledb.QueryAll(ctx, s.db, `SELECT id, notifier_id, job FROM alert_outbox ORDER BY id`, func(sc consoledb.Scanner) (row, error) {
		var r row
		err := sc.Scan(&r.id, &r.notifier, &r.job)
		return r, err
	})
	if err != nil {
		return err
	}
	present := make(map[int64]bool, len(rows))
	for _, r := range rows {
		present[r.id] = true
	}
	// Rows queued earlier and gone from the outbox since were delivered:
	// forget them (a row is marked until a read no longer finds it, so a
	// read racing its deletion never queues it twice).
	s.qmu.Lock()
	for id := range s.queued {
		if !present[id] {
			delete(s.queued, id)
		}
	}
	s.qmu.Unlock()
	for _, r := range rows {
		s.qmu.Lock()
		done := s.queued[r.id]
		s.qmu.Unlock()
		if done {
			continue
		}
		var oj outboxJob
		if err := json.Unmarshal([]byte(r.job), &oj); err != nil {
			s.log.Error("unreadable outbox row dropped", "id", r.id, "err", err)
			s.outboxDone(r.id)
			continue
		}
		j := job{
			outboxID: r.id, notifierID: r.notifier, action: oj.Action, ruleID: oj.RuleID, ruleName: oj.RuleName,
			description: oj.Description, kind: oj.Kind, severity: oj.Severity, subject: oj.Subject, dedupKey: oj.DedupKey,
			summary: oj.Summary, details: oj.Details, labels: oj.Labels, links: oj.Links, startsAt: oj.StartsAt, endsAt: oj.EndsAt, ackedAt: oj.AckedAt,
		}
		if !s.enqueue(j) {
			return nil // a queue is full: the rest waits for the next round, in order
		}
	}
	return nil
}

// outboxDone deletes a delivered (or given up) outbox row. While the topic
// is away the deletion is made here and republished later, so a delivery
// is not repeated by this console meanwhile.
func (s *Service) outboxDone(id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 15*time.Second)
	defer cancel()
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM alert_outbox WHERE id = ?`, id)
		return err
	}, consoledb.LocalFallback())
	if err != nil {
		s.log.Error("notification outbox: delete a delivered row", "id", id, "err", err)
	}
}

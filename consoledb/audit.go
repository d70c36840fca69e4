package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// AuditEntry is one change made through the console: who, what, when and
// from where.
type AuditEntry struct {
	ID         int64
	At         time.Time
	User       string
	Action     string // e.g. "topic.create", "user.add", "group.reset-offsets"
	Target     string // what it was done to, e.g. the topic name
	Detail     string // parameters, human readable
	RemoteAddr string
	Outcome    string // "ok" or the error text
}

// Bounds of the audit entry's fields, in bytes: what a client sends (a
// user name on a failed sign-in, a path) is recorded, but never more.
const (
	MaxAuditUser    = 128
	MaxAuditAction  = 64
	MaxAuditTarget  = 512
	MaxAuditDetail  = 4096
	MaxAuditAddr    = 64
	MaxAuditOutcome = 1024
)

// Bound cuts every field of e to its bound (valid UTF-8, "…" marking a
// cut) and replaces control characters, so an entry is small and prints
// on one line. AppendAudit applies it; callers that also log the entry
// apply it first.
func (e *AuditEntry) Bound() {
	e.User = boundText(e.User, MaxAuditUser, false)
	e.Action = boundText(e.Action, MaxAuditAction, false)
	e.Target = boundText(e.Target, MaxAuditTarget, false)
	e.Detail = boundText(e.Detail, MaxAuditDetail, true)
	e.RemoteAddr = boundText(e.RemoteAddr, MaxAuditAddr, false)
	e.Outcome = boundText(e.Outcome, MaxAuditOutcome, true)
}

// boundText returns s as valid UTF-8 without control characters (but
// newlines when lines is set), at most n bytes plus "…" when cut.
func boundText(s string, n int, lines bool) string {
	clean := func(r rune) rune {
		if r < ' ' && !(lines && r == '\n') || r == 0x7f || r == utf8.RuneError {
			return '?'
		}
		return r
	}
	if len(s) > n {
		s = s[:n]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return strings.Map(clean, s) + "…"
	}
	return strings.Map(clean, s)
}

// AppendAudit records e, bounded (see Bound). A zero At means now; an
// empty Outcome means "ok".
func (c *Console) AppendAudit(ctx context.Context, e AuditEntry) (int64, error) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Outcome == "" {
		e.Outcome = "ok"
	}
	e.Bound()
	id := c.db.NewID()
	err := c.db.Change(WithActor(ctx, e.User), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_log(id, at, username, action, target, detail, remote_addr, outcome) VALUES(?,?,?,?,?,?,?,?)`,
			id, ms(e.At), e.User, e.Action, e.Target, e.Detail, e.RemoteAddr, e.Outcome)
		return err
	}, Unlocked())
	if err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return id, nil
}

// The audit log is shared by every host: each entry has an id unique in
// the cluster (NewID), so appending needs no lock.
var _ = Replicate(Table{Name: "audit_log"})

// AuditFilter selects audit entries, newest first. Zero fields match all.
type AuditFilter struct {
	User   string
	Action string // exact action, or a prefix ending in "." (e.g. "topic.")
	// ActionLike matches the actions that contain it ("session" finds
	// session.login and session.logout; "reset" finds group.reset-offsets):
	// what a person types into the audit page's filter.
	ActionLike string
	Search     string // substring of target or detail
	Target     string // exact target (e.g. a group's name)
	Since      time.Time
	Until      time.Time
	BeforeID   int64 // entries with id < BeforeID (paging); 0 for the newest
	Limit      int   // default 100, at most 1000
}

// Audit lists entries matching f, newest first, and whether more remain.
func (c *Console) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, bool, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var where []string
	var args []any
	if f.User != "" {
		where = append(where, "username = ?")
		args = append(args, f.User)
	}
	if f.Action != "" {
		if strings.HasSuffix(f.Action, ".") {
			where = append(where, "substr(action, 1, ?) = ?")
			args = append(args, len(f.Action), f.Action)
		} else {
			where = append(where, "action = ?")
			args = append(args, f.Action)
		}
	}
	if f.ActionLike != "" {
		where = append(where, "instr(action, ?) > 0")
		args = append(args, f.ActionLike)
	}
	if f.Search != "" {
		where = append(where, "(instr(target, ?) > 0 OR instr(detail, ?) > 0)")
		args = append(args, f.Search, f.Search)
	}
	if f.Target != "" {
		where = append(where, "target = ?")
		args = append(args, f.Target)
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, ms(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, "at < ?")
		args = append(args, ms(f.Until))
	}
	if f.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, f.BeforeID)
	}
	q := `SELECT id, at, username, action, target, detail, remote_addr, outcome FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit+1)
	out, err := QueryAll(ctx, c.db, q, func(row Scanner) (AuditEntry, error) {
		var e AuditEntry
		var at int64
		err := row.Scan(&e.ID, &at, &e.User, &e.Action, &e.Target, &e.Detail, &e.RemoteAddr, &e.Outcome)
		e.At = fromMS(at)
		return e, err
	}, args...)
	if err != nil {
		return nil, false, fmt.Errorf("read audit log: %w", err)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	return out, more, nil
}

// pruneBatch is how many audit rows one DELETE removes, so pruning a large
// backlog never holds the database's write lock for long.
const pruneBatch = 5000

// PruneAudit deletes the audit entries recorded before before, then the
// oldest beyond the newest keep entries (keep <= 0: no size cap), in
// batches. It returns how many it deleted.
func (c *Console) PruneAudit(ctx context.Context, before time.Time, keep int) (int64, error) {
	var total int64
	del := func(q string, args ...any) error {
		for {
			var n int64
			err := c.db.Change(ctx, func(tx *sql.Tx) error {
				res, err := tx.ExecContext(ctx, q, args...)
				if err != nil {
					return err
				}
				n, _ = res.RowsAffected()
				return nil
			})
			if err != nil {
				return fmt.Errorf("prune audit log: %w", err)
			}
			total += n
			if n < pruneBatch {
				return nil
			}
		}
	}
	if err := del(`DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < ? ORDER BY id LIMIT ?)`, ms(before), pruneBatch); err != nil {
		return total, err
	}
	if keep > 0 {
		var cut int64
		err := c.db.QueryRowContext(ctx, `SELECT id FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?`, keep).Scan(&cut)
		if err == nil {
			if err := del(`DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE id <= ? ORDER BY id LIMIT ?)`, cut, pruneBatch); err != nil {
				return total, err
			}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return total, fmt.Errorf("prune audit log: %w", err)
		}
	}
	return total, nil
}

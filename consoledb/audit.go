package consoledb

import (
	"context"
	"fmt"
	"strings"
	"time"
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

// AppendAudit records e. A zero At means now; an empty Outcome means "ok".
func (c *Console) AppendAudit(ctx context.Context, e AuditEntry) (int64, error) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Outcome == "" {
		e.Outcome = "ok"
	}
	if len(e.Detail) > 4096 {
		e.Detail = e.Detail[:4096] + "…"
	}
	res, err := c.db.ExecContext(ctx, `INSERT INTO audit_log(at, username, action, target, detail, remote_addr, outcome) VALUES(?,?,?,?,?,?,?)`,
		ms(e.At), e.User, e.Action, e.Target, e.Detail, e.RemoteAddr, e.Outcome)
	if err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return res.LastInsertId()
}

// AuditFilter selects audit entries, newest first. Zero fields match all.
type AuditFilter struct {
	User     string
	Action   string // exact action, or a prefix ending in "." (e.g. "topic.")
	Search   string // substring of target or detail
	BeforeID int64  // entries with id < BeforeID (paging); 0 for the newest
	Limit    int    // default 100, at most 1000
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
	if f.Search != "" {
		where = append(where, "(instr(target, ?) > 0 OR instr(detail, ?) > 0)")
		args = append(args, f.Search, f.Search)
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
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.User, &e.Action, &e.Target, &e.Detail, &e.RemoteAddr, &e.Outcome); err != nil {
			return nil, false, fmt.Errorf("read audit log: %w", err)
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read audit log: %w", err)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	return out, more, nil
}

package consoledb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Writing replicated tables. Every change of a replicated table (see
// Replicate) goes through DB.Change: fn runs in a transaction on the
// replica's capture connection, where temporary triggers note the primary
// key of every row inserted, updated or deleted (foreign-key cascades
// included). The replica then reads those rows (or their absence), rolls
// the transaction back, produces one record per row, and returns once this
// host applied them. Before fn runs it holds the cluster's console write
// lock and has applied the topic up to its end, so what fn reads is the
// cluster's latest state and no other host writes meanwhile.
//
// Without a replica (a test, a tool), Change is a plain transaction.

// ChangeOption modifies a Change.
type ChangeOption func(*changeOpts)

type changeOpts struct {
	unlocked bool
	fallback bool
}

// Unlocked skips the write lock and the catch-up: for appends of rows
// whose keys are unique by construction (audit entries), which read
// nothing and cannot be stale.
func Unlocked() ChangeOption { return func(o *changeOpts) { o.unlocked = true } }

// LocalFallback commits fn locally when the console topic cannot be
// reached, instead of refusing: for the leading console's background work
// (alert evaluation), which must go on paging during an outage. The tables
// it touched are republished whole once the topic is back.
func LocalFallback() ChangeOption { return func(o *changeOpts) { o.fallback = true } }

// ErrUnavailable is returned by Change while this host cannot reach the
// console topic: the change is refused rather than made here only.
var ErrUnavailable = errors.New("the console cannot reach its state topic; changes are refused until it is back")

// ErrBusy is returned by Change when the cluster's console write lock
// stayed taken for the whole WaitTimeout (other hosts saving many changes).
var ErrBusy = errors.New("other changes are being saved; try again in a moment")

// StaleError refuses an edit based on a version of a row that another
// change replaced since.
type StaleError struct {
	Table   string
	By      string // who made the change that replaced it
	Host    string // on which host (broker id)
	At      time.Time
	Deleted bool // the row was deleted
}

func (e *StaleError) Error() string {
	verb := "changed"
	if e.Deleted {
		verb = "deleted"
	}
	s := verb
	if e.By != "" {
		s += " by " + e.By
	}
	if e.Host != "" {
		s += " on host " + e.Host
	}
	if !e.At.IsZero() {
		s += " at " + e.At.UTC().Format("15:04") + " UTC"
	}
	return s + "; reload"
}

// IsStale reports whether err is a refused stale edit.
func IsStale(err error) bool {
	var se *StaleError
	return errors.As(err, &se)
}

type actorKey struct{}

// WithActor returns ctx carrying who makes the changes done with it (a
// console user's name, "cli:root", "system"); records say so.
func WithActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

func actorOf(ctx context.Context) string {
	if s, ok := ctx.Value(actorKey{}).(string); ok && s != "" {
		return s
	}
	return "system"
}

// Change runs fn and makes its changes of replicated tables the cluster's
// (see the comment above). fn must not call Change. An error of fn is
// returned as is, and nothing is changed.
func (d *DB) Change(ctx context.Context, fn func(tx *sql.Tx) error, opts ...ChangeOption) error {
	var o changeOpts
	for _, opt := range opts {
		opt(&o)
	}
	if r := d.rep.Load(); r != nil {
		return r.change(ctx, fn, o)
	}
	if q := d.queue.Load(); q != nil {
		return q.change(ctx, fn)
	}
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Version is what the replica knows of a row: the version (the offset of
// the record that last wrote it, plus one; 0 when the row was never
// replicated), who wrote it, on which host, when, and whether that was a
// deletion.
type Version struct {
	Version int64
	By      string
	Host    string
	At      time.Time
	Deleted bool
}

// RowVersion returns the version of the row of table with primary key key
// (values in key order), read through q (the DB, or a Change's tx).
func RowVersion(ctx context.Context, q Querier, table string, key ...any) (Version, error) {
	rows, err := q.QueryContext(ctx, `SELECT version, by_user, by_host, at, deleted FROM replica_keys WHERE tbl = ? AND pk = ?`,
		table, pkJSON(normKey(key)))
	if err != nil {
		return Version{}, err
	}
	defer rows.Close()
	var v Version
	if rows.Next() {
		var at int64
		var del int
		if err := rows.Scan(&v.Version, &v.By, &v.Host, &at, &del); err != nil {
			return Version{}, err
		}
		v.At, v.Deleted = fromMS(at), del != 0
	}
	return v, rows.Err()
}

// normKey makes key values encode as the replica encodes them (ints as
// int64).
func normKey(key []any) []any {
	out := make([]any, len(key))
	for i, k := range key {
		switch x := k.(type) {
		case int:
			out[i] = int64(x)
		case int32:
			out[i] = int64(x)
		default:
			out[i] = k
		}
	}
	return out
}

// CheckVersion refuses, with a *StaleError, a change of the row of table
// with primary key key that was based on version base, when the row's
// version is another one now. base 0 means the editor did not say (an API
// call without a version): no check. Call it inside Change's fn, where it
// reads the cluster's latest state.
func CheckVersion(ctx context.Context, tx *sql.Tx, table string, base int64, key ...any) error {
	if base == 0 {
		return nil
	}
	v, err := RowVersion(ctx, tx, table, key...)
	if err != nil {
		return err
	}
	if v.Version == base && !v.Deleted {
		return nil
	}
	if v.Version == 0 {
		// Never replicated (a database from before replication, not yet
		// imported): nothing to compare with.
		return nil
	}
	return &StaleError{Table: table, By: v.By, Host: v.Host, At: v.At, Deleted: v.Deleted}
}

// ---- capture ----

// capturer runs transactions on one connection whose temporary triggers
// record the keys of changed rows of the replicated tables.
type capturer struct {
	conn   *sql.Conn
	tables map[string]*tableInfo
}

const captureTable = `temp._replica_capture`

func newCapturer(ctx context.Context, db *sql.DB, tables map[string]*tableInfo) (*capturer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// No constraint on the capture table, and plain INSERTs: a statement
	// with its own conflict clause (INSERT OR REPLACE, an upsert) imposes
	// it on what its triggers do. Keys noted twice are merged when read.
	stmts := []string{`CREATE TEMP TABLE IF NOT EXISTS _replica_capture (tbl TEXT NOT NULL, pk TEXT NOT NULL)`}
	for _, ti := range tables {
		keyOf := func(row string) string {
			parts := make([]string, len(ti.pk))
			for i, c := range ti.pk {
				parts[i] = row + "." + quoteIdent(c)
			}
			return "json_array(" + strings.Join(parts, ", ") + ")"
		}
		ins := func(row string) string {
			return `INSERT INTO _replica_capture(tbl, pk) VALUES('` + ti.Name + `', ` + keyOf(row) + `);`
		}
		tn := quoteIdent(ti.Name)
		stmts = append(stmts,
			`CREATE TEMP TRIGGER IF NOT EXISTS "_rc_`+ti.Name+`_i" AFTER INSERT ON main.`+tn+` BEGIN `+ins("NEW")+` END`,
			`CREATE TEMP TRIGGER IF NOT EXISTS "_rc_`+ti.Name+`_u" AFTER UPDATE ON main.`+tn+` BEGIN `+ins("OLD")+ins("NEW")+` END`,
			`CREATE TEMP TRIGGER IF NOT EXISTS "_rc_`+ti.Name+`_d" AFTER DELETE ON main.`+tn+` BEGIN `+ins("OLD")+` END`)
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			conn.Close()
			return nil, fmt.Errorf("consoledb: capture triggers: %w", err)
		}
	}
	return &capturer{conn: conn, tables: tables}, nil
}

// captured is one changed row: its table, key, image (nil: deleted) and the
// version it had when the change began.
type captured struct {
	ti    *tableInfo
	pk    []any
	image map[string]any
	base  int64
}

// run runs fn in a transaction and returns the rows it changed; the
// transaction is committed when commit is set (with after run inside it
// first), rolled back otherwise.
func (c *capturer) run(ctx context.Context, fn func(tx *sql.Tx) error, commit bool, after func(tx *sql.Tx, rows []captured) error) ([]captured, error) {
	tx, err := c.conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+captureTable); err != nil {
		return nil, err
	}
	if err := fn(tx); err != nil {
		return nil, err
	}
	type ck struct{ tbl, pk string }
	keys, err := QueryAll(ctx, tx, `SELECT tbl, pk FROM `+captureTable+` GROUP BY tbl, pk ORDER BY min(rowid)`, func(row Scanner) (ck, error) {
		var k ck
		err := row.Scan(&k.tbl, &k.pk)
		return k, err
	})
	if err != nil {
		return nil, err
	}
	var out []captured
	for _, k := range keys {
		ti := c.tables[k.tbl]
		pk, err := ti.pkValues(k.pk)
		if err != nil {
			return nil, err
		}
		if ti.local(pk) {
			continue
		}
		img, err := ti.readImage(ctx, tx, pk)
		if err != nil {
			return nil, fmt.Errorf("consoledb: read changed row of %s: %w", ti.Name, err)
		}
		v, err := RowVersion(ctx, tx, ti.Name, pk...)
		if err != nil {
			return nil, err
		}
		out = append(out, captured{ti: ti, pk: pk, image: img, base: v.Version})
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+captureTable); err != nil {
		return nil, err
	}
	if !commit {
		return out, nil
	}
	if after != nil {
		if err := after(tx, out); err != nil {
			return nil, err
		}
	}
	return out, tx.Commit()
}

// records makes the records of captured rows.
func records(rows []captured, by string, host int32) ([]Record, error) {
	out := make([]Record, 0, len(rows))
	for _, r := range rows {
		rec := Record{Key: encodeKey(r.ti.Name, r.pk), Headers: map[string]string{
			HeaderVersion: recordFormat, HeaderBy: by, HeaderHost: hostHeader(host), headerBase: strconv.FormatInt(r.base, 10),
		}}
		if r.image != nil {
			v, err := encodeImage(r.image)
			if err != nil {
				return nil, fmt.Errorf("consoledb: row of %s: %w", r.ti.Name, err)
			}
			rec.Value = v
		}
		out = append(out, rec)
	}
	return out, nil
}

// headerBase is the version of the row the writer saw (diagnostics: the
// applier warns when a record of this host replaced another version).
const headerBase = "sluice.base"

// ---- without a replica: queue for the cluster ----

// QueueForCluster makes Change, while no replica runs on d (a command on
// the host: sluice console user), commit locally and queue the changed
// rows, as changed, in replica_outbox; the console on this host publishes
// them when its replica runs (Replica.publishQueued), whether this host's
// database is then the cluster's or is replaced by it.
func (d *DB) QueueForCluster(ctx context.Context) error {
	// Only the tables this database has: a command migrates only the
	// components it writes.
	tables, err := loadTables(ctx, d, true)
	if err != nil {
		return err
	}
	c, err := newCapturer(ctx, d.DB, tables)
	if err != nil {
		return err
	}
	d.queue.Store(&localQueue{c: c})
	return nil
}

type localQueue struct {
	c *capturer
}

func (q *localQueue) change(ctx context.Context, fn func(tx *sql.Tx) error) error {
	by := actorOf(ctx)
	_, err := q.c.run(ctx, fn, true, func(tx *sql.Tx, rows []captured) error {
		for _, r := range rows {
			var img any // NULL: deleted
			if r.image != nil {
				b, err := encodeImage(r.image)
				if err != nil {
					return err
				}
				img = string(b)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO replica_outbox(tbl, pk, image, by_user, at) VALUES(?,?,?,?,?)`,
				r.ti.Name, pkJSON(r.pk), img, by, ms(time.Now())); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

func (q *localQueue) close() { q.c.conn.Close() }

// pkValuesOf is pkValues of a table that may be unknown (nil).
func (ti *tableInfo) pkValuesOf(s string) ([]any, error) {
	if ti == nil {
		return nil, errors.New("unknown table")
	}
	return ti.pkValues(s)
}

// pkValues decodes a pk column of replica_keys or replica_outbox.
func (ti *tableInfo) pkValues(s string) ([]any, error) {
	var raw []any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&raw); err != nil {
		return nil, err
	}
	return ti.keyValues(raw)
}

// Package consoledb is the console's own state: one SQLite database file
// (modernc.org/sqlite, pure Go) under the data directory, in WAL mode with a
// busy timeout.
//
// Schema changes are ordered lists of SQL migrations. Each part of the console
// owns its own list, named by a component string, so parts can grow
// independently: "console" (users, sessions, the audit log, settings, lag
// samples and known brokers; console.go), "alerting" (package alerting) and
// "migration" (the comparisons). schema_migrations records how many of each
// list are applied. A migration list is append-only: never edit or reorder an
// entry that has shipped.
//
// Several handles may share one file (the web console opens its own with
// OpenConsole beside the appliance's); WAL mode and the busy timeout let them
// take turns writing.
package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is the console database. It embeds *sql.DB; use it as one.
type DB struct {
	*sql.DB
	path string

	rep   atomic.Pointer[Replica]    // the replica writing through the console topic, once started
	queue atomic.Pointer[localQueue] // QueueForCluster's local capture, without a replica
}

// Path is the database file.
func (d *DB) Path() string { return d.path }

// Close closes the database (and a QueueForCluster connection). Stop the
// replica first.
func (d *DB) Close() error {
	if q := d.queue.Swap(nil); q != nil {
		q.close()
	}
	return d.DB.Close()
}

// Replica returns the replica running on d, or nil.
func (d *DB) Replica() *Replica { return d.rep.Load() }

var idSeq atomic.Uint32

// NewID returns an id for a row appended by this host that no other host
// will use: the time in milliseconds, a hash of this host's broker id and
// a sequence number, so ids grow with time (lists ordered by id are in
// time order) and two hosts never collide unless one appends more than
// 1024 rows in a millisecond.
func (d *DB) NewID() int64 {
	var host int64
	if r := d.rep.Load(); r != nil {
		host = int64(uint32(r.cfg.Host)*2654435761) >> 22 & 0x3ff
	}
	return time.Now().UnixMilli()<<20 | host<<10 | int64(idSeq.Add(1)&0x3ff)
}

// Open opens (creating if needed, readable by its owner only) the database at
// path, sets WAL mode, a busy timeout, foreign keys and immediate write
// transactions, and creates schema_migrations. It applies no migration list:
// each component applies its own with Migrate (NewConsole and OpenConsole the
// console's).
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("consoledb: empty database path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("consoledb: create directory for %s: %w", path, err)
	}
	if err := createPrivate(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("consoledb: open %s: %w", path, err)
	}
	// One writer at a time is SQLite's rule; readers proceed in WAL mode.
	db.SetMaxOpenConns(8)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("consoledb: open %s: %w", path, err)
	}
	d := &DB{DB: db, path: path}
	if _, err := d.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT PRIMARY KEY,
		version   INTEGER NOT NULL,
		applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("consoledb: %s: create schema_migrations: %w", path, err)
	}
	// Every console database has the replica's bookkeeping (versions are
	// read from it, with or without a replica running).
	if err := d.MigrateReplica(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("consoledb: %s: %w", path, err)
	}
	// SQLite creates the WAL and shared-memory files with the database
	// file's mode; files left by an older Sluice are tightened here.
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := tighten(f); err != nil {
			db.Close()
			return nil, err
		}
	}
	return d, nil
}

// The database holds password hashes, session ids and the audit log: it is
// created readable by its owner only (0600), whatever the umask, and an
// existing file readable by others loses those bits (group read, 0640, is
// left for installs that grant it on purpose).
const (
	fileMode    os.FileMode = 0o600
	maxFileMode os.FileMode = 0o640
)

// createPrivate creates path with fileMode when it does not exist.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consoledb: create %s: %w", path, err)
	}
	if err := f.Chmod(fileMode); err != nil { // the umask only removes bits; be explicit anyway
		f.Close()
		return fmt.Errorf("consoledb: chmod %s: %w", path, err)
	}
	return f.Close()
}

// tighten removes from path's mode what maxFileMode does not grant.
func tighten(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consoledb: %w", err)
	}
	if perm := st.Mode().Perm(); perm&^maxFileMode != 0 {
		if err := os.Chmod(path, perm&maxFileMode); err != nil {
			return fmt.Errorf("consoledb: %s has mode %v and cannot be made private: %w", path, perm, err)
		}
	}
	return nil
}

// Migrate applies the migrations of component that are not applied yet, each
// in its own transaction, in order. A database whose recorded version is above
// len(migrations) was written by a newer Sluice: Migrate refuses it rather than
// guess.
func (d *DB) Migrate(ctx context.Context, component string, migrations []string) error {
	var version int
	err := d.QueryRowContext(ctx, `SELECT version FROM schema_migrations WHERE component = ?`, component).Scan(&version)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("consoledb: read schema version of %s: %w", component, err)
	}
	if version > len(migrations) {
		return fmt.Errorf("consoledb: %s schema is at version %d but this build knows only %d: the database was written by a newer Sluice", component, version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		tx, err := d.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("consoledb: migrate %s to %d: %w", component, i+1, err)
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("consoledb: migrate %s to %d: %w", component, i+1, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(component, version) VALUES(?, ?)
			ON CONFLICT(component) DO UPDATE SET version = excluded.version, applied_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')`, component, i+1); err != nil {
			tx.Rollback()
			return fmt.Errorf("consoledb: migrate %s to %d: %w", component, i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("consoledb: migrate %s to %d: %w", component, i+1, err)
		}
	}
	return nil
}

// Version reports the applied schema version of component (0 when none).
func (d *DB) Version(ctx context.Context, component string) (int, error) {
	var v int
	err := d.QueryRowContext(ctx, `SELECT version FROM schema_migrations WHERE component = ?`, component).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

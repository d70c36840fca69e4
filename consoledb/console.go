package consoledb

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// ConsoleComponent is the migration component of the console's own tables:
// users, sessions, the audit log, settings, lag samples and the brokers the
// console has seen.
const ConsoleComponent = "console"

// FileName is the name of the console database inside console.data.dir.
const FileName = "console.db"

// consoleMigrations is append-only: never edit or reorder an entry that has
// shipped; add a new one instead. Times are Unix milliseconds (UTC) so range
// queries and pruning are integer comparisons.
var consoleMigrations = []string{
	// 1: users, sessions, audit log, settings, lag samples, known brokers.
	`CREATE TABLE users (
		id            INTEGER PRIMARY KEY,
		name          TEXT NOT NULL UNIQUE COLLATE NOCASE,
		role          TEXT NOT NULL CHECK (role IN ('viewer','operator','admin')),
		password_hash TEXT NOT NULL,
		created_at    INTEGER NOT NULL,
		updated_at    INTEGER NOT NULL,
		last_login_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE sessions (
		id           TEXT PRIMARY KEY,           -- hex SHA-256 of the cookie token; the token itself is never stored
		user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
		created_at   INTEGER NOT NULL,
		expires_at   INTEGER NOT NULL,
		last_seen_at INTEGER NOT NULL,
		remote_addr  TEXT NOT NULL DEFAULT '',
		user_agent   TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX sessions_user ON sessions(user_id);
	CREATE INDEX sessions_expiry ON sessions(expires_at);
	CREATE TABLE audit_log (
		id          INTEGER PRIMARY KEY,
		at          INTEGER NOT NULL,
		username    TEXT NOT NULL,
		action      TEXT NOT NULL,
		target      TEXT NOT NULL DEFAULT '',
		detail      TEXT NOT NULL DEFAULT '',
		remote_addr TEXT NOT NULL DEFAULT '',
		outcome     TEXT NOT NULL DEFAULT 'ok'
	);
	CREATE INDEX audit_log_user ON audit_log(username, id);
	CREATE INDEX audit_log_action ON audit_log(action, id);
	CREATE TABLE settings (
		key        TEXT PRIMARY KEY,
		value      TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE lag_samples (
		group_name TEXT NOT NULL,
		topic      TEXT NOT NULL,
		at         INTEGER NOT NULL,
		lag        INTEGER NOT NULL,
		lag_ms     INTEGER NOT NULL,
		PRIMARY KEY (group_name, at, topic)
	) WITHOUT ROWID;
	CREATE INDEX lag_samples_at ON lag_samples(at);
	CREATE TABLE known_brokers (
		id           INTEGER PRIMARY KEY,
		host         TEXT NOT NULL,
		port         INTEGER NOT NULL,
		rack         TEXT NOT NULL DEFAULT '',
		first_seen_at INTEGER NOT NULL,
		last_seen_at INTEGER NOT NULL
	);`,
	// 2: the audit log is pruned by age.
	`CREATE INDEX audit_log_at ON audit_log(at);`,
}

// ErrNotFound is returned by lookups that found nothing.
var ErrNotFound = errors.New("consoledb: not found")

// Console is the console's view of the database: users, sessions, audit log,
// settings, lag samples and known brokers. Other components (alerting,
// comparisons) share the same *DB with their own migration components.
type Console struct {
	db *DB
}

// NewConsole applies the console migrations to db and returns the console
// store. db stays owned by the caller.
func NewConsole(ctx context.Context, db *DB) (*Console, error) {
	if err := db.Migrate(ctx, ConsoleComponent, consoleMigrations); err != nil {
		return nil, err
	}
	return &Console{db: db}, nil
}

// OpenConsole opens (creating when missing) <dataDir>/console.db and applies
// the console migrations. Close the returned DB when done.
func OpenConsole(ctx context.Context, dataDir string) (*DB, *Console, error) {
	if dataDir == "" {
		return nil, nil, errors.New("consoledb: console.data.dir is empty")
	}
	db, err := Open(ctx, filepath.Join(dataDir, FileName))
	if err != nil {
		return nil, nil, err
	}
	c, err := NewConsole(ctx, db)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("consoledb: %w", err)
	}
	return db, c, nil
}

// DB is the underlying database.
func (c *Console) DB() *DB { return c.db }

package migration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

// Migrations is the "migration" component's schema in the console database,
// applied in order by consoledb. Append only: never edit a shipped entry.
var Migrations = []string{
	`CREATE TABLE migration_comparisons (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT NOT NULL,
		spec       TEXT NOT NULL,
		state      TEXT NOT NULL DEFAULT 'running',
		error      TEXT NOT NULL DEFAULT '',
		generation INTEGER NOT NULL DEFAULT 1,
		created_by TEXT NOT NULL DEFAULT '',
		created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
		updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
	)`,
	`CREATE TABLE migration_checkpoints (
		comparison_id INTEGER PRIMARY KEY REFERENCES migration_comparisons(id) ON DELETE CASCADE,
		generation    INTEGER NOT NULL,
		seq           INTEGER NOT NULL,
		snapshot      TEXT NOT NULL,
		state         BLOB NOT NULL,
		saved_at      TEXT NOT NULL
	)`,
	`CREATE TABLE migration_differences (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		comparison_id INTEGER NOT NULL REFERENCES migration_comparisons(id) ON DELETE CASCADE,
		generation    INTEGER NOT NULL,
		kind          TEXT NOT NULL,
		seq           INTEGER NOT NULL,
		detail        TEXT NOT NULL
	)`,
	`CREATE INDEX migration_differences_by_kind ON migration_differences(comparison_id, kind, id)`,
}

// The comparisons are shared by every host of a cluster (see
// consoledb.Replicate): definitions, states, checkpoints and sampled
// differences, so the console that takes over resumes each running
// comparison from its last checkpoint.
var (
	_ = consoledb.Replicate(consoledb.Table{Name: "migration_comparisons"})
	_ = consoledb.Replicate(consoledb.Table{Name: "migration_checkpoints"})
	_ = consoledb.Replicate(consoledb.Table{Name: "migration_differences"})
)

// State is the lifecycle state of a stored comparison.
type State string

// States of a stored comparison.
const (
	StateRunning  State = "running"  // being compared (or retrying after an error, see Error)
	StatePaused   State = "paused"   // stopped by an operator; Resume continues from the checkpoint
	StateFinished State = "finished" // a bounded comparison that reached its end
	StateFailed   State = "failed"   // stopped by an error that retrying cannot fix
)

// ErrNotFound is returned for a comparison id that does not exist.
var ErrNotFound = errors.New("comparison not found")

// errStale is returned by a checkpoint save from a run that was replaced
// (the comparison was restarted or deleted meanwhile).
var errStale = errors.New("comparison was restarted or deleted")

// Store keeps comparisons, their checkpoints and their differences in the
// console database.
type Store struct {
	db *consoledb.DB
}

// OpenStore applies the migration component's schema to db.
func OpenStore(ctx context.Context, db *consoledb.DB) (*Store, error) {
	if err := db.Migrate(ctx, "migration", Migrations); err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// Stored is a comparison as stored.
type Stored struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	Spec       Spec      `json:"spec"`
	State      State     `json:"state"`
	Error      string    `json:"error,omitempty"`
	Generation int64     `json:"generation"` // bumped by each restart
	CreatedBy  string    `json:"created_by,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Snapshot is the numbers at the last checkpoint (nil before the first).
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	SavedAt  time.Time `json:"saved_at"`
	// Version is the comparison's version in the console's replicated
	// state (0: never replicated). An edit, pause, resume, restart or
	// delete based on it is refused once another change replaced it.
	Version int64 `json:"version"`
}

const timeLayout = "2006-01-02T15:04:05.000Z"

func parseTime(s string) time.Time {
	t, _ := time.Parse(timeLayout, s)
	return t
}

// Create stores a new comparison in state running and returns its id. The
// spec is validated and stored with its defaults filled in.
func (s *Store) Create(ctx context.Context, name string, spec Spec, createdBy string) (int64, error) {
	cs, err := compile(spec)
	if err != nil {
		return 0, err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = cs.Left + " vs " + cs.Right
	}
	if len(name) > 200 {
		return 0, errors.New("name is longer than 200 characters")
	}
	js, err := json.Marshal(cs.Spec)
	if err != nil {
		return 0, err
	}
	var id int64
	err = s.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO migration_comparisons(name, spec, created_by) VALUES(?, ?, ?)`, name, string(js), createdBy)
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("migration: store comparison: %w", err)
	}
	return id, nil
}

const storedColumns = `c.id, c.name, c.spec, c.state, c.error, c.generation, c.created_by, c.created_at, c.updated_at,
	k.snapshot, k.saved_at`

func scanStored(row consoledb.Scanner) (Stored, error) {
	var st Stored
	var spec, created, updated string
	var snap, saved sql.NullString
	if err := row.Scan(&st.ID, &st.Name, &spec, &st.State, &st.Error, &st.Generation, &st.CreatedBy, &created, &updated, &snap, &saved); err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(spec), &st.Spec); err != nil {
		return st, fmt.Errorf("migration: comparison %d: stored spec: %w", st.ID, err)
	}
	st.CreatedAt, st.UpdatedAt = parseTime(created), parseTime(updated)
	if snap.Valid {
		var sn Snapshot
		if err := json.Unmarshal([]byte(snap.String), &sn); err == nil {
			st.Snapshot = &sn
		}
		st.SavedAt = parseTime(saved.String)
	}
	return st, nil
}

// Get returns one comparison.
func (s *Store) Get(ctx context.Context, id int64) (Stored, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+storedColumns+` FROM migration_comparisons c
		LEFT JOIN migration_checkpoints k ON k.comparison_id = c.id AND k.generation = c.generation WHERE c.id = ?`, id)
	st, err := scanStored(row)
	if errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("comparison %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return st, err
	}
	v, err := consoledb.RowVersion(ctx, s.db, comparisonsTable, id)
	st.Version = v.Version
	return st, err
}

// List returns every comparison, newest first.
func (s *Store) List(ctx context.Context) ([]Stored, error) {
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT `+storedColumns+` FROM migration_comparisons c
		LEFT JOIN migration_checkpoints k ON k.comparison_id = c.id AND k.generation = c.generation ORDER BY c.id DESC`, scanStored)
	if err != nil {
		return nil, fmt.Errorf("migration: list comparisons: %w", err)
	}
	for i := range out {
		v, err := consoledb.RowVersion(ctx, s.db, comparisonsTable, out[i].ID)
		if err != nil {
			return nil, fmt.Errorf("migration: list comparisons: %w", err)
		}
		out[i].Version = v.Version
	}
	return out, nil
}

// comparisonsTable is the replicated table of the comparisons' rows,
// whose versions stale edits are checked against.
const comparisonsTable = "migration_comparisons"

// CheckVersion refuses, with a *consoledb.StaleError, an action on
// comparison id based on version base (Stored.Version as a page showed
// it) when another change replaced that version since, on any host; base
// 0 checks nothing. It reads this host's view: the actions check again
// inside their change, against the cluster's latest state.
func (s *Store) CheckVersion(ctx context.Context, id, base int64) error {
	if base == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return consoledb.CheckVersion(ctx, tx, comparisonsTable, base, id)
}

// SetState changes a comparison's state and error text; base, when not 0,
// is the version the change is based on (see CheckVersion).
func (s *Store) SetState(ctx context.Context, id int64, state State, errText string, base int64) error {
	return s.setState(ctx, id, state, errText, -1, base)
}

// setState is SetState; with gen >= 0, only while the comparison is at
// generation gen and running (a run recording its own retry or failure
// must not undo a pause, restart or deletion made meanwhile on any host).
func (s *Store) setState(ctx context.Context, id int64, state State, errText string, gen, base int64) error {
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		if err := consoledb.CheckVersion(ctx, tx, comparisonsTable, base, id); err != nil {
			return err
		}
		q := `UPDATE migration_comparisons SET state = ?, error = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?`
		args := []any{string(state), errText, id}
		if gen >= 0 {
			q += ` AND generation = ? AND state = 'running'`
			args = append(args, gen)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if gen >= 0 {
				return errStale
			}
			return fmt.Errorf("comparison %d: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, errStale) && !consoledb.IsStale(err) {
		return fmt.Errorf("migration: set state of comparison %d: %w", id, err)
	}
	return err
}

// Reset forgets a comparison's progress and differences and bumps its
// generation, so it starts over; the state becomes running. base, when
// not 0, is the version the restart is based on (see CheckVersion).
func (s *Store) Reset(ctx context.Context, id, base int64) error {
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		if err := consoledb.CheckVersion(ctx, tx, comparisonsTable, base, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE migration_comparisons SET generation = generation + 1, state = 'running', error = '',
			updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("comparison %d: %w", id, ErrNotFound)
		}
		for _, q := range []string{`DELETE FROM migration_checkpoints WHERE comparison_id = ?`, `DELETE FROM migration_differences WHERE comparison_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !consoledb.IsStale(err) {
		return fmt.Errorf("migration: reset comparison %d: %w", id, err)
	}
	return err
}

// Update replaces a comparison's name and spec (validated as on Create)
// and resets it like Reset: its progress and differences are forgotten and
// it starts over in state running. base, when not 0, is the version the
// edit is based on (see CheckVersion).
func (s *Store) Update(ctx context.Context, id int64, name string, spec Spec, base int64) error {
	cs, err := compile(spec)
	if err != nil {
		return err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = cs.Left + " vs " + cs.Right
	}
	if len(name) > 200 {
		return errors.New("name is longer than 200 characters")
	}
	js, err := json.Marshal(cs.Spec)
	if err != nil {
		return err
	}
	err = s.db.Change(ctx, func(tx *sql.Tx) error {
		if err := consoledb.CheckVersion(ctx, tx, comparisonsTable, base, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE migration_comparisons SET name = ?, spec = ?, generation = generation + 1, state = 'running',
			error = '', updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?`, name, string(js), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("comparison %d: %w", id, ErrNotFound)
		}
		for _, q := range []string{`DELETE FROM migration_checkpoints WHERE comparison_id = ?`, `DELETE FROM migration_differences WHERE comparison_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !consoledb.IsStale(err) {
		return fmt.Errorf("migration: update comparison %d: %w", id, err)
	}
	return err
}

// Delete removes a comparison with its checkpoint and differences. base,
// when not 0, is the version the deletion is based on (see CheckVersion).
func (s *Store) Delete(ctx context.Context, id, base int64) error {
	err := s.db.Change(ctx, func(tx *sql.Tx) error {
		if err := consoledb.CheckVersion(ctx, tx, comparisonsTable, base, id); err != nil {
			return err
		}
		// Explicitly, not only by the foreign keys' cascade: each row
		// deleted is a record of the console topic.
		for _, q := range []string{`DELETE FROM migration_differences WHERE comparison_id = ?`, `DELETE FROM migration_checkpoints WHERE comparison_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM migration_comparisons WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("comparison %d: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !consoledb.IsStale(err) {
		return fmt.Errorf("migration: delete comparison %d: %w", id, err)
	}
	return err
}

// DiffQuery selects a page of stored differences.
type DiffQuery struct {
	Kind   Kind // "" for every kind
	Offset int  // rows to skip
	Limit  int  // page size; default 50, at most 1000
}

// Differences returns one page of a comparison's stored differences in the
// order they were found, and how many match the query in all.
func (s *Store) Differences(ctx context.Context, id int64, q DiffQuery) ([]Difference, int64, error) {
	if q.Kind != "" && q.Kind.index() < 0 {
		return nil, 0, fmt.Errorf("unknown difference kind %q", q.Kind)
	}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Limit = min(q.Limit, 1000)
	q.Offset = max(q.Offset, 0)
	where := `comparison_id = ? AND generation = (SELECT generation FROM migration_comparisons WHERE id = ?)`
	args := []any{id, id}
	if q.Kind != "" {
		where += ` AND kind = ?`
		args = append(args, string(q.Kind))
	}
	var total int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM migration_differences WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("migration: count differences: %w", err)
	}
	out, err := consoledb.QueryAll(ctx, s.db, `SELECT id, detail FROM migration_differences WHERE `+where+` ORDER BY id LIMIT ? OFFSET ?`,
		func(row consoledb.Scanner) (Difference, error) {
			var rowID int64
			var detail string
			if err := row.Scan(&rowID, &detail); err != nil {
				return Difference{}, err
			}
			var d Difference
			if err := json.Unmarshal([]byte(detail), &d); err != nil {
				return Difference{}, fmt.Errorf("difference %d: %w", rowID, err)
			}
			d.ID = rowID
			return d, nil
		}, append(args, q.Limit, q.Offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("migration: read differences: %w", err)
	}
	return out, total, nil
}

// Checkpointer returns the Checkpointer of comparison id at generation gen.
// A save fails once the comparison was restarted or deleted.
func (s *Store) Checkpointer(id, gen int64) Checkpointer {
	return &sqlCheckpointer{s: s, id: id, gen: gen}
}

type sqlCheckpointer struct {
	s       *Store
	id, gen int64
	seq     int64
}

func (c *sqlCheckpointer) LoadCheckpoint(ctx context.Context) ([]byte, error) {
	var state []byte
	err := c.s.db.QueryRowContext(ctx, `SELECT state, seq FROM migration_checkpoints WHERE comparison_id = ? AND generation = ?`, c.id, c.gen).Scan(&state, &c.seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return state, err
}

// ErrCheckpointTooLarge fails a comparison whose checkpoint is larger than
// the console's replicated state can carry (consolestate.MaxRecordBytes).
var ErrCheckpointTooLarge = errors.New("the comparison's state is larger than the console can replicate (16 MiB): narrow the window or the limits")

// MaxCheckpointBytes bounds a checkpoint's engine state: it travels as one
// record of the console topic (base64 in JSON, compressed).
var MaxCheckpointBytes = 11 << 20

// SaveCheckpoint writes the state, the snapshot and the new differences in
// one change.
func (c *sqlCheckpointer) SaveCheckpoint(ctx context.Context, cp *Checkpoint) error {
	if len(cp.State) > MaxCheckpointBytes {
		return fmt.Errorf("%w (%d bytes)", ErrCheckpointTooLarge, len(cp.State))
	}
	snap, err := json.Marshal(cp.Snapshot)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(timeLayout)
	err = c.s.db.Change(ctx, func(tx *sql.Tx) error {
		var gen int64
		var state string
		err := tx.QueryRowContext(ctx, `SELECT generation, state FROM migration_comparisons WHERE id = ?`, c.id).Scan(&gen, &state)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && gen != c.gen) {
			return errStale
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO migration_checkpoints(comparison_id, generation, seq, snapshot, state, saved_at)
			VALUES(?, ?, ?, ?, ?, ?)
			ON CONFLICT(comparison_id) DO UPDATE SET generation = excluded.generation, seq = excluded.seq,
				snapshot = excluded.snapshot, state = excluded.state, saved_at = excluded.saved_at`,
			c.id, c.gen, c.seq+1, string(snap), cp.State, now); err != nil {
			return err
		}
		if len(cp.Differences) > 0 {
			stmt, err := tx.PrepareContext(ctx, `INSERT INTO migration_differences(comparison_id, generation, kind, seq, detail) VALUES(?, ?, ?, ?, ?)`)
			if err != nil {
				return err
			}
			defer stmt.Close()
			for _, d := range cp.Differences {
				js, err := json.Marshal(d)
				if err != nil {
					return err
				}
				if _, err := stmt.ExecContext(ctx, c.id, c.gen, string(d.Kind), d.Seq, string(js)); err != nil {
					return err
				}
			}
		}
		if cp.Done && state == string(StateRunning) {
			if _, err := tx.ExecContext(ctx, `UPDATE migration_comparisons SET state = 'finished', error = '',
				updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?`, c.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.seq++
	return nil
}

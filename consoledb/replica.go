package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The replica: this host's copy of the console state, kept current from the
// console topic, and the way changes reach that topic. See DESIGN.md, "The
// console in a cluster", for the whole design; the files are:
//
//	registry.go  the replicated tables (Replicate)
//	record.go    the record format: keys, row images, headers
//	change.go    DB.Change: capture, versions, StaleError, QueueForCluster
//	replica.go   Replica: start (import, replay, rebuild), the fetch and
//	             apply loop, waits, availability, status
//	apply.go     applying records to SQLite

// ReplicaComponent is the migration component of the replica's bookkeeping
// tables.
const ReplicaComponent = "replica"

var replicaMigrations = []string{
	// 1: where each host stands in each topic, what it knows of every
	// replicated row, what it changed while no replica ran, and tables it
	// committed locally while the topic was unreachable.
	`CREATE TABLE replica_state (
		topic        TEXT PRIMARY KEY,
		applied      INTEGER NOT NULL,             -- offset of the last applied record; -1 none
		topic_id     TEXT NOT NULL DEFAULT '',     -- the topic's id when known (a recreated topic has another)
		caught_up_at INTEGER NOT NULL DEFAULT 0,   -- when this host last had applied up to the topic's end
		origin       TEXT NOT NULL DEFAULT '',     -- how this host joined: import, fresh, replay, rebuild
		updated_at   INTEGER NOT NULL
	);
	CREATE TABLE replica_keys (
		tbl      TEXT NOT NULL,
		pk       TEXT NOT NULL,                    -- JSON array of the primary key values
		version  INTEGER NOT NULL,                 -- offset of the record that last wrote the row, plus one
		deleted  INTEGER NOT NULL DEFAULT 0,
		by_user  TEXT NOT NULL DEFAULT '',
		by_host  TEXT NOT NULL DEFAULT '',
		at       INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (tbl, pk)
	) WITHOUT ROWID;
	CREATE TABLE replica_outbox (
		id      INTEGER PRIMARY KEY,
		tbl     TEXT NOT NULL,
		pk      TEXT NOT NULL,
		image   TEXT,                          -- the row as changed (JSON, as a record's value); NULL: deleted
		by_user TEXT NOT NULL DEFAULT '',
		at      INTEGER NOT NULL
	);
	CREATE TABLE replica_dirty (
		tbl   TEXT PRIMARY KEY,
		since INTEGER NOT NULL
	);`,
}

// MigrateReplica applies the replica's migrations to d.
func (d *DB) MigrateReplica(ctx context.Context) error {
	return d.Migrate(ctx, ReplicaComponent, replicaMigrations)
}

// Log is a console topic: one partition, records in order.
type Log interface {
	// Append writes recs in order (acks=all) and returns the offset of the
	// last.
	Append(ctx context.Context, recs []Record) (int64, error)
	// Fetch returns records from offset from on, in order, waiting a
	// moment (well under a second) for some when there are none: an empty
	// answer is not an error.
	Fetch(ctx context.Context, from int64) ([]Record, error)
	// End returns the offset the next record will get (the high
	// watermark) and the topic's id ("" when unknown).
	End(ctx context.Context) (end int64, id string, err error)
}

// Lock is the cluster's console write lock.
type Lock interface {
	// Lock waits for the lock (until ctx ends) and returns its release.
	Lock(ctx context.Context) (unlock func(), err error)
}

// MutexLock is a Lock inside one process (tests, tools).
type MutexLock struct{ ch chan struct{} }

// NewMutexLock returns an unlocked MutexLock.
func NewMutexLock() *MutexLock { return &MutexLock{ch: make(chan struct{}, 1)} }

// Lock implements Lock.
func (m *MutexLock) Lock(ctx context.Context) (func(), error) {
	select {
	case m.ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-m.ch }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ReplicaConfig configures a Replica. Log and Lock are required.
type ReplicaConfig struct {
	// Topic names the log in replica_state and in logs (default
	// "__sluice_console").
	Topic string
	Log   Log
	Lock  Lock
	// Host is this host's broker id, recorded in every record.
	Host   int32
	Logger *slog.Logger
	// ProbeInterval is how often the topic's end is read (default 2s).
	ProbeInterval time.Duration
	// UnreachableAfter is how long without an answer from the topic makes
	// the console say so and refuse changes (default 10s).
	UnreachableAfter time.Duration
	// StaleAfter is how long a host may have been behind before it
	// rebuilds rather than catching up: half the topic's
	// delete.retention.ms (default 84h), after which tombstones it has not
	// seen may be gone.
	StaleAfter time.Duration
	// WaitTimeout bounds what a change waits for: the lock, the catch-up,
	// its own records (default 10s).
	WaitTimeout time.Duration
	// BackupDir receives the copy of a database whose state was not the
	// cluster's (default: the database's directory).
	BackupDir string
	// Now is the clock (tests).
	Now func() time.Time
}

func (c *ReplicaConfig) ensureDefaults(d *DB) {
	if c.Topic == "" {
		c.Topic = "__sluice_console"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = 2 * time.Second
	}
	if c.UnreachableAfter <= 0 {
		c.UnreachableAfter = 10 * time.Second
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 84 * time.Hour
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = 10 * time.Second
	}
	if c.BackupDir == "" {
		c.BackupDir = filepath.Dir(d.path)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Replica keeps d current from the console topic and writes d's changes
// through it. StartReplica starts it; Close stops it.
type Replica struct {
	db     *DB
	cfg    ReplicaConfig
	log    *slog.Logger
	tables map[string]*tableInfo

	capMu sync.Mutex // one capture at a time on cap
	cap   *capturer
	apply *sql.Conn // foreign keys off; only the loop goroutine uses it

	mu          sync.Mutex
	inited      bool   // the start decision (import, replay, ...) was made. Lock mu.
	applied     int64  // last applied offset, -1 none. Lock mu.
	end         int64  // the topic's end as last seen, -1 unknown. Lock mu.
	topicID     string // Lock mu.
	changed     chan struct{}
	lastOK      time.Time // last answer from the topic. Lock mu.
	lastErr     error     // last failure. Lock mu.
	errSince    time.Time // failing since (zero: not failing). Lock mu.
	caughtUp    time.Time // last time applied reached end. Lock mu.
	persistedAt time.Time // caught_up_at as last written. Lock mu.
	rebuilding  bool      // Lock mu.
	origin      string    // Lock mu.
	conflicts   int64     // records of this host that replaced a version it had not read. Lock mu.
	skipped     int64     // malformed or unknown records skipped. Lock mu.
	warnedTable map[string]bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartReplica attaches a replica to d and starts it: from now on d.Change
// writes through cfg.Log. Every component's migrations must have been
// applied (the replicated tables must exist). It returns at once; the
// start decision (import, replay, catching up) is made by its loop as soon
// as the topic answers. WaitCaughtUp waits for it.
func StartReplica(ctx context.Context, d *DB, cfg ReplicaConfig) (*Replica, error) {
	if cfg.Log == nil || cfg.Lock == nil {
		return nil, errors.New("consoledb: replica without a log or a lock")
	}
	cfg.ensureDefaults(d)
	if err := d.MigrateReplica(ctx); err != nil {
		return nil, err
	}
	tables, err := loadTables(ctx, d)
	if err != nil {
		return nil, err
	}
	r := &Replica{db: d, cfg: cfg, log: cfg.Logger.With("component", "console-replica", "topic", cfg.Topic), tables: tables,
		applied: -1, end: -1, changed: make(chan struct{}), warnedTable: map[string]bool{}}
	if r.cap, err = newCapturer(ctx, d.DB, tables); err != nil {
		return nil, err
	}
	if r.apply, err = d.DB.Conn(ctx); err != nil {
		r.cap.conn.Close()
		return nil, err
	}
	// A compacted topic may deliver a child row's last image before its
	// parent's: applying checks no foreign keys (changes were checked when
	// they were made).
	if _, err := r.apply.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		r.close()
		return nil, err
	}
	st, ok, err := r.readState(ctx)
	if err != nil {
		r.close()
		return nil, err
	}
	if ok {
		r.applied, r.topicID, r.caughtUp, r.origin = st.applied, st.topicID, st.caughtUp, st.origin
		r.persistedAt = st.caughtUp
	}
	if !d.rep.CompareAndSwap(nil, r) {
		r.close()
		return nil, errors.New("consoledb: a replica already runs on this database")
	}
	lctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.loop(lctx) }()
	go func() { defer r.wg.Done(); r.probe(lctx) }()
	return r, nil
}

func (r *Replica) close() {
	if r.cap != nil {
		r.cap.conn.Close()
	}
	if r.apply != nil {
		r.apply.Close()
	}
}

// Close stops the replica and waits for it; d.Change is a local
// transaction again afterwards. Close the DB after.
func (r *Replica) Close() error {
	r.db.rep.CompareAndSwap(r, nil)
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	r.capMu.Lock()
	defer r.capMu.Unlock()
	r.close()
	return nil
}

type replicaState struct {
	applied  int64
	topicID  string
	caughtUp time.Time
	origin   string
}

func (r *Replica) readState(ctx context.Context) (replicaState, bool, error) {
	var st replicaState
	var caught int64
	err := r.db.QueryRowContext(ctx, `SELECT applied, topic_id, caught_up_at, origin FROM replica_state WHERE topic = ?`, r.cfg.Topic).
		Scan(&st.applied, &st.topicID, &caught, &st.origin)
	if errors.Is(err, sql.ErrNoRows) {
		return st, false, nil
	}
	st.caughtUp = fromMS(caught)
	return st, err == nil, err
}

// ---- waiting and availability ----

// Applied returns the offset of the last applied record (-1: none).
func (r *Replica) Applied() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// waitApplied waits until the record at offset off is applied.
func (r *Replica) waitApplied(ctx context.Context, off int64) error {
	for {
		r.mu.Lock()
		done, ch := r.applied >= off && !r.rebuilding, r.changed
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for this host to apply offset %d of %s: %w", off, r.cfg.Topic, ctx.Err())
		case <-ch:
		}
	}
}

// WaitCaughtUp waits until the replica has made its start decision and
// applied the topic up to the end it saw then.
func (r *Replica) WaitCaughtUp(ctx context.Context) error {
	for {
		r.mu.Lock()
		ok := r.inited && r.end >= 0 && r.applied+1 >= r.end && !r.rebuilding
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *Replica) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// succeeded records an answer from the topic.
func (r *Replica) succeeded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastOK = r.cfg.Now()
	if !r.errSince.IsZero() {
		r.log.Info("console topic reachable again", "after", r.lastOK.Sub(r.errSince).Round(time.Millisecond))
	}
	r.errSince, r.lastErr = time.Time{}, nil
}

// failed records a failure to reach the topic.
func (r *Replica) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errSince.IsZero() {
		r.errSince = r.cfg.Now()
		r.log.Warn("console topic unreachable", "err", err)
	}
	r.lastErr = err
}

// Available reports whether changes can be made now: the start decision
// is made and the topic answered within UnreachableAfter.
func (r *Replica) Available() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.availableLocked()
}

func (r *Replica) availableLocked() bool {
	return r.inited && !r.lastOK.IsZero() && r.cfg.Now().Sub(r.lastOK) < r.cfg.UnreachableAfter &&
		(r.errSince.IsZero() || r.cfg.Now().Sub(r.errSince) < r.cfg.UnreachableAfter)
}

// ReplicaStatus is where a host's console stands in one of its topics.
type ReplicaStatus struct {
	Topic      string    `json:"topic"`
	Applied    int64     `json:"applied"` // offset of the last applied record, -1 none
	End        int64     `json:"end"`     // the topic's end as last seen, -1 unknown
	Lag        int64     `json:"lag"`     // records behind the end; -1 unknown
	Reachable  bool      `json:"reachable"`
	Err        string    `json:"error,omitempty"` // the last failure while unreachable
	Since      time.Time `json:"since"`           // unreachable since
	LastOK     time.Time `json:"last_ok"`
	CaughtUp   time.Time `json:"caught_up"` // last time applied reached the end
	Started    bool      `json:"started"`   // the start decision is made
	Rebuilding bool      `json:"rebuilding"`
	Origin     string    `json:"origin"`    // how this host joined: import, fresh, replay, rebuild
	Conflicts  int64     `json:"conflicts"` // writes of this host that replaced a version they had not read
	Skipped    int64     `json:"skipped"`   // records skipped (malformed, unknown table)
	Dirty      []string  `json:"dirty,omitempty"`
}

// Status reports where the replica stands.
func (r *Replica) Status() ReplicaStatus {
	r.mu.Lock()
	st := ReplicaStatus{Topic: r.cfg.Topic, Applied: r.applied, End: r.end, Lag: -1, Reachable: r.availableLocked(),
		Since: r.errSince, LastOK: r.lastOK, CaughtUp: r.caughtUp, Started: r.inited, Rebuilding: r.rebuilding,
		Origin: r.origin, Conflicts: r.conflicts, Skipped: r.skipped}
	if r.lastErr != nil {
		st.Err = r.lastErr.Error()
	}
	r.mu.Unlock()
	if st.End >= 0 {
		st.Lag = max(0, st.End-(st.Applied+1))
	}
	return st
}

// Dirty lists the tables committed on this host only while the topic was
// away, not yet republished.
func (r *Replica) Dirty(ctx context.Context) []string {
	out, _ := QueryAll(ctx, r.db, `SELECT tbl FROM replica_dirty ORDER BY tbl`, func(row Scanner) (s string, err error) {
		err = row.Scan(&s)
		return s, err
	})
	return out
}

// ---- the write path ----

func (r *Replica) change(ctx context.Context, fn func(tx *sql.Tx) error, o changeOpts) error {
	wctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	if !r.Available() {
		if o.fallback {
			return r.commitLocally(ctx, fn)
		}
		return ErrUnavailable
	}
	if !o.unlocked {
		unlock, err := r.cfg.Lock.Lock(wctx)
		if err != nil {
			if o.fallback {
				return r.commitLocally(ctx, fn)
			}
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return ErrBusy
			}
			return fmt.Errorf("%w (the console write lock: %v)", ErrUnavailable, err)
		}
		defer unlock()
		if err := r.catchUp(wctx); err != nil {
			if o.fallback {
				return r.commitLocally(ctx, fn)
			}
			return err
		}
	}
	r.capMu.Lock()
	rows, err := r.cap.run(wctx, fn, false, nil)
	r.capMu.Unlock()
	if err != nil || len(rows) == 0 {
		return err
	}
	recs, err := records(rows, actorOf(ctx), r.cfg.Host)
	if err != nil {
		return err
	}
	last, err := r.cfg.Log.Append(wctx, recs)
	if err != nil {
		r.failed(err)
		if o.fallback {
			// The records may or may not have been written: committing
			// the same rows here as well is harmless (the same images).
			return r.commitLocally(ctx, fn)
		}
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r.succeeded()
	return r.waitApplied(wctx, last)
}

// catchUp waits until this host applied the topic up to its end.
func (r *Replica) catchUp(ctx context.Context) error {
	end, _, err := r.cfg.Log.End(ctx)
	if err != nil {
		r.failed(err)
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r.succeeded()
	r.noteEnd(end)
	if end == 0 {
		return nil
	}
	return r.waitApplied(ctx, end-1)
}

func (r *Replica) noteEnd(end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if end > r.end {
		r.end = end
	}
	if r.inited && r.applied+1 >= end && !r.rebuilding {
		r.caughtUp = r.cfg.Now()
	}
}

// commitLocally commits fn here only and marks the tables it touched
// dirty: they are republished whole once the topic is back.
func (r *Replica) commitLocally(ctx context.Context, fn func(tx *sql.Tx) error) error {
	r.capMu.Lock()
	defer r.capMu.Unlock()
	_, err := r.cap.run(ctx, fn, true, func(tx *sql.Tx, rows []captured) error {
		seen := map[string]bool{}
		for _, c := range rows {
			if seen[c.ti.Name] {
				continue
			}
			seen[c.ti.Name] = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO replica_dirty(tbl, since) VALUES(?, ?) ON CONFLICT(tbl) DO NOTHING`,
				c.ti.Name, ms(r.cfg.Now())); err != nil {
				return err
			}
		}
		if len(seen) > 0 {
			r.log.Warn("console topic unreachable: change committed on this host only; republished when the topic is back",
				"tables", slices.Sorted(func(yield func(string) bool) {
					for k := range seen {
						if !yield(k) {
							return
						}
					}
				}))
		}
		return nil
	})
	return err
}

// ---- the loop ----

// loop makes the start decision, then fetches and applies until ctx ends,
// and publishes what was changed here while the topic was away.
func (r *Replica) loop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	var next int64
	var rebuildTx *sql.Tx // open while rebuilding
	var rebuildEnd int64
	abortRebuild := func() {
		if rebuildTx != nil {
			rebuildTx.Rollback()
			rebuildTx = nil
		}
	}
	defer abortRebuild()
	sleep := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		return true
	}
	for ctx.Err() == nil {
		r.mu.Lock()
		inited, rebuilding := r.inited, r.rebuilding
		r.mu.Unlock()
		if !inited {
			from, rebuild, end, err := r.start(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.failed(err)
				}
				if !sleep() {
					return
				}
				continue
			}
			next = from
			if rebuild {
				r.mu.Lock()
				r.rebuilding = true
				r.mu.Unlock()
				rebuilding, rebuildEnd = true, end
			}
			r.mu.Lock()
			r.inited = true
			r.notifyLocked()
			r.mu.Unlock()
		}
		if rebuilding && rebuildTx == nil {
			tx, err := r.apply.BeginTx(ctx, nil)
			if err != nil {
				r.log.Error("console replica: begin rebuild", "err", err)
				if !sleep() {
					return
				}
				continue
			}
			if err := r.clear(ctx, tx); err != nil {
				tx.Rollback()
				r.log.Error("console replica: rebuild", "err", err)
				if !sleep() {
					return
				}
				continue
			}
			rebuildTx, next = tx, 0
			if rebuildEnd == 0 {
				if err := r.finishRebuild(ctx, rebuildTx, -1); err != nil {
					abortRebuild()
					r.log.Error("console replica: rebuild", "err", err)
					continue
				}
				rebuildTx, rebuilding = nil, false
			}
		}
		recs, err := r.cfg.Log.Fetch(ctx, next)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.failed(err)
			if rebuilding {
				// Start the rebuild over when the topic is back; the
				// database stays as it was meanwhile.
				abortRebuild()
			}
			if !sleep() {
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		r.succeeded()
		if len(recs) == 0 {
			continue
		}
		if !rebuilding && r.tooStale() {
			r.log.Warn("this console was behind for longer than tombstones are kept: rebuilding it from the topic",
				"caught_up_at", r.Status().CaughtUp, "stale_after", r.cfg.StaleAfter)
			end, _, err := r.cfg.Log.End(ctx)
			if err != nil {
				r.failed(err)
				continue
			}
			r.mu.Lock()
			r.rebuilding, r.origin = true, "rebuild"
			r.mu.Unlock()
			rebuilding, rebuildEnd = true, end
			continue
		}
		if rebuilding {
			last, err := r.applyBatch(ctx, rebuildTx, recs)
			if err != nil {
				abortRebuild()
				r.log.Error("console replica: rebuild", "err", err)
				if !sleep() {
					return
				}
				continue
			}
			next = last + 1
			if next >= rebuildEnd {
				if err := r.finishRebuild(ctx, rebuildTx, last); err != nil {
					abortRebuild()
					r.log.Error("console replica: rebuild", "err", err)
					continue
				}
				rebuildTx, rebuilding = nil, false
			}
			continue
		}
		tx, err := r.apply.BeginTx(ctx, nil)
		if err != nil {
			r.log.Error("console replica: begin", "err", err)
			if !sleep() {
				return
			}
			continue
		}
		last, err := r.applyBatch(ctx, tx, recs)
		if err == nil {
			err = r.saveState(ctx, tx, last)
		}
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Error("console replica: apply failed; retrying", "from", next, "err", err)
			if !sleep() {
				return
			}
			continue
		}
		next = last + 1
		r.advance(last)
	}
}

// advance records that everything up to last is applied.
func (r *Replica) advance(last int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = last
	if r.end >= 0 && last+1 >= r.end {
		r.caughtUp = r.cfg.Now()
	}
	if last+1 > r.end {
		r.end = last + 1
		r.caughtUp = r.cfg.Now()
	}
	r.notifyLocked()
}

func (r *Replica) finishRebuild(ctx context.Context, tx *sql.Tx, last int64) error {
	if err := r.saveState(ctx, tx, last); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.mu.Lock()
	r.rebuilding = false
	r.mu.Unlock()
	r.log.Info("console database rebuilt from the topic", "records_to", last)
	r.advance(last)
	return nil
}

func (r *Replica) tooStale() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.caughtUp.IsZero() && r.cfg.Now().Sub(r.caughtUp) > r.cfg.StaleAfter
}

// saveState writes the applied offset in tx.
func (r *Replica) saveState(ctx context.Context, tx *sql.Tx, last int64) error {
	r.mu.Lock()
	caught, origin, id := r.caughtUp, r.origin, r.topicID
	if r.end >= 0 && last+1 >= r.end {
		caught = r.cfg.Now()
	}
	r.persistedAt = caught
	r.mu.Unlock()
	_, err := tx.ExecContext(ctx, `INSERT INTO replica_state(topic, applied, topic_id, caught_up_at, origin, updated_at) VALUES(?,?,?,?,?,?)
		ON CONFLICT(topic) DO UPDATE SET applied = excluded.applied, topic_id = excluded.topic_id, caught_up_at = excluded.caught_up_at,
		origin = excluded.origin, updated_at = excluded.updated_at`, r.cfg.Topic, last, id, ms(caught), origin, ms(r.cfg.Now()))
	return err
}

// probe reads the topic's end every ProbeInterval: the status page's end
// offset and the banner's reachability; then it does the housekeeping
// (which waits for the loop to apply what it publishes).
func (r *Replica) probe(ctx context.Context) {
	t := time.NewTicker(r.cfg.ProbeInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.ProbeInterval+time.Second)
		end, id, err := r.cfg.Log.End(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.failed(err)
		} else {
			r.succeeded()
			r.noteEnd(end)
			r.mu.Lock()
			if r.topicID == "" {
				r.topicID = id
			}
			persist := r.inited && !r.rebuilding && r.caughtUp.Sub(r.persistedAt) > time.Minute
			r.mu.Unlock()
			if persist {
				r.persistCaughtUp(ctx)
			}
			if r.Available() && !r.isRebuilding() {
				r.housekeeping(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Replica) persistCaughtUp(ctx context.Context) {
	r.mu.Lock()
	caught := r.caughtUp
	r.persistedAt = caught
	r.mu.Unlock()
	if _, err := r.db.ExecContext(ctx, `UPDATE replica_state SET caught_up_at = max(caught_up_at, ?) WHERE topic = ?`, ms(caught), r.cfg.Topic); err != nil && ctx.Err() == nil {
		r.log.Warn("console replica: record catch-up time", "err", err)
	}
}

// ---- start: import, replay, rebuild ----

// start decides, under the write lock, how this host joins the topic, and
// returns the offset to fetch from and whether that is a rebuild (applied
// in one transaction, after emptying the replicated tables) up to end.
func (r *Replica) start(ctx context.Context) (from int64, rebuild bool, end int64, err error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	unlock, err := r.cfg.Lock.Lock(lctx)
	if err != nil {
		return 0, false, 0, fmt.Errorf("the console write lock: %w", err)
	}
	defer unlock()
	end, id, err := r.cfg.Log.End(lctx)
	if err != nil {
		return 0, false, 0, err
	}
	r.succeeded()
	r.mu.Lock()
	r.end, r.topicID = end, id
	r.mu.Unlock()
	st, known, err := r.readState(ctx)
	if err != nil {
		return 0, false, 0, err
	}
	switch {
	case known && (st.applied+1 > end || (st.topicID != "" && id != "" && st.topicID != id)):
		r.log.Warn("the console topic is not the one this host applied (it was recreated, or lost data): joining it anew",
			"applied", st.applied, "end", end, "topic_id", id, "applied_topic_id", st.topicID)
	case known && !st.caughtUp.IsZero() && r.cfg.Now().Sub(st.caughtUp) > r.cfg.StaleAfter:
		r.log.Warn("this console was stopped for longer than tombstones are kept: rebuilding it from the topic",
			"caught_up_at", st.caughtUp, "stale_after", r.cfg.StaleAfter)
		r.setOrigin("rebuild")
		return 0, true, end, nil
	case known:
		r.log.Info("console replica catching up", "from", st.applied+1, "end", end)
		return st.applied + 1, false, end, nil
	}
	has, counts, err := r.hasData(ctx)
	if err != nil {
		return 0, false, 0, err
	}
	if end == 0 {
		origin := "fresh"
		if has {
			origin = "import"
		}
		if err := r.publishAll(lctx, origin, counts); err != nil {
			return 0, false, 0, err
		}
		r.setOrigin(origin)
		if err := r.initState(ctx, -1); err != nil {
			return 0, false, 0, err
		}
		return 0, false, end, nil
	}
	if has {
		path, err := r.backupAside(ctx)
		if err != nil {
			return 0, false, 0, err
		}
		r.log.Warn("this host's console state is not the cluster's (another host initialised the console topic): it was copied aside and is replaced by the topic's",
			"copy", path, "rows", counts)
	}
	r.setOrigin("replay")
	return 0, true, end, nil
}

func (r *Replica) setOrigin(o string) {
	r.mu.Lock()
	r.origin = o
	r.mu.Unlock()
}

func (r *Replica) initState(ctx context.Context, applied int64) error {
	tx, err := r.apply.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := r.saveState(ctx, tx, applied); err != nil {
		return err
	}
	return tx.Commit()
}

// hasData reports whether any replicated table has a row that is not
// local, with the row counts per table.
func (r *Replica) hasData(ctx context.Context) (bool, map[string]int, error) {
	counts := map[string]int{}
	has := false
	for _, ti := range r.tables {
		keys, err := r.keysOf(ctx, r.db, ti)
		if err != nil {
			return false, nil, err
		}
		if len(keys) > 0 {
			counts[ti.Name] = len(keys)
			has = true
		}
	}
	return has, counts, nil
}

// keysOf lists the primary keys of ti's rows that are not local.
func (r *Replica) keysOf(ctx context.Context, q Querier, ti *tableInfo) ([][]any, error) {
	cols := make([]string, len(ti.pk))
	for i, c := range ti.pk {
		cols[i] = quoteIdent(c)
	}
	rows, err := q.QueryContext(ctx, `SELECT `+joinComma(cols)+` FROM `+quoteIdent(ti.Name))
	if err != nil {
		return nil, fmt.Errorf("consoledb: read %s: %w", ti.Name, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if !ti.local(vals) {
			out = append(out, vals)
		}
	}
	return out, rows.Err()
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// importChunk is how many records one Append of an import carries.
const importChunk = 500

// publishAll writes the origin record and, for an import, every
// replicated row this host has. Called under the lock on an empty topic;
// running it again writes the same keys (idempotent).
func (r *Replica) publishAll(ctx context.Context, origin string, counts map[string]int) error {
	meta := fmt.Sprintf(`{"origin":%q,"host":%d,"at":%d}`, origin, r.cfg.Host, ms(r.cfg.Now()))
	hdr := map[string]string{HeaderVersion: recordFormat, HeaderBy: origin, HeaderHost: hostHeader(r.cfg.Host)}
	batch := []Record{{Key: encodeKey(metaTable, []any{"origin"}), Value: []byte(meta), Headers: hdr}}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := r.cfg.Log.Append(ctx, batch); err != nil {
			return fmt.Errorf("publish the console state: %w", err)
		}
		batch = batch[:0]
		return nil
	}
	total := 0
	if origin == "import" {
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range r.tables {
				if !yield(k) {
					return
				}
			}
		}) {
			ti := r.tables[name]
			keys, err := r.keysOf(ctx, r.db, ti)
			if err != nil {
				return err
			}
			for _, pk := range keys {
				img, err := ti.readImage(ctx, r.db, pk)
				if err != nil {
					return err
				}
				if img == nil {
					continue
				}
				recs, err := records([]captured{{ti: ti, pk: pk, image: img}}, "import", r.cfg.Host)
				if err != nil {
					return err
				}
				batch = append(batch, recs...)
				total++
				if len(batch) >= importChunk {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if origin == "import" {
		r.log.Info("console state imported into the console topic (once, on the first start of a replicating Sluice)", "rows", total, "per_table", counts)
	} else {
		r.log.Info("console topic initialised (no console state to import)")
	}
	return nil
}

// backupAside copies the database next to it before its replicated
// tables are replaced by the topic's.
func (r *Replica) backupAside(ctx context.Context) (string, error) {
	path := filepath.Join(r.cfg.BackupDir, filepath.Base(r.db.path)+".pre-replication-"+r.cfg.Now().UTC().Format("20060102T150405Z"))
	if err := r.db.BackupTo(ctx, path); err != nil {
		return "", fmt.Errorf("copy the console database aside: %w", err)
	}
	return path, nil
}

// clear empties every replicated table and the keys (a rebuild). A row
// cleared is a row deleted: a table's OnApply sees it go (the users
// table's ends the user's sessions on this host), because what the topic
// brings back under the same key may be another row — the cluster's user
// 2 is not this host's user 2 — and the apply connection checks no foreign
// keys that would cascade.
func (r *Replica) clear(ctx context.Context, tx *sql.Tx) error {
	for _, ti := range r.tables {
		if ti.OnApply != nil {
			keys, err := r.keysOf(ctx, tx, ti)
			if err != nil {
				return err
			}
			for _, pk := range keys {
				before, err := ti.readImage(ctx, tx, pk)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM `+quoteIdent(ti.Name)+` WHERE `+ti.where, pk...); err != nil {
					return err
				}
				if err := ti.OnApply(ctx, tx, pk, before, nil); err != nil {
					return err
				}
			}
			continue
		}
		if ti.LocalKey == nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+quoteIdent(ti.Name)); err != nil {
				return err
			}
			continue
		}
		keys, err := r.keysOf(ctx, tx, ti)
		if err != nil {
			return err
		}
		for _, pk := range keys {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+quoteIdent(ti.Name)+` WHERE `+ti.where, pk...); err != nil {
				return err
			}
		}
	}
	for _, q := range []string{`DELETE FROM replica_keys`, `DELETE FROM replica_dirty`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// ---- housekeeping: republish, queued changes, old tombstones ----

// housekeeping publishes tables committed locally while the topic was
// away and changes queued by commands (QueueForCluster), and forgets keys
// deleted long ago.
func (r *Replica) housekeeping(ctx context.Context) {
	var dirty []string
	var queued int
	r.db.QueryRowContext(ctx, `SELECT count(*) FROM replica_outbox`).Scan(&queued)
	dirty, _ = QueryAll(ctx, r.db, `SELECT tbl FROM replica_dirty ORDER BY tbl`, func(row Scanner) (s string, err error) {
		err = row.Scan(&s)
		return s, err
	})
	if len(dirty) == 0 && queued == 0 {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	unlock, err := r.cfg.Lock.Lock(hctx)
	if err != nil {
		return
	}
	defer unlock()
	if err := r.catchUp(hctx); err != nil {
		return
	}
	if len(dirty) > 0 {
		if err := r.republish(hctx, dirty); err != nil {
			r.log.Warn("console replica: republish tables committed while the topic was away", "tables", dirty, "err", err)
		}
	}
	if queued > 0 {
		if err := r.publishQueued(hctx); err != nil {
			r.log.Warn("console replica: publish changes queued on this host", "err", err)
		}
	}
	if _, err := r.db.ExecContext(ctx, `DELETE FROM replica_keys WHERE deleted = 1 AND at < ?`, ms(r.cfg.Now().Add(-4*r.cfg.StaleAfter))); err != nil {
		r.log.Debug("console replica: forget old deletions", "err", err)
	}
}

// republish writes every row of the dirty tables, and a tombstone for each
// row the topic has that this host has not.
func (r *Replica) republish(ctx context.Context, tables []string) error {
	var recs []Record
	for _, name := range tables {
		ti := r.tables[name]
		if ti == nil {
			continue
		}
		keys, err := r.keysOf(ctx, r.db, ti)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		var rows []captured
		for _, pk := range keys {
			img, err := ti.readImage(ctx, r.db, pk)
			if err != nil {
				return err
			}
			have[pkJSON(pk)] = true
			rows = append(rows, captured{ti: ti, pk: pk, image: img})
		}
		known, err := QueryAll(ctx, r.db, `SELECT pk FROM replica_keys WHERE tbl = ? AND deleted = 0`, func(row Scanner) (s string, err error) {
			err = row.Scan(&s)
			return s, err
		}, name)
		if err != nil {
			return err
		}
		for _, k := range known {
			if have[k] {
				continue
			}
			pk, err := ti.pkValues(k)
			if err != nil {
				continue
			}
			rows = append(rows, captured{ti: ti, pk: pk})
		}
		rs, err := records(rows, "system", r.cfg.Host)
		if err != nil {
			return err
		}
		recs = append(recs, rs...)
	}
	if err := r.appendAndWait(ctx, recs); err != nil {
		return err
	}
	for _, name := range tables {
		r.db.ExecContext(ctx, `DELETE FROM replica_dirty WHERE tbl = ?`, name)
	}
	r.log.Info("tables committed while the console topic was away republished", "tables", tables, "records", len(recs))
	return nil
}

// publishQueued publishes the changes commands made while no replica ran
// (QueueForCluster), as they were made. A row of a table with a natural
// key (users: the name) is applied by that key — updated if the cluster
// has a row with that name, inserted with a new id otherwise — since its
// id was chosen on this host alone; other rows (audit entries, whose ids
// are unique) are published as they are. Called under the write lock,
// caught up.
func (r *Replica) publishQueued(ctx context.Context) error {
	type q struct {
		id      int64
		tbl, pk string
		image   sql.NullString
		by      string
	}
	queued, err := QueryAll(ctx, r.db, `SELECT id, tbl, pk, image, by_user FROM replica_outbox ORDER BY id`, func(row Scanner) (x q, err error) {
		err = row.Scan(&x.id, &x.tbl, &x.pk, &x.image, &x.by)
		return x, err
	})
	if err != nil || len(queued) == 0 {
		return err
	}
	n := 0
	for _, x := range queued {
		ti := r.tables[x.tbl]
		pk, err := ti.pkValuesOf(x.pk)
		switch {
		case ti == nil || err != nil || ti.local(pk):
			r.log.Warn("queued change of this host dropped", "table", x.tbl, "key", x.pk)
		case ti.NaturalKey != "" && x.image.Valid:
			img, err := ti.decodeImage([]byte(x.image.String))
			if err != nil {
				r.log.Warn("queued change of this host dropped", "table", x.tbl, "key", x.pk, "err", err)
				break
			}
			if err := r.publishByNaturalKey(ctx, ti, img, x.by); err != nil {
				return err
			}
			n++
		default:
			rec := Record{Key: encodeKey(ti.Name, pk), Headers: map[string]string{HeaderVersion: recordFormat, HeaderBy: x.by, HeaderHost: hostHeader(r.cfg.Host)}}
			if x.image.Valid {
				rec.Value = []byte(x.image.String)
			}
			if err := r.appendAndWait(ctx, []Record{rec}); err != nil {
				return err
			}
			n++
		}
		if _, err := r.db.ExecContext(ctx, `DELETE FROM replica_outbox WHERE id = ?`, x.id); err != nil {
			return err
		}
	}
	r.log.Info("changes made on this host by a command published", "rows", n)
	return nil
}

// publishByNaturalKey writes img's columns (its own primary key aside) to
// the row of ti with img's natural key, or to a new row.
func (r *Replica) publishByNaturalKey(ctx context.Context, ti *tableInfo, img map[string]any, by string) error {
	var cols []string
	var vals []any
	for _, c := range ti.cols {
		if v, ok := img[c]; ok && !slices.Contains(ti.pk, c) {
			cols = append(cols, c)
			vals = append(vals, v)
		}
	}
	natural := img[ti.NaturalKey]
	r.capMu.Lock()
	rows, err := r.cap.run(ctx, func(tx *sql.Tx) error {
		var sets []string
		for _, c := range cols {
			sets = append(sets, quoteIdent(c)+" = ?")
		}
		res, err := tx.ExecContext(ctx, `UPDATE `+quoteIdent(ti.Name)+` SET `+joinComma(sets)+` WHERE `+quoteIdent(ti.NaturalKey)+` = ?`,
			append(slices.Clone(vals), natural)...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		qs := make([]string, len(cols))
		quoted := make([]string, len(cols))
		for i, c := range cols {
			qs[i], quoted[i] = "?", quoteIdent(c)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO `+quoteIdent(ti.Name)+` (`+joinComma(quoted)+`) VALUES (`+joinComma(qs)+`)`, vals...)
		return err
	}, false, nil)
	r.capMu.Unlock()
	if err != nil {
		return fmt.Errorf("queued change of %s: %w", ti.Name, err)
	}
	recs, err := records(rows, by, r.cfg.Host)
	if err != nil {
		return err
	}
	return r.appendAndWait(ctx, recs)
}

func (r *Replica) appendAndWait(ctx context.Context, recs []Record) error {
	for len(recs) > 0 {
		n := min(len(recs), importChunk)
		last, err := r.cfg.Log.Append(ctx, recs[:n])
		if err != nil {
			r.failed(err)
			return err
		}
		if err := r.waitApplied(ctx, last); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// BackupTo writes a consistent copy of the database to path (VACUUM INTO,
// while others read and write), readable by its owner only. path must not
// exist.
func (d *DB) BackupTo(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	// Created empty with mode 0600 first, so the copy is never readable
	// by others, even for a moment; VACUUM INTO refuses a non-empty file
	// but writes into an empty one.
	if err := createPrivate(path); err != nil {
		return err
	}
	if _, err := d.ExecContext(ctx, `VACUUM INTO `+quoteLiteral(path)); err != nil {
		os.Remove(path)
		return fmt.Errorf("consoledb: backup to %s: %w", path, err)
	}
	return os.Chmod(path, fileMode)
}

func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

func (r *Replica) isRebuilding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rebuilding
}

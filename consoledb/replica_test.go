package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/internal/testutil"
)

// host is one console of a test cluster: its database and replica.
type host struct {
	t     *testing.T
	dir   string
	db    *DB
	c     *Console
	rep   *Replica
	id    int32
	log   Log
	lock  Lock
	clock func() time.Time
}

func openHost(t *testing.T, dir string, log Log, lock Lock, id int32) *host {
	t.Helper()
	BcryptCost = bcrypt.MinCost
	h := &host{t: t, dir: dir, log: log, lock: lock, id: id}
	h.open(nil)
	return h
}

func (h *host) open(now func() time.Time) {
	h.t.Helper()
	ctx := context.Background()
	db, c, err := OpenConsole(ctx, h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	h.db, h.c = db, c
	rep, err := StartReplica(ctx, db, ReplicaConfig{Log: h.log, Lock: h.lock, Host: h.id, ProbeInterval: 50 * time.Millisecond,
		UnreachableAfter: time.Second, WaitTimeout: 20 * time.Second, Now: now})
	if err != nil {
		db.Close()
		h.t.Fatal(err)
	}
	h.rep = rep
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.WaitCaughtUp(wctx); err != nil {
		h.t.Fatalf("host %d: catch up: %v (%+v)", h.id, err, rep.Status())
	}
	h.t.Cleanup(h.close)
}

func (h *host) close() {
	if h.rep != nil {
		h.rep.Close()
		h.rep = nil
	}
	if h.db != nil {
		h.db.Close()
		h.db = nil
	}
}

// sync waits until h applied everything in its log.
func (h *host) sync() {
	h.t.Helper()
	end, _, err := h.log.End(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if end > 0 {
		if err := h.rep.waitApplied(ctx, end-1); err != nil {
			h.t.Fatalf("host %d: %v (%+v)", h.id, err, h.rep.Status())
		}
	}
}

// dump is every replicated table's rows, for comparing two hosts.
func dump(t *testing.T, db *DB) map[string][]string {
	t.Helper()
	ctx := context.Background()
	tables, err := loadTables(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for name, ti := range tables {
		rows, err := db.QueryContext(ctx, `SELECT `+ti.colList()+` FROM `+quoteIdent(name)+` ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(ti.cols))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			if ti.local(vals[:len(ti.pk)]) {
				continue
			}
			out[name] = append(out[name], fmt.Sprint(vals...))
		}
		rows.Close()
	}
	return out
}

// A user created on one host is there on the other at once, signs in
// there, and its last sign-in is shared; a changed password ends the
// user's sessions on both hosts; the CSRF secret stays per host.
func TestReplicaSharesUsers(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	b := openHost(t, t.TempDir(), log, lock, 2)
	ctx := WithActor(context.Background(), "root")

	u, err := a.c.CreateUser(ctx, "alice", RoleAdmin, "alice-password")
	if err != nil {
		t.Fatal(err)
	}
	b.sync()
	got, err := b.c.UserByName(ctx, "alice")
	if err != nil || got.ID != u.ID || got.Role != RoleAdmin {
		t.Fatalf("alice on host 2: %+v %v", got, err)
	}
	if _, err := b.c.Authenticate(ctx, "alice", "alice-password"); err != nil {
		t.Fatalf("sign-in on host 2: %v", err)
	}
	if _, err := b.c.CreateUser(ctx, "alice", RoleViewer, "other-password"); !errors.Is(err, ErrUserExists) {
		t.Fatalf("second alice on host 2: %v", err)
	}
	a.sync() // host 1 applies host 2's change of the row (the sign-in)
	v, err := RowVersion(ctx, a.db, "users", u.ID)
	if err != nil || v.Version == 0 || v.By != "alice" || v.Host != "2" {
		t.Fatalf("version after the sign-in on host 2: %+v %v", v, err)
	}

	tokA, _ := a.c.CreateSession(ctx, u.ID, time.Hour, "", "")
	tokB, _ := b.c.CreateSession(ctx, u.ID, time.Hour, "", "")
	if err := a.c.SetPassword(ctx, u.ID, "new-password-1", UserBase{}); err != nil {
		t.Fatal(err)
	}
	b.sync()
	for name, h := range map[string]*host{"1": a, "2": b} {
		for _, tok := range []string{tokA, tokB} {
			if _, err := h.c.SessionByToken(ctx, tok, time.Minute, 0, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("host %s: a session survived the password change: %v", name, err)
			}
		}
	}

	// Sessions and the CSRF secret stay on their host.
	secA, _ := a.c.SettingOrInit(ctx, "csrf_secret", func() string { return "A" })
	secB, _ := b.c.SettingOrInit(ctx, "csrf_secret", func() string { return "B" })
	if secA != "A" || secB != "B" {
		t.Fatalf("csrf secrets %q %q", secA, secB)
	}
	if err := a.c.SetSetting(ctx, "theme", "dark"); err != nil {
		t.Fatal(err)
	}
	b.sync()
	if v, err := b.c.Setting(ctx, "theme"); v != "dark" || err != nil {
		t.Fatalf("shared setting on host 2: %q %v", v, err)
	}
	if v, _ := b.c.Setting(ctx, "csrf_secret"); v != "B" {
		t.Fatalf("host 2's csrf secret became %q", v)
	}
	for _, r := range log.Records() {
		if strings.Contains(string(r.Key), "csrf_secret") {
			t.Fatalf("the CSRF secret reached the topic: %s", r.Key)
		}
	}

	// Audit entries from both hosts, with ids that do not collide.
	for i := 0; i < 20; i++ {
		if _, err := a.c.AppendAudit(ctx, AuditEntry{User: "root", Action: "x.a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.c.AppendAudit(ctx, AuditEntry{User: "root", Action: "x.b"}); err != nil {
			t.Fatal(err)
		}
	}
	a.sync()
	b.sync()
	if da, db := dump(t, a.db), dump(t, b.db); !reflect.DeepEqual(da, db) {
		t.Fatalf("the hosts differ:\n%v\n%v", da, db)
	}
	if es, _, _ := a.c.Audit(ctx, AuditFilter{Limit: 100}); len(es) != 40 {
		t.Fatalf("%d audit entries, want 40", len(es))
	}

	// Removing the user on host 2 ends its sessions on host 1.
	other, _ := a.c.CreateUser(ctx, "root", RoleAdmin, "root-password")
	_ = other
	tok, _ := a.c.CreateSession(ctx, u.ID, time.Hour, "", "")
	if err := b.c.DeleteUser(ctx, u.ID, UserBase{}); err != nil {
		t.Fatal(err)
	}
	a.sync()
	if _, err := a.c.SessionByToken(ctx, tok, time.Minute, 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a removed user's session on host 1: %v", err)
	}
	var n int
	a.db.QueryRow(`SELECT count(*) FROM sessions WHERE user_id = ?`, u.ID).Scan(&n)
	if n != 0 {
		t.Fatalf("%d sessions of the removed user left on host 1", n)
	}
}

// An edit based on a version another host replaced is refused with who
// changed it, where and when; the edit based on the current version
// succeeds.
func TestReplicaStaleEdit(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	b := openHost(t, t.TempDir(), log, lock, 2)
	ctx := context.Background()
	u, err := a.c.CreateUser(WithActor(ctx, "root"), "bob", RoleViewer, "bob-password")
	if err != nil {
		t.Fatal(err)
	}
	b.sync()
	base, _ := RowVersion(ctx, b.db, "users", u.ID)
	edit := func(h *host, who, role string) error {
		return h.db.Change(WithActor(ctx, who), func(tx *sql.Tx) error {
			if err := CheckVersion(ctx, tx, "users", base.Version, u.ID); err != nil {
				return err
			}
			_, err := tx.Exec(`UPDATE users SET role = ? WHERE id = ?`, role, u.ID)
			return err
		})
	}
	if err := edit(a, "alice", "operator"); err != nil {
		t.Fatal(err)
	}
	err = edit(b, "carol", "admin")
	var se *StaleError
	if !errors.As(err, &se) || se.By != "alice" || se.Host != "1" || !strings.HasPrefix(err.Error(), "changed by alice on host 1 at ") ||
		!strings.HasSuffix(err.Error(), "; reload") {
		t.Fatalf("stale edit: %v", err)
	}
	b.sync()
	if got, _ := b.c.UserByID(ctx, u.ID); got.Role != RoleOperator {
		t.Fatalf("role %s after the refused edit", got.Role)
	}
}

// The compacted topic alone rebuilds the database: after changes,
// deletions and compaction (tombstones dropped too), a new host replays
// the topic into the same rows as the hosts that saw every record.
func TestReplicaRebuildFromCompactedTopic(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	ctx := WithActor(context.Background(), "root")
	var ids []int64
	for i := 0; i < 10; i++ {
		u, err := a.c.CreateUser(ctx, fmt.Sprintf("user%d", i), RoleViewer, "a-password")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	for i, id := range ids {
		switch i % 3 {
		case 0:
			a.c.DeleteUser(ctx, id, UserBase{})
		case 1:
			a.c.SetRole(ctx, id, RoleOperator, UserBase{})
		}
	}
	// A new user takes a deleted one's name.
	if _, err := a.c.CreateUser(ctx, "user0", RoleAdmin, "a-password"); err != nil {
		t.Fatal(err)
	}
	a.c.SetSetting(ctx, "k", "v1")
	a.c.SetSetting(ctx, "k", "v2")
	want := dump(t, a.db)
	for _, drop := range []bool{false, true} {
		log.Compact(drop)
		b := openHost(t, t.TempDir(), log, lock, 2)
		if got := dump(t, b.db); !reflect.DeepEqual(got, want) {
			t.Fatalf("rebuilt (tombstones dropped: %v):\n%v\nwant\n%v", drop, got, want)
		}
		b.close()
	}
}

// A host whose database is deleted rebuilds it from the topic; a host
// stopped while others change things catches up when it starts again.
func TestReplicaCatchUpAndDeletedDatabase(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	dirB := t.TempDir()
	b := openHost(t, dirB, log, lock, 2)
	ctx := WithActor(context.Background(), "root")
	a.c.CreateUser(ctx, "one", RoleViewer, "a-password")
	b.sync()
	b.close()
	for i := 0; i < 5; i++ {
		a.c.CreateUser(ctx, fmt.Sprintf("later%d", i), RoleViewer, "a-password")
	}
	b.open(nil)
	if got, want := dump(t, b.db), dump(t, a.db); !reflect.DeepEqual(got, want) {
		t.Fatalf("host 2 after its restart:\n%v\nwant\n%v", got, want)
	}
	if st := b.rep.Status(); st.Origin != "replay" {
		t.Fatalf("origin %q", st.Origin)
	}
	b.close()
	for _, f := range []string{FileName, FileName + "-wal", FileName + "-shm"} {
		os.Remove(filepath.Join(dirB, f))
	}
	b.open(nil)
	if got, want := dump(t, b.db), dump(t, a.db); !reflect.DeepEqual(got, want) {
		t.Fatalf("host 2 with a new database:\n%v\nwant\n%v", got, want)
	}
}

// Upgrading: the first host to start with state publishes it once; a
// second host with state of its own keeps a copy aside and takes the
// cluster's; starting again publishes nothing more.
func TestReplicaImport(t *testing.T) {
	ctx := WithActor(context.Background(), "root")
	BcryptCost = bcrypt.MinCost
	seed := func(dir string, users ...string) {
		db, c, err := OpenConsole(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, u := range users {
			if _, err := c.CreateUser(ctx, u, RoleAdmin, "a-password"); err != nil {
				t.Fatal(err)
			}
		}
		c.AppendAudit(ctx, AuditEntry{User: "root", Action: "user.add"})
		c.SettingOrInit(ctx, "csrf_secret", func() string { return "s" })
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	seed(dirA, "ann", "abe")
	seed(dirB, "ben")
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, dirA, log, lock, 1)
	if st := a.rep.Status(); st.Origin != "import" {
		t.Fatalf("host 1 origin %q", st.Origin)
	}
	n := len(log.Records())
	if n != 1+2+1 { // origin, two users, one audit entry
		t.Fatalf("%d records after the import", n)
	}
	b := openHost(t, dirB, log, lock, 2)
	if st := b.rep.Status(); st.Origin != "replay" {
		t.Fatalf("host 2 origin %q", st.Origin)
	}
	if _, err := b.c.UserByName(ctx, "ben"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("host 2's own user is still there: %v", err)
	}
	if _, err := b.c.UserByName(ctx, "ann"); err != nil {
		t.Fatalf("host 1's user on host 2: %v", err)
	}
	copies, _ := filepath.Glob(filepath.Join(dirB, FileName+".pre-replication-*"))
	if len(copies) != 1 {
		t.Fatalf("copies aside: %v", copies)
	}
	if st, err := os.Stat(copies[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("copy aside: %v %v", st.Mode(), err)
	}
	a.close()
	a.open(nil)
	if len(log.Records()) != n {
		t.Fatalf("a second start published again: %d records", len(log.Records()))
	}
	// The topic lost and recreated empty: a host republishes what it has.
	log.Reset("new")
	a.close()
	a.open(nil)
	if st := a.rep.Status(); st.Origin != "import" {
		t.Fatalf("after the topic was recreated: origin %q", st.Origin)
	}
	c := openHost(t, t.TempDir(), log, lock, 3)
	if got, want := dump(t, c.db), dump(t, a.db); !reflect.DeepEqual(got, want) {
		t.Fatalf("a new host after the re-import:\n%v\nwant\n%v", got, want)
	}
}

// While the topic is unreachable, changes are refused (and the status
// says so); a change with LocalFallback is committed locally and
// republished once the topic is back.
func TestReplicaUnreachable(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	b := openHost(t, t.TempDir(), log, lock, 2)
	ctx := WithActor(context.Background(), "root")
	a.c.SetSetting(ctx, "gone", "soon")
	log.SetDown(true)
	waitFor(t, func() bool { return !a.rep.Available() })
	if st := a.rep.Status(); st.Reachable || st.Err == "" {
		t.Fatalf("status while down: %+v", st)
	}
	if _, err := a.c.CreateUser(ctx, "x", RoleViewer, "a-password"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("create while down: %v", err)
	}
	// Sign-in still works.
	err := a.db.Change(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO settings(key, value, updated_at) VALUES('during', 'outage', 0)`); err != nil {
			return err
		}
		_, err := tx.Exec(`DELETE FROM settings WHERE key = 'gone'`)
		return err
	}, LocalFallback())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := a.c.Setting(ctx, "during"); v != "outage" {
		t.Fatal("the fallback change is not in the local database")
	}
	if d := a.rep.Dirty(ctx); len(d) != 1 || d[0] != "settings" {
		t.Fatalf("dirty %v", d)
	}
	log.SetDown(false)
	waitFor(t, func() bool {
		v, _ := b.c.Setting(ctx, "during")
		_, gone := b.c.Setting(ctx, "gone")
		return v == "outage" && errors.Is(gone, ErrNotFound) && len(a.rep.Dirty(ctx)) == 0
	})
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !ok() {
			return errors.New("not yet")
		}
		return nil
	})
}

// A host that was behind for longer than StaleAfter rebuilds rather than
// catching up, and misses no deletion whose tombstone is gone.
func TestReplicaStaleHostRebuilds(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	dirB := t.TempDir()
	b := openHost(t, dirB, log, lock, 2)
	ctx := WithActor(context.Background(), "root")
	u, _ := a.c.CreateUser(ctx, "doomed", RoleViewer, "a-password")
	b.sync()
	b.close()
	a.c.DeleteUser(ctx, u.ID, UserBase{})
	a.c.CreateUser(ctx, "after", RoleViewer, "a-password")
	log.Compact(true) // the tombstone is gone
	later := func() time.Time { return time.Now().Add(100 * time.Hour) }
	b.open(later)
	if _, err := b.c.UserByName(ctx, "doomed"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the deleted user survived on the stale host: %v", err)
	}
	if st := b.rep.Status(); st.Origin != "rebuild" {
		t.Fatalf("origin %q", st.Origin)
	}
}

// A record applied is recorded with its offset in one transaction: a
// replica started again applies nothing twice.
func TestReplicaRestartAppliesOnce(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	dir := t.TempDir()
	a := openHost(t, dir, log, lock, 1)
	ctx := WithActor(context.Background(), "root")
	u, _ := a.c.CreateUser(ctx, "once", RoleViewer, "a-password")
	applied := a.rep.Applied()
	// Changed behind the replica's back: a re-applied record would undo it.
	a.db.Exec(`UPDATE users SET role = 'admin' WHERE id = ?`, u.ID)
	a.close()
	a.open(nil)
	if a.rep.Applied() != applied {
		t.Fatalf("applied %d, want %d", a.rep.Applied(), applied)
	}
	if got, _ := a.c.UserByID(ctx, u.ID); got.Role != RoleAdmin {
		t.Fatal("a record was applied again")
	}
}

// Changes made while no replica runs (sluice console user) are queued
// and published by the next replica on the host.
func TestQueueForCluster(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	dir := t.TempDir()
	a := openHost(t, dir, log, lock, 1)
	b := openHost(t, t.TempDir(), log, lock, 2)
	a.close()
	ctx := WithActor(context.Background(), "cli:root")
	db, c, err := OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MigrateReplica(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueueForCluster(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateUser(ctx, "rescue", RoleAdmin, "a-password"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	a.open(nil)
	waitFor(t, func() bool {
		u, err := b.c.UserByName(ctx, "rescue")
		return err == nil && u.Role == RoleAdmin
	})
	v, _ := RowVersion(ctx, b.db, "users", mustUser(t, b.c, "rescue").ID)
	if v.By != "cli:root" {
		t.Fatalf("published by %q", v.By)
	}
}

func mustUser(t *testing.T, c *Console, name string) User {
	t.Helper()
	u, err := c.UserByName(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Concurrent changes from two hosts are serialised by the lock: every
// one lands, and the hosts agree.
func TestReplicaConcurrentWriters(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	b := openHost(t, t.TempDir(), log, lock, 2)
	ctx := WithActor(context.Background(), "root")
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 20; i++ {
		for _, h := range []*host{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.c.CreateUser(ctx, fmt.Sprintf("u%d-%d", h.id, i), RoleViewer, "a-password"); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	a.sync()
	b.sync()
	if da, db := dump(t, a.db), dump(t, b.db); !reflect.DeepEqual(da, db) || len(da["users"]) != 40 {
		t.Fatalf("hosts differ or users missing: %d %d", len(da["users"]), len(db["users"]))
	}
	if a.rep.Status().Conflicts+b.rep.Status().Conflicts != 0 {
		t.Fatal("conflicts under the lock")
	}
}

// Statements with their own conflict clause (upserts, INSERT OR REPLACE)
// are captured like any other, each changed row once.
func TestCaptureConflictClauses(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	b := openHost(t, t.TempDir(), log, lock, 2)
	ctx := WithActor(context.Background(), "root")
	for i := 0; i < 3; i++ {
		err := a.db.Change(ctx, func(tx *sql.Tx) error {
			if _, err := tx.Exec(`INSERT INTO settings(key, value, updated_at) VALUES('u', ?, 0)
				ON CONFLICT(key) DO UPDATE SET value = excluded.value`, fmt.Sprint(i)); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT OR REPLACE INTO settings(key, value, updated_at) VALUES('r', ?, 0)`, fmt.Sprint(i)); err != nil {
				return err
			}
			_, err := tx.Exec(`UPDATE settings SET value = value || '!' WHERE key = 'u'`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b.sync()
	if u, _ := b.c.Setting(ctx, "u"); u != "2!" {
		t.Fatalf("u = %q", u)
	}
	if r, _ := b.c.Setting(ctx, "r"); r != "2" {
		t.Fatalf("r = %q", r)
	}
	if n := len(log.Records()); n != 1+3*2 {
		t.Fatalf("%d records, want one per row changed per change", n)
	}
}

// A user added with the command line on a host that has not joined the
// cluster's console yet survives the join: the host's own state is
// replaced by the cluster's, and the queued user is then added by name,
// with an id of the cluster's, not over the cluster's user of the same id.
func TestQueuedChangeSurvivesJoin(t *testing.T) {
	log, lock := NewMemLog(), NewMutexLock()
	a := openHost(t, t.TempDir(), log, lock, 1)
	ctx := WithActor(context.Background(), "root")
	ann, err := a.c.CreateUser(ctx, "ann", RoleAdmin, "a-password")
	if err != nil {
		t.Fatal(err)
	}
	dirB := t.TempDir()
	db, c, err := OpenConsole(ctx, dirB)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.QueueForCluster(ctx); err != nil {
		t.Fatal(err)
	}
	rescue, err := c.CreateUser(WithActor(ctx, "cli:root"), "rescue", RoleAdmin, "a-password")
	if err != nil {
		t.Fatal(err)
	}
	if rescue.ID != ann.ID {
		t.Fatalf("the test wants the same id on both hosts: %d %d", rescue.ID, ann.ID)
	}
	db.Close()
	b := openHost(t, dirB, log, lock, 2)
	waitFor(t, func() bool {
		_, err := a.c.UserByName(ctx, "rescue")
		return err == nil
	})
	b.sync()
	if got, _ := b.c.UserByID(ctx, ann.ID); got.Name != "ann" {
		t.Fatalf("user %d on host 2 is %q", ann.ID, got.Name)
	}
	if da, db := dump(t, a.db), dump(t, b.db); !reflect.DeepEqual(da["users"], db["users"]) {
		t.Fatalf("users differ:\n%v\n%v", da["users"], db["users"])
	}
	if _, err := b.c.Authenticate(ctx, "rescue", "a-password"); err != nil {
		t.Fatal(err)
	}
}

// A host whose own state is replaced by the topic's (it joins a console
// another host initialised) ends the sessions made against its own users:
// the topic's user under the same id is another user, and a session of
// this host's admin must not become a session of the cluster's viewer.
func TestReplicaReplayEndsLocalSessions(t *testing.T) {
	ctx := WithActor(context.Background(), "root")
	BcryptCost = bcrypt.MinCost
	dirA, dirB := t.TempDir(), t.TempDir()
	seed := func(dir, name string, role Role) (token string) {
		db, c, err := OpenConsole(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		u, err := c.CreateUser(ctx, name, role, "a-password")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := c.CreateSession(ctx, u.ID, time.Hour, "127.0.0.1", "test")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	seed(dirA, "vic", RoleViewer)
	tokB := seed(dirB, "ben", RoleAdmin)
	log, lock := NewMemLog(), NewMutexLock()
	openHost(t, dirA, log, lock, 1)
	b := openHost(t, dirB, log, lock, 2)
	if st := b.rep.Status(); st.Origin != "replay" {
		t.Fatalf("host 2 origin %q", st.Origin)
	}
	s, err := b.c.SessionByToken(ctx, tokB, time.Hour, 0, 0)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("host 2's session of its own admin survived the replay as %q (%s): %v", s.User.Name, s.User.Role, err)
	}
}

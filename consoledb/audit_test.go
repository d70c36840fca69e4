package consoledb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAuditEntriesAreBounded: a megabyte user name (a hostile sign-in
// attempt) is recorded cut to its bound, as valid UTF-8 on one line.
func TestAuditEntriesAreBounded(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	huge := strings.Repeat("é", 1<<19) + "\r\nforged line"
	if _, err := c.AppendAudit(ctx, AuditEntry{User: huge, Action: "session.login", Target: huge, Detail: huge, RemoteAddr: huge, Outcome: huge}); err != nil {
		t.Fatal(err)
	}
	es, _, err := c.Audit(ctx, AuditFilter{})
	if err != nil || len(es) != 1 {
		t.Fatalf("%v %v", es, err)
	}
	e := es[0]
	for name, f := range map[string]struct {
		v   string
		max int
	}{"user": {e.User, MaxAuditUser}, "target": {e.Target, MaxAuditTarget}, "detail": {e.Detail, MaxAuditDetail}, "addr": {e.RemoteAddr, MaxAuditAddr}, "outcome": {e.Outcome, MaxAuditOutcome}} {
		if len(f.v) > f.max+len("…") || !utf8.ValidString(f.v) || !strings.HasSuffix(f.v, "…") {
			t.Errorf("%s: %d bytes, valid %v", name, len(f.v), utf8.ValidString(f.v))
		}
	}
	short := AuditEntry{User: "a\r\nb", Target: "t\x00"}
	short.Bound()
	if short.User != "a??b" || short.Target != "t?" {
		t.Errorf("control characters kept: %q %q", short.User, short.Target)
	}
}

// TestPruneAudit: entries older than the retention go, then the oldest
// beyond the row cap, in batches larger than one DELETE.
func TestPruneAudit(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	now := time.Now()
	const old, recent = 2*pruneBatch + 7, 30
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < old+recent; i++ {
		at := now.Add(-400 * 24 * time.Hour)
		if i >= old {
			at = now.Add(-time.Duration(old+recent-i) * time.Minute)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log(at, username, action) VALUES(?, 'u', 'x')`, ms(at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	n, err := c.PruneAudit(ctx, now.Add(-365*24*time.Hour), 0)
	if err != nil || n != old {
		t.Fatalf("pruned %d (%v), want %d", n, err, old)
	}
	n, err = c.PruneAudit(ctx, now.Add(-365*24*time.Hour), 10)
	if err != nil || n != recent-10 {
		t.Fatalf("pruned %d (%v), want %d", n, err, recent-10)
	}
	es, _, _ := c.Audit(ctx, AuditFilter{Limit: 1000})
	if len(es) != 10 || es[9].At.Before(now.Add(-11*time.Minute)) {
		t.Fatalf("kept %d entries, oldest %v", len(es), es[len(es)-1].At)
	}
	if n, err := c.PruneAudit(ctx, now.Add(-365*24*time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("second prune: %d %v", n, err)
	}
}

// TestDatabaseFilesArePrivate: console.db and its WAL and shared-memory
// files are created 0600 even with umask 0, and an existing world-readable
// database is tightened on open.
func TestDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := t.TempDir()
	db, c, err := OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendAudit(ctx, AuditEntry{User: "u", Action: "x"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(f), st.Mode().Perm())
		}
	}
	db.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(f, 0o666); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	db, _, err = OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if st, err := os.Stat(f); err == nil && st.Mode().Perm() != 0o640 {
			t.Errorf("%s reopened: mode %v, want 0640", filepath.Base(f), st.Mode().Perm())
		}
	}
}

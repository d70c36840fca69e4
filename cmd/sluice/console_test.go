package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
)

func runConsole(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := consoleMain(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestConsoleUserCommands(t *testing.T) {
	consoledb.BcryptCost = bcrypt.MinCost
	dir := t.TempDir()
	code, out, _ := runConsole(t, "", "user", "list", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "no console users yet") {
		t.Fatalf("empty list: %d %q", code, out)
	}
	code, _, errs := runConsole(t, "pw\n", "user", "add", "--data-dir", dir, "--password-stdin", "root")
	if code != 1 || !strings.Contains(errs, "at least 8 characters") {
		t.Fatalf("short password: %d %q", code, errs)
	}
	code, out, errs = runConsole(t, "a-good-password\n", "user", "add", "root", "--role", "admin", "--data-dir", dir, "--password-stdin")
	if code != 0 || !strings.Contains(out, "user root added as admin") {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	code, _, errs = runConsole(t, "a-good-password\n", "user", "add", "--data-dir", dir, "--password-stdin", "root")
	if code != 1 || !strings.Contains(errs, "already exists") {
		t.Fatalf("duplicate: %d %q", code, errs)
	}
	code, _, errs = runConsole(t, "", "user", "add", "--data-dir", dir, "--role", "boss", "x")
	if code != exitUsage || !strings.Contains(errs, "unknown role") {
		t.Fatalf("bad role: %d %q", code, errs)
	}
	code, _, errs = runConsole(t, "", "user", "add", "--data-dir", dir, "root")
	if code != 1 || !strings.Contains(errs, "--password-stdin") {
		t.Fatalf("no terminal: %d %q", code, errs)
	}
	code, out, _ = runConsole(t, "another-password\n", "user", "passwd", "--data-dir", dir, "--password-stdin", "root")
	if code != 0 || !strings.Contains(out, "password of root changed") {
		t.Fatalf("passwd: %d %q", code, out)
	}
	code, _, errs = runConsole(t, "another-password\n", "user", "passwd", "--data-dir", dir, "--password-stdin", "nobody")
	if code != 1 || !strings.Contains(errs, "no user") {
		t.Fatalf("passwd of a missing user: %d %q", code, errs)
	}
	code, out, _ = runConsole(t, "", "user", "list", "--data-dir", dir, "--json")
	var users []struct{ Name, Role string }
	if code != 0 || json.Unmarshal([]byte(out), &users) != nil || len(users) != 1 || users[0].Role != "admin" {
		t.Fatalf("list json: %d %q", code, out)
	}
	// The console sees the user, with the new password, and the audit log
	// records both changes.
	db, store, err := consoledb.OpenConsole(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := store.Authenticate(context.Background(), "root", "another-password"); err != nil {
		t.Fatal(err)
	}
	entries, _, _ := store.Audit(context.Background(), consoledb.AuditFilter{Action: "user."})
	if len(entries) < 3 || !strings.HasPrefix(entries[0].User, "cli") {
		t.Fatalf("audit: %+v", entries)
	}
	// console.data.dir from the serve config file.
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "sluice.properties")
	os.WriteFile(cfg, []byte("console.data.dir="+dir+"\n"), 0o644)
	code, out, errs = runConsole(t, "", "user", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "root") {
		t.Fatalf("list via --config: %d %q %q", code, out, errs)
	}
	if code, _, _ := runConsole(t, "", "user", "frob", "--data-dir", dir); code != exitUsage {
		t.Fatalf("unknown verb: %d", code)
	}
	if code, _, _ := runConsole(t, ""); code != exitUsage {
		t.Fatalf("no arguments: %d", code)
	}
}

// A user added on the command line is queued for the cluster: the console
// on the host publishes it when its replica runs (consoledb tests that
// part); the queue holds the changed row.
func TestConsoleUserQueuedForCluster(t *testing.T) {
	consoledb.BcryptCost = bcrypt.MinCost
	dir := t.TempDir()
	if code, out, errs := runConsole(t, "a-good-password\n", "user", "add", "--role", "admin", "--data-dir", dir, "--password-stdin", "root"); code != 0 {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	db, _, err := consoledb.OpenConsole(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT tbl, by_user FROM replica_outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, by string
		rows.Scan(&tbl, &by)
		if !strings.HasPrefix(by, "cli") {
			t.Errorf("queued by %q", by)
		}
		tables = append(tables, tbl)
	}
	rows.Close()
	if strings.Join(tables, ",") != "users,audit_log" {
		t.Fatalf("queued rows of %v, want the user and its audit entry", tables)
	}
}

// backup copies console.db while it is open; restore puts the copy back,
// keeping the database it replaces, and refuses while a console runs on
// the directory or when the file is not a console database.
func TestConsoleBackupRestore(t *testing.T) {
	consoledb.BcryptCost = bcrypt.MinCost
	ctx := context.Background()
	dir := t.TempDir()
	if code, _, errs := runConsole(t, "a-good-password\n", "user", "add", "--data-dir", dir, "--password-stdin", "kept"); code != 0 {
		t.Fatalf("add: %q", errs)
	}
	// Open, as a running console has it, while the backup is made.
	db, store, err := consoledb.OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "console-backup.db")
	if code, out, errs := runConsole(t, "", "backup", "--data-dir", dir, backup); code != 0 || !strings.Contains(out, backup) {
		t.Fatalf("backup: %d %q %q", code, out, errs)
	}
	if st, err := os.Stat(backup); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", st, err)
	}
	if code, _, errs := runConsole(t, "", "backup", "--data-dir", dir, backup); code != 1 || !strings.Contains(errs, "exists") {
		t.Fatalf("backup over an existing file: %d %q", code, errs)
	}
	if _, err := store.CreateUser(ctx, "later", consoledb.RoleViewer, "a-good-password"); err != nil {
		t.Fatal(err)
	}
	release, err := consoledb.HoldRunning(dir)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runConsole(t, "", "restore", "--data-dir", dir, backup); code != 1 || !strings.Contains(errs, "stop sluice serve") {
		t.Fatalf("restore while running: %d %q", code, errs)
	}
	release()
	db.Close()
	junk := filepath.Join(t.TempDir(), "junk")
	os.WriteFile(junk, []byte("not a database"), 0o600)
	if code, _, _ := runConsole(t, "", "restore", "--data-dir", dir, junk); code != 1 {
		t.Fatalf("restore of junk: %d", code)
	}
	code, out, errs := runConsole(t, "", "restore", "--data-dir", dir, backup)
	if code != 0 || !strings.Contains(out, "replaced is") {
		t.Fatalf("restore: %d %q %q", code, out, errs)
	}
	db, store, err = consoledb.OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := store.UserByName(ctx, "kept"); err != nil {
		t.Fatalf("the backed-up user: %v", err)
	}
	if _, err := store.UserByName(ctx, "later"); !errors.Is(err, consoledb.ErrNotFound) {
		t.Fatalf("a user made after the backup: %v", err)
	}
	if copies, _ := filepath.Glob(filepath.Join(dir, consoledb.FileName+".replaced-*")); len(copies) != 1 {
		t.Fatalf("replaced copies: %v", copies)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
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

package consoledb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestMigrateAppliesInOrderAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "console.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := []string{`CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT)`}
	if err := db.Migrate(ctx, "test", v1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO a(name) VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	db.Close()

	// An upgrade adds a migration; the data stays.
	db, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v2 := append(v1, `ALTER TABLE a ADD COLUMN note TEXT NOT NULL DEFAULT ''`)
	if err := db.Migrate(ctx, "test", v2); err != nil {
		t.Fatal(err)
	}
	var name, note string
	if err := db.QueryRowContext(ctx, `SELECT name, note FROM a`).Scan(&name, &note); err != nil || name != "kept" {
		t.Fatalf("row after upgrade: %q %q %v", name, note, err)
	}
	if v, _ := db.Version(ctx, "test"); v != 2 {
		t.Fatalf("version = %d, want 2", v)
	}
	// Components are independent.
	if v, _ := db.Version(ctx, "other"); v != 0 {
		t.Fatalf("other version = %d", v)
	}
	// A newer database is refused by an older list.
	if err := db.Migrate(ctx, "test", v1); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("downgrade err = %v", err)
	}
}

func TestMigrateFailureLeavesVersion(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Migrate(ctx, "bad", []string{`CREATE TABLE ok (x)`, `THIS IS NOT SQL`})
	if err == nil {
		t.Fatal("bad migration applied")
	}
	if v, _ := db.Version(ctx, "bad"); v != 1 {
		t.Fatalf("version after failure = %d, want 1", v)
	}
}

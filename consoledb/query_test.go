package consoledb

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// QueryAll returns the rows in the query's order through the scan
// function, nil for none, and stops at the first error of the query or of
// a scan.
func TestQueryAll(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE n (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
		INSERT INTO n(name) VALUES ('a'), ('b'), ('c')`); err != nil {
		t.Fatal(err)
	}
	name := func(row Scanner) (s string, err error) {
		err = row.Scan(&s)
		return s, err
	}
	got, err := QueryAll(ctx, db, `SELECT name FROM n WHERE id >= ? ORDER BY id DESC`, name, 2)
	if err != nil || strings.Join(got, ",") != "c,b" {
		t.Fatalf("QueryAll = %q, %v; want c,b", got, err)
	}
	if got, err := QueryAll(ctx, db, `SELECT name FROM n WHERE id > 10`, name); err != nil || got != nil {
		t.Fatalf("no rows: %q, %v; want nil, nil", got, err)
	}
	if _, err := QueryAll(ctx, db, `SELECT nope FROM n`, name); err == nil {
		t.Fatal("a bad query returned no error")
	}
	bad := errors.New("bad row")
	calls := 0
	_, err = QueryAll(ctx, db, `SELECT name FROM n ORDER BY id`, func(row Scanner) (string, error) {
		calls++
		s, _ := name(row)
		if s == "b" {
			return "", bad
		}
		return s, nil
	})
	if !errors.Is(err, bad) || calls != 2 {
		t.Fatalf("scan error: %v after %d rows; want the scan's error after 2", err, calls)
	}
	// A transaction is a Querier too.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if got, err := QueryAll(ctx, tx, `SELECT name FROM n ORDER BY id`, name); err != nil || len(got) != 3 {
		t.Fatalf("in a transaction: %q, %v", got, err)
	}
}

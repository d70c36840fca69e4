package consoledb

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Table is a console table whose rows are shared by every host of a
// cluster: each change of a row is a record of the console topic (see
// DESIGN.md, "The console in a cluster"). Register it once, in a package
// variable of the component whose migrations create the table:
//
//	var _ = consoledb.Replicate(consoledb.Table{Name: "alert_rules"})
//
// and write it only through DB.Change. The columns, their types and the
// primary key are read from SQLite when the replica starts.
type Table struct {
	// Name is the SQLite table.
	Name string
	// LocalKey, when set, reports whether the row with this primary key
	// stays on its host (settings: the CSRF secret). Such rows are never
	// published, imported or applied.
	LocalKey func(key []any) bool
	// NaturalKey, when set, is a UNIQUE column that names a row across the
	// cluster (users: name). A row changed by a command while no replica
	// ran gets its id on this host alone; it is published by this key
	// instead (see QueueForCluster).
	NaturalKey string
	// OnApply, when set, runs in the apply transaction after a record of
	// this table was applied, with the row's image before and after (nil
	// when absent): a local consequence, such as ending the sessions of a
	// user whose password changed. It must not write replicated tables.
	OnApply func(ctx context.Context, tx *sql.Tx, key []any, before, after map[string]any) error
}

var registry struct {
	sync.Mutex
	tables []Table
}

var tableName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Replicate registers t as replicated and returns true (so that it can
// initialise a package variable). It panics on a malformed name or a table
// registered twice: both are programming errors.
func Replicate(t Table) bool {
	if !tableName.MatchString(t.Name) || strings.HasPrefix(t.Name, "replica_") || strings.HasPrefix(t.Name, "_") {
		panic("consoledb: Replicate: bad table name " + t.Name)
	}
	registry.Lock()
	defer registry.Unlock()
	for _, have := range registry.tables {
		if have.Name == t.Name {
			panic("consoledb: Replicate: " + t.Name + " registered twice")
		}
	}
	registry.tables = append(registry.tables, t)
	return true
}

// ReplicatedTables lists the names of the registered tables.
func ReplicatedTables() []string {
	registry.Lock()
	defer registry.Unlock()
	out := make([]string, len(registry.tables))
	for i, t := range registry.tables {
		out[i] = t.Name
	}
	return out
}

func registered() []Table {
	registry.Lock()
	defer registry.Unlock()
	return slices.Clone(registry.tables)
}

// column affinities, as SQLite derives them from a declared type.
const (
	affInteger = iota
	affReal
	affText
	affBlob
	affNumeric
)

func affinity(declared string) int {
	d := strings.ToUpper(declared)
	switch {
	case strings.Contains(d, "INT"):
		return affInteger
	case strings.Contains(d, "CHAR"), strings.Contains(d, "CLOB"), strings.Contains(d, "TEXT"):
		return affText
	case strings.Contains(d, "BLOB"), d == "":
		return affBlob
	case strings.Contains(d, "REAL"), strings.Contains(d, "FLOA"), strings.Contains(d, "DOUB"):
		return affReal
	}
	return affNumeric
}

// tableInfo is a registered table as the database has it.
type tableInfo struct {
	Table
	cols  []string       // every column, in order
	aff   map[string]int // column -> affinity
	pk    []string       // primary key columns, in key order
	where string         // "pk1 = ? AND pk2 = ?"
}

// loadTables reads the schema of every registered table. A registered
// table missing from the database is an error (its component was not
// migrated before the replica started) unless skipMissing.
func loadTables(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, skipMissing ...bool) (map[string]*tableInfo, error) {
	out := map[string]*tableInfo{}
	for _, t := range registered() {
		ti := &tableInfo{Table: t, aff: map[string]int{}}
		type col struct {
			name string
			typ  string
			pk   int
		}
		cols, err := QueryAll(ctx, q, `SELECT name, type, pk FROM pragma_table_info(?)`, func(row Scanner) (col, error) {
			var c col
			err := row.Scan(&c.name, &c.typ, &c.pk)
			return c, err
		}, t.Name)
		if err != nil {
			return nil, fmt.Errorf("consoledb: schema of %s: %w", t.Name, err)
		}
		if len(cols) == 0 && len(skipMissing) > 0 && skipMissing[0] {
			continue
		}
		if len(cols) == 0 {
			return nil, fmt.Errorf("consoledb: replicated table %s does not exist (its component was not migrated)", t.Name)
		}
		var pks []col
		for _, c := range cols {
			ti.cols = append(ti.cols, c.name)
			ti.aff[c.name] = affinity(c.typ)
			if c.pk > 0 {
				pks = append(pks, c)
			}
		}
		if len(pks) == 0 {
			return nil, fmt.Errorf("consoledb: replicated table %s has no primary key", t.Name)
		}
		slices.SortFunc(pks, func(a, b col) int { return a.pk - b.pk })
		var conds []string
		for _, c := range pks {
			ti.pk = append(ti.pk, c.name)
			conds = append(conds, quoteIdent(c.name)+" = ?")
		}
		ti.where = strings.Join(conds, " AND ")
		out[t.Name] = ti
	}
	return out, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func (ti *tableInfo) local(key []any) bool { return ti.LocalKey != nil && ti.LocalKey(key) }

func (ti *tableInfo) colList() string {
	q := make([]string, len(ti.cols))
	for i, c := range ti.cols {
		q[i] = quoteIdent(c)
	}
	return strings.Join(q, ", ")
}

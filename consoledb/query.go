package consoledb

import (
	"context"
	"database/sql"
)

// Scanner is one row to read: *sql.Row (from QueryRowContext) or
// *sql.Rows. Scan functions take it so that one function reads a row of a
// single-row lookup and of a list.
type Scanner = interface{ Scan(dest ...any) error }

// Querier runs a query: *DB, *sql.DB or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryAll runs query with args and returns every row, in order, as scan
// reads it; the first error (of the query, a scan, or the iteration) ends
// it. The caller names what failed when it wraps the error.
func QueryAll[T any](ctx context.Context, db Querier, query string, scan func(Scanner) (T, error), args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

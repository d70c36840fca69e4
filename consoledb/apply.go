package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Applying records: each record is the last image of its row (or its
// absence), so applying is "last record wins": INSERT OR REPLACE of the
// image, or DELETE. A batch is applied in the caller's transaction, which
// also records the applied offset (saveState), so a crash between the two
// neither applies twice nor skips. Records at or below the offset already
// recorded in the database are skipped (a command's replica may apply into
// the same database).

// applyBatch applies recs in tx and returns the offset of the last.
func (r *Replica) applyBatch(ctx context.Context, tx *sql.Tx, recs []Record) (int64, error) {
	var done int64 = -1
	if err := tx.QueryRowContext(ctx, `SELECT applied FROM replica_state WHERE topic = ?`, r.cfg.Topic).Scan(&done); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	r.mu.Lock()
	rebuilding := r.rebuilding
	r.mu.Unlock()
	last := recs[len(recs)-1].Offset
	for _, rec := range recs {
		if rec.Offset <= done && !rebuilding {
			continue
		}
		if err := r.applyOne(ctx, tx, rec, rebuilding); err != nil {
			return 0, fmt.Errorf("offset %d: %w", rec.Offset, err)
		}
	}
	return last, nil
}

// applyOne applies one record in a savepoint: a record the database
// refuses (a constraint a newer or older schema does not share) is skipped
// and logged, as a malformed one is, so one bad record never stops the
// replica; any other error fails the batch, to be retried.
func (r *Replica) applyOne(ctx context.Context, tx *sql.Tx, rec Record, rebuilding bool) error {
	table, raw, err := decodeKey(rec.Key)
	if err != nil {
		r.skip(rec, err)
		return nil
	}
	if table == metaTable {
		return nil
	}
	ti := r.tables[table]
	if ti == nil {
		r.mu.Lock()
		warn := !r.warnedTable[table]
		r.warnedTable[table] = true
		r.skipped++
		r.mu.Unlock()
		if warn {
			r.log.Warn("console record of a table this Sluice does not replicate skipped (written by a newer Sluice?)", "table", table, "offset", rec.Offset)
		}
		return nil
	}
	pk, err := ti.keyValues(raw)
	if err != nil {
		r.skip(rec, err)
		return nil
	}
	if ti.local(pk) {
		return nil
	}
	var img map[string]any
	if rec.Value != nil {
		if img, err = ti.decodeImage(rec.Value); err != nil {
			r.skip(rec, err)
			return nil
		}
		if pkJSON(ti.keyOf(img)) != pkJSON(pk) {
			r.skip(rec, fmt.Errorf("%w: the row's key columns differ from the record key", ErrMalformedRecord))
			return nil
		}
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT apply_one`); err != nil {
		return err
	}
	err = r.write(ctx, tx, ti, pk, img, rec, rebuilding)
	if err == nil {
		_, err = tx.ExecContext(ctx, `RELEASE apply_one`)
		return err
	}
	if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO apply_one`); rerr != nil {
		return rerr
	}
	tx.ExecContext(ctx, `RELEASE apply_one`)
	if isConstraint(err) {
		r.skip(rec, err)
		return nil
	}
	return err
}

func (r *Replica) write(ctx context.Context, tx *sql.Tx, ti *tableInfo, pk []any, img map[string]any, rec Record, rebuilding bool) error {
	var before map[string]any
	var err error
	if ti.OnApply != nil {
		if before, err = ti.readImage(ctx, tx, pk); err != nil {
			return err
		}
	}
	if !rebuilding && rec.Headers[HeaderHost] == hostHeader(r.cfg.Host) {
		// A record of this host replaced a version its writer had not
		// read: two writers ran at once (the lock was lost in between).
		if base, err := strconv.ParseInt(rec.Headers[headerBase], 10, 64); err == nil {
			if v, err := RowVersion(ctx, tx, ti.Name, pk...); err == nil && v.Version != base {
				r.mu.Lock()
				r.conflicts++
				r.mu.Unlock()
				r.log.Warn("a change of this host replaced a version of the row it had not read (two writers at once)",
					"table", ti.Name, "key", pkJSON(pk), "offset", rec.Offset, "by", v.By, "host", v.Host)
			}
		}
	}
	if img == nil {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+quoteIdent(ti.Name)+` WHERE `+ti.where, pk...); err != nil {
			return err
		}
	} else {
		cols := make([]string, 0, len(img))
		for c := range img {
			cols = append(cols, c)
		}
		slices.Sort(cols)
		args := make([]any, len(cols))
		qs := make([]string, len(cols))
		for i, c := range cols {
			args[i] = img[c]
			qs[i] = "?"
			cols[i] = quoteIdent(c)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO `+quoteIdent(ti.Name)+` (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(qs, ", ")+`)`, args...); err != nil {
			return err
		}
	}
	del := 0
	if img == nil {
		del = 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO replica_keys(tbl, pk, version, deleted, by_user, by_host, at) VALUES(?,?,?,?,?,?,?)
		ON CONFLICT(tbl, pk) DO UPDATE SET version = excluded.version, deleted = excluded.deleted, by_user = excluded.by_user,
		by_host = excluded.by_host, at = excluded.at`,
		ti.Name, pkJSON(pk), rec.Offset+1, del, rec.Headers[HeaderBy], rec.Headers[HeaderHost], ms(rec.Time)); err != nil {
		return err
	}
	if ti.OnApply != nil {
		return ti.OnApply(ctx, tx, pk, before, img)
	}
	return nil
}

func (r *Replica) skip(rec Record, err error) {
	r.mu.Lock()
	r.skipped++
	r.mu.Unlock()
	// The key only: a row image may hold what the logs must not.
	r.log.Warn("console record skipped", "offset", rec.Offset, "key", string(rec.Key[:min(len(rec.Key), 200)]), "err", err)
}

func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

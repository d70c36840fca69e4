package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// LagSample is the lag of one consumer group on one topic at one moment:
// records behind (summed over the topic's partitions) and the largest time lag
// of its partitions.
type LagSample struct {
	Group   string
	Topic   string
	Lag     int64
	LagTime time.Duration
}

// LagPoint is a group's lag at one sample time, over all its topics (or one).
type LagPoint struct {
	At      time.Time
	Lag     int64         // records behind, summed
	LagTime time.Duration // the largest partition time lag
}

// InsertLagSamples stores samples taken at at, in one transaction.
func (c *Console) InsertLagSamples(ctx context.Context, at time.Time, samples []LagSample) error {
	if len(samples) == 0 {
		return nil
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("insert lag samples: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO lag_samples(group_name, topic, at, lag, lag_ms) VALUES(?,?,?,?,?)
		ON CONFLICT(group_name, at, topic) DO UPDATE SET lag = excluded.lag, lag_ms = excluded.lag_ms`)
	if err != nil {
		return fmt.Errorf("insert lag samples: %w", err)
	}
	defer st.Close()
	t := ms(at)
	for _, s := range samples {
		if _, err := st.ExecContext(ctx, s.Group, s.Topic, t, s.Lag, s.LagTime.Milliseconds()); err != nil {
			return fmt.Errorf("insert lag samples: %w", err)
		}
	}
	return tx.Commit()
}

// LagHistory returns the lag of group at every sample time in [since, until),
// oldest first. With topic empty the lag is summed over the group's topics.
func (c *Console) LagHistory(ctx context.Context, group, topic string, since, until time.Time) ([]LagPoint, error) {
	q := `SELECT at, sum(lag), max(lag_ms) FROM lag_samples WHERE group_name = ? AND at >= ? AND at < ?`
	args := []any{group, ms(since), ms(until)}
	if topic != "" {
		q += ` AND topic = ?`
		args = append(args, topic)
	}
	q += ` GROUP BY at ORDER BY at`
	out, err := QueryAll(ctx, c.db, q, func(row Scanner) (LagPoint, error) {
		var at, lag, lagMS int64
		err := row.Scan(&at, &lag, &lagMS)
		return LagPoint{At: fromMS(at), Lag: lag, LagTime: time.Duration(lagMS) * time.Millisecond}, err
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("read lag history of %s: %w", group, err)
	}
	return out, nil
}

// PruneLagSamples deletes samples older than before.
func (c *Console) PruneLagSamples(ctx context.Context, before time.Time) (int64, error) {
	res, err := c.db.ExecContext(ctx, `DELETE FROM lag_samples WHERE at < ?`, ms(before))
	if err != nil {
		return 0, fmt.Errorf("prune lag samples: %w", err)
	}
	return res.RowsAffected()
}

// LagTrends returns the lag of each of groups at every sample time since
// since, summed over its topics, oldest first: the groups list's trend
// lines. Groups without samples are absent from the map.
func (c *Console) LagTrends(ctx context.Context, groups []string, since time.Time) (map[string][]LagPoint, error) {
	out := make(map[string][]LagPoint, len(groups))
	// One query per chunk of names, each an index range scan of the
	// (group_name, at, topic) key.
	for len(groups) > 0 {
		chunk := groups[:min(len(groups), 200)]
		groups = groups[len(chunk):]
		q := `SELECT group_name, at, sum(lag), max(lag_ms) FROM lag_samples WHERE at >= ? AND group_name IN (?` +
			strings.Repeat(",?", len(chunk)-1) + `) GROUP BY group_name, at ORDER BY group_name, at`
		args := make([]any, 0, len(chunk)+1)
		args = append(args, ms(since))
		for _, g := range chunk {
			args = append(args, g)
		}
		type row struct {
			group string
			pt    LagPoint
		}
		rows, err := QueryAll(ctx, c.db, q, func(r Scanner) (row, error) {
			var x row
			var at, lag, lagMS int64
			err := r.Scan(&x.group, &at, &lag, &lagMS)
			x.pt = LagPoint{At: fromMS(at), Lag: lag, LagTime: time.Duration(lagMS) * time.Millisecond}
			return x, err
		}, args...)
		if err != nil {
			return nil, fmt.Errorf("read lag trends: %w", err)
		}
		for _, r := range rows {
			out[r.group] = append(out[r.group], r.pt)
		}
	}
	return out, nil
}

// LagRound is one sampling round of the lag history topic: every group's
// lag per topic at one time.
type LagRound struct {
	At      time.Time
	Samples []LagSample
}

// ApplyLagHistory stores the samples of rounds and records last as the
// applied offset of topic (the lag history topic), in one transaction, so
// a crash between the two neither stores twice nor skips. Samples already
// stored are overwritten (the same values).
func (c *Console) ApplyLagHistory(ctx context.Context, topic string, last int64, rounds []LagRound) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store lag history: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO lag_samples(group_name, topic, at, lag, lag_ms) VALUES(?,?,?,?,?)
		ON CONFLICT(group_name, at, topic) DO UPDATE SET lag = excluded.lag, lag_ms = excluded.lag_ms`)
	if err != nil {
		return fmt.Errorf("store lag history: %w", err)
	}
	defer st.Close()
	for _, r := range rounds {
		for _, s := range r.Samples {
			if _, err := st.ExecContext(ctx, s.Group, s.Topic, ms(r.At), s.Lag, s.LagTime.Milliseconds()); err != nil {
				return fmt.Errorf("store lag history: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO replica_state(topic, applied, updated_at) VALUES(?,?,?)
		ON CONFLICT(topic) DO UPDATE SET applied = excluded.applied, updated_at = excluded.updated_at`, topic, last, ms(time.Now())); err != nil {
		return fmt.Errorf("store lag history: %w", err)
	}
	return tx.Commit()
}

// AppliedOffset returns the offset of topic last applied here (-1: none).
func (c *Console) AppliedOffset(ctx context.Context, topic string) (int64, error) {
	var off int64 = -1
	err := c.db.QueryRowContext(ctx, `SELECT applied FROM replica_state WHERE topic = ?`, topic).Scan(&off)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	return off, err
}

// LastLagSample returns the time of the newest stored lag sample (zero
// when none).
func (c *Console) LastLagSample(ctx context.Context) (time.Time, error) {
	var at sql.NullInt64
	if err := c.db.QueryRowContext(ctx, `SELECT max(at) FROM lag_samples`).Scan(&at); err != nil {
		return time.Time{}, err
	}
	return fromMS(at.Int64), nil
}

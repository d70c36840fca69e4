package consoledb

import (
	"context"
	"fmt"
	"time"
)

// KnownBroker is a broker the console has seen in cluster metadata. A broker
// that was seen once and is missing from metadata now is shown as down.
type KnownBroker struct {
	ID          int32
	Host        string
	Port        int32
	Rack        string
	FirstSeenAt time.Time
	LastSeenAt  time.Time
}

// SeeBrokers records that the given brokers are in metadata now.
func (c *Console) SeeBrokers(ctx context.Context, brokers []KnownBroker) error {
	if len(brokers) == 0 {
		return nil
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record brokers: %w", err)
	}
	defer tx.Rollback()
	now := ms(time.Now())
	for _, b := range brokers {
		if _, err := tx.ExecContext(ctx, `INSERT INTO known_brokers(id, host, port, rack, first_seen_at, last_seen_at) VALUES(?,?,?,?,?,?)
			ON CONFLICT(id) DO UPDATE SET host = excluded.host, port = excluded.port, rack = excluded.rack, last_seen_at = excluded.last_seen_at`,
			b.ID, b.Host, b.Port, b.Rack, now, now); err != nil {
			return fmt.Errorf("record brokers: %w", err)
		}
	}
	return tx.Commit()
}

// KnownBrokers lists every broker ever seen, by id.
func (c *Console) KnownBrokers(ctx context.Context) ([]KnownBroker, error) {
	out, err := QueryAll(ctx, c.db, `SELECT id, host, port, rack, first_seen_at, last_seen_at FROM known_brokers ORDER BY id`,
		func(row Scanner) (KnownBroker, error) {
			var b KnownBroker
			var first, last int64
			err := row.Scan(&b.ID, &b.Host, &b.Port, &b.Rack, &first, &last)
			b.FirstSeenAt, b.LastSeenAt = fromMS(first), fromMS(last)
			return b, err
		})
	if err != nil {
		return nil, fmt.Errorf("list known brokers: %w", err)
	}
	return out, nil
}

// ForgetBroker removes a broker from the known list (a decommissioned host).
func (c *Console) ForgetBroker(ctx context.Context, id int32) error {
	res, err := c.db.ExecContext(ctx, `DELETE FROM known_brokers WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("forget broker %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Setting returns the value stored under key, or ErrNotFound.
func (c *Console) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := c.db.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read setting %s: %w", key, err)
	}
	return v, nil
}

// SetSetting stores value under key.
func (c *Console) SetSetting(ctx context.Context, key, value string) error {
	err := c.db.Change(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO settings(key, value, updated_at) VALUES(?,?,?)
			ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, key, value, ms(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("write setting %s: %w", key, err)
	}
	return nil
}

// Settings are shared by every host, but for the local keys (LocalSettings).
var _ = Replicate(Table{Name: "settings", LocalKey: func(key []any) bool { return LocalSettings[fmt.Sprint(key[0])] }})

// LocalSettings are the settings each host keeps to itself: the CSRF
// secret (a host's forms are checked by the host that served them).
var LocalSettings = map[string]bool{"csrf_secret": true}

// SettingOrInit returns the value under key, storing and returning init()
// when there is none yet. Concurrent callers all get the first stored value.
// It writes this host's database only: for LocalSettings.
func (c *Console) SettingOrInit(ctx context.Context, key string, init func() string) (string, error) {
	if v, err := c.Setting(ctx, key); err == nil {
		return v, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	if _, err := c.db.ExecContext(ctx, `INSERT INTO settings(key, value, updated_at) VALUES(?,?,?) ON CONFLICT(key) DO NOTHING`,
		key, init(), ms(time.Now())); err != nil {
		return "", fmt.Errorf("write setting %s: %w", key, err)
	}
	return c.Setting(ctx, key)
}

// SettingsWithPrefix returns the settings whose key starts with prefix.
func (c *Console) SettingsWithPrefix(ctx context.Context, prefix string) (map[string]string, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT key, value FROM settings WHERE substr(key, 1, ?) = ?`, utf8.RuneCountInString(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("read settings %s*: %w", prefix, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read settings %s*: %w", prefix, err)
		}
		out[k] = v
	}
	return out, rows.Err()
}

// DeleteSetting removes the setting under key (none: no error).
func (c *Console) DeleteSetting(ctx context.Context, key string) error {
	err := c.db.Change(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM settings WHERE key = ?`, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete setting %s: %w", key, err)
	}
	return nil
}

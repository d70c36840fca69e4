package consoledb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Backup and restore of console.db. A backup (DB.BackupTo) is a
// consistent copy made with VACUUM INTO while the console serves. Restore
// puts one back while the console is stopped: the running console holds a
// shared flock on console.data.dir/console.running (HoldRunning), which
// Restore must take exclusively.

// RunningFile is the file in console.data.dir the running console holds a
// shared lock on.
const RunningFile = "console.running"

// HoldRunning takes the shared lock that says a console runs on dir, until
// release.
func HoldRunning(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, RunningFile), os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("consoledb: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("consoledb: %s is being restored: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// ErrRunning is returned by Restore while a console runs on the directory.
var ErrRunning = errors.New("the console is running on this data directory: stop sluice serve first")

// Restore replaces dir's console.db with a copy of the backup file. The
// database it replaces (if any) is kept as console.db.replaced-<time>,
// whose path it returns. The backup must be a console database.
func Restore(ctx context.Context, backup, dir string) (string, error) {
	if err := checkBackup(ctx, backup); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, RunningFile), os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return "", ErrRunning
	}
	path := filepath.Join(dir, FileName)
	replaced := ""
	if _, err := os.Stat(path); err == nil {
		// Fold the write-ahead log into the file, so the file alone is
		// the database, then keep it aside.
		cur, err := Open(ctx, path)
		if err != nil {
			return "", err
		}
		_, err = cur.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		cur.Close()
		if err != nil {
			return "", fmt.Errorf("consoledb: checkpoint %s: %w", path, err)
		}
		replaced = path + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(path, replaced); err != nil {
			return "", err
		}
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
	}
	src, err := Open(ctx, backup)
	if err != nil {
		return replaced, err
	}
	defer src.Close()
	if err := src.BackupTo(ctx, path); err != nil {
		return replaced, err
	}
	return replaced, nil
}

// checkBackup opens backup and checks it is a sound console database.
func checkBackup(ctx context.Context, backup string) error {
	st, err := os.Stat(backup)
	if err != nil {
		return fmt.Errorf("consoledb: backup: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() == 0 {
		return fmt.Errorf("consoledb: %s is not a console database backup", backup)
	}
	db, err := Open(ctx, backup)
	if err != nil {
		return err
	}
	defer db.Close()
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("consoledb: %s fails SQLite's integrity check: %v %s", backup, err, ok)
	}
	if v, err := db.Version(ctx, ConsoleComponent); err != nil || v == 0 {
		return fmt.Errorf("consoledb: %s is not a console database (no console tables)", backup)
	}
	return nil
}

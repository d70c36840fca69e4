package alerting

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sluice-io/sluice/consoledb"
)

// keySize is an AES-256 key.
const keySize = 32

// secretAAD binds sealed secrets to their use, so a ciphertext from another
// part of the console cannot be swapped in.
var secretAAD = []byte("sluice alerting notifier secret v1")

// sealer encrypts notifier secrets (PagerDuty routing keys, webhook tokens)
// with AES-256-GCM under a key kept in a file of its own (0600) in the
// console data directory, so a copy of the database alone does not reveal
// them.
type sealer struct {
	aead cipher.AEAD
	key  []byte
}

// loadOrCreateKey reads the key file, creating it with a fresh random key
// (mode 0600, exclusive create) when it does not exist. A key file that
// others can read, or of the wrong size, is refused.
func loadOrCreateKey(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("alerting: no key file configured")
	}
	key, err := readKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("alerting: key file directory: %w", err)
	}
	key = make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("alerting: generate key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readKey(path) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("alerting: create key file: %w", err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("alerting: write key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("alerting: write key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("alerting: write key file: %w", err)
	}
	return key, nil
}

func readKey(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("alerting: key file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("alerting: key file %s has mode %v: others may read it; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("alerting: key file: %w", err)
	}
	if len(key) != keySize {
		return nil, fmt.Errorf("alerting: key file %s holds %d bytes, want %d", path, len(key), keySize)
	}
	return key, nil
}

func newSealer(key []byte) (*sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("alerting: key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("alerting: key: %w", err)
	}
	return &sealer{aead: aead, key: key}, nil
}

// seal returns nonce || ciphertext.
func (s *sealer) seal(plain string) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("alerting: crypto/rand failed: " + err.Error()) // rand.Read does not fail on Linux
	}
	return s.aead.Seal(nonce, nonce, []byte(plain), secretAAD)
}

// errSecretUnreadable means a stored secret cannot be decrypted with the
// current key file (it was replaced or lost): the secret must be entered
// again.
var errSecretUnreadable = errors.New("stored secret cannot be decrypted with the current key file; enter it again")

func (s *sealer) open(sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return "", errSecretUnreadable
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], secretAAD)
	if err != nil {
		return "", errSecretUnreadable
	}
	return string(plain), nil
}

// secretHint is what the console may show of a secret after it is saved:
// its last four characters for a long secret, nothing of a short one.
func secretHint(secret string) string {
	r := []rune(secret)
	if len(r) < 16 {
		return "••••"
	}
	return "••••" + string(r[len(r)-4:])
}

// LoadOrCreateKey returns the key in path, creating the file (0600) with a
// fresh random key when it does not exist: a single node's cluster key.
func LoadOrCreateKey(path string) ([]byte, error) { return loadOrCreateKey(path) }

// reseal re-encrypts, in this host's database, the notifier secrets sealed
// with the key in keyFile (a host's own key, before the cluster key) with
// the cluster key of to, then renames keyFile to keyFile+".replaced". It
// runs before the replica starts, so an import publishes resealed secrets.
// A secret that opens with neither key is left as it is (it must be
// entered again, as before).
func reseal(ctx context.Context, db *consoledb.DB, keyFile string, to *sealer, log *slog.Logger) error {
	old, err := readKey(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(old, to.key) == 1 {
		return nil // the file is the cluster key (a single node)
	}
	from, err := newSealer(old)
	if err != nil {
		return err
	}
	type row struct {
		id     int64
		sealed []byte
	}
	rows, err := consoledb.QueryAll(ctx, db, `SELECT id, secret FROM alert_notifiers WHERE secret IS NOT NULL`, func(sc consoledb.Scanner) (row, error) {
		var r row
		err := sc.Scan(&r.id, &r.sealed)
		return r, err
	})
	if err != nil {
		return fmt.Errorf("alerting: reseal secrets: %w", err)
	}
	n := 0
	for _, r := range rows {
		if _, err := to.open(r.sealed); err == nil {
			continue // already under the cluster key
		}
		plain, err := from.open(r.sealed)
		if err != nil {
			continue
		}
		if _, err := db.ExecContext(ctx, `UPDATE alert_notifiers SET secret = ? WHERE id = ?`, to.seal(plain), r.id); err != nil {
			return fmt.Errorf("alerting: reseal secrets: %w", err)
		}
		n++
	}
	if err := os.Rename(keyFile, keyFile+".replaced"); err != nil {
		return fmt.Errorf("alerting: %w", err)
	}
	log.Info("notifier secrets resealed with the cluster key; the host's own key file is no longer used", "secrets", n, "old_key", keyFile+".replaced")
	return nil
}

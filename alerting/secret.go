package alerting

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	return &sealer{aead: aead}, nil
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

package consoledb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Session is a signed-in browser. Only a hash of its token is stored, so a
// copy of the database does not let anyone sign in.
type Session struct {
	ID         string // hex SHA-256 of the token
	User       User
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt time.Time
	RemoteAddr string
	UserAgent  string
}

// NewToken returns 32 random bytes, URL-safe base64 encoded.
func NewToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("consoledb: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SessionID is the stored id of a session token.
func SessionID(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// CreateSession starts a session for user id that lasts ttl and returns the
// token to put in the cookie.
func (c *Console) CreateSession(ctx context.Context, userID int64, ttl time.Duration, remoteAddr, userAgent string) (string, error) {
	token := NewToken()
	now := time.Now()
	if len(userAgent) > 256 {
		userAgent = userAgent[:256]
	}
	if _, err := c.db.ExecContext(ctx, `INSERT INTO sessions(id, user_id, created_at, expires_at, last_seen_at, remote_addr, user_agent) VALUES(?,?,?,?,?,?,?)`,
		SessionID(token), userID, ms(now), ms(now.Add(ttl)), ms(now), remoteAddr, userAgent); err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	return token, nil
}

// SessionByToken returns the live session for token with its user's current
// name and role, or ErrNotFound when there is none or it expired. When the
// session was last seen more than touchAfter ago, its last-seen time is
// updated and, with idle > 0, its expiry is pushed to now+idle (never past
// maxAge after creation).
func (c *Console) SessionByToken(ctx context.Context, token string, touchAfter, idle, maxAge time.Duration) (Session, error) {
	if token == "" {
		return Session{}, ErrNotFound
	}
	id := SessionID(token)
	var s Session
	var role string
	var created, expires, seen, uc, uu, ul int64
	err := c.db.QueryRowContext(ctx, `SELECT s.id, s.created_at, s.expires_at, s.last_seen_at, s.remote_addr, s.user_agent,
			u.id, u.name, u.role, u.created_at, u.updated_at, u.last_login_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = ?`, id).
		Scan(&s.ID, &created, &expires, &seen, &s.RemoteAddr, &s.UserAgent,
			&s.User.ID, &s.User.Name, &role, &uc, &uu, &ul)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session: %w", err)
	}
	s.User.Role = Role(role)
	s.User.CreatedAt, s.User.UpdatedAt, s.User.LastLoginAt = fromMS(uc), fromMS(uu), fromMS(ul)
	s.CreatedAt, s.ExpiresAt, s.LastSeenAt = fromMS(created), fromMS(expires), fromMS(seen)
	now := time.Now()
	if !now.Before(s.ExpiresAt) {
		c.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		return Session{}, ErrNotFound
	}
	if now.Sub(s.LastSeenAt) >= touchAfter {
		exp := s.ExpiresAt
		if idle > 0 {
			exp = now.Add(idle)
			if maxAge > 0 && exp.After(s.CreatedAt.Add(maxAge)) {
				exp = s.CreatedAt.Add(maxAge)
			}
		}
		if _, err := c.db.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ?, expires_at = ? WHERE id = ?`, ms(now), ms(exp), id); err != nil {
			return Session{}, fmt.Errorf("touch session: %w", err)
		}
		s.LastSeenAt, s.ExpiresAt = fromMS(ms(now)), fromMS(ms(exp))
	}
	return s, nil
}

// DeleteSession ends the session of token.
func (c *Console) DeleteSession(ctx context.Context, token string) error {
	_, err := c.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, SessionID(token))
	return err
}

// DeleteUserSessions ends every session of a user except keepToken's.
func (c *Console) DeleteUserSessions(ctx context.Context, userID int64, keepToken string) error {
	_, err := c.db.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ? AND id != ?`, userID, SessionID(keepToken))
	return err
}

// PruneSessions deletes expired sessions.
func (c *Console) PruneSessions(ctx context.Context) (int64, error) {
	res, err := c.db.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, ms(time.Now()))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

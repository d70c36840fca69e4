package consoledb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Role is what a console user may do. Roles are ordered: each includes the
// rights of the ones below it.
type Role string

const (
	// RoleViewer reads everything: cluster, topics, messages, groups.
	RoleViewer Role = "viewer"
	// RoleOperator also changes the cluster: creates, alters and deletes
	// topics, produces messages, resets group offsets.
	RoleOperator Role = "operator"
	// RoleAdmin also manages users and reads the audit log.
	RoleAdmin Role = "admin"
)

// Roles lists the roles from least to most privileged.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(strings.TrimSpace(s))); r {
	case RoleViewer, RoleOperator, RoleAdmin:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want viewer, operator or admin)", s)
}

// Rank orders roles: viewer 1, operator 2, admin 3; 0 for an unknown role.
func (r Role) Rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Allows reports whether a user with role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.Rank() > 0 && r.Rank() >= need.Rank() }

// BcryptCost is the bcrypt work factor for new password hashes. Tests lower it.
var BcryptCost = bcrypt.DefaultCost

// MinPasswordLen is the shortest password accepted. bcrypt reads at most 72
// bytes, so longer passwords are refused rather than silently truncated.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 72
)

// User is a console account.
type User struct {
	ID          int64
	Name        string
	Role        Role
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastLoginAt time.Time // zero when never signed in
	// Version is the row's version in the console's replicated state (0
	// when it was never replicated); with UpdatedAt it is the Base of an
	// edit made from what a page showed.
	Version int64
}

// Base returns the base of an edit of u as a page shows it.
func (u User) Base() UserBase { return UserBase{Version: u.Version, Updated: u.UpdatedAt.UnixMilli()} }

// UserBase is what an admin's edit of a user was based on: the row's
// version and its updated_at (ms) as the admin's page showed them. The
// zero UserBase checks nothing (a command, a user's own password).
//
// A sign-in changes the row too (its last sign-in time) without changing
// updated_at: an edit based on an older version is refused only when
// something else changed since (the role, the password, or the user was
// deleted), so signing in does not spoil the admin's open page.
type UserBase struct {
	Version int64
	Updated int64
}

// checkUserBase refuses, with a *StaleError, an edit of user id based on
// base when another change replaced what base saw. Call it inside a
// Change's fn, before anything else reads the row.
func checkUserBase(ctx context.Context, tx *sql.Tx, id int64, base UserBase) error {
	err := CheckVersion(ctx, tx, "users", base.Version, id)
	var se *StaleError
	if !errors.As(err, &se) || se.Deleted {
		return err
	}
	var upd int64
	switch qerr := tx.QueryRowContext(ctx, `SELECT updated_at FROM users WHERE id = ?`, id).Scan(&upd); {
	case errors.Is(qerr, sql.ErrNoRows):
		se.Deleted = true
		return se
	case qerr != nil:
		return qerr
	case upd == base.Updated:
		return nil // signed in meanwhile, nothing else
	}
	return err
}

// Errors returned by user operations; check with errors.Is.
var (
	ErrUserExists      = errors.New("a user with that name already exists")
	ErrBadCredentials  = errors.New("wrong user name or password")
	ErrLastAdmin       = errors.New("the last admin cannot be removed or demoted")
	errInvalidUsername = errors.New("user name must be 1-64 characters: letters, digits, and . _ @ -")
	errAdminExists     = errors.New("an admin already exists")
)

// ValidateUsername checks a user name: 1-64 characters of letters, digits
// and . _ @ -.
func ValidateUsername(name string) error {
	if name == "" || len(name) > 64 {
		return errInvalidUsername
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '@', r == '-':
		default:
			return errInvalidUsername
		}
	}
	return nil
}

// ValidatePassword checks a new password's length.
func ValidatePassword(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLen {
		return fmt.Errorf("password must be at least %d characters", MinPasswordLen)
	}
	if len(pw) > MaxPasswordLen {
		return fmt.Errorf("password must be at most %d bytes", MaxPasswordLen)
	}
	return nil
}

func hashPassword(pw string) (string, error) {
	if err := ValidatePassword(pw); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), BcryptCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// CreateUser adds a user with a bcrypt hash of password.
func (c *Console) CreateUser(ctx context.Context, name string, role Role, password string) (User, error) {
	if err := ValidateUsername(name); err != nil {
		return User{}, err
	}
	if role.Rank() == 0 {
		return User{}, fmt.Errorf("unknown role %q", role)
	}
	hash, err := hashPassword(password)
	if err != nil {
		return User{}, err
	}
	now := time.Now()
	var id int64
	err = c.db.Change(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO users(name, role, password_hash, created_at, updated_at) VALUES(?,?,?,?,?)`,
			name, string(role), hash, ms(now), ms(now))
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		if isUniqueViolation(err) {
			return User{}, ErrUserExists
		}
		return User{}, fmt.Errorf("create user %s: %w", name, err)
	}
	return User{ID: id, Name: name, Role: role, CreatedAt: fromMS(ms(now)), UpdatedAt: fromMS(ms(now))}, nil
}

// CreateFirstAdmin creates an admin only while no admin exists, in one
// transaction, so two racing setup requests cannot both succeed.
func (c *Console) CreateFirstAdmin(ctx context.Context, name, password string) (User, error) {
	if err := ValidateUsername(name); err != nil {
		return User{}, err
	}
	hash, err := hashPassword(password)
	if err != nil {
		return User{}, err
	}
	now := time.Now()
	var id int64
	err = c.db.Change(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errAdminExists
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO users(name, role, password_hash, created_at, updated_at) VALUES(?,?,?,?,?)`,
			name, string(RoleAdmin), hash, ms(now), ms(now))
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	switch {
	case errors.Is(err, errAdminExists):
		return User{}, err
	case isUniqueViolation(err):
		return User{}, ErrUserExists
	case err != nil:
		return User{}, fmt.Errorf("create admin: %w", err)
	}
	return User{ID: id, Name: name, Role: RoleAdmin, CreatedAt: fromMS(ms(now)), UpdatedAt: fromMS(ms(now))}, nil
}

const userCols = `id, name, role, created_at, updated_at, last_login_at`

func scanUser(row Scanner) (User, error) {
	var u User
	var role string
	var created, updated, last int64
	if err := row.Scan(&u.ID, &u.Name, &role, &created, &updated, &last); err != nil {
		return User{}, err
	}
	u.Role = Role(role)
	u.CreatedAt, u.UpdatedAt, u.LastLoginAt = fromMS(created), fromMS(updated), fromMS(last)
	return u, nil
}

// UserByName looks a user up by name (case-insensitive).
func (c *Console) UserByName(ctx context.Context, name string) (User, error) {
	u, err := scanUser(c.db.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	}
	return u, err
}

// UserByID looks a user up by id.
func (c *Console) UserByID(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(c.db.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, err
	}
	v, err := RowVersion(ctx, c.db, "users", u.ID)
	u.Version = v.Version
	return u, err
}

// Users lists every user by name.
func (c *Console) Users(ctx context.Context) ([]User, error) {
	out, err := QueryAll(ctx, c.db, `SELECT `+userCols+` FROM users ORDER BY name`, scanUser)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	for i := range out {
		v, err := RowVersion(ctx, c.db, "users", out[i].ID)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out[i].Version = v.Version
	}
	return out, nil
}

// AdminCount is the number of admins.
func (c *Console) AdminCount(ctx context.Context) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&n)
	return n, err
}

// dummyHash is compared against when the user does not exist, so a failed
// sign-in takes as long for unknown names as for wrong passwords.
// It is made on first use with the cost in force then.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("sluice-timing-equaliser"), BcryptCost)
	return h
})

// Authenticate checks name and password and records the sign-in time. It
// returns ErrBadCredentials for an unknown user or a wrong password alike.
func (c *Console) Authenticate(ctx context.Context, name, password string) (User, error) {
	var hash string
	var u User
	var role string
	var created, updated, last int64
	err := c.db.QueryRowContext(ctx, `SELECT id, name, role, created_at, updated_at, last_login_at, password_hash FROM users WHERE name = ?`, name).
		Scan(&u.ID, &u.Name, &role, &created, &updated, &last, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return User{}, ErrBadCredentials
	}
	if err != nil {
		return User{}, fmt.Errorf("authenticate: %w", err)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return User{}, ErrBadCredentials
	}
	u.Role = Role(role)
	u.CreatedAt, u.UpdatedAt = fromMS(created), fromMS(updated)
	now := time.Now()
	u.LastLoginAt = fromMS(ms(now))
	err = c.db.Change(WithActor(ctx, u.Name), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE users SET last_login_at = ? WHERE id = ?`, ms(now), u.ID)
		return err
	})
	if errors.Is(err, ErrUnavailable) {
		// Signing in works while the console topic is away (to see what
		// is wrong); only the last sign-in time is not recorded.
		return u, nil
	}
	if err != nil {
		return User{}, fmt.Errorf("authenticate: %w", err)
	}
	return u, nil
}

// CheckPassword reports whether password is the user's current password.
func (c *Console) CheckPassword(ctx context.Context, id int64, password string) (bool, error) {
	var hash string
	if err := c.db.QueryRowContext(ctx, `SELECT password_hash FROM users WHERE id = ?`, id).Scan(&hash); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, ErrNotFound
		}
		return false, err
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil, nil
}

// SetPassword replaces a user's password and ends all of the user's
// sessions. An edit based on a user changed since (base) is refused with
// a *StaleError.
func (c *Console) SetPassword(ctx context.Context, id int64, password string, base UserBase) error {
	hash, err := hashPassword(password)
	if err != nil {
		return err
	}
	// The sessions are local to each host: deleted here for a database
	// without a replica, and on every host by the users table's OnApply.
	err = c.db.Change(ctx, func(tx *sql.Tx) error {
		if err := checkUserBase(ctx, tx, id, base); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?`, hash, ms(time.Now()), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !IsStale(err) {
		return fmt.Errorf("set password: %w", err)
	}
	return err
}

// SetRole changes a user's role. Demoting the last admin is refused. A role
// change ends the user's sessions so the new rights apply at the next sign-in
// as well as immediately (sessions read the role from users on every request).
// An edit based on a user changed since (base) is refused with a
// *StaleError.
func (c *Console) SetRole(ctx context.Context, id int64, role Role, base UserBase) error {
	if role.Rank() == 0 {
		return fmt.Errorf("unknown role %q", role)
	}
	err := c.db.Change(ctx, func(tx *sql.Tx) error {
		if err := checkUserBase(ctx, tx, id, base); err != nil {
			return err
		}
		var cur string
		if err := tx.QueryRowContext(ctx, `SELECT role FROM users WHERE id = ?`, id).Scan(&cur); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		if Role(cur) == RoleAdmin && role != RoleAdmin {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&n); err != nil {
				return err
			}
			if n <= 1 {
				return ErrLastAdmin
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE users SET role = ?, updated_at = ? WHERE id = ?`, string(role), ms(time.Now()), id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrLastAdmin) && !IsStale(err) {
		return fmt.Errorf("set role: %w", err)
	}
	return err
}

// DeleteUser removes a user and their sessions. Removing the last admin is
// refused, and so is a removal based on a user changed since (base, a
// *StaleError).
func (c *Console) DeleteUser(ctx context.Context, id int64, base UserBase) error {
	err := c.db.Change(ctx, func(tx *sql.Tx) error {
		if err := checkUserBase(ctx, tx, id, base); err != nil {
			return err
		}
		var cur string
		if err := tx.QueryRowContext(ctx, `SELECT role FROM users WHERE id = ?`, id).Scan(&cur); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		if Role(cur) == RoleAdmin {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&n); err != nil {
				return err
			}
			if n <= 1 {
				return ErrLastAdmin
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrLastAdmin) && !IsStale(err) {
		return fmt.Errorf("delete user: %w", err)
	}
	return err
}

// Users are shared by every host; their sessions are not, but a changed
// password or a removed user ends the user's sessions on every host.
var _ = Replicate(Table{Name: "users", NaturalKey: "name", OnApply: func(ctx context.Context, tx *sql.Tx, key []any, before, after map[string]any) error {
	if before == nil {
		return nil
	}
	if after != nil && fmt.Sprint(before["password_hash"]) == fmt.Sprint(after["password_hash"]) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, key[0])
	return err
}})

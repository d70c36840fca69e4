package consoledb

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func openConsole(t *testing.T) (*DB, *Console) {
	t.Helper()
	BcryptCost = bcrypt.MinCost
	db, c, err := OpenConsole(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, c
}

func TestUsersPasswordsAndLastAdmin(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	if _, err := c.CreateUser(ctx, "bad name", RoleViewer, "long enough pw"); err == nil {
		t.Fatal("a name with a space was accepted")
	}
	if _, err := c.CreateUser(ctx, "ann", RoleViewer, "short"); err == nil {
		t.Fatal("a 5-character password was accepted")
	}
	admin, err := c.CreateFirstAdmin(ctx, "root", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateFirstAdmin(ctx, "root2", "correct horse"); err == nil {
		t.Fatal("a second first admin was created")
	}
	if _, err := c.CreateUser(ctx, "ROOT", RoleViewer, "correct horse"); !errors.Is(err, ErrUserExists) {
		t.Fatalf("case-insensitive duplicate: %v", err)
	}
	if _, err := c.Authenticate(ctx, "root", "wrong password"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := c.Authenticate(ctx, "nobody", "whatever1"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown user: %v", err)
	}
	u, err := c.Authenticate(ctx, "Root", "correct horse")
	if err != nil || u.ID != admin.ID || u.Role != RoleAdmin || u.LastLoginAt.IsZero() {
		t.Fatalf("authenticate: %+v %v", u, err)
	}
	if err := c.SetRole(ctx, admin.ID, RoleViewer, UserBase{}); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("demoting the last admin: %v", err)
	}
	if err := c.DeleteUser(ctx, admin.ID, UserBase{}); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("deleting the last admin: %v", err)
	}
	tok, err := c.CreateSession(ctx, admin.ID, time.Hour, "127.0.0.1", "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetPassword(ctx, admin.ID, "new password 1", UserBase{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SessionByToken(ctx, tok, time.Minute, 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("session survived a password change: %v", err)
	}
	if _, err := c.Authenticate(ctx, "root", "new password 1"); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsExpireAndStoreOnlyHashes(t *testing.T) {
	ctx := context.Background()
	db, c := openConsole(t)
	u, err := c.CreateUser(ctx, "op", RoleOperator, "operator pw")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateSession(ctx, u.ID, time.Hour, "10.0.0.1", "ua")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sessions WHERE id = ?`, tok).Scan(&n); err != nil || n != 0 {
		t.Fatalf("raw token stored: %d %v", n, err)
	}
	s, err := c.SessionByToken(ctx, tok, 0, 2*time.Hour, 3*time.Hour)
	if err != nil || s.User.Name != "op" || s.User.Role != RoleOperator {
		t.Fatalf("session: %+v %v", s, err)
	}
	if d := time.Until(s.ExpiresAt); d < 110*time.Minute {
		t.Fatalf("idle extension not applied: expires in %v", d)
	}
	// Role changes apply to live sessions.
	if err := c.SetRole(ctx, u.ID, RoleViewer, UserBase{}); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.SessionByToken(ctx, tok, time.Hour, 0, 0); s.User.Role != RoleViewer {
		t.Fatalf("role after change = %s", s.User.Role)
	}
	short, _ := c.CreateSession(ctx, u.ID, -time.Second, "", "")
	if _, err := c.SessionByToken(ctx, short, 0, 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired session accepted: %v", err)
	}
	if err := c.DeleteSession(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SessionByToken(ctx, tok, 0, 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted session accepted: %v", err)
	}
}

func TestAuditFiltersAndPaging(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	for i := 0; i < 5; i++ {
		c.AppendAudit(ctx, AuditEntry{User: "ann", Action: "topic.create", Target: "orders", RemoteAddr: "1.2.3.4"})
	}
	c.AppendAudit(ctx, AuditEntry{User: "bob", Action: "user.add", Target: "carl", Outcome: "user exists"})
	all, more, err := c.Audit(ctx, AuditFilter{Limit: 4})
	if err != nil || len(all) != 4 || !more || all[0].User != "bob" || all[0].Outcome != "user exists" {
		t.Fatalf("first page: %+v more=%v err=%v", all, more, err)
	}
	rest, more, _ := c.Audit(ctx, AuditFilter{Limit: 4, BeforeID: all[3].ID})
	if len(rest) != 2 || more {
		t.Fatalf("second page: %d more=%v", len(rest), more)
	}
	topics, _, _ := c.Audit(ctx, AuditFilter{Action: "topic."})
	if len(topics) != 5 {
		t.Fatalf("prefix filter: %d", len(topics))
	}
	bob, _, _ := c.Audit(ctx, AuditFilter{User: "bob", Search: "car"})
	if len(bob) != 1 {
		t.Fatalf("user+search filter: %d", len(bob))
	}
}

func TestLagHistorySumsTopicsAndPrunes(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < 3; i++ {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := c.InsertLagSamples(ctx, at, []LagSample{
			{Group: "g", Topic: "a", Lag: int64(10 * i), LagTime: time.Duration(i) * time.Second},
			{Group: "g", Topic: "b", Lag: 1, LagTime: 5 * time.Second},
			{Group: "h", Topic: "a", Lag: 99},
		}); err != nil {
			t.Fatal(err)
		}
	}
	pts, err := c.LagHistory(ctx, "g", "", t0, time.Now())
	if err != nil || len(pts) != 3 {
		t.Fatalf("history: %v %v", pts, err)
	}
	if pts[2].Lag != 21 || pts[2].LagTime != 5*time.Second || !pts[0].At.Equal(t0) {
		t.Fatalf("point: %+v", pts[2])
	}
	one, _ := c.LagHistory(ctx, "g", "a", t0, time.Now())
	if one[2].Lag != 20 {
		t.Fatalf("per-topic: %+v", one)
	}
	n, err := c.PruneLagSamples(ctx, t0.Add(90*time.Second))
	if err != nil || n != 6 {
		t.Fatalf("pruned %d, %v", n, err)
	}
}

func TestSettingsAndKnownBrokers(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	v1, err := c.SettingOrInit(ctx, "secret", func() string { return "first" })
	if err != nil || v1 != "first" {
		t.Fatal(v1, err)
	}
	v2, _ := c.SettingOrInit(ctx, "secret", func() string { return "second" })
	if v2 != "first" {
		t.Fatalf("SettingOrInit replaced the value: %q", v2)
	}
	if err := c.SeeBrokers(ctx, []KnownBroker{{ID: 1, Host: "a", Port: 9092}, {ID: 2, Host: "b", Port: 9092}}); err != nil {
		t.Fatal(err)
	}
	bs, _ := c.KnownBrokers(ctx)
	if len(bs) != 2 || bs[1].Host != "b" {
		t.Fatalf("%+v", bs)
	}
	if err := c.ForgetBroker(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.ForgetBroker(ctx, 2); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

// TestSettingsWithPrefix: settings listed by a key prefix (taken
// literally: % and _ are no wildcards), and deleted.
func TestSettingsWithPrefix(t *testing.T) {
	ctx := context.Background()
	_, c := openConsole(t)
	for k, v := range map[string]string{"moves.a": "1", "moves.b": "2", "movesXc": "3", "moves%d": "4", "other": "5", "ünï.x": "6"} {
		if err := c.SetSetting(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.SettingsWithPrefix(ctx, "moves.")
	if err != nil || len(got) != 2 || got["moves.a"] != "1" || got["moves.b"] != "2" {
		t.Fatalf("moves.*: %v %v", got, err)
	}
	if got, _ := c.SettingsWithPrefix(ctx, "moves%"); len(got) != 1 || got["moves%d"] != "4" {
		t.Fatalf("moves%%*: %v", got)
	}
	if got, _ := c.SettingsWithPrefix(ctx, "ünï."); len(got) != 1 {
		t.Fatalf("a prefix beyond ASCII: %v", got)
	}
	if err := c.DeleteSetting(ctx, "moves.a"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSetting(ctx, "moves.a"); err != nil {
		t.Fatalf("deleting a missing setting: %v", err)
	}
	if _, err := c.Setting(ctx, "moves.a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted setting: %v", err)
	}
	if got, _ := c.SettingsWithPrefix(ctx, "moves."); len(got) != 1 {
		t.Fatalf("after delete: %v", got)
	}
}

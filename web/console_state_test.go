package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// newReplicatedServer is a console whose database writes through a
// replica of an in-memory console topic, with the status page wired.
func newReplicatedServer(t *testing.T) (*testServer, *consoledb.MemLog, *consoledb.Replica) {
	t.Helper()
	log := consoledb.NewMemLog()
	ts, rep := newReplicatedHost(t, log, consoledb.NewMutexLock(), 7, nil)
	return ts, log, rep
}

// newReplicatedHost is the console of host id of a cluster whose console
// topic is log and write lock lock (brokers nil: a new kfake cluster).
func newReplicatedHost(t *testing.T, log *consoledb.MemLog, lock consoledb.Lock, id int32, brokers []string) (*testServer, *consoledb.Replica) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, _, err := consoledb.OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := consoledb.StartReplica(ctx, db, consoledb.ReplicaConfig{Log: log, Lock: lock, Host: id,
		ProbeInterval: 50 * time.Millisecond, UnreachableAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close(); db.Close() })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(c *Config) {
		c.DataDir = dir
		c.DB = db
		c.Brokers = brokers
		c.ReplicaStatus = func() ConsoleStatus {
			return ConsoleStatus{Host: id, Leader: true, Topics: []consoledb.ReplicaStatus{rep.Status()}, KeyFrom: "file k", LockFrom: "mutex"}
		}
	})
	return ts, rep
}

// The status page shows where this host stands in the console topic; while
// the topic is unreachable every page says the console may be stale and a
// change is refused (503) rather than made here only, while signing in
// still works; once the topic is back, changes go through again.
func TestConsoleStateBannerAndRefusal(t *testing.T) {
	ts, log, rep := newReplicatedServer(t)
	admin := ts.signedIn(t, "root", RoleAdmin)
	ts.user(t, "bob", RoleViewer)

	r := admin.Get("/console/status")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `id="replica-status"`, "__sluice_console", "reachable", "Console status")
	if strings.Contains(r.Text, `id="console-stale"`) {
		t.Fatal("a banner while the topic is reachable")
	}
	var st ConsoleStatus
	raw := admin.GetJSON("/console/status", &st)
	if len(st.Topics) != 1 || st.Topics[0].Applied != rep.Applied() || st.Topics[0].Lag != 0 {
		t.Fatalf("status JSON %+v (applied %d)", st, rep.Applied())
	}
	// snake_case names, as the console's other JSON
	expectContains(t, raw, `"host":7`, `"leader":true`, `"key_from":"file k"`, `"lock_from":"mutex"`, `"topics":[{"topic":"__sluice_console"`,
		`"applied":`, `"end":`, `"lag":0`, `"reachable":true`, `"last_ok":`, `"caught_up":`, `"origin":`)
	for _, camel := range []string{`"Topics"`, `"Applied"`, `"KeyFrom"`, `"LastOK"`, `"CaughtUp"`} {
		if strings.Contains(raw.Text, camel) {
			t.Fatalf("status JSON has %s: %s", camel, raw.Text)
		}
	}

	log.SetDown(true)
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if rep.Available() {
			return errors.New("still available")
		}
		return nil
	})
	r = admin.Get("/users")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `id="console-stale"`, "cannot reach its state topic", "may be stale", "changes are refused")
	r = admin.Post("/users", "/users", url.Values{"username": {"carol"}, "role": {"viewer"}, "password": {"password-1"}})
	expectStatus(t, r, http.StatusServiceUnavailable)
	expectContains(t, r, "Changes are refused", "would be lost")
	if _, err := ts.store.UserByName(context.Background(), "carol"); err == nil {
		t.Fatal("the refused user was created")
	}
	bob := ts.client(t)
	bob.SignIn("bob", "password-1")
	expectContains(t, bob.Get("/"), `id="console-stale"`)

	log.SetDown(false)
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !rep.Available() {
			return errors.New("not available yet")
		}
		return nil
	})
	r = admin.Post("/users", "/users", url.Values{"username": {"carol"}, "role": {"viewer"}, "password": {"password-1"}})
	expectStatus(t, r, http.StatusSeeOther)
	if strings.Contains(admin.Get("/users").Text, `id="console-stale"`) {
		t.Fatal("the banner stays once the topic is back")
	}
}

// TestBrowserConsoleStatusAndBanner: in Chromium, the status page shows the
// replica's applied offset against the topic's end; with the topic away,
// every page carries the banner and the add-user form answers that the
// change was refused; with the topic back, the banner goes and the change
// is made.
func TestBrowserConsoleStatusAndBanner(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	ts, log, rep := newReplicatedServer(t)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.user(t, "root", RoleAdmin)
	b := browsertest.New(t, ts.URL())
	defer b.PublishScreenshots()
	b.Visit("/login")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "root"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Brokers up")

	b.Visit("/console/status")
	b.WaitText("__sluice_console")
	if text := b.Text("#replica-status"); !strings.Contains(text, "reachable") || !strings.Contains(text, fmt.Sprint(rep.Applied())) {
		t.Fatalf("the status table: %q (applied %d)", text, rep.Applied())
	}
	if strings.Contains(b.PageText(), "cannot reach its state topic") {
		t.Fatal("a banner while the topic is reachable")
	}
	b.CheckCSP("/console/status")
	b.Screenshot("console-status")

	log.SetDown(true)
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if rep.Available() {
			return errors.New("still available")
		}
		return nil
	})
	b.Visit("/users")
	b.WaitText("cannot reach its state topic")
	b.Screenshot("console-stale-banner")
	b.Do("add a user while the topic is away",
		chromedp.SendKeys(chromedp.ID("f-username"), "carol"),
		chromedp.SendKeys(chromedp.ID("f-password"), "carol-password-1"),
		chromedp.Submit(chromedp.ID("f-username")),
	)
	b.WaitText("Changes are refused")
	if _, err := ts.store.UserByName(context.Background(), "carol"); err == nil {
		t.Fatal("the refused user was created")
	}

	log.SetDown(false)
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !rep.Available() {
			return errors.New("not available yet")
		}
		return nil
	})
	b.Visit("/users")
	b.Do("add the user again",
		chromedp.SendKeys(chromedp.ID("f-username"), "carol"),
		chromedp.SendKeys(chromedp.ID("f-password"), "carol-password-1"),
		chromedp.Submit(chromedp.ID("f-username")),
	)
	b.WaitText("User carol added")
	if strings.Contains(b.PageText(), "cannot reach its state topic") {
		t.Fatal("the banner stays once the topic is back")
	}
}

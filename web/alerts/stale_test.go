package alerts

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/web"
)

var versionField = regexp.MustCompile(`name="version" value="(\d+)"`)

// replicated attaches a replica of an in-memory console topic to the
// engine's database, so that every change gets a version (as on every host
// of a cluster).
func (e *env) replicated(t *testing.T) {
	t.Helper()
	rep, err := consoledb.StartReplica(context.Background(), e.db, consoledb.ReplicaConfig{Log: consoledb.NewMemLog(),
		Lock: consoledb.NewMutexLock(), Host: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rep.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNotifierStaleEdit: a notifier's edit form carries the version it
// shows; saved after someone else changed the notifier, it is refused
// (409) with who changed it, where and when, keeps what was typed, and
// stores nothing; reloaded, the same edit goes through.
func TestNotifierStaleEdit(t *testing.T) {
	e := newEnv(t)
	e.replicated(t)
	admin := e.signedIn(t, "root", web.RoleAdmin)
	ctx := context.Background()
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "on-call", Type: alerting.NotifierPagerDuty,
		Secret: "0123456789abcdef0123456789abcdef", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/alerts/notifiers/%d", n.ID)
	form := func(name string) url.Values {
		t.Helper()
		page := admin.Get(path)
		expectStatus(t, page, http.StatusOK)
		m := versionField.FindStringSubmatch(page.Text)
		if m == nil {
			t.Fatalf("no version in the notifier's form: %s", snippet(page.Text))
		}
		return url.Values{"name": {name}, "type": {"pagerduty"}, "enabled": {"1"}, "send_resolved": {"1"}, "version": {m[1]}}
	}
	mine := form("on-call (mine)")

	// Another admin saves first, on another host.
	if _, err := e.eng.UpdateNotifier(consoledb.WithActor(ctx, "alice"), n.ID, alerting.NotifierInput{Name: "on-call (alice)",
		Type: alerting.NotifierPagerDuty, Enabled: true, SendResolved: true, Version: n.Version}); err != nil {
		t.Fatal(err)
	}
	r := admin.Post(path, path, mine)
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "Not saved", "changed by alice", "reload", `value="on-call (mine)"`)
	got, err := e.eng.Notifier(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "on-call (alice)" || !got.HasSecret {
		t.Fatalf("after the refused edit: %+v", got)
	}

	// Reloaded, the edit goes through over alice's.
	expectStatus(t, admin.Post(path, path, form("on-call (mine)")), http.StatusSeeOther)
	if got, _ := e.eng.Notifier(ctx, n.ID); got.Name != "on-call (mine)" || !got.HasSecret {
		t.Fatalf("after the reloaded edit: %+v", got)
	}
}

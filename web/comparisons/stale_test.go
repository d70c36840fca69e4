package comparisons_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/comparisons"
	"github.com/sluice-io/sluice/web/webtest"
)

// replicatedHost is the console of one host of a cluster whose console
// topic is log: its own database, written through a replica of log, with
// the comparison pages over a Manager of that database. The Manager runs
// nothing (another host leads), so only what the operators do changes the
// comparisons.
type replicatedHost struct {
	harness
	rep *consoledb.Replica
	log *consoledb.MemLog
}

func newReplicatedHost(t *testing.T, brokers []string, log *consoledb.MemLog, lock consoledb.Lock, id int32) *replicatedHost {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, _, err := consoledb.OpenConsole(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := migration.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// Every replicated table linked in must exist before the replica
	// starts, the alerting engine's too (the appliance migrates them all).
	eng, err := alerting.New(ctx, alerting.Config{DB: db, KeyFile: filepath.Join(dir, "alerting.key")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	rep, err := consoledb.StartReplica(ctx, db, consoledb.ReplicaConfig{Log: log, Lock: lock, Host: id})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
	mgr := migration.NewManager(store, migration.ManagerOptions{Brokers: brokers, Leader: func() bool { return false }})
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: dir, DB: db, Brokers: brokers, Logger: webtest.Logger(),
		Extra: []web.PageGroup{comparisons.PageGroup(mgr, comparisons.Options{})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mgr.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
		rep.Close()
		db.Close()
	})
	return &replicatedHost{harness: harness{srv: srv, mgr: mgr, brokers: brokers}, rep: rep, log: log}
}

// sync waits until the host applied everything in the console topic.
func (h *replicatedHost) sync(t *testing.T) {
	t.Helper()
	end, _, err := h.log.End(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := h.rep.Applied(); got+1 < end {
			return fmt.Errorf("applied %d of %d", got, end)
		}
		return nil
	})
}

var versionField = regexp.MustCompile(`name="version" value="(\d+)"`)

// version is the version the page at path of c bases its actions on.
func version(t *testing.T, c *client, path string) string {
	t.Helper()
	r := c.Get(path)
	expectStatus(t, r, http.StatusOK)
	m := versionField.FindStringSubmatch(r.Text)
	if m == nil {
		t.Fatalf("no version on %s: %s", path, snippet(r.Text))
	}
	return m[1]
}

// Two operators on two hosts act on the same comparison from pages opened
// before the other's change: the second's edit, pause, resume, restart,
// delete and ignore are refused (409, who changed it, where, reload) and
// change nothing; after a reload, the action goes through.
func TestComparisonStaleActions(t *testing.T) {
	brokers := kfakeBrokers(t)
	orderStreams(t, brokers, "ORDER", "ORDERNEW", 1, 5, nil, nil)
	log, lock := consoledb.NewMemLog(), consoledb.NewMutexLock()
	h1 := newReplicatedHost(t, brokers, log, lock, 1)
	h2 := newReplicatedHost(t, brokers, log, lock, 2)
	ctx := context.Background()
	op1 := h1.signedInAs(t, "olga", web.RoleOperator)
	op2 := h2.signedInAs(t, "oscar", web.RoleOperator)
	id, err := h1.mgr.Create(consoledb.WithActor(ctx, "alice"), "orders", migration.Spec{Left: "ORDER", Right: "ORDERNEW", Values: "json"}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	h2.sync(t)
	page := fmt.Sprintf("/comparisons/%d", id)

	// Both pages open; the operator on host 1 pauses first.
	v2 := version(t, op2, page)
	edit2 := version(t, op2, page+"/edit")
	del2 := version(t, op2, page+"/delete")
	expectStatus(t, op1.Post(page, page+"/pause", url.Values{"version": {version(t, op1, page)}}), http.StatusSeeOther)
	h2.sync(t)
	st, _ := h2.mgr.Get(ctx, id)
	if st.State != migration.StatePaused {
		t.Fatalf("after the pause on host 1: %+v", st)
	}
	const changedBy = "changed by olga on host 1"

	for _, action := range []string{"pause", "resume", "restart"} {
		r := op2.Post(page, page+"/"+action, url.Values{"version": {v2}})
		expectStatus(t, r, http.StatusConflict)
		expectContains(t, r, "Changed meanwhile", changedBy, "reload")
	}
	r := op2.Post(page+"/delete", page+"/delete", url.Values{"version": {del2}, "confirm": {"yes"}})
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, changedBy, "reload")
	r = op2.Post(page, page+"/ignore", url.Values{"version": {v2}, "path": {"processed_at"}})
	expectStatus(t, r, http.StatusConflict)
	form := createForm("ORDER", "ORDERNEW")
	form.Set("name", "typed on host 2")
	form.Set("version", edit2)
	r = op2.Post(page+"/edit", page+"/edit", form)
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, changedBy, "reload", `value="typed on host 2"`)

	h1.sync(t)
	for _, h := range []*replicatedHost{h1, h2} {
		st, err := h.mgr.Get(ctx, id)
		if err != nil || st.State != migration.StatePaused || st.Name != "orders" || st.Generation != 1 || len(st.Spec.Ignore) != 0 {
			t.Fatalf("after the refused actions: %+v %v", st, err)
		}
	}

	// Reloaded, host 2's actions go through.
	expectStatus(t, op2.Post(page, page+"/resume", url.Values{"version": {version(t, op2, page)}}), http.StatusSeeOther)
	form.Set("version", version(t, op2, page+"/edit"))
	expectStatus(t, op2.Post(page+"/edit", page+"/edit", form), http.StatusSeeOther)
	h1.sync(t)
	if st, _ := h1.mgr.Get(ctx, id); st.Name != "typed on host 2" || st.State != migration.StateRunning {
		t.Fatalf("after the reloaded actions: %+v", st)
	}
	// Host 1's page is now stale in turn; its delete is refused, then,
	// reloaded, goes through.
	r = op1.Post(page+"/delete", page+"/delete", url.Values{"version": {del2}, "confirm": {"yes"}})
	expectStatus(t, r, http.StatusConflict)
	expectStatus(t, op1.Post(page+"/delete", page+"/delete", url.Values{"version": {version(t, op1, page+"/delete")}, "confirm": {"yes"}}), http.StatusSeeOther)
	h2.sync(t)
	if _, err := h2.mgr.Get(ctx, id); err == nil {
		t.Fatal("the comparison survived its deletion")
	}
}

// signedInAs returns a client of h signed in as a new user name with role.
func (h *replicatedHost) signedInAs(t *testing.T, name string, role web.Role) *client {
	t.Helper()
	if _, err := h.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
	c := h.client(t)
	c.SignIn(name, "password-1")
	return c
}

package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
)

// caughtUp waits until rep has applied everything in log.
func caughtUp(t *testing.T, log *consoledb.MemLog, rep *consoledb.Replica) {
	t.Helper()
	end, _, err := log.End(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := rep.Applied(); got+1 < end {
			return fmt.Errorf("applied %d of %d", got, end)
		}
		return nil
	})
}

// userForm is what the users page of c shows of user id's form for action
// (role, password, delete): the version and updated time it is based on.
func userForm(t *testing.T, c *client, id int64, action string) url.Values {
	t.Helper()
	page := c.Get("/users")
	expectStatus(t, page, http.StatusOK)
	re := regexp.MustCompile(`(?s)action="/users/` + fmt.Sprint(id) + `/` + action + `".*?name="version" value="(\d+)".*?name="updated" value="(\d+)"`)
	m := re.FindStringSubmatch(page.Text)
	if m == nil {
		t.Fatalf("no version in the %s form of user %d: %s", action, id, snippet(page.Text))
	}
	return url.Values{"version": {m[1]}, "updated": {m[2]}}
}

func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = vs
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// Two admins on two hosts act on the same user from pages they opened
// before the other's change: the second role change, password change and
// removal are refused (409, who changed the user, where, "reload") and
// change nothing; after a reload they go through. A sign-in of the user
// meanwhile does not spoil the admin's page.
func TestUserStaleEdits(t *testing.T) {
	log, lock := consoledb.NewMemLog(), consoledb.NewMutexLock()
	h1, rep1 := newReplicatedHost(t, log, lock, 1, nil)
	h2, rep2 := newReplicatedHost(t, log, lock, 2, h1.brokers)
	ctx := context.Background()

	root := h1.signedIn(t, "root", RoleAdmin)
	carol := h2.signedIn(t, "carol", RoleAdmin)
	bob, err := h1.store.CreateUser(ctx, "bob", RoleViewer, "password-1")
	if err != nil {
		t.Fatal(err)
	}
	caughtUp(t, log, rep1)
	caughtUp(t, log, rep2)

	// Both pages are open; root (host 1) changes bob's role first.
	rootRole := userForm(t, root, bob.ID, "role")
	carolRole := userForm(t, carol, bob.ID, "role")
	carolPw := userForm(t, carol, bob.ID, "password")
	carolDel := userForm(t, carol, bob.ID, "delete")
	path := fmt.Sprintf("/users/%d/", bob.ID)
	expectStatus(t, root.Post("/users", path+"role", with(rootRole, "role", "operator")), http.StatusSeeOther)
	caughtUp(t, log, rep2)

	for _, tc := range []struct {
		action string
		form   url.Values
	}{
		{"role", with(carolRole, "role", "admin")},
		{"password", with(carolPw, "password", "carol-chose-this")},
		{"delete", carolDel},
	} {
		r := carol.Post("/users", path+tc.action, tc.form)
		expectStatus(t, r, http.StatusConflict)
		expectContains(t, r, "Changed meanwhile", "changed by root on host 1", "reload")
	}
	got, err := h2.store.UserByID(ctx, bob.ID)
	if err != nil || got.Role != consoledb.RoleOperator {
		t.Fatalf("bob after the refused edits: %+v %v", got, err)
	}
	if ok, _ := h2.store.CheckPassword(ctx, bob.ID, "carol-chose-this"); ok {
		t.Fatal("the refused password change was applied")
	}

	// Carol reloads; bob signs in on host 1 meanwhile: her edit goes
	// through (a sign-in changes no setting an admin sees).
	carolPw = userForm(t, carol, bob.ID, "password")
	if _, err := h1.store.Authenticate(ctx, "bob", "password-1"); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, log, rep2)
	expectStatus(t, carol.Post("/users", path+"password", with(carolPw, "password", "carol-chose-this")), http.StatusSeeOther)
	if ok, err := h2.store.CheckPassword(ctx, bob.ID, "carol-chose-this"); !ok {
		t.Fatalf("the reloaded password change was not applied (%v)", err)
	}

	// Root, whose page predates carol's change, cannot remove bob with it;
	// reloaded, he can, and carol's stale page then finds bob deleted.
	r := root.Post("/users", path+"delete", with(rootRole))
	expectStatus(t, r, http.StatusConflict)
	expectContains(t, r, "changed by carol on host 2", "reload")
	carolRole = userForm(t, carol, bob.ID, "role")
	caughtUp(t, log, rep1)
	expectStatus(t, root.Post("/users", path+"delete", userForm(t, root, bob.ID, "delete")), http.StatusSeeOther)
	r = carol.Post("/users", path+"role", with(carolRole, "role", "viewer"))
	if r.StatusCode != http.StatusConflict && r.StatusCode != http.StatusNotFound {
		t.Fatalf("role change of a deleted user: %d %s", r.StatusCode, snippet(r.Text))
	}
	if _, err := h2.store.UserByID(ctx, bob.ID); err == nil {
		t.Fatal("bob is back")
	}
}

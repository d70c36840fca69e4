package web

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

func TestUsersAdministration(t *testing.T) {
	ts := newTestServer(t)
	admin := ts.signedIn(t, "ada", RoleAdmin)
	r := admin.Get("/users")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "ada", "you", "Add a user")
	// Validation in the add form.
	r = admin.Post("/users", "/users", url.Values{"username": {"new user"}, "role": {"boss"}, "password": {"short"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Unknown role", "User name must be", "At least 8 characters", `value="new user"`)
	r = admin.Post("/users", "/users", url.Values{"username": {"bea"}, "role": {"viewer"}, "password": {"bea-password"}})
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, admin.Get("/users"), "User bea added as viewer.")
	r = admin.Post("/users", "/users", url.Values{"username": {"BEA"}, "role": {"viewer"}, "password": {"bea-password"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "exists already")
	bea, _ := ts.store.UserByName(context.Background(), "bea")
	id := itoa64(bea.ID)
	// bea signs in, then the admin changes her role and password.
	bc := ts.client(t)
	bc.SignIn("bea", "bea-password")
	expectStatus(t, admin.Post("/users", "/users/"+id+"/role", url.Values{"role": {"operator"}}), http.StatusSeeOther)
	expectContains(t, admin.Get("/users"), "bea is now operator.")
	expectStatus(t, admin.Post("/users", "/users/"+id+"/password", url.Values{"password": {"x"}}), http.StatusSeeOther)
	expectContains(t, admin.Get("/users"), "Password of bea not changed")
	expectStatus(t, admin.Post("/users", "/users/"+id+"/password", url.Values{"password": {"new-bea-password"}}), http.StatusSeeOther)
	// Her session ended with the password change.
	if r := bc.Get("/topics"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("bea still signed in after a password reset: %d", r.StatusCode)
	}
	bc.SignIn("bea", "new-bea-password")
	// The last admin cannot be demoted, and nobody removes themselves.
	ada, _ := ts.store.UserByName(context.Background(), "ada")
	expectStatus(t, admin.Post("/users", "/users/"+itoa64(ada.ID)+"/role", url.Values{"role": {"viewer"}}), http.StatusSeeOther)
	expectContains(t, admin.Get("/users"), "last admin cannot be removed or demoted")
	expectStatus(t, admin.Post("/users", "/users/"+itoa64(ada.ID)+"/delete", nil), http.StatusSeeOther)
	expectContains(t, admin.Get("/users"), "You cannot remove yourself")
	expectStatus(t, admin.Post("/users", "/users/"+id+"/delete", nil), http.StatusSeeOther)
	expectContains(t, admin.Get("/users"), "User bea removed.")
	expectStatus(t, admin.Post("/users", "/users/"+id+"/role", url.Values{"role": {"viewer"}}), http.StatusNotFound)
	expectStatus(t, admin.Post("/users", "/users/abc/role", url.Values{"role": {"viewer"}}), http.StatusBadRequest)

	// The audit page shows all of it, filterable.
	r = admin.Get("/audit")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "user.add", "user.role", "user.password", "user.remove", "bea", "failed")
	r = admin.Get("/audit?action=user.remove")
	if strings.Contains(r.Text, `<td class="mono">user.add</td>`) || !strings.Contains(r.Text, `<td class="mono">user.remove</td>`) {
		t.Fatal("audit filter by action")
	}
	r = admin.Get("/audit?user=nobody")
	expectContains(t, r, "Nothing recorded")
	admin.Accept = "application/json"
	r = admin.Get("/audit?action=user.")
	expectContains(t, r, `"action":"user.remove"`, `"remote_addr":`) // snake_case, as every JSON answer
}

// The audit page's action filter matches any part of the action
// ("session" finds session.login, "reset" the offset resets), and what a
// filter selects downloads as CSV or JSON.
func TestAuditFilterBySubstringAndExport(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for _, a := range []string{"session.login", "session.logout", "group.reset-offsets", "topic.create"} {
		if _, err := ts.store.AppendAudit(ctx, consoledb.AuditEntry{At: time.Now(), User: "bot", Action: a, Target: "t-" + a, Detail: "=1+1", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	admin := ts.signedIn(t, "ada", RoleAdmin)
	r := admin.Get("/audit?user=bot&action=session")
	expectContains(t, r, `<td class="mono">session.login</td>`, `<td class="mono">session.logout</td>`, `value="session"`, "Export")
	if strings.Contains(r.Text, `<td class="mono">topic.create</td>`) {
		t.Fatal("the action filter kept topic.create")
	}
	r = admin.Get("/audit?user=bot&action=Reset")
	expectContains(t, r, `<td class="mono">group.reset-offsets</td>`)
	if strings.Contains(r.Text, `<td class="mono">session.login</td>`) {
		t.Fatal("the action filter kept session.login")
	}

	r = admin.Get("/audit?user=bot&action=session&as=csv")
	expectStatus(t, r, http.StatusOK)
	if !strings.Contains(r.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("disposition %q", r.Header.Get("Content-Disposition"))
	}
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil || len(rows) != 3 || rows[0][3] != "action" || rows[1][3] != "session.logout" || rows[2][3] != "session.login" || rows[1][5] != "'=1+1" {
		t.Fatalf("CSV export %q (%v)", rows, err)
	}
	r = admin.Get("/audit?user=bot&as=json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.Text), &got); err != nil || len(got) != 4 || got[0]["action"] != "topic.create" || got[3]["user"] != "bot" {
		t.Fatalf("JSON export %.300s (%v)", r.Text, err)
	}
	expectStatus(t, admin.Get("/audit?as=xml"), http.StatusBadRequest)
	// The export itself is on record.
	if es := auditOf(t, ts, "access.audit.export"); len(es) != 2 {
		t.Fatalf("export audit entries: %+v", es)
	}
}

func TestAuditLogPages(t *testing.T) {
	ts := newTestServer(t)
	for i := 0; i < 130; i++ {
		ts.store.AppendAudit(context.Background(), consoledb.AuditEntry{User: "bot", Action: "topic.create", Target: "t"})
	}
	admin := ts.signedIn(t, "ada", RoleAdmin)
	r := admin.Get("/audit?user=bot")
	m := olderRe.FindStringSubmatch(r.Text)
	if m == nil {
		t.Fatal("no link to older entries")
	}
	r = admin.Get(strings.ReplaceAll(m[1], "&amp;", "&"))
	if n := strings.Count(r.Text, "topic.create"); n != 30 {
		t.Fatalf("second page has %d entries, want 30", n)
	}
}

func TestAccountPasswordChange(t *testing.T) {
	ts := newTestServer(t)
	c := ts.signedIn(t, "ann", RoleViewer)
	other := ts.client(t)
	other.SignIn("ann", "password-1")
	expectContains(t, c.Get("/account"), "Change your password", "role viewer")
	r := c.Post("/account", "/account/password", url.Values{"current": {"wrong"}, "password": {"new-password-1"}, "confirm": {"new-password-1"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "This is not your current password")
	r = c.Post("/account", "/account/password", url.Values{"current": {"password-1"}, "password": {"new-password-1"}, "confirm": {"other"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "The passwords differ")
	r = c.Post("/account", "/account/password", url.Values{"current": {"password-1"}, "password": {"new-password-1"}, "confirm": {"new-password-1"}})
	expectStatus(t, r, http.StatusSeeOther)
	// This browser stays signed in; the other session ended.
	expectContains(t, c.Get("/account"), "Password changed.")
	if r := other.Get("/account"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("other session survived: %d", r.StatusCode)
	}
	fresh := ts.client(t)
	r = fresh.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"password-1"}})
	expectStatus(t, r, http.StatusUnauthorized)
	fresh.SignIn("ann", "new-password-1")
}

var olderRe = regexp.MustCompile(`href="([^"]+)">Older`)

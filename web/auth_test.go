package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Every route that shows or changes anything needs a signed-in user.
func TestEveryRouteNeedsSignIn(t *testing.T) {
	ts := newTestServer(t)
	c := ts.client(t)
	for _, path := range []string{"/", "/brokers", "/topics", "/topics/new", "/topics/t", "/topics/t/messages",
		"/topics/t/messages/export", "/topics/t/messages/tail", "/groups", "/groups/g", "/users", "/account", "/audit"} {
		r := c.Get(path)
		if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s signed out: status %d, location %q", path, r.StatusCode, r.Header.Get("Location"))
		}
	}
	for _, path := range []string{"/topics", "/topics/t/configs", "/topics/t/partitions", "/topics/t/delete", "/topics/t/messages",
		"/groups/g/reset", "/users", "/users/1/role", "/users/1/password", "/users/1/delete", "/account/password", "/brokers/1/forget"} {
		r := c.Post("/login", path, url.Values{"name": {"x"}})
		if r.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s signed out: status %d, want 401", path, r.StatusCode)
		}
	}
	c.Accept = "application/json"
	r := c.Get("/topics")
	expectStatus(t, r, http.StatusUnauthorized)
	expectContains(t, r, `"error"`)
	// The sign-in page sends the user back where they wanted to go.
	c.Accept = ""
	ts.user(t, "ann", RoleViewer)
	r = c.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"password-1"}, "next": {"/groups?q=x"}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/groups?q=x" {
		t.Fatalf("redirect after sign-in: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	// ...but never off the site.
	c2 := ts.client(t)
	r = c2.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"password-1"}, "next": {"//evil.example/"}})
	if r.Header.Get("Location") != "/" {
		t.Fatalf("open redirect: %q", r.Header.Get("Location"))
	}
}

func TestSetupCreatesFirstAdminOnce(t *testing.T) {
	ts := newTestServer(t)
	ts.announceSetup(context.Background())
	tok := ts.SetupToken()
	if tok == "" {
		t.Fatal("no setup token while no admin exists")
	}
	c := ts.client(t)
	r := c.Get("/login")
	expectContains(t, r, "No admin yet")
	expectStatus(t, c.Get("/setup?token=wrong"), http.StatusForbidden)
	page := "/setup?token=" + tok
	expectStatus(t, c.Get(page), http.StatusOK)

	r = c.Post(page, "/setup", url.Values{"token": {tok}, "username": {"root"}, "password": {"secret-pw-1"}, "confirm": {"secret-pw-2"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "The passwords differ", `value="root"`)
	r = c.Post(page, "/setup", url.Values{"token": {tok}, "username": {"bad name"}, "password": {"short"}, "confirm": {"short"}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "User name must be", "At least 8 characters")

	r = c.Post(page, "/setup", url.Values{"token": {tok}, "username": {"root"}, "password": {"secret-pw-1"}, "confirm": {"secret-pw-1"}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("setup: %d %s", r.StatusCode, snippet(r.Text))
	}
	r = c.Get("/users")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "root", "Welcome, root")
	if ts.SetupToken() != "" {
		t.Fatal("setup token still valid after the admin was created")
	}
	other := ts.client(t)
	expectStatus(t, other.Get(page), http.StatusNotFound)
	r = other.Post("/login", "/setup", url.Values{"token": {tok}, "username": {"evil"}, "password": {"secret-pw-1"}, "confirm": {"secret-pw-1"}})
	expectStatus(t, r, http.StatusNotFound)
	entries, _, _ := ts.store.Audit(context.Background(), consoledbFilter("user.setup-admin"))
	if len(entries) != 1 || entries[0].User != "root" {
		t.Fatalf("audit of setup: %+v", entries)
	}
}

func TestSignInFailuresAreLimited(t *testing.T) {
	ts := newTestServer(t)
	ts.user(t, "ann", RoleViewer)
	c := ts.client(t)
	r := c.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {""}})
	expectStatus(t, r, http.StatusUnprocessableEntity)
	expectContains(t, r, "Enter your password")
	for i := 0; i < 5; i++ {
		r = c.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"nope-nope"}})
		expectStatus(t, r, http.StatusUnauthorized)
		expectContains(t, r, "Wrong user name or password", `value="ann"`)
	}
	// The sixth try is refused without checking, even with the right password.
	r = c.Post("/login", "/login", url.Values{"username": {"ann"}, "password": {"password-1"}})
	expectStatus(t, r, http.StatusTooManyRequests)
	expectContains(t, r, "Too many failed sign-ins")
	// Another user from the same address still gets in (the per-address
	// limit is higher than the per-user one).
	ts.user(t, "bob", RoleViewer)
	c.SignIn("bob", "password-1")
}

func TestSessionCookieAndSignOut(t *testing.T) {
	ts := newTestServer(t)
	c := ts.signedIn(t, "ann", RoleViewer)
	if _, ok := c.Cookies[sessionCookie]; !ok {
		t.Fatal("no session cookie")
	}
	// Cookie attributes: HttpOnly and SameSite; not Secure over plain HTTP.
	ts.user(t, "bob", RoleViewer)
	b := ts.client(t)
	r := b.Post("/login", "/login", url.Values{"username": {"bob"}, "password": {"password-1"}})
	var raw string
	for _, h := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(h, sessionCookie+"=") {
			raw = h
		}
	}
	low := strings.ToLower(raw)
	if !strings.Contains(low, "httponly") || !strings.Contains(low, "samesite=lax") || strings.Contains(low, "secure") {
		t.Fatalf("session cookie attributes: %s", raw)
	}
	expectStatus(t, c.Get("/topics"), http.StatusOK)
	r = c.Post("/topics", "/logout", nil)
	expectStatus(t, r, http.StatusSeeOther)
	if r := c.Get("/topics"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("still signed in after sign-out: %d", r.StatusCode)
	}
}

func TestCSRFRejected(t *testing.T) {
	ts := newTestServer(t)
	c := ts.signedIn(t, "op", RoleOperator)
	form := url.Values{"name": {"csrf-topic"}}
	// No token.
	r := c.Do(http.MethodPost, "/topics", form)
	expectStatus(t, r, http.StatusForbidden)
	expectContains(t, r, "The form has expired")
	// A made-up token.
	form.Set("_csrf", "AAAA")
	expectStatus(t, c.Do(http.MethodPost, "/topics", form), http.StatusForbidden)
	// The token of another session.
	other := ts.signedIn(t, "op2", RoleOperator)
	form.Set("_csrf", other.CSRF("/topics/new"))
	expectStatus(t, c.Do(http.MethodPost, "/topics", form), http.StatusForbidden)
	// The right token, from another site.
	form.Set("_csrf", c.CSRF("/topics/new"))
	c.Headers["Origin"] = "https://evil.example"
	expectStatus(t, c.Do(http.MethodPost, "/topics", form), http.StatusForbidden)
	delete(c.Headers, "Origin")
	// The token of the signed-out page does not work once signed in.
	anon := ts.client(t)
	form.Set("_csrf", anon.CSRF("/login"))
	expectStatus(t, c.Do(http.MethodPost, "/topics", form), http.StatusForbidden)
	// And the sign-in form itself is protected.
	r = anon.Do(http.MethodPost, "/login", url.Values{"username": {"op"}, "password": {"password-1"}})
	expectStatus(t, r, http.StatusForbidden)
	// Nothing was created by the refused requests.
	if _, err := ts.kc.TopicMetadata(context.Background(), "csrf-topic"); err == nil {
		t.Fatal("a refused request created the topic")
	}
	// The header form of the token works for scripts.
	c.Headers["X-CSRF-Token"] = c.CSRF("/topics/new")
	r = c.Do(http.MethodPost, "/topics", url.Values{"name": {"csrf-topic"}, "partitions": {"1"}})
	expectStatus(t, r, http.StatusSeeOther)
}

func TestRolesEnforcedOnTheServer(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "orders", 1)
	viewer := ts.signedIn(t, "vic", RoleViewer)
	for _, path := range []string{"/", "/brokers", "/topics", "/topics/orders", "/topics/orders/messages", "/groups", "/account"} {
		expectStatus(t, viewer.Get(path), http.StatusOK)
	}
	for _, path := range []string{"/topics/new", "/users", "/audit"} {
		r := viewer.Get(path)
		expectStatus(t, r, http.StatusForbidden)
		expectContains(t, r, "Your role is viewer")
	}
	// A viewer cannot create, change, produce, reset or delete.
	posts := map[string]url.Values{
		"/topics":                   {"name": {"by-viewer"}},
		"/topics/orders/configs":    {"cfg.retention.ms": {"1000"}, "was.retention.ms": {"604800000"}},
		"/topics/orders/partitions": {"count": {"3"}},
		"/topics/orders/delete":     {"confirm": {"orders"}},
		"/topics/orders/messages":   {"value": {"v"}},
		"/groups/g/reset":           {"mode": {"earliest"}},
		"/users":                    {"username": {"x"}, "role": {"admin"}, "password": {"password-1"}},
		"/brokers/1/forget":         {},
	}
	for path, form := range posts {
		r := viewer.Post("/topics", path, form)
		if r.StatusCode != http.StatusForbidden {
			t.Errorf("viewer POST %s: status %d, want 403", path, r.StatusCode)
		}
	}
	// The pages do not offer what the role cannot do.
	r := viewer.Get("/topics/orders")
	if strings.Contains(r.Text, "Delete topic") || strings.Contains(r.Text, "Preview configuration changes") {
		t.Fatal("the topic page offers changes to a viewer")
	}
	if strings.Contains(viewer.Get("/topics").Text, "Create topic") {
		t.Fatal("the topics page offers creation to a viewer")
	}
	if _, err := ts.kc.TopicMetadata(context.Background(), "orders"); err != nil {
		t.Fatal("orders was changed by a viewer:", err)
	}
	// An operator changes topics but does not manage users.
	op := ts.signedIn(t, "olga", RoleOperator)
	expectStatus(t, op.Post("/topics/new", "/topics", url.Values{"name": {"by-operator"}, "partitions": {"1"}}), http.StatusSeeOther)
	expectStatus(t, op.Get("/users"), http.StatusForbidden)
	expectStatus(t, op.Post("/topics", "/users", url.Values{"username": {"x"}, "role": {"admin"}, "password": {"password-1"}}), http.StatusForbidden)
	// Nav entries follow the role.
	if txt := op.Get("/").Text; strings.Contains(txt, `href="/audit"`) || strings.Contains(txt, `class="navmore"`) {
		t.Fatal("nav shows the audit log or the Admin menu to an operator")
	}
	admin := ts.signedIn(t, "ada", RoleAdmin)
	expectContains(t, admin.Get("/"), `href="/audit"`, `href="/users"`)
	// The admin entries are folded under one Admin menu, after the others;
	// the menu is marked current on an admin page.
	home := admin.Get("/").Text
	menu := strings.Index(home, `<li class="navmore">`)
	if menu < 0 || strings.Index(home, `href="/users"`) < menu || strings.Index(home, `href="/audit"`) < menu || strings.Index(home, `href="/topics"`) > menu {
		t.Fatalf("admin entries not under the Admin menu: menu at %d", menu)
	}
	if !strings.Contains(admin.Get("/users").Text, `<summary class="current">Admin</summary>`) {
		t.Fatal("the Admin menu is not marked current on the users page")
	}
	// A role change applies to the live session at once.
	vic, _ := ts.store.UserByName(context.Background(), "vic")
	expectStatus(t, admin.Post("/users", "/users/"+itoa64(vic.ID)+"/role", url.Values{"role": {"operator"}}), http.StatusSeeOther)
	expectStatus(t, viewer.Get("/topics/new"), http.StatusOK)
}

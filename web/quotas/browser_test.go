package quotas_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/quotas"
	"github.com/sluice-io/sluice/web/webtest"
)

// TestBrowserQuotas sets a client quota from the Quotas page's form in
// Chromium and deletes another from its row (after the browser's confirm
// dialog), checking each on the broker and in the audit log; a viewer is
// offered no link to the page, is refused it, and its forged posts (with
// its session's valid CSRF token) get 403 and change nothing.
func TestBrowserQuotas(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	c := testcluster.New(t)
	consoledb.BcryptCost = bcrypt.MinCost
	srv, err := web.New(web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Brokers: []string{c.Addr()},
		Logger:  webtest.Logger(),
		Extra:   []web.PageGroup{quotas.PageGroup(quotas.Options{Metrics: c.App().Metrics().Gatherer()})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]web.Role{"root": web.RoleAdmin, "vic": web.RoleViewer} {
		if _, err := srv.Store().CreateUser(ctx, name, role, "password-1"); err != nil {
			t.Fatal(err)
		}
	}
	audit := func(action string) []consoledb.AuditEntry {
		t.Helper()
		es, _, err := srv.Store().Audit(ctx, consoledb.AuditFilter{Action: action, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	adm := c.Admin()
	// described is every quota on the broker, as entity key=value.
	described := func() string {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range d {
			for _, v := range q.Values {
				out = append(out, fmt.Sprintf("%s %s=%g", q.Entity.String(), v.Key, v.Value))
			}
		}
		sort.Strings(out)
		return strings.Join(out, "; ")
	}

	b := browsertest.New(t, srv.URL())
	defer b.PublishScreenshots()
	b.SignIn("root", "password-1")
	b.Visit("/quotas")
	b.WaitText("No client quotas")
	set := func(entity, field, value, rateField, rate string) {
		t.Helper()
		actions := []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.ID("f-entity"), entity)}
		if field != "" {
			actions = append(actions, chromedp.SendKeys(chromedp.ID("f-"+field), value))
		}
		actions = append(actions,
			chromedp.SendKeys(chromedp.ID("f-"+rateField), rate),
			chromedp.Click(chromedp.CSS(`section[aria-labelledby="set-quota"] button[type="submit"]`)))
		before := described()
		b.Do("preview a quota of "+entity, actions...)
		// The preview: the quota now (none) and after; nothing set yet.
		b.WaitText("Set quotas of ")
		if got := described(); got != before {
			t.Fatalf("the preview changed quotas: %s, was %s", got, before)
		}
		if row := b.Text(`#quota-preview tbody tr`); !strings.Contains(row, rateField) || !strings.Contains(row, "none") || !strings.Contains(row, "MiB/s") {
			t.Fatalf("the quota preview row: %q", row)
		}
		b.Do("apply the quota of "+entity, chromedp.Click(chromedp.CSS(`form[action="/quotas"] input[name="apply"] ~ button[type="submit"]`)))
	}
	set("client", "client_id", "hog", "producer_byte_rate", "1MiB")
	b.WaitText(`Quotas of client id "hog" set.`)
	set("default-user", "", "", "consumer_byte_rate", "10MiB")
	b.WaitText(`Quotas of every user (default) set.`)
	if got := b.Text("#quotas"); !strings.Contains(got, "1.0 MiB/s") || !strings.Contains(got, "10.0 MiB/s") {
		t.Fatalf("the quotas table shows %q", got)
	}
	b.Screenshot("quotas")
	if got, want := described(), "{client-id=hog} producer_byte_rate=1.048576e+06; {user=<default>} consumer_byte_rate=1.048576e+07"; got != want {
		t.Fatalf("quotas on the broker: %s, want %s", got, want)
	}
	sets := audit("quota.set")
	if len(sets) != 2 || sets[1].User != "root" || sets[1].Target != "client-id=hog" || sets[1].Outcome != "ok" || !strings.Contains(sets[1].Detail, "producer_byte_rate=1048576") {
		t.Fatalf("quota.set audit %+v", sets)
	}

	// Delete the default user's quota from its row, through the dialog.
	msg := b.Confirm("delete the default user's quota",
		chromedp.Click(chromedp.CSS(`#quotas form:has(input[name="user_default"]) button`)))
	if !strings.Contains(msg, "Delete every quota of every user (default)?") {
		t.Fatalf("the confirm dialog says %q", msg)
	}
	b.WaitText("Quotas of every user (default) deleted: its clients fall back to the next matching quota, or none.")
	if got, want := described(), "{client-id=hog} producer_byte_rate=1.048576e+06"; got != want {
		t.Fatalf("quotas on the broker after the delete: %s, want %s", got, want)
	}
	if dels := audit("quota.delete"); len(dels) != 1 || dels[0].User != "root" || dels[0].Target != "user=<default>" || dels[0].Outcome != "ok" {
		t.Fatalf("quota.delete audit %+v", dels)
	}

	// A viewer.
	b.SignOut()
	b.SignIn("vic", "password-1")
	if n := b.Count(`a[href="/quotas"]`); n != 0 {
		t.Fatalf("a viewer is offered %d links to the quotas page", n)
	}
	for path, fields := range map[string]map[string]string{
		"/quotas":        {"entity": "client", "client_id": "hog", "producer_byte_rate": "1"},
		"/quotas/delete": {"has_user": "false", "has_client": "true", "client_id": "hog"},
		"/quotas?apply":  {"entity": "client", "client_id": "hog", "producer_byte_rate": "1", "apply": "1", "was.producer_byte_rate": "1048576"},
	} {
		path, _, _ = strings.Cut(path, "?")
		if st := b.ForgedPost(path, fields); st != http.StatusForbidden {
			t.Fatalf("a viewer's POST %s: status %d, want 403", path, st)
		}
	}
	b.Visit("/quotas")
	b.WaitText("this needs admin")
	if got, want := described(), "{client-id=hog} producer_byte_rate=1.048576e+06"; got != want {
		t.Fatalf("quotas on the broker after the viewer's posts: %s, want %s", got, want)
	}
	if len(audit("quota.set")) != 2 || len(audit("quota.delete")) != 1 {
		t.Fatalf("the viewer's posts were audited as quota changes: %+v %+v", audit("quota.set"), audit("quota.delete"))
	}
	if n := len(audit("auth.role-refused")); n != 4 {
		t.Fatalf("%d refusals audited, want 4", n)
	}
}

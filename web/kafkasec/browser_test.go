package kafkasec_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
)

// TestBrowserKafkaUsersAndACLs does in Chromium what an admin does on the
// Kafka users and ACL pages of one broker with SASL and ACLs on: add a
// SCRAM user with a generated password (shown once, and it logs in), add
// an ACL after its preview, remove it from its row after the confirmation
// page, and remove the user's credential through the confirm dialog; each
// is checked on the broker and in the audit log. A viewer has no link to
// either page, is refused them, and its forged posts with its session's
// valid CSRF token get 403 and change nothing.
func TestBrowserKafkaUsersAndACLs(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	brk := startBroker(t)
	con := brk.console(t, "console", "console-secret")
	ctx := context.Background()
	if err := con.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]web.Role{"root": web.RoleAdmin, "vic": web.RoleViewer} {
		if _, err := con.srv.Store().CreateUser(ctx, name, role, "password-1"); err != nil {
			t.Fatal(err)
		}
	}
	adm := brk.admin(t)
	// bob's ACL is there from the start: the viewer's forged removal aims
	// at it.
	bobs := kadm.NewACLs().Allow("User:bob").AllowHosts("*").Topics("orders").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := adm.CreateACLs(ctx, bobs); err != nil || rs[0].Err != nil {
		t.Fatalf("create bob's ACL: %v %+v", err, rs)
	}
	// acls is every ACL on the broker, as principal operation name.
	acls := func() string {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
		if err != nil || res[0].Err != nil {
			t.Fatalf("describe ACLs: %v %+v", err, res)
		}
		var out []string
		for _, d := range res[0].Described {
			out = append(out, fmt.Sprintf("%s %s %s %s", d.Principal, d.Operation, d.Name, d.Pattern))
		}
		sort.Strings(out)
		return strings.Join(out, "; ")
	}
	// okAudit: one ok entry of action by root, on target (any when ""),
	// whose detail contains detail.
	okAudit := func(action, target, detail string) {
		t.Helper()
		es := con.audit(t, action)
		if len(es) != 1 || es[0].User != "root" || (target != "" && es[0].Target != target) || es[0].Outcome != "ok" || !strings.Contains(es[0].Detail, detail) {
			t.Fatalf("audit of %s: %+v, want one ok entry by root on %s with %q", action, es, target, detail)
		}
	}

	b := browsertest.New(t, con.srv.URL())
	defer b.PublishScreenshots()
	b.SignIn("root", "password-1")

	// A SCRAM user with a generated password.
	b.Visit("/kafka-users")
	b.WaitText("nobody")
	b.Do("add alice",
		chromedp.SendKeys(chromedp.ID("f-user"), "alice"),
		chromedp.SetValue(chromedp.ID("f-mechanism"), "SCRAM-SHA-256"),
		chromedp.SetValue(chromedp.ID("f-iterations"), "8192"),
		chromedp.Click(chromedp.CSS(`section[aria-labelledby="set-pw"] button[type="submit"]`)),
	)
	b.WaitText("Password of alice")
	pw := strings.TrimSpace(b.Text(`pre[data-secret]`))
	if err := brk.login("alice", pw, scram.Auth{User: "alice", Pass: pw}.AsSha256Mechanism()); err != nil {
		t.Fatalf("alice cannot log in with the password the page generated: %v", err)
	}
	okAudit("kafka_user.set", "alice", "mechanism=SCRAM-SHA-256 iterations=8192")
	if strings.Contains(con.audit(t, "kafka_user.set")[0].Detail, pw) {
		t.Fatal("the audit log holds the generated password")
	}

	// An ACL: preview, then add.
	b.Visit("/acls")
	b.Do("preview an ACL",
		chromedp.SendKeys(chromedp.ID("f-principal"), "User:alice"),
		chromedp.SetValue(chromedp.ID("f-permission"), "Allow"),
		chromedp.SetValue(chromedp.ID("f-operation"), "Read"),
		chromedp.SetValue(chromedp.ID("f-type"), "Topic"),
		chromedp.SendKeys(chromedp.ID("f-name"), "orders-"),
		chromedp.SetValue(chromedp.ID("f-pattern"), "Prefixed"),
		chromedp.SetValue(chromedp.ID("f-host"), "*"),
		chromedp.Click(chromedp.CSS(`#add button[value="preview"]`)),
	)
	b.WaitText("every topic whose name starts with orders-")
	b.WaitText("--allow-principal User:alice --operation Read --topic orders- --resource-pattern-type prefixed")
	b.Screenshot("acl-preview")
	const bobsACL = "User:bob DESCRIBE orders LITERAL"
	if got := acls(); got != bobsACL {
		t.Fatalf("ACLs after the preview: %s", got)
	}
	b.Do("add the ACL", chromedp.Click(chromedp.CSS(`#add button[value="create"]`)))
	b.WaitText("ACL added: ")
	if got, want := acls(), "User:alice READ orders- PREFIXED; "+bobsACL; got != want {
		t.Fatalf("ACLs on the broker: %s, want %s", got, want)
	}
	okAudit("acl.create", "ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)", "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)")

	// Remove it from its row, after the confirmation page.
	b.Do("remove alice's ACL", chromedp.Click(chromedp.Search(`//tr[td[normalize-space()="User:alice"]]//a[contains(., "Remove")]`)))
	b.WaitText("1 matching ACL(s) will be removed")
	b.Do("confirm", chromedp.Click(chromedp.CSS(`form[action="/acls/delete"] button.danger`)))
	b.WaitText("1 ACL removed.")
	if got := acls(); got != bobsACL {
		t.Fatalf("ACLs on the broker after the removal: %s", got)
	}
	okAudit("acl.delete", "", "User:alice")

	// Remove alice's credential, through the dialog.
	b.Visit("/kafka-users")
	msg := b.Confirm("remove alice's credential", chromedp.Click(chromedp.CSS(`form:has(input[name="user"][value="alice"]) button`)))
	if msg != "Remove the SCRAM-SHA-256 credential of alice? Clients using it can no longer authenticate." {
		t.Fatalf("the confirm dialog says %q", msg)
	}
	b.WaitText("SCRAM-SHA-256 credential of alice removed.")
	testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if brk.login("alice", pw, scram.Auth{User: "alice", Pass: pw}.AsSha256Mechanism()) == nil {
			return fmt.Errorf("alice still logs in")
		}
		return nil
	})
	okAudit("kafka_user.delete", "alice", "mechanism=SCRAM-SHA-256")

	// A viewer.
	b.SignOut()
	b.SignIn("vic", "password-1")
	if n := b.Count(`a[href="/kafka-users"], a[href="/acls"]`); n != 0 {
		t.Fatalf("a viewer is offered %d links to the security pages", n)
	}
	forged := []struct {
		path   string
		fields map[string]string
	}{
		{"/kafka-users", map[string]string{"user": "mallory", "mechanism": "SCRAM-SHA-512", "iterations": "4096", "password": "mallory-1", "confirm": "mallory-1"}},
		{"/kafka-users/delete", map[string]string{"user": "nobody", "mechanism": "all"}},
		{"/acls", map[string]string{"do": "create", "principal": "User:mallory", "permission": "Allow", "operation": "All", "type": "Cluster", "name": "kafka-cluster", "pattern": "Literal", "host": "*"}},
		{"/acls/delete", map[string]string{"principal": "User:bob", "type": "Topic", "name": "orders", "pattern": "Literal", "operation": "Describe", "permission": "Allow", "host": "*"}},
	}
	for _, f := range forged {
		if st := b.ForgedPost(f.path, f.fields); st != http.StatusForbidden {
			t.Fatalf("a viewer's POST %s: status %d, want 403", f.path, st)
		}
	}
	for _, page := range []string{"/kafka-users", "/acls", "/acls/delete?principal=User:bob"} {
		b.Visit(page)
		b.WaitText("this needs admin")
	}
	if got := acls(); got != bobsACL {
		t.Fatalf("ACLs after the viewer's posts: %s", got)
	}
	if err := brk.login("nobody", "nobody-secret", scram.Auth{User: "nobody", Pass: "nobody-secret"}.AsSha512Mechanism()); err != nil {
		t.Fatalf("nobody no longer logs in after the viewer's post: %v", err)
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "mallory"); err == nil && d["mallory"].Err == nil {
		t.Fatalf("mallory exists after the viewer's post: %+v", d)
	}
	for _, action := range []string{"kafka_user.set", "kafka_user.delete", "acl.create", "acl.delete"} {
		if n := len(con.audit(t, action)); n != 1 {
			t.Fatalf("%d %s entries after the viewer's posts, want the admin's 1", n, action)
		}
	}
	if n := len(con.audit(t, "auth.role-refused")); n != len(forged)+3 {
		t.Fatalf("%d refusals audited, want %d", n, len(forged)+3)
	}
}

package kafkasec_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/kafkasec"
	"github.com/sluice-io/sluice/web/webtest"
)

// broker is one in-process broker with a SASL_PLAINTEXT listener
// (SCRAM-SHA-256 and -512) and Kafka's AclAuthorizer, whose super user is
// User:console; users console (a super user) and nobody exist.
type broker struct {
	c         *testcluster.Cluster
	sasl      string // the SASL_PLAINTEXT listener's address
	plaintext string // the inter-broker PLAINTEXT listener's address
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	b := &broker{sasl: testutil.FreeAddr(t), plaintext: testutil.FreeAddr(t)}
	b.c = testcluster.New(t, testcluster.BrokerSettings(0,
		fmt.Sprintf("listeners=INTERNAL://%s,SASL_PLAINTEXT://%s", b.plaintext, b.sasl),
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"inter.broker.listener.name=INTERNAL",
		"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"super.users=User:console",
		"connection.failed.authentication.delay.ms=0",
	))
	b.addUser(t, "console", "console-secret")
	b.addUser(t, "nobody", "nobody-secret")
	return b
}

// addUser writes a SCRAM-SHA-512 credential straight into the store, as
// `sluice users set --offline` does.
func (b *broker) addUser(t *testing.T, user, password string) {
	t.Helper()
	mech, _ := security.ScramMechanismNamed("SCRAM-SHA-512")
	cred, err := mech.NewCredential(password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, err := range b.c.App().Coordinator().AlterScramCredentials(ctx, []cluster.ScramChange{{User: user, Mechanism: "SCRAM-SHA-512", Credential: &cred}}) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// login reports whether user authenticates with password and mechanism
// on the SASL listener.
func (b *broker) login(user, password string, mech sasl.Mechanism) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.sasl), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// admin is a kadm client as User:console.
func (b *broker) admin(t *testing.T) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.sasl), kgo.SASL(scram.Auth{User: "console", Pass: "console-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// console is a console with the Kafka users and ACL pages whose Kafka
// client authenticates as user.
type console struct {
	srv *web.Server
}

func (b *broker) console(t *testing.T, user, password string) *console {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	srv, err := web.New(web.Config{
		Listen:       "127.0.0.1:0",
		DataDir:      filepath.Join(t.TempDir()),
		Brokers:      []string{b.sasl},
		KafkaOptions: []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism())},
		Logger:       webtest.Logger(),
		Extra:        []web.PageGroup{kafkasec.PageGroup()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &console{srv: srv}
}

func (c *console) signedIn(t *testing.T, name string, role web.Role) *webtest.Client {
	t.Helper()
	if _, err := c.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
	cl := webtest.NewClient(t, c.srv.App())
	cl.SignIn(name, "password-1")
	return cl
}

func (c *console) audit(t *testing.T, action string) []consoledb.AuditEntry {
	t.Helper()
	entries, _, err := c.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: action, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

var shownRe = regexp.MustCompile(`<pre class="mono" data-secret="1">([^<]+)</pre>`)

// TestSecurityPages runs the Kafka users and ACL pages against one broker
// with SASL and ACLs on.
func TestSecurityPages(t *testing.T) {
	b := startBroker(t)
	con := b.console(t, "console", "console-secret")
	admin := con.signedIn(t, "root", web.RoleAdmin)

	t.Run("Roles", func(t *testing.T) {
		for _, role := range []web.Role{web.RoleViewer, web.RoleOperator} {
			c := con.signedIn(t, "u-"+string(role), role)
			for _, path := range []string{"/kafka-users", "/acls", "/acls/delete?principal=User:alice"} {
				webtest.ExpectStatus(t, c.Get(path), 403)
			}
			// A form posted with a valid token is refused too.
			token := c.CSRF("/account")
			for _, path := range []string{"/kafka-users", "/kafka-users/delete", "/acls", "/acls/delete"} {
				r := c.Do("POST", path, url.Values{"_csrf": {token}, "user": {"mallory"}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"4096"},
					"password": {"x"}, "confirm": {"x"}, "principal": {"User:mallory"}, "type": {"Topic"}, "name": {"t"},
					"pattern": {"Literal"}, "operation": {"All"}, "permission": {"Allow"}})
				webtest.ExpectStatus(t, r, 403)
			}
			r := c.Get("/account")
			webtest.ExpectLacks(t, r, `href="/kafka-users"`, `href="/acls"`)
		}
		r := admin.Get("/account")
		webtest.ExpectContains(t, r, `href="/kafka-users"`, `href="/acls"`)
		if got := con.audit(t, "kafka_user."); len(got) != 0 {
			t.Fatalf("refused requests changed something: %+v", got)
		}
	})

	t.Run("KafkaUsers", func(t *testing.T) {
		r := admin.Get("/kafka-users")
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "console", "nobody", "SCRAM-SHA-512", "4096")

		// A typed password, SCRAM-SHA-256 at 8192 iterations.
		r = admin.Post("/kafka-users", "/kafka-users", url.Values{"user": {"alice"}, "mechanism": {"SCRAM-SHA-256"},
			"iterations": {"8192"}, "password": {"alice-secret-1"}, "confirm": {"alice-secret-1"}})
		webtest.ExpectStatus(t, r, 303)
		r = admin.Get("/kafka-users")
		webtest.ExpectContains(t, r, "alice", "SCRAM-SHA-256", "8192")
		webtest.ExpectLacks(t, r, "alice-secret-1")
		if err := b.login("alice", "alice-secret-1", scram.Auth{User: "alice", Pass: "alice-secret-1"}.AsSha256Mechanism()); err != nil {
			t.Fatalf("alice cannot log in with the password set on the page: %v", err)
		}

		// A generated password is shown on the answer, once.
		r = admin.Post("/kafka-users", "/kafka-users", url.Values{"user": {"bob"}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"4096"}})
		webtest.ExpectStatus(t, r, 200)
		m := shownRe.FindStringSubmatch(r.Text)
		if m == nil {
			t.Fatalf("no generated password shown: %s", webtest.Snippet(webtest.MainOf(r.Text)))
		}
		pw := m[1]
		if err := b.login("bob", pw, scram.Auth{User: "bob", Pass: pw}.AsSha512Mechanism()); err != nil {
			t.Fatalf("bob cannot log in with the generated password: %v", err)
		}
		r = admin.Get("/kafka-users")
		webtest.ExpectContains(t, r, "bob")
		webtest.ExpectLacks(t, r, pw, "data-secret")

		// Bad input: each error beside its field, nothing changed.
		for _, tc := range []struct {
			form  url.Values
			field string
			text  string
		}{
			{url.Values{"user": {""}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"4096"}}, "user", "Enter the user"},
			{url.Values{"user": {"carol"}, "mechanism": {"SCRAM-SHA-1"}, "iterations": {"4096"}}, "mechanism", "Pick SCRAM-SHA-256 or SCRAM-SHA-512"},
			{url.Values{"user": {"carol"}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"1000"}}, "iterations", "A number from 4096 to 16384"},
			{url.Values{"user": {"carol"}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"4096"}, "password": {"a-long-one"}, "confirm": {"another"}}, "confirm", "The two passwords differ"},
		} {
			r := admin.Post("/kafka-users", "/kafka-users", tc.form)
			webtest.ExpectStatus(t, r, 422)
			webtest.ExpectContains(t, r, `<div class="error" id="e-`+tc.field+`">`+tc.text)
		}
		if d, err := b.admin(t).DescribeUserSCRAMs(context.Background(), "carol"); err == nil && d["carol"].Err == nil {
			t.Fatalf("carol exists after refused forms: %+v", d)
		}

		// Remove alice's only credential: she can no longer log in.
		r = admin.Post("/kafka-users", "/kafka-users/delete", url.Values{"user": {"alice"}, "mechanism": {"SCRAM-SHA-256"}})
		webtest.ExpectStatus(t, r, 303)
		r = admin.Get("/kafka-users")
		webtest.ExpectLacks(t, r, "<td>alice</td>")
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			if b.login("alice", "alice-secret-1", scram.Auth{User: "alice", Pass: "alice-secret-1"}.AsSha256Mechanism()) == nil {
				return fmt.Errorf("alice still logs in")
			}
			return nil
		})

		sets := con.audit(t, "kafka_user.set")
		if len(sets) != 2 || sets[0].User != "root" {
			t.Fatalf("kafka_user.set entries %+v, want alice's and bob's by root", sets)
		}
		for _, e := range sets {
			if e.Outcome != "ok" || strings.Contains(e.Detail, "secret") || strings.Contains(e.Detail, pw) {
				t.Fatalf("audit entry %+v", e)
			}
		}
		dels := con.audit(t, "kafka_user.delete")
		if len(dels) != 1 || dels[0].Target != "alice" || dels[0].Detail != "mechanism=SCRAM-SHA-256" || dels[0].Outcome != "ok" {
			t.Fatalf("kafka_user.delete entries %+v", dels)
		}
	})

	t.Run("ACLs", func(t *testing.T) {
		r := admin.Get("/acls")
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "No ACLs yet")

		form := url.Values{"principal": {"User:alice"}, "permission": {"Allow"}, "operation": {"Read"}, "type": {"Topic"},
			"name": {"orders-"}, "pattern": {"Prefixed"}, "host": {"*"}}
		preview := url.Values{"do": {"preview"}}
		for k, v := range form {
			preview[k] = v
		}
		r = admin.Post("/acls", "/acls", preview)
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r,
			"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)`",
			"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
			"kafka-acls.sh --bootstrap-server "+b.sasl+" --add --allow-principal User:alice --operation Read --topic orders- --resource-pattern-type prefixed",
			"every topic whose name starts with orders-", "also allows: Describe")
		ctx := context.Background()
		adm := b.admin(t)
		if res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny)); err != nil || len(res[0].Described) != 0 {
			t.Fatalf("a preview created something: %v %+v", err, res)
		}

		form.Set("do", "create")
		r = admin.Post("/acls", "/acls", form)
		webtest.ExpectStatus(t, r, 303)
		r = admin.Get("/acls")
		webtest.ExpectContains(t, r, "User:alice", "orders-", "Prefixed", "Read")

		// alice may read orders-eu now (the broker enforces what the page added).
		b.addUser(t, "alice", "alice-secret-2")
		alice, err := kgo.NewClient(kgo.SeedBrokers(b.sasl), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret-2"}.AsSha512Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer alice.Close()
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders-eu"); err != nil {
			t.Fatal(err)
		}
		describes := func() (bool, error) {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("orders-eu")
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, alice)
			if err != nil {
				return false, err
			}
			return resp.Topics[0].ErrorCode == 0, nil
		}
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			if ok, err := describes(); !ok {
				return fmt.Errorf("alice may not describe orders-eu: %v", err)
			}
			return nil
		})

		// Filters.
		for q, want := range map[string]bool{
			"principal=User:alice":                      true,
			"principal=User:bob":                        false,
			"type=Group":                                false,
			"type=Topic&name=orders-eu":                 true, // match: the prefixed ACL applies
			"type=Topic&name=orders-eu&pattern=Literal": false,
			"name=orders-&pattern=Prefixed":             true,
		} {
			r := admin.Get("/acls?" + q)
			webtest.ExpectStatus(t, r, 200)
			main := webtest.Response{Response: r.Response, Text: webtest.MainOf(r.Text)}
			if want {
				webtest.ExpectContains(t, main, "<td class=\"mono\">User:alice</td>")
			} else {
				webtest.ExpectContains(t, main, "No ACL matches")
			}
		}

		// Bad input: each error beside its field, nothing added.
		for _, tc := range []struct {
			key, value, text string
		}{
			{"principal", "alice", "A principal is Type:name"},
			{"operation", "ClusterAction", "Topic has no ClusterAction operation"},
			{"host", "client.example.com", "An IP address"},
			{"name", "", "Enter the resource"},
			{"name", "a/b", "A name cannot contain"},
			{"type", "DelegationToken", "Pick Topic, Group, Cluster or TransactionalId"},
		} {
			bad := url.Values{}
			for k, v := range form {
				bad[k] = v
			}
			bad.Set(tc.key, tc.value)
			r := admin.Post("/acls", "/acls", bad)
			webtest.ExpectStatus(t, r, 422)
			webtest.ExpectContains(t, r, `<div class="error" id="e-`+tc.key+`">`+tc.text)
		}
		r = admin.Get("/acls?principal=nope")
		webtest.ExpectStatus(t, r, 422)
		webtest.ExpectContains(t, r, `<span class="error" id="fe-principal">A principal is Type:name`)

		// Remove: the confirmation shows the matching bindings, then
		// they go.
		r = admin.Get("/acls?principal=User:alice")
		m := regexp.MustCompile(`href="(/acls/delete\?[^"]+)">Remove…`).FindStringSubmatch(r.Text)
		if m == nil {
			t.Fatalf("no remove link: %s", webtest.Snippet(webtest.MainOf(r.Text)))
		}
		confirmURL := strings.ReplaceAll(m[1], "&amp;", "&")
		r = admin.Get(confirmURL)
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "1 matching ACL(s) will be removed",
			"ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED) (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)")
		u, _ := url.Parse(confirmURL)
		r = admin.Post(confirmURL, "/acls/delete", u.Query())
		webtest.ExpectStatus(t, r, 303)
		r = admin.Get("/acls")
		webtest.ExpectContains(t, r, "No ACLs yet")
		testutil.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			if ok, err := describes(); ok || err != nil {
				return fmt.Errorf("alice still describes orders-eu (%v)", err)
			}
			return nil
		})
		// A removal that names nothing is refused.
		webtest.ExpectStatus(t, admin.Get("/acls/delete"), 400)

		creates := con.audit(t, "acl.create")
		if len(creates) != 1 || creates[0].Outcome != "ok" || !strings.Contains(creates[0].Target, "name=orders-, patternType=PREFIXED") ||
			!strings.Contains(creates[0].Detail, "principal=User:alice") {
			t.Fatalf("acl.create entries %+v", creates)
		}
		deletes := con.audit(t, "acl.delete")
		if len(deletes) != 1 || deletes[0].Outcome != "ok" || !strings.HasPrefix(deletes[0].Detail, "removed 1: ResourcePattern(resourceType=TOPIC, name=orders-") {
			t.Fatalf("acl.delete entries %+v", deletes)
		}
	})

	// A console whose principal the brokers refuse says so.
	t.Run("Refused", func(t *testing.T) {
		other := b.console(t, "nobody", "nobody-secret")
		c := other.signedIn(t, "root2", web.RoleAdmin)
		for _, path := range []string{"/kafka-users", "/acls"} {
			r := c.Get(path)
			webtest.ExpectStatus(t, r, 200)
			webtest.ExpectContains(t, r, "CLUSTER_AUTHORIZATION_FAILED", "may not Describe on the cluster")
			webtest.ExpectLacks(t, r, "No Kafka users yet", "No ACLs yet")
		}
		r := c.Post("/kafka-users", "/kafka-users", url.Values{"user": {"eve"}, "mechanism": {"SCRAM-SHA-512"}, "iterations": {"4096"}})
		webtest.ExpectStatus(t, r, 422)
		webtest.ExpectContains(t, r, "may not Alter on the cluster")
		if got := other.audit(t, "kafka_user.set"); len(got) != 1 || got[0].Outcome == "ok" {
			t.Fatalf("refused change audited as %+v", got)
		}
	})
}

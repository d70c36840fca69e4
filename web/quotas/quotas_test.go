package quotas_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/quotas"
	"github.com/sluice-io/sluice/web/webtest"
)

var wasRe = regexp.MustCompile(`name="was\.([a-z_]+)" value="([^"]*)"`)

// TestQuotasPage sets, lists and deletes client quotas through the page
// against one in-process broker, and shows a throttled client.
func TestQuotasPage(t *testing.T) {
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
	signedIn := func(name string, role web.Role) *webtest.Client {
		if _, err := srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
			t.Fatal(err)
		}
		cl := webtest.NewClient(t, srv.App())
		cl.SignIn(name, "password-1")
		return cl
	}
	audit := func(action string) []consoledb.AuditEntry {
		entries, _, err := srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: action, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return entries
	}
	admin := signedIn("root", web.RoleAdmin)
	adm := c.Admin()
	ctx := context.Background()
	described := func() map[string]map[string]float64 {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, q := range d {
			vals := map[string]float64{}
			for _, v := range q.Values {
				vals[v.Key] = v.Value
			}
			out[q.Entity.String()] = vals
		}
		return out
	}

	t.Run("Roles", func(t *testing.T) {
		for _, role := range []web.Role{web.RoleViewer, web.RoleOperator} {
			cl := signedIn("u-"+string(role), role)
			webtest.ExpectStatus(t, cl.Get("/quotas"), 403)
			token := cl.CSRF("/account")
			for _, path := range []string{"/quotas", "/quotas/delete"} {
				r := cl.Do("POST", path, url.Values{"_csrf": {token}, "entity": {"client"}, "client_id": {"x"},
					"producer_byte_rate": {"1024"}, "has_client": {"true"}})
				webtest.ExpectStatus(t, r, 403)
			}
			// Nor apply a set without its preview.
			r := cl.Do("POST", "/quotas", url.Values{"_csrf": {token}, "entity": {"client"}, "client_id": {"x"},
				"producer_byte_rate": {"1024"}, "apply": {"1"}})
			webtest.ExpectStatus(t, r, 403)
			webtest.ExpectLacks(t, cl.Get("/account"), `href="/quotas"`)
		}
		webtest.ExpectContains(t, admin.Get("/account"), `href="/quotas"`)
		if got := audit("quota."); len(got) != 0 || len(described()) != 0 {
			t.Fatalf("refused requests changed something: %+v %v", got, described())
		}
	})

	t.Run("SetListDelete", func(t *testing.T) {
		// set previews the form, checks nothing changed, then applies it
		// as the preview's button does.
		set := func(form url.Values) webtest.Response {
			t.Helper()
			before := described()
			r := admin.Post("/quotas", "/quotas", form)
			webtest.ExpectStatus(t, r, 200)
			webtest.ExpectContains(t, r, "Set quotas of", `id="quota-preview"`, `name="apply" value="1"`)
			if fmt.Sprint(described()) != fmt.Sprint(before) {
				t.Fatalf("a preview changed quotas: %v, was %v", described(), before)
			}
			apply := url.Values{"apply": {"1"}}
			for k, v := range form {
				apply[k] = v
			}
			for _, m := range wasRe.FindAllStringSubmatch(r.Text, -1) {
				apply.Set("was."+m[1], m[2])
			}
			return admin.Post("/quotas", "/quotas", apply)
		}
		r := admin.Get("/quotas")
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "No client quotas")

		r = set(url.Values{"entity": {"client"}, "client_id": {"hog"},
			"producer_byte_rate": {"1KiB"}, "consumer_byte_rate": {"10MiB"}})
		webtest.ExpectStatus(t, r, 303)
		r = set(url.Values{"entity": {"user+default-client"}, "user": {"alice"}, "request_percentage": {"50"}})
		webtest.ExpectStatus(t, r, 303)
		r = set(url.Values{"entity": {"default-client"}, "producer_byte_rate": {"1048576"}, "controller_mutation_rate": {"2.5"}})
		webtest.ExpectStatus(t, r, 303)
		got := described()
		for ent, want := range map[string]map[string]float64{
			"{client-id=hog}":                   {"producer_byte_rate": 1024, "consumer_byte_rate": 10 << 20},
			"{user=alice, client-id=<default>}": {"request_percentage": 50},
			"{client-id=<default>}":             {"producer_byte_rate": 1 << 20, "controller_mutation_rate": 2.5},
		} {
			if fmt.Sprint(got[ent]) != fmt.Sprint(want) {
				t.Fatalf("quotas of %s = %v, want %v (all %v)", ent, got[ent], want, got)
			}
		}
		r = admin.Get("/quotas")
		webtest.ExpectContains(t, r, `client id &#34;hog&#34;`, "1.0 KiB/s (1,024 bytes per second)", "10.0 MiB/s (10,485,760 bytes per second)",
			`clients of user &#34;alice&#34;, each by default`, "50 % of one request thread", "every client id (default)", "Produce rate", "Fetch rate", "Request time",
			"Partition mutations", "2.5 partitions created or deleted per second")

		// Bad input: each error beside its field, nothing changed.
		for _, tc := range []struct {
			form  url.Values
			field string
			text  string
		}{
			{url.Values{"entity": {"client"}, "client_id": {""}, "producer_byte_rate": {"1"}}, "client_id", "Enter the client id"},
			{url.Values{"entity": {"user"}, "user": {"bob"}, "producer_byte_rate": {"fast"}}, "producer_byte_rate", "Bytes per second"},
			{url.Values{"entity": {"user"}, "user": {"bob"}, "consumer_byte_rate": {"0"}}, "consumer_byte_rate", "More than 0 bytes per second"},
			{url.Values{"entity": {"user"}, "user": {"bob"}, "request_percentage": {"-5"}}, "request_percentage", "More than 0 percent"},
			{url.Values{"entity": {"user"}, "user": {"bob"}}, "producer_byte_rate", "Set at least one"},
			{url.Values{"entity": {"user"}, "user": {"bob"}, "controller_mutation_rate": {"0"}}, "controller_mutation_rate", "More than 0 partitions per second"},
			{url.Values{"entity": {"user"}, "user": {"bob"}, "controller_mutation_rate": {"many"}}, "controller_mutation_rate", "Partitions per second"},
			{url.Values{"entity": {"user+client"}, "user": {"bob"}, "client_id": {"app"}, "controller_mutation_rate": {"5"}}, "controller_mutation_rate", "A user or a client id alone"},
			{url.Values{"entity": {"default-user"}, "user": {"bob"}, "request_percentage": {"5"}}, "user", "Leave this empty"},
		} {
			r := admin.Post("/quotas", "/quotas", tc.form)
			webtest.ExpectStatus(t, r, 422)
			webtest.ExpectContains(t, r, `<div class="error" id="e-`+tc.field+`">`+tc.text)
		}
		if len(described()) != 3 {
			t.Fatalf("refused forms changed quotas: %v", described())
		}

		// Throttled: client id hog produces over its 1 KiB/s.
		cl := c.Client(kgo.ClientID("hog"), kgo.ProducerBatchMaxBytes(1<<20))
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "hogged"); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// The broker learns of the quota from its store: produce until
		// it throttles.
		testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			if err := cl.ProduceSync(pctx, &kgo.Record{Topic: "hogged", Value: make([]byte, 16<<10)}).FirstErr(); err != nil {
				return err
			}
			r := admin.Get("/quotas")
			if !strings.Contains(r.Text, `<td class="mono">hog</td>`) {
				i := strings.Index(r.Text, `id="throttled"`)
				return fmt.Errorf("hog not listed as throttled: %s", webtest.Snippet(r.Text[i:]))
			}
			// The page read before hog was throttled: it is throttled now.
			if !strings.Contains(r.Text, "throttled now: ") {
				t.Fatalf("hog not shown as throttled lately: %s", webtest.Snippet(r.Text[strings.Index(r.Text, `id="throttled"`):]))
			}
			return nil
		})

		// Delete alice's default client quota.
		r = admin.Post("/quotas", "/quotas/delete", url.Values{"has_user": {"true"}, "user": {"alice"}, "has_client": {"true"}, "client_default": {"1"}})
		webtest.ExpectStatus(t, r, 303)
		if _, ok := described()["{user=alice, client-id=<default>}"]; ok {
			t.Fatalf("alice's quota still there: %v", described())
		}
		webtest.ExpectLacks(t, admin.Get("/quotas"), `<td>clients of user &#34;alice&#34;`)

		sets := audit("quota.set")
		if len(sets) != 3 || sets[0].User != "root" || sets[0].Outcome != "ok" {
			t.Fatalf("quota.set entries %+v", sets)
		}
		var targets []string
		for _, e := range sets {
			targets = append(targets, e.Target+" "+e.Detail)
		}
		if s := strings.Join(targets, "|"); !strings.Contains(s, "client-id=hog producer_byte_rate=1024 consumer_byte_rate=10485760") ||
			!strings.Contains(s, "user=alice, client-id=<default> request_percentage=50") {
			t.Fatalf("quota.set targets %s", s)
		}
		dels := audit("quota.delete")
		if len(dels) != 1 || dels[0].Target != "user=alice, client-id=<default>" || dels[0].Outcome != "ok" {
			t.Fatalf("quota.delete entries %+v", dels)
		}
	})

	t.Run("Preview", func(t *testing.T) {
		// hog has 1 KiB/s produce and 10 MiB/s fetch: the preview shows
		// the one quota set, old -> new; the fetch rate is not touched.
		form := url.Values{"entity": {"client"}, "client_id": {"hog"}, "producer_byte_rate": {"2MiB"}}
		r := admin.Post("/quotas", "/quotas", form)
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, `Set quotas of client id &#34;hog&#34;`, "1.0 KiB/s (1,024 bytes per second)", "2.0 MiB/s (2,097,152 bytes per second)",
			`name="was.producer_byte_rate" value="1024"`, "Apply 1 quota")
		webtest.ExpectLacks(t, r, "10.0 MiB/s")
		// JSON: the same facts.
		token := admin.CSRF("/quotas")
		admin.Accept = "application/json"
		jr := admin.Do("POST", "/quotas", url.Values{"_csrf": {token}, "entity": {"client"}, "client_id": {"hog"}, "producer_byte_rate": {"2MiB"}})
		admin.Accept = ""
		webtest.ExpectStatus(t, jr, 200)
		webtest.ExpectContains(t, jr, `"entity":"client-id=hog"`, `"key":"producer_byte_rate"`, `"old":"1.0 KiB/s (1,024 bytes per second)"`, `"refused":""`)
		if got := described()["{client-id=hog}"]["producer_byte_rate"]; got != 1024 {
			t.Fatalf("a preview changed hog's produce rate to %v", got)
		}
		// Stale: someone sets hog's produce rate after the preview; the
		// apply shows the value now and changes nothing.
		v := 4096.0
		if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("hog")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: v}}}}); err != nil {
			t.Fatal(err)
		}
		sets := len(audit("quota.set"))
		form.Set("apply", "1")
		form.Set("was.producer_byte_rate", "1024")
		r = admin.Post("/quotas", "/quotas", form)
		webtest.ExpectStatus(t, r, 409)
		webtest.ExpectContains(t, r, "producer_byte_rate changed since the preview", "4.0 KiB/s")
		if got := described()["{client-id=hog}"]["producer_byte_rate"]; got != 4096 {
			t.Fatalf("a stale apply set hog's produce rate to %v", got)
		}
		// Applied from a fresh preview.
		form.Set("was.producer_byte_rate", "4096")
		webtest.ExpectStatus(t, admin.Post("/quotas", "/quotas", form), 303)
		if got := described()["{client-id=hog}"]; got["producer_byte_rate"] != 2<<20 || got["consumer_byte_rate"] != 10<<20 {
			t.Fatalf("hog's quotas after the apply: %v", got)
		}
		if got := audit("quota.set"); len(got) != sets+1 || !strings.Contains(got[0].Detail, "producer_byte_rate=2097152") {
			t.Fatalf("quota.set entries after previews and one apply: %+v", got)
		}
	})
}

// TestQuotasPreviewRefused: a set the brokers refuse in validation is
// shown in the preview, with nothing changed and nothing to apply.
func TestQuotasPreviewRefused(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	var applied atomic.Int32
	kc.ControlKey(kmsg.AlterClientQuotas.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.AlterClientQuotasRequest)
		if !req.ValidateOnly {
			applied.Add(1)
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, c := range e.Entity {
				rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
				rc.Type, rc.Name = c.Type, c.Name
				re.Entity = append(re.Entity, rc)
			}
			re.ErrorCode = kerr.InvalidRequest.Code
			re.ErrorMessage = kmsg.StringPtr("Quota producer_byte_rate above the cluster's limit")
			resp.Entries = append(resp.Entries, re)
		}
		return resp, nil, true
	})
	consoledb.BcryptCost = bcrypt.MinCost
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Brokers: kc.ListenAddrs(), Logger: webtest.Logger(),
		Extra: []web.PageGroup{quotas.PageGroup(quotas.Options{})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := srv.Store().CreateUser(context.Background(), "root", web.RoleAdmin, "password-1"); err != nil {
		t.Fatal(err)
	}
	admin := webtest.NewClient(t, srv.App())
	admin.SignIn("root", "password-1")
	r := admin.Post("/quotas", "/quotas", url.Values{"entity": {"client"}, "client_id": {"hog"}, "producer_byte_rate": {"1TiB"}})
	webtest.ExpectStatus(t, r, 422)
	webtest.ExpectContains(t, r, "The brokers refuse this change", "above the cluster&#39;s limit", "Nothing was changed.")
	webtest.ExpectLacks(t, r, `name="apply"`)
	if n := applied.Load(); n != 0 {
		t.Fatalf("%d AlterClientQuotas requests without validate_only", n)
	}
	entries, _, err := srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "quota.", Limit: 10})
	if err != nil || len(entries) != 0 {
		t.Fatalf("audit after a refused preview: %v %+v", err, entries)
	}
}

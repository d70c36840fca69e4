package e2e

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

// TestConsoleBrokerConfigs edits the dynamic configs of a Sluice broker
// from its console page: a key the broker reads only at start is refused
// with the broker's own words beside the field; a cluster-wide default is
// previewed ("cluster default" after) and applied, and the broker then
// describes it as DYNAMIC_DEFAULT_BROKER_CONFIG; the broker's own override
// wins over it, and deleting that override is previewed as falling back to
// the cluster default. (Here, not in package web: web's tests run against
// kfake, whose messages are not the broker's.)
func TestConsoleBrokerConfigs(t *testing.T) {
	c := testcluster.New(t)
	consoledb.BcryptCost = bcrypt.MinCost
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir()), Brokers: c.Addrs(), Logger: webtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := srv.Store().CreateUser(context.Background(), "olga", web.RoleOperator, "password-1"); err != nil {
		t.Fatal(err)
	}
	op := webtest.NewClient(t, srv.App())
	op.SignIn("olga", "password-1")
	id := c.Node(0).ID()
	page := "/brokers/" + strconv.Itoa(int(id))
	post := func(form url.Values) webtest.Response {
		t.Helper()
		return op.Post(page, page+"/configs", form)
	}
	want := func(r webtest.Response, status int, texts ...string) {
		t.Helper()
		if r.StatusCode != status {
			t.Fatalf("status %d, want %d: %s", r.StatusCode, status, r.Text)
		}
		for _, s := range texts {
			if !strings.Contains(r.Text, s) {
				t.Fatalf("the page lacks %q: %s", s, r.Text)
			}
		}
	}
	inForce := func(name string) (string, kmsg.ConfigSource) {
		t.Helper()
		rcs, err := c.Admin().DescribeBrokerConfigs(context.Background(), id)
		if err != nil || len(rcs) != 1 {
			t.Fatalf("describe: %v %v", rcs, err)
		}
		for _, cfg := range rcs[0].Configs {
			if cfg.Key == name {
				return cfg.MaybeValue(), cfg.Source
			}
		}
		t.Fatalf("broker %d does not describe %s", id, name)
		return "", 0
	}

	r := op.Get(page)
	want(r, http.StatusOK, `id="dyn-broker-form"`, `name="cfg.message.max.bytes"`)

	// A key read at start: the broker's refusal, beside the field.
	r = post(url.Values{"scope": {"broker"}, "newkey": {"log.dirs"}, "newvalue": {"/elsewhere"}})
	want(r, http.StatusUnprocessableEntity, "log.dirs cannot be changed while the broker runs", "restart the broker", `value="/elsewhere"`, `role="alert"`)
	// A value out of its key's range: refused by the broker too.
	r = post(url.Values{"scope": {"broker"}, "cfg.message.max.bytes": {"-5"}, "was.message.max.bytes": {""}})
	want(r, http.StatusUnprocessableEntity, "Refused:", "message.max.bytes")
	if v, src := inForce("log.dirs"); strings.Contains(v, "elsewhere") || src == kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("log.dirs changed: %s %v", v, src)
	}

	// The cluster-wide default: previewed, applied.
	def := url.Values{"scope": {"default"}, "cfg.log.retention.ms": {"2h"}, "was.log.retention.ms": {""}}
	r = post(def)
	want(r, http.StatusOK, "Change the cluster-wide defaults", "7200000", "cluster default", "Every broker without its own override takes it.")
	def.Set("apply", "1")
	def.Set("cfg.log.retention.ms", "7200000")
	r = post(def)
	want(r, http.StatusSeeOther)
	if v, src := inForce("log.retention.ms"); v != "7200000" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("log.retention.ms after the default: %s %v", v, src)
	}
	r = op.Get(page)
	want(r, http.StatusOK, "Saved (cluster default): log.retention.ms=7200000.")

	// The broker's own override wins; deleting it falls back to the default.
	own := url.Values{"scope": {"broker"}, "apply": {"1"}, "cfg.log.retention.ms": {"3600000"}, "was.log.retention.ms": {""}}
	want(post(own), http.StatusSeeOther)
	if v, src := inForce("log.retention.ms"); v != "3600000" || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("log.retention.ms after the broker's override: %s %v", v, src)
	}
	r = post(url.Values{"scope": {"default"}, "cfg.log.retention.ms": {"3h"}, "was.log.retention.ms": {"7200000"}})
	want(r, http.StatusOK, "This broker&#39;s own override stays in force")
	r = post(url.Values{"scope": {"broker"}, "cfg.log.retention.ms": {""}, "was.log.retention.ms": {"3600000"}})
	want(r, http.StatusOK, "deleted", "7200000", "cluster default")
	r = post(url.Values{"scope": {"broker"}, "apply": {"1"}, "cfg.log.retention.ms": {"3600000"}, "was.log.retention.ms": {"3600000"}, "reset.log.retention.ms": {"1"}})
	want(r, http.StatusSeeOther)
	if v, src := inForce("log.retention.ms"); v != "7200000" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("log.retention.ms after deleting the override: %s %v", v, src)
	}
	es, _, err := srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: "broker.configs", Limit: 10})
	if err != nil || len(es) != 3 {
		t.Fatalf("audit: %+v %v", es, err)
	}
}

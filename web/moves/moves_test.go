package moves_test

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/moves"
	"github.com/sluice-io/sluice/web/webtest"
)

// console is a console with the moves page over a cluster.
type console struct {
	t   *testing.T
	srv *web.Server
}

func newConsole(t *testing.T, brokers []string, o moves.Options) *console {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	srv, err := web.New(web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Brokers: brokers,
		Logger:  webtest.Logger(),
		Extra:   []web.PageGroup{moves.PageGroup(o)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Started: the page group's background work (the cleaner) runs.
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &console{t: t, srv: srv}
}

func (c *console) signedIn(name string, role web.Role) *webtest.Client {
	c.t.Helper()
	if _, err := c.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		c.t.Fatal(err)
	}
	cl := webtest.NewClient(c.t, c.srv.App())
	cl.SignIn(name, "password-1")
	return cl
}

func (c *console) audit(action string) []consoledb.AuditEntry {
	c.t.Helper()
	entries, _, err := c.srv.Store().Audit(context.Background(), consoledb.AuditFilter{Action: action, Limit: 100})
	if err != nil {
		c.t.Fatal(err)
	}
	return entries
}

var planRe = regexp.MustCompile(`name="plan" value="([0-9a-f]+)"`)

// TestMovesPage drives the page against one in-process broker: who may
// use it, the list and its JSON, the preview of each move with its
// errors beside the fields, a start refused when the plan changed, and the
// cleaner removing a recorded throttle once nothing moves.
func TestMovesPage(t *testing.T) {
	c := testcluster.New(t)
	c.CreateTopic("orders", 2, 1, nil)
	id := c.Node(0).ID()
	ids := strconv.Itoa(int(id))
	con := newConsole(t, []string{c.Addr()}, moves.Options{CleanupInterval: time.Hour})
	op := con.signedIn("op", web.RoleOperator)

	t.Run("Roles", func(t *testing.T) {
		viewer := con.signedIn("viewer", web.RoleViewer)
		webtest.ExpectStatus(t, viewer.Get("/moves"), 403)
		token := viewer.CSRF("/account")
		for _, path := range []string{"/moves/preview", "/moves/start", "/moves/cancel"} {
			r := viewer.Do("POST", path, url.Values{"_csrf": {token}, "kind": {"drain"}, "broker": {ids}, "all": {"1"}})
			webtest.ExpectStatus(t, r, 403)
		}
		webtest.ExpectLacks(t, viewer.Get("/account"), `href="/moves"`)
		webtest.ExpectContains(t, op.Get("/account"), `href="/moves"`)
		// Without the CSRF token, an operator's post is refused too.
		webtest.ExpectStatus(t, op.Do("POST", "/moves/cancel", url.Values{"all": {"1"}}), 403)
		if got := con.audit("moves."); len(got) != 0 {
			t.Fatalf("refused requests were audited as moves: %+v", got)
		}
	})

	t.Run("List", func(t *testing.T) {
		r := op.Get("/moves")
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "No partition moves in progress", `id="move-topic"`, `id="move-add"`, `id="move-drain"`,
			`id="move-drain-broker"`, `id="move-topic-throttle"`, `hx-get="/moves"`, `<option value="orders"`)
		var out struct {
			Moves     []json.RawMessage `json:"moves"`
			Total     int64             `json:"bytes_total"`
			Throttled []string          `json:"throttled_topics"`
		}
		webtest.ExpectStatus(t, op.GetJSON("/moves", &out), 200)
		if out.Moves == nil || len(out.Moves) != 0 || out.Throttled == nil {
			t.Fatalf("JSON %+v", out)
		}
		op.Headers["HX-Request"], op.Headers["HX-Target"] = "true", "moves-progress"
		r = op.Get("/moves")
		delete(op.Headers, "HX-Request")
		delete(op.Headers, "HX-Target")
		webtest.ExpectContains(t, r, "No partition moves in progress")
		webtest.ExpectLacks(t, r, `id="move-topic"`, "<html")
	})

	t.Run("Preview", func(t *testing.T) {
		// Already on the chosen broker: nothing to move, nothing to confirm.
		r := op.Post("/moves", "/moves/preview", url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}})
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "Reassign topic orders", "Nothing to move")
		webtest.ExpectLacks(t, r, `id="move-confirm"`)
		// Adding the only broker: it already holds everything.
		r = op.Post("/moves", "/moves/preview", url.Values{"kind": {"add"}, "broker": {ids}, "throttle": {"1MiB"}})
		webtest.ExpectStatus(t, r, 200)
		webtest.ExpectContains(t, r, "Add broker "+ids, "Nothing to move")

		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"kind": {"drain"}, "broker": {ids}}, "cannot move off broker " + ids},
			{url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}, "rf": {"2"}}, "needs at least 2 brokers"},
			{url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {"x"}}, "is not a broker id"},
			{url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {""}}, "Give the brokers"},
			{url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {"77"}}, "Broker 77 is not live"},
			{url.Values{"kind": {"topic"}, "topic": {"nope"}, "brokers": {ids}}, "nope"},
			{url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}, "rf": {"0"}}, "replication factor of 1 or more"},
			{url.Values{"kind": {"add"}, "broker": {"77"}}, "Broker 77 is not live"},
			{url.Values{"kind": {"drain"}, "broker": {ids}, "throttle": {"-5"}}, "Bytes per second"},
			{url.Values{"kind": {"drain"}, "broker": {ids}, "throttle": {"0"}}, "More than 0 bytes per second"},
			{url.Values{"kind": {"drain"}, "broker": {"me"}}, "Choose a broker"},
			{url.Values{"kind": {"bogus"}}, "Choose a move"},
		} {
			r := op.Post("/moves", "/moves/preview", tc.form)
			if r.StatusCode != 422 && r.StatusCode != 404 {
				t.Errorf("%v: status %d", tc.form, r.StatusCode)
			}
			webtest.ExpectContains(t, r, tc.want)
		}
		if got := con.audit("moves."); len(got) != 0 {
			t.Fatalf("previews were audited as moves: %+v", got)
		}
	})

	t.Run("StaleStart", func(t *testing.T) {
		// A start whose plan is not the one computed now shows the new plan.
		r := op.Post("/moves", "/moves/start", url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}, "plan": {"0123"}})
		webtest.ExpectStatus(t, r, 409)
		webtest.ExpectContains(t, r, "The cluster changed since the preview")
		// The plan it shows starts (nothing to move here).
		r = op.Post("/moves", "/moves/preview", url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}})
		h := planRe.FindStringSubmatch(r.Text)
		if h != nil {
			t.Fatalf("a preview with nothing to move offers a confirmation")
		}
		var pv struct {
			Plan  string            `json:"plan"`
			Steps []json.RawMessage `json:"steps"`
		}
		token := op.CSRF("/account")
		op.Accept = "application/json"
		r = op.Do("POST", "/moves/preview", url.Values{"_csrf": {token}, "kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}})
		op.Accept = ""
		if err := json.Unmarshal([]byte(r.Text), &pv); err != nil || pv.Plan == "" || pv.Steps == nil {
			t.Fatalf("JSON preview %v: %s", err, r.Text)
		}
		r = op.Post("/moves", "/moves/start", url.Values{"kind": {"topic"}, "topic": {"orders"}, "brokers": {ids}, "plan": {pv.Plan}})
		webtest.ExpectStatus(t, r, 303)
	})

	t.Run("Cancel", func(t *testing.T) {
		r := op.Post("/moves", "/moves/cancel", url.Values{"all": {"1"}})
		webtest.ExpectStatus(t, r, 303)
		webtest.ExpectStatus(t, op.Post("/moves", "/moves/cancel", url.Values{"topic": {"orders"}, "partition": {"x"}}), 400)
		// Cancelling a partition that does not move: Kafka's
		// NO_REASSIGNMENT_IN_PROGRESS, audited as failed.
		r = op.Post("/moves", "/moves/cancel", url.Values{"topic": {"orders"}, "partition": {"0"}})
		webtest.ExpectStatus(t, r, 303)
		got := con.audit("moves.cancel")
		if len(got) != 1 || got[0].Target != "orders-0" || got[0].Outcome == "ok" {
			t.Fatalf("audit of the cancel %+v", got)
		}
	})

	t.Run("Cleaner", func(t *testing.T) {
		// A throttle recorded by the page, its move ended: the cleaner
		// removes it from the topic and the broker, and forgets it; a
		// recorded topic deleted meanwhile is forgotten.
		adm := c.Admin()
		ctx := context.Background()
		v := "0:" + ids
		if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: config.LeaderThrottledReplicas, Value: &v}}, "orders"); err != nil {
			t.Fatal(err)
		}
		rate := "1048576"
		if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: config.LeaderThrottledRate, Value: &rate}}, id); err != nil {
			t.Fatal(err)
		}
		store := con.srv.Store()
		for _, k := range []string{"moves.throttle.topic:orders", "moves.throttle.topic:gone", "moves.throttle.rates"} {
			if err := store.SetSetting(ctx, k, rate); err != nil {
				t.Fatal(err)
			}
		}
		webtest.ExpectContains(t, op.Get("/moves"), `id="moves-throttled"`, "gone, orders")
		cl := moves.Cleaner{Admin: func() *kadm.Client { return adm }, Store: store, Leader: func() bool { return true }, Logger: webtest.Logger()}
		// A move starting (a record younger than the grace): left alone.
		if err := store.SetSetting(ctx, "moves.throttle.topic:orders", strconv.FormatInt(time.Now().UnixMilli(), 10)+" "+rate); err != nil {
			t.Fatal(err)
		}
		cl.Grace = time.Minute
		if err := cl.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if left, _ := store.SettingsWithPrefix(ctx, "moves."); len(left) != 3 {
			t.Fatalf("a round within the grace removed records: %v", left)
		}
		cl.Grace = 0
		if err := cl.Round(ctx); err != nil {
			t.Fatal(err)
		}
		left, err := store.SettingsWithPrefix(ctx, "moves.")
		if err != nil || len(left) != 0 {
			t.Fatalf("records left %v %v", left, err)
		}
		tc, err := adm.DescribeTopicConfigs(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range tc[0].Configs {
			if cfg.Key == config.LeaderThrottledReplicas && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("orders keeps %s=%v", cfg.Key, cfg.MaybeValue())
			}
		}
		bc, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range bc[0].Configs {
			if cfg.Key == config.LeaderThrottledRate && cfg.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("broker keeps %s=%v from %v", cfg.Key, cfg.MaybeValue(), cfg.Source)
			}
		}
	})
}

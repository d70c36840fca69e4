package schemas

import (
	"context"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

type fixedLeader struct {
	leading bool
	url     atomic.Value
}

func (l *fixedLeader) IsLeader() bool { return l.leading }
func (l *fixedLeader) LeaderURL() string {
	u, _ := l.url.Load().(string)
	return u
}

// TestDeleteOnFollowerHost: on a host whose registry is not the leader,
// the subject page offers the delete and says it is forwarded; the delete
// goes to the leader (whose registry checks credentials; the hosts share a
// key) and the page answers with this host's view already showing it.
func TestDeleteOnFollowerHost(t *testing.T) {
	ctx := context.Background()
	log := schemareg.NewMemLog()
	key := []byte("0123456789abcdef0123456789abcdef")
	auth := func(context.Context, string, string) (schemareg.Role, error) { return schemareg.RoleNone, nil } // no user may write
	la, lb := &fixedLeader{leading: true}, &fixedLeader{}
	leader := schemareg.New(schemareg.Config{Log: log, Leader: la, Auth: auth, PeerKey: key})
	follower := schemareg.New(schemareg.Config{Log: log, Leader: lb, Auth: auth, PeerKey: key})
	for _, r := range []*schemareg.Registry{leader, follower} {
		r.Start(ctx)
		t.Cleanup(func() { r.Close() })
	}
	srv := httptest.NewServer(leader.Handler())
	t.Cleanup(srv.Close)
	la.url.Store(srv.URL)
	lb.url.Store(srv.URL)
	for _, s := range []string{avroV1, avroV2} {
		if _, err := leader.Register(ctx, "orders-value", schemareg.SchemaRequest{Schema: s}); err != nil {
			t.Fatal(err)
		}
	}

	console, err := web.New(web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: filepath.Join(t.TempDir()),
		Brokers: webtest.Kfake(t, "schemas-test"),
		Logger:  webtest.Logger(),
		Extra: []web.PageGroup{PageGroup(func() Registry { return follower },
			func(context.Context) ([]string, error) { return []string{"orders"}, nil })},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { console.Close() })
	e := &env{srv: console, reg: follower}
	op := e.signedIn(t, "op", web.RoleOperator)

	r := op.Get("/schemas/orders-value")
	webtest.ExpectContains(t, r, "a delete is forwarded to the registry&#39;s leader, "+srv.URL, `action="/schemas/orders-value/delete"`)
	r = op.Post("/schemas/orders-value", "/schemas/orders-value/delete", url.Values{"version": {"2"}, "confirm": {"orders-value"}})
	webtest.ExpectStatus(t, r, 303)
	for name, reg := range map[string]*schemareg.Registry{"follower": follower, "leader": leader} {
		if vs := reg.SubjectVersions("orders-value"); len(vs) != 2 || !vs[1].Deleted {
			t.Fatalf("%s after the delete on the follower's console: %+v", name, vs)
		}
	}
	webtest.ExpectContains(t, op.Get("/schemas/orders-value"), "Version 2 of orders-value deleted (soft).")

	// the leader's refusal comes back as the page's note
	r = op.Post("/schemas/orders-value", "/schemas/orders-value/delete", url.Values{"version": {"1"}, "confirm": {"orders-value"}, "permanent": {"1"}})
	webtest.ExpectStatus(t, r, 303)
	webtest.ExpectContains(t, op.Get("/schemas/orders-value"), "Not deleted:", "not deleted first")
}

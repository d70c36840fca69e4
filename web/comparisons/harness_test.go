package comparisons_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/comparisons"
	"github.com/sluice-io/sluice/web/webtest"
)

// The handler tests drive a real console (web.New, through app.Test) with
// the comparisons page group mounted as the appliance mounts it, over a
// real migration.Manager in the console's own database, against a private
// kfake cluster.

type harness struct {
	srv     *web.Server
	mgr     *migration.Manager
	brokers []string
}

func kfakeBrokers(t testing.TB) []string {
	t.Helper()
	return webtest.Kfake(t, "sluice-cmp-test")
}

// newHarness builds the console with the group owning its Manager (the
// PageGroup(nil, ...) path); opts may change the page options.
func newHarness(t testing.TB, brokers []string, opts ...func(*comparisons.Options)) *harness {
	t.Helper()
	consoledb.BcryptCost = bcrypt.MinCost
	h := &harness{brokers: brokers}
	o := comparisons.Options{
		Manager:   migration.ManagerOptions{Brokers: brokers, CheckpointInterval: 100 * time.Millisecond, RetryMin: 200 * time.Millisecond},
		OnManager: func(m *migration.Manager) { h.mgr = m },
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := web.New(web.Config{
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Brokers: brokers,
		Logger:  webtest.Logger(),
		Extra:   []web.PageGroup{comparisons.PageGroup(nil, o)},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	if h.mgr == nil {
		t.Fatal("PageGroup did not hand over the Manager it built")
	}
	t.Cleanup(func() {
		// Not started (app.Test only): the group's Run never ran, so the
		// Manager it built is closed here; Close is idempotent.
		h.mgr.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close console: %v", err)
		}
	})
	return h
}

// client drives the console in process (app.Test), keeping cookies; see
// webtest.Client.
type (
	client   = webtest.Client
	response = webtest.Response
)

var (
	snippet        = webtest.Snippet
	expectStatus   = webtest.ExpectStatus
	expectContains = webtest.ExpectContains
)

var userSeq atomic.Int64

func (h *harness) client(t testing.TB) *client { return webtest.NewClient(t, h.srv.App()) }

// signedIn returns a client signed in through the form as a new user with
// role.
func (h *harness) signedIn(t testing.TB, role web.Role) *client {
	t.Helper()
	name := fmt.Sprintf("%s%d", role, userSeq.Add(1))
	if _, err := h.srv.Store().CreateUser(context.Background(), name, role, "password-1"); err != nil {
		t.Fatal(err)
	}
	c := h.client(t)
	c.SignIn(name, "password-1")
	return c
}

// ---- the cluster ----

// order is one record of the generated order streams.
type order struct {
	key   string
	value string
}

// orderStreams creates left and right and writes n orders keyed o-0001...
// to both, the right copy 3 ms later with its own processed_at (a field the
// comparisons ignore). The right side also differs where change says (key
// -> new value, "" drops the record), and extra records are appended to it.
func orderStreams(t testing.TB, brokers []string, left, right string, partitions int32, n int, change map[string]string, extra []order) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopics(ctx, partitions, 1, nil, left, right)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("o-%04d", i)
		ts := base.Add(time.Duration(i) * time.Millisecond)
		v := orderValue(i, float64(i)*1.5, ts)
		recs = append(recs, &kgo.Record{Topic: left, Key: []byte(key), Value: []byte(v), Timestamp: ts})
		// The new service stamps its own processing time.
		rv := orderValue(i, float64(i)*1.5, ts.Add(3*time.Millisecond))
		if c, ok := change[key]; ok {
			if c == "" {
				continue
			}
			rv = c
		}
		recs = append(recs, &kgo.Record{Topic: right, Key: []byte(key), Value: []byte(rv), Timestamp: ts.Add(3 * time.Millisecond)})
	}
	for i, e := range extra {
		recs = append(recs, &kgo.Record{Topic: right, Key: []byte(e.key), Value: []byte(e.value), Timestamp: base.Add(time.Duration(n+i+1) * time.Millisecond)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func orderValue(i int, total float64, at time.Time) string {
	return fmt.Sprintf(`{"order":{"id":"o-%04d","total":%g,"items":[{"sku":"tea","qty":%d}]},"processed_at":%q}`, i, total, i%5+1, at.Format(time.RFC3339Nano))
}

// waitState polls the manager until comparison id reaches state.
func (h *harness) waitState(t testing.TB, id int64, want migration.State) migration.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := h.mgr.Get(context.Background(), id)
		if err == nil && st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("comparison %d: state %s (%s, err %v), want %s", id, st.State, st.Error, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceMore appends n more orders, numbered from first, to both sides,
// equal (up to processed_at) and stamped now.
func produceMore(t testing.TB, brokers []string, left, right string, first, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	now := time.Now().Truncate(time.Millisecond)
	for i := first; i < first+n; i++ {
		key := fmt.Sprintf("o-%04d", i)
		recs = append(recs,
			&kgo.Record{Topic: left, Key: []byte(key), Value: []byte(orderValue(i, float64(i)*1.5, now)), Timestamp: now},
			&kgo.Record{Topic: right, Key: []byte(key), Value: []byte(orderValue(i, float64(i)*1.5, now.Add(time.Millisecond))), Timestamp: now.Add(time.Millisecond)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

package alerting

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
)

// replicated starts a replica of log on e's database.
func (e *testEnv) replicated(t *testing.T, log consoledb.Log, lock consoledb.Lock, host int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := consoledb.NewConsole(ctx, e.db); err != nil { // every replicated table must exist
		t.Fatal(err)
	}
	rep, err := consoledb.StartReplica(ctx, e.db, consoledb.ReplicaConfig{Log: log, Lock: lock, Host: host,
		ProbeInterval: 50 * time.Millisecond, UnreachableAfter: time.Second, WaitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Close() })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) outbox(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(`SELECT count(*) FROM alert_outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Two consoles share their alert state through the console topic. The one
// that leads fires and delivers; the one that takes over neither triggers
// again what was delivered nor forgets to resolve it, and delivers what the
// previous leader queued but did not send.
func TestFailoverKeepsAlertState(t *testing.T) {
	log, lock := consoledb.NewMemLog(), consoledb.NewMutexLock()
	key := make([]byte, 32)
	rand.Read(key)
	var lagging atomic.Int64
	var leaderA, leaderB atomic.Bool
	src := LagFunc(func(context.Context) ([]GroupLag, error) {
		return []GroupLag{{Group: "billing", State: "Stable", Members: 1,
			Partitions: []PartitionLag{{Topic: "orders", Partition: 0, Lag: lagging.Load()}}}}, nil
	})
	env := func(leader *atomic.Bool, host int32) *testEnv {
		e := newTestService(t, func(c *Config) {
			c.Key = key
			c.Leader = leader.Load
			c.Sources = Sources{Lag: src}
		})
		e.replicated(t, log, lock, host)
		return e
	}
	leaderA.Store(true)
	a, b := env(&leaderA, 1), env(&leaderB, 2)
	pd := newReceiver(t, 202)
	n := a.pagerDuty(t, pd, "0123456789abcdef0123456789abcdef")
	a.rule(t, Rule{Name: "billing lag", Kind: KindLagRecords, Severity: SeverityCritical, Threshold: 10, NotifierIDs: []int64{n.ID}})

	lagging.Store(100)
	a.evaluate(t)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := len(pd.accepted("event_action", "trigger")); got != 1 {
			return errorf("%d triggers", got)
		}
		if a.outbox(t)+b.outbox(t) != 0 {
			return errorf("outbox not empty on both hosts yet")
		}
		return nil
	})

	// A takes its leave; B leads, with the alert firing in its database.
	leaderA.Store(false)
	leaderB.Store(true)
	alerts, err := b.svc.Alerts(context.Background())
	if err != nil || len(alerts) != 1 || alerts[0].State != StateFiring {
		t.Fatalf("open alerts on the new leader: %+v %v", alerts, err)
	}
	for range 3 {
		b.evaluate(t)
	}
	time.Sleep(300 * time.Millisecond)
	if got := len(pd.accepted("event_action", "trigger")); got != 1 {
		t.Fatalf("%d triggers after the takeover, want the one the old leader sent", got)
	}
	lagging.Store(0)
	b.evaluate(t)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := len(pd.accepted("event_action", "resolve")); got != 1 {
			return errorf("%d resolves", got)
		}
		// Delivered, and its outbox row deleted everywhere (the row goes
		// once the delivery has finished, just after the receiver has it).
		if a.outbox(t)+b.outbox(t) != 0 {
			return errorf("outbox not empty on both hosts yet")
		}
		return nil
	})

	// B evaluates and fires again, but stops leading before it delivers:
	// the notification waits in the outbox, and A, leading again,
	// delivers it.
	leaderB.Store(false)
	lagging.Store(100)
	b.evaluate(t)
	if b.outbox(t) != 1 {
		t.Fatalf("outbox %d after a round that fired, want 1", b.outbox(t))
	}
	leaderA.Store(true)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := len(pd.accepted("event_action", "trigger")); got != 2 {
			return errorf("%d triggers", got)
		}
		if a.outbox(t)+b.outbox(t) != 0 {
			return errorf("outbox not empty on both hosts yet")
		}
		return nil
	})
}

// Secrets sealed with a host's own key file by an older Sluice are
// resealed with the cluster key, and the old file is set aside.
func TestResealWithClusterKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "host.key")
	pd := newReceiver(t, 202)
	const secret = "fedcba9876543210fedcba9876543210"
	e := newTestService(t, func(c *Config) { c.KeyFile = keyFile })
	n := e.pagerDuty(t, pd, secret)
	e.svc.Close()

	cluster := make([]byte, 32)
	rand.Read(cluster)
	svc, err := New(context.Background(), Config{DB: e.db, KeyFile: keyFile, Key: cluster, AllowedTargets: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the host key file is still in use: %v", err)
	}
	if _, err := os.Stat(keyFile + ".replaced"); err != nil {
		t.Fatal(err)
	}
	got, plain, err := svc.notifierWithSecret(context.Background(), n.ID)
	if err != nil || plain != secret || got.ID != n.ID {
		t.Fatalf("secret under the cluster key: %q %v", plain, err)
	}
}

// Acknowledgements and silences are shared state: an alert acknowledged on
// a console that does not lead reaches PagerDuty from the one that does,
// and shows acknowledged on both; a silence made on one host holds the
// trigger back on the host that leads after a failover, until it is ended
// (on yet another host).
func TestFailoverKeepsAcksAndSilences(t *testing.T) {
	log, lock := consoledb.NewMemLog(), consoledb.NewMutexLock()
	key := make([]byte, 32)
	rand.Read(key)
	var billingLag, paymentsLag atomic.Int64
	var leaderA, leaderB atomic.Bool
	src := LagFunc(func(context.Context) ([]GroupLag, error) {
		return append(group("billing", billingLag.Load()), group("payments", paymentsLag.Load())...), nil
	})
	env := func(leader *atomic.Bool, host int32) *testEnv {
		e := newTestService(t, func(c *Config) {
			c.Key = key
			c.Leader = leader.Load
			c.Sources = Sources{Lag: src}
		})
		e.replicated(t, log, lock, host)
		return e
	}
	leaderA.Store(true)
	a, b := env(&leaderA, 1), env(&leaderB, 2)
	ctx := context.Background()
	pd := newReceiver(t, 202)
	n := a.pagerDuty(t, pd, pdKey)
	rule := a.rule(t, Rule{Name: "lag", Kind: KindLagRecords, Severity: SeverityCritical, Threshold: 10, NotifierIDs: []int64{n.ID}})
	triggers := func(want int) error {
		if got := len(pd.accepted("event_action", "trigger")); got != want {
			return errorf("%d triggers, want %d", got, want)
		}
		return nil
	}

	billingLag.Store(100)
	a.evaluate(t)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error { return triggers(1) })

	// Acknowledged on B, which does not lead: A sends the acknowledge.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if openAlerts(t, b)["lag group:billing"].State != StateFiring {
			return errorf("the firing alert is not on host B yet")
		}
		return nil
	})
	if err := b.svc.Acknowledge(ctx, rule.ID, "group:billing", "bob", "looking"); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := len(pd.accepted("event_action", "acknowledge")); got != 1 {
			return errorf("%d acknowledge events", got)
		}
		if a.outbox(t)+b.outbox(t) != 0 {
			return errorf("outbox not empty on both hosts yet")
		}
		return nil
	})
	for name, e := range map[string]*testEnv{"A": a, "B": b} {
		if al := openAlerts(t, e)["lag group:billing"]; al.AckedBy != "bob" || al.AckComment != "looking" {
			t.Errorf("host %s: alert %+v, want acknowledged by bob", name, al)
		}
		if firing, unacked, err := e.svc.OpenCounts(ctx); err != nil || firing != 1 || unacked != 0 {
			t.Errorf("host %s: %d firing, %d unacknowledged (%v)", name, firing, unacked, err)
		}
	}

	// Silenced on A; then B leads and the condition starts to hold: the
	// trigger is held back.
	x, err := a.svc.CreateSilence(ctx, Silence{Subject: "group:payments", CreatedBy: "alice", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		ss, err := b.svc.Silences(ctx, 0)
		if err != nil || len(ss) != 1 || ss[0].ID != x.ID || !ss[0].Active(time.Now()) {
			return errorf("silences on host B: %+v %v", ss, err)
		}
		return nil
	})
	leaderA.Store(false)
	leaderB.Store(true)
	paymentsLag.Store(100)
	for range 3 {
		b.evaluate(t)
	}
	time.Sleep(300 * time.Millisecond)
	if err := triggers(1); err != nil {
		t.Fatalf("silenced: %v", err)
	}
	if al := openAlerts(t, b)["lag group:payments"]; al.State != StateFiring || al.Notified || al.Silence == nil {
		t.Fatalf("silenced alert on the new leader: %+v", al)
	}

	// Ended on A: the next round on B sends the trigger it held back.
	if err := a.svc.EndSilence(ctx, x.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		ss, err := b.svc.Silences(ctx, 0)
		if err != nil || len(ss) != 1 || ss[0].Active(time.Now()) {
			return errorf("the ended silence is not on host B yet: %+v %v", ss, err)
		}
		return nil
	})
	b.evaluate(t)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error { return triggers(2) })
}

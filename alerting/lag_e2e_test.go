package alerting

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// kafkaSeeds returns the bootstrap addresses the end-to-end test runs
// against: SLUICE_ALERTING_TEST_BROKERS (comma-separated) when set, so the
// same test can be pointed at a real Sluice broker, else an in-process kfake
// cluster on a free loopback port.
func kafkaSeeds(t *testing.T) []string {
	t.Helper()
	if s := os.Getenv("SLUICE_ALERTING_TEST_BROKERS"); s != "" {
		return strings.Split(s, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(testutil.FreePort(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestLagRuleTriggersOnceAndResolves drives a real franz-go consumer group:
// while it keeps up, nothing is sent; when it stops consuming, the lag rule
// sends exactly one PagerDuty trigger (and one webhook "firing"); when it
// comes back and catches up, exactly one resolve with the same dedup_key.
func TestLagRuleTriggersOnceAndResolves(t *testing.T) {
	testutil.Heavy(t, "lag rounds on a real broker, ~6 s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seeds := kafkaSeeds(t)
	topic := fmt.Sprintf("orders-%d", rand.Uint32())
	group := fmt.Sprintf("billing-%d", rand.Uint32())

	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// A producer writes ~200 records/s for the whole test.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	pctx, pstop := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			prod.Produce(pctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte("order")}, nil)
		}
	}()
	defer func() { pstop(); pwg.Wait() }()

	// consumer runs a member of the group that commits after every poll
	// until stopped.
	consumer := func() (stop func()) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				if fs.IsClientClosed() {
					return
				}
				if err := cl.CommitUncommittedOffsets(cctx); err != nil && cctx.Err() == nil {
					t.Logf("commit: %v", err)
				}
			}
		}()
		return func() {
			ccancel()
			<-done
			cl.Close() // leaves the group: it is Empty while stopped
		}
	}

	pd := newReceiver(t, 202)
	hook := newReceiver(t, 200)
	env := newTestService(t, func(c *Config) {
		c.Evaluate = true
		c.Interval = 100 * time.Millisecond
		c.Sources.Lag = KadmLag(adm) // the lead can swap in package lag's collector here
	})
	pdn := env.pagerDuty(t, pd, "0123456789abcdef0123456789abcdef")
	hn := env.webhook(t, hook, "")
	rule := env.rule(t, Rule{
		Name: "billing lag", Kind: KindLagRecords, Severity: SeverityCritical, Threshold: 400,
		For: 500 * time.Millisecond, ClearFor: 500 * time.Millisecond,
		Scope: Scope{Pattern: group}, NotifierIDs: []int64{pdn.ID, hn.ID},
	})

	stop := consumer()
	// Keeping up: the group's lag stays under the threshold over many rounds.
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		lags, err := adm.Lag(ctx, group)
		if err != nil {
			return err
		}
		l := lags[group]
		if l.State != "Stable" || len(l.Lag) == 0 {
			return fmt.Errorf("group %s not consuming yet (state %q)", group, l.State)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond)
	if n := len(pd.requests()); n != 0 {
		t.Fatalf("a consuming group caused %d PagerDuty requests", n)
	}

	stop()
	stopped := time.Now()
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if n := len(pd.accepted("event_action", "trigger")); n != 1 {
			return fmt.Errorf("%d triggers", n)
		}
		return nil
	})
	t.Logf("trigger %v after the consumer stopped", time.Since(stopped).Round(time.Millisecond))
	time.Sleep(800 * time.Millisecond) // several more rounds while the lag stays high
	triggers := pd.accepted("event_action", "trigger")
	if len(triggers) != 1 {
		t.Fatalf("%d triggers while the group stayed stopped, want exactly 1", len(triggers))
	}
	key, _ := triggers[0].Decoded["dedup_key"].(string)
	if want := fmt.Sprintf("sluice/rule-%d/group:%s", rule.ID, group); key != want {
		t.Errorf("dedup_key %q, want %q", key, want)
	}
	alerts, err := env.svc.Alerts(ctx)
	if err != nil || len(alerts) != 1 || alerts[0].State != StateFiring || alerts[0].DedupKey != key {
		t.Fatalf("open alerts = %+v, %v", alerts, err)
	}

	stop = consumer()
	defer func() { stop() }()
	testutil.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if n := len(pd.accepted("event_action", "resolve")); n != 1 {
			return fmt.Errorf("%d resolves", n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	resolves := pd.accepted("event_action", "resolve")
	if len(resolves) != 1 || len(pd.accepted("event_action", "trigger")) != 1 {
		t.Fatalf("after catching up: %d resolves, %d triggers; want 1 and 1", len(resolves), len(pd.accepted("event_action", "trigger")))
	}
	if k, _ := resolves[0].Decoded["dedup_key"].(string); k != key {
		t.Errorf("resolve dedup_key %q, trigger had %q", k, key)
	}
	if rk := resolves[0].Decoded["routing_key"]; rk != "0123456789abcdef0123456789abcdef" {
		t.Errorf("resolve routing_key %v", rk)
	}

	// The webhook saw the same incident: one firing, one resolved, one
	// fingerprint.
	firing, resolved := hook.accepted("status", "firing"), hook.accepted("status", "resolved")
	if len(firing) != 1 || len(resolved) != 1 {
		t.Fatalf("webhook got %d firing and %d resolved messages", len(firing), len(resolved))
	}
	fp := func(r received) any { return r.Decoded["alerts"].([]any)[0].(map[string]any)["fingerprint"] }
	if fp(firing[0]) != fp(resolved[0]) || firing[0].Decoded["groupKey"] != resolved[0].Decoded["groupKey"] {
		t.Errorf("webhook firing and resolved differ in fingerprint or groupKey")
	}

	hist, err := env.svc.History(ctx, HistoryQuery{RuleID: rule.ID})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for i := len(hist) - 1; i >= 0; i-- {
		events = append(events, hist[i].Event)
	}
	if strings.Join(events, ",") != "pending,firing,resolved" {
		t.Errorf("history = %v, want pending,firing,resolved", events)
	}
	if alerts, _ := env.svc.Alerts(ctx); len(alerts) != 0 {
		t.Errorf("alerts still open after resolve: %+v", alerts)
	}
	// The evaluator exported the lag it read, per group/topic/partition.
	fams, err := env.reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		if f.GetName() == "sluice_consumergroup_lag_records" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "group" && l.GetValue() == group {
						series++
					}
				}
			}
		}
	}
	if series != 3 {
		t.Errorf("%d lag series for %s, want 3 (one per partition)", series, group)
	}
}

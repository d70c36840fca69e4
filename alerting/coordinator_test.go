package alerting

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestLagAlertWhileCoordinatorDown: while a group's coordinator is down
// the lag source returns the group with its Err set (package lag's
// Collector does); its firing lag alert then neither resolves nor is
// triggered again, and once the lag is read again it resolves when the
// lag is gone.
func TestLagAlertWhileCoordinatorDown(t *testing.T) {
	src := &scriptedLag{groups: billing(900)}
	env := newTestService(t, func(c *Config) { c.Sources.Lag = src })
	pd := newReceiver(t, 202)
	n := env.pagerDuty(t, pd, pdKey)
	env.rule(t, Rule{Name: "billing lag", Kind: KindLagRecords, Threshold: 100, NotifierIDs: []int64{n.ID}})
	env.evaluate(t)
	env.waitDeliveries(t, 1)

	src.groups = []GroupLag{{Group: "billing", Err: errors.New("no broker lists the group and describing it failed (its coordinator may be down): COORDINATOR_NOT_AVAILABLE")}}
	for range 3 {
		env.evaluate(t)
	}
	alerts, err := env.svc.Alerts(context.Background())
	if err != nil || len(alerts) != 1 || alerts[0].State != StateFiring {
		t.Fatalf("alerts while the coordinator is down: %+v %v", alerts, err)
	}

	// A coordinator answers again, still lagging: no second trigger.
	src.groups = billing(900)
	env.evaluate(t)
	// Then the lag is gone: resolved.
	src.groups = billing(0)
	env.evaluate(t)
	// Delivered in order per notifier: a second trigger would have been
	// delivered before the resolve.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := len(pd.accepted("event_action", "resolve")); got != 1 {
			return errorf("%d resolves", got)
		}
		return nil
	})
	if got := len(pd.accepted("event_action", "trigger")); got != 1 {
		t.Fatalf("%d triggers, want 1", got)
	}
}

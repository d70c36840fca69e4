package alerts

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
)

// The rule form's preview shows each subject's value now and whether the
// rule would fire, storing nothing; a failed delivery shows the request
// that was sent and is sent again with Retry; a resolved history entry
// gives the clearing value, not the firing text.
func TestRulePreviewRetryAndResolvedHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	op := e.signedIn(t, "otto", web.RoleOperator)
	e.lag.set(
		alerting.GroupLag{Group: "billing", State: "Empty", Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 10, LogEnd: 5010, Lag: 5000}}},
		alerting.GroupLag{Group: "shipping", State: "Stable", Members: 1, Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 5000, LogEnd: 5010, Lag: 10}}},
	)
	form := url.Values{"name": {"lag"}, "kind": {"lag_records"}, "severity": {"warning"}, "threshold": {"1000"}, "for": {"0"}, "clear_for": {"0"},
		"enabled": {"1"}}
	r := op.Post("/alerts/rules/new", "/alerts/rules/preview", form)
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, "Would fire now", `href="/groups/billing"`, "would fire", `href="/groups/shipping"`, "for 1 subject of 2")
	if rules, _ := e.eng.Rules(ctx); len(rules) != 0 {
		t.Fatalf("the preview stored %d rules", len(rules))
	}

	// A receiver that fails, then recovers.
	var fail atomic.Bool
	fail.Store(true)
	good := newReceiver(t, http.StatusAccepted)
	bad := newReceiver(t, http.StatusBadRequest)
	recv := newReceiver(t, http.StatusAccepted)
	recv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if fail.Load() {
			bad.srv.Config.Handler.ServeHTTP(w, req)
			return
		}
		good.srv.Config.Handler.ServeHTTP(w, req)
	})
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "on-call", Type: alerting.NotifierPagerDuty, URL: recv.srv.URL, Secret: "0123456789abcdef0123456789abcdef", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := e.eng.CreateRule(ctx, alerting.Rule{Name: "billing lag", Kind: alerting.KindLagRecords, Severity: alerting.SeverityCritical,
		Threshold: 1000, Enabled: true, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	var failed alerting.Delivery
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		ds, err := e.eng.Deliveries(ctx, alerting.DeliveryQuery{})
		if err == nil && (len(ds) != 1 || ds[0].Status != alerting.DeliveryFailed) {
			err = fmt.Errorf("deliveries %+v", ds)
		}
		if err == nil {
			failed = ds[0]
		}
		return err
	})
	r = op.Get(fmt.Sprintf("/alerts/deliveries?rule=%d", rule.ID))
	expectContains(t, r, "failed", "[redacted]", "&#34;event_action&#34;: &#34;trigger&#34;", fmt.Sprintf("/alerts/deliveries/%d/retry", failed.ID))
	if strings.Contains(r.Text, "0123456789abcdef0123456789abcdef") {
		t.Fatal("the delivery log shows the routing key")
	}
	fail.Store(false)
	r = op.Post("/alerts/deliveries", fmt.Sprintf("/alerts/deliveries/%d/retry", failed.ID), nil)
	expectStatus(t, r, http.StatusSeeOther)
	expectContains(t, op.Get("/alerts/deliveries"), "Sent again to on-call: delivered (HTTP 202).", fmt.Sprintf("sends delivery %d again", failed.ID))
	if evs := good.events(); len(evs) != 1 || evs[0]["event_action"] != "trigger" || evs[0]["routing_key"] != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("the retried request: %v", evs)
	}

	// It clears: the resolved entry gives the value that cleared it.
	e.lag.set(alerting.GroupLag{Group: "billing", State: "Stable", Members: 1, Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 4990, LogEnd: 5010, Lag: 20}}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	r = op.Get(fmt.Sprintf("/alerts/history?rule=%d", rule.ID))
	expectContains(t, r, ">resolved<", "20 records behind", "5,000 records behind")
}

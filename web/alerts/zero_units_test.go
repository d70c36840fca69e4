package alerts

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/web"
	"github.com/sluice-io/sluice/web/webtest"
)

// TestAlertPagesZerosCarryUnits: the alert pages of a quiet console (a
// rule and a notifier, nothing firing, an evaluation done) show no bare
// zero in a numeric cell or figure (webtest.BareZeros).
func TestAlertPagesZerosCarryUnits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "hook", Type: alerting.NotifierWebhook, URL: "http://127.0.0.1:9/hook", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := e.eng.CreateRule(ctx, alerting.Rule{Name: "billing lag", Kind: alerting.KindLagRecords, Severity: alerting.SeverityWarning,
		Threshold: 1000, Enabled: true, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.lag.set(alerting.GroupLag{Group: "billing", State: "Empty", Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 10, LogEnd: 10}}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	c := e.signedIn(t, "ada", web.RoleAdmin)
	var all []webtest.ZeroFinding
	for _, p := range []string{"/", "/alerts", "/alerts/rules", "/alerts/rules/" + strconv.FormatInt(rule.ID, 10), "/alerts/history",
		"/alerts/notifiers", "/alerts/notifiers/" + strconv.FormatInt(n.ID, 10), "/alerts/deliveries", "/alerts/silences"} {
		r := c.Get(p)
		expectStatus(t, r, http.StatusOK)
		all = append(all, webtest.BareZeros(p, r.Text)...)
	}
	webtest.ExpectNoBareZeros(t, all)
}

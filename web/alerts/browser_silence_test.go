package alerts

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
)

// TestBrowserSilenceExpires: a silence made in Chromium with the form's
// "until a time…" a few seconds ahead holds back the trigger of an alert
// that fires under it, and the alerts page marks the alert silenced; once
// the silence has expired the trigger reaches the PagerDuty-compatible
// receiver, the alert shows without the mark and with its Silence… link
// again, and the silences page calls the silence expired.
func TestBrowserSilenceExpires(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	e := newEnv(t)
	ctx := context.Background()
	if err := e.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Store().CreateUser(ctx, "otto", web.RoleOperator, "password-1"); err != nil {
		t.Fatal(err)
	}
	pd := newReceiver(t, http.StatusAccepted)
	n, err := e.eng.CreateNotifier(ctx, alerting.NotifierInput{Name: "on-call", Type: alerting.NotifierPagerDuty, URL: pd.srv.URL, Secret: "0123456789abcdef0123456789abcdef", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := e.eng.CreateRule(ctx, alerting.Rule{Name: "billing lag", Kind: alerting.KindLagRecords, Severity: alerting.SeverityCritical,
		Threshold: 1000, Enabled: true, NotifierIDs: []int64{n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	triggers := func() int {
		k := 0
		for _, ev := range pd.events() {
			if ev["event_action"] == "trigger" {
				k++
			}
		}
		return k
	}

	b := browsertest.New(t, e.srv.URL())
	defer b.PublishScreenshots()
	b.Visit("/login?next=%2Falerts%2Fsilences")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "otto"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("New silence")

	// A silence of the rule on group:billing until a few seconds from now,
	// in the viewer's zone, to the second.
	paris, err := time.LoadLocation(browsertest.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	const lead = 8 * time.Second
	until := time.Now().Add(lead).Truncate(time.Second)
	b.Do("silence until a time",
		chromedp.SetValue(chromedp.ID("f-rule"), fmt.Sprint(rule.ID)),
		chromedp.SendKeys(chromedp.ID("f-subject"), "group:billing"),
		chromedp.SetValue(chromedp.ID("f-for"), "until"),
		chromedp.SetValue(chromedp.ID("f-until"), until.In(paris).Format("2006-01-02T15:04:05")),
		chromedp.SendKeys(chromedp.ID("f-comment"), "deploy"),
		chromedp.Click(chromedp.CSS(`#new-silence button.primary`)),
	)
	b.WaitText(fmt.Sprintf("Silenced rule %d on group:billing until", rule.ID))
	if got := b.Text("table tbody"); !strings.Contains(got, "active") {
		t.Fatalf("silences table right after: %q", got)
	}

	// The group falls behind while the silence lasts: the alert fires, no
	// trigger goes out, the alerts page marks it silenced.
	e.lag.set(alerting.GroupLag{Group: "billing", State: "Empty", Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 10, LogEnd: 5010, Lag: 5000}}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(until) {
		t.Skipf("the machine took more than %v to get here; the silence expired before the alert fired", lead)
	}
	b.Visit("/alerts")
	b.WaitText("billing lag")
	if got := b.Text("table.alerts tbody"); !strings.Contains(got, "silenced") || !strings.Contains(got, "Silenced until") {
		t.Fatalf("alert under the silence: %q", got)
	}
	if k := triggers(); k != 0 {
		t.Fatalf("%d triggers sent under the silence: %v", k, pd.events())
	}
	b.Screenshot("silence-01-silenced")

	// After the expiry the next evaluation sends the trigger held back.
	for time.Now().Before(until) {
		time.Sleep(until.Sub(time.Now()) + 10*time.Millisecond)
	}
	testutil.CheckFor(t, 20*time.Second, 200*time.Millisecond, func() error {
		if err := e.eng.EvaluateNow(ctx); err != nil {
			return err
		}
		if k := triggers(); k != 1 {
			return fmt.Errorf("%d triggers after the silence expired: %v", k, pd.events())
		}
		return nil
	})
	ev := pd.events()[0]
	if ev["dedup_key"] != fmt.Sprintf("sluice/rule-%d/group:billing", rule.ID) {
		t.Fatalf("trigger after the silence: %v", ev)
	}

	// The alert shows unsilenced, with its Silence… link back.
	b.Visit("/alerts")
	b.WaitText("billing lag")
	got := b.Text("table.alerts tbody")
	if strings.Contains(got, "silenced") || strings.Contains(got, "Silenced until") || !strings.Contains(got, "firing") {
		t.Fatalf("alert after the silence expired: %q", got)
	}
	if !evalBool(t, b, `!!document.querySelector('a[aria-label="Silence billing lag on group:billing"]')`) {
		t.Fatal("no Silence… link on the alert after its silence expired")
	}
	b.Screenshot("silence-02-expired-firing")
	b.Visit("/alerts/silences")
	if got := b.Text("table tbody"); !strings.Contains(got, "expired") || strings.Contains(got, "active") || strings.Contains(got, "End now") {
		t.Fatalf("silences table after the expiry: %q", got)
	}
}

func evalBool(t testing.TB, b *browsertest.Browser, expr string) bool {
	t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

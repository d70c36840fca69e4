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

// TestBrowserIncidentOverview: the overview open in Chromium shows a lag
// rule firing, and the Alerts item of the navigation counts it, without a
// reload; Acknowledge on the overview reaches the PagerDuty-compatible
// receiver as an "acknowledge" event; Silence… opens the silence form for
// that alert, and the silence shows on the overview.
func TestBrowserIncidentOverview(t *testing.T) {
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

	b := browsertest.New(t, e.srv.URL())
	defer b.PublishScreenshots()
	b.Visit("/login")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "otto"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("All clear")
	b.CheckCSP("/")
	// A mark on the page that a reload would lose.
	if _, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`window.__noReload = true`)); err != nil {
		t.Fatal(err)
	}

	// The group falls behind; an evaluation (the test's evaluator does not
	// run on its own) fires the rule.
	e.lag.set(alerting.GroupLag{Group: "billing", State: "Empty", Partitions: []alerting.PartitionLag{{Topic: "orders", Partition: 0, Committed: 10, LogEnd: 5010, Lag: 5000}}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	// The overview refreshes every 10 s, the navigation's counts with it.
	b.WaitTextWithin("1 alert firing", 15*time.Second)
	testutil.CheckFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		badge, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`(function(){var s=document.querySelector('#mainnav a[href="/alerts"] .navbadge');return s && !s.hidden ? s.textContent : ""})()`))
		if err != nil || badge != "1" {
			return fmt.Errorf("alerts badge %q (%v)", badge, err)
		}
		return nil
	})
	if still, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`window.__noReload === true`)); err != nil || !still {
		t.Fatalf("the page was reloaded (%v)", err)
	}
	if got := b.Text("#overview-alerts"); !strings.Contains(got, "billing lag") || !strings.Contains(got, "5,000 records behind") {
		t.Fatalf("alerts panel: %q", got)
	}
	b.Screenshot("incident-01-firing")

	// Acknowledge from the overview: PagerDuty gets an acknowledge event
	// with the trigger's dedup key.
	b.Do("acknowledge", chromedp.Click(chromedp.CSS(`button[aria-label="Acknowledge billing lag on group:billing"]`)))
	b.WaitText("acknowledged")
	var ack map[string]any
	testutil.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		for _, ev := range pd.events() {
			if ev["event_action"] == "acknowledge" {
				ack = ev
				return nil
			}
		}
		return fmt.Errorf("no acknowledge event among %v", pd.events())
	})
	if ack["dedup_key"] != fmt.Sprintf("sluice/rule-%d/group:billing", rule.ID) || ack["routing_key"] != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("acknowledge event %v", ack)
	}

	// Silence it for an hour from the overview's link.
	b.Visit("/")
	b.Do("silence", chromedp.Click(chromedp.CSS(`a[aria-label="Silence billing lag on group:billing"]`)))
	b.WaitText("Silence")
	if subj, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.getElementById("f-subject").value`)); err != nil || subj != "group:billing" {
		t.Fatalf("silence form subject %q (%v)", subj, err)
	}
	b.Do("silence for 1 h",
		chromedp.SetValue(chromedp.ID("f-for"), "1h"),
		chromedp.Click(chromedp.CSS(`#new-silence button.primary`)),
	)
	b.WaitText(fmt.Sprintf("Silenced rule %d on group:billing until", rule.ID))
	b.Visit("/")
	if got := b.Text("#overview-alerts"); !strings.Contains(got, "silenced") {
		t.Fatalf("alerts panel after the silence: %q", got)
	}
	b.Screenshot("incident-02-acknowledged-silenced")
}

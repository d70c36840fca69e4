package alerts

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web"
)

// The browser test drives Debian's Chromium, headless, through a real
// console (listening on a free port, against kfake) with the alert pages:
// an operator adds a webhook notifier and sends it a test event, creates a
// rule (a mistake first, shown by its field), sees it listed, sees it fire
// and land in the history. Every page is checked for Content-Security-
// Policy violations and screenshotted; with SLUICE_SCREENSHOTS=1 the
// screenshots are copied to docs/screenshots/.

func TestBrowserAlertPages(t *testing.T) {
	testutil.Heavy(t, "Chromium")
	e := newEnv(t)
	ctx := context.Background()
	if err := e.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Store().CreateUser(ctx, "otto", web.RoleOperator, "password-1"); err != nil {
		t.Fatal(err)
	}
	hook := newReceiver(t, http.StatusOK)
	b := browsertest.New(t, e.srv.URL())
	defer b.PublishScreenshots()

	b.Visit("/login?next=%2Falerts")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), "otto"),
		chromedp.SendKeys(chromedp.ID("f-password"), "password-1"),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("No alert rules yet")
	b.CheckCSP("/alerts")
	b.Screenshot("alerts-01-empty")

	// A webhook notifier, then its test event.
	b.Visit("/alerts/notifiers")
	b.Do("add a webhook",
		chromedp.SendKeys(chromedp.ID("f-name"), "ops webhook"),
		chromedp.SetValue(chromedp.ID("f-type"), "webhook"),
		chromedp.SendKeys(chromedp.ID("f-url"), hook.srv.URL+"/alertmanager"),
		chromedp.SendKeys(chromedp.ID("f-secret"), "s3cret-token-7f2c"),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.WaitText("Notifier ops webhook added.")
	b.Do("send a test event", chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	b.WaitText("Test event delivered to ops webhook (HTTP 200).")
	if got := hook.events(); len(got) != 2 || got[0]["status"] != "firing" || got[1]["status"] != "resolved" {
		t.Fatalf("webhook received %v", got)
	}
	if s := b.PageText(); strings.Contains(s, "s3cret-token-7f2c") || !strings.Contains(s, "••••7f2c") {
		t.Fatalf("the notifier page shows the token or no hint: %.600s", s)
	}
	b.CheckCSP("/alerts/notifiers/1")
	b.Screenshot("alerts-02-notifier-test")

	// A rule: a mistake first, shown next to its field.
	b.Visit("/alerts/rules/new")
	b.Do("fill the rule form with a mistake",
		chromedp.SendKeys(chromedp.ID("f-name"), "billing lag"),
		chromedp.SendKeys(chromedp.ID("f-description"), "Runbook: restart the billing consumers."),
		chromedp.SetValue(chromedp.ID("f-severity"), "critical"),
		chromedp.SendKeys(chromedp.ID("f-threshold"), "lots"),
		chromedp.SetValue(chromedp.ID("f-for"), "0"),
		chromedp.SendKeys(chromedp.ID("f-scope_pattern"), "billing*"),
		chromedp.Click(chromedp.CSS(`input[name="notifiers"]`)),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.WaitText("is not a number")
	b.CheckCSP("/alerts/rules")
	b.Screenshot("alerts-03-rule-error")
	b.Do("fix the threshold",
		chromedp.SetValue(chromedp.ID("f-threshold"), "1000"),
		chromedp.Submit(chromedp.ID("f-name")),
	)
	b.WaitText("Rule billing lag created.")
	b.Screenshot("alerts-04-rule")
	b.Visit("/alerts/rules")
	b.WaitText("billing lag")
	if s := b.PageText(); !strings.Contains(s, "> 1,000 records") || !strings.Contains(s, "ops webhook") || !strings.Contains(s, "enabled") {
		t.Fatalf("rules list: %.800s", s)
	}
	b.Screenshot("alerts-05-rules")

	// The group falls behind: the rule fires.
	e.lag.set(alerting.GroupLag{Group: "billing-eu", State: "Empty", Partitions: []alerting.PartitionLag{
		{Topic: "orders", Partition: 0, Committed: 100, LogEnd: 4100, Lag: 4000},
		{Topic: "orders", Partition: 1, Committed: 90, LogEnd: 1290, Lag: 1200},
	}})
	if err := e.eng.EvaluateNow(ctx); err != nil {
		t.Fatal(err)
	}
	b.Visit("/alerts")
	b.WaitText("5,200 records behind")
	b.Screenshot("alerts-06-firing")
	b.Visit("/alerts/history")
	b.WaitText("firing")
	b.Screenshot("alerts-07-history")
	b.Visit("/alerts/deliveries")
	b.WaitText("ops webhook")
	b.Screenshot("alerts-08-deliveries")

	// Disable it from the list.
	b.Visit("/alerts/rules")
	b.Do("disable the rule", chromedp.Click(chromedp.CSS(`button[aria-label="Disable billing lag"]`)))
	b.WaitText("Rule billing lag disabled.")
	b.CheckCSP("/alerts/rules")
}

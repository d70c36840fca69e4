// Package screenshots renders every page of the console with demo data
// (an in-process broker as it ships, realistic ORDER/ORDERNEW order
// streams, a compacted topic, binary values, lagging and stable consumer
// groups, a lag rule firing to a PagerDuty-compatible receiver) in headless
// Chromium, in light and dark, some at phone width, so a reviewer sees the
// whole console in a minute:
//
//	make screenshots            # writes ./screenshots/*.png
//
// It is a test only so that it can use the test harnesses; it runs when
// SLUICE_SCREENSHOTS_DIR names the folder to write, and is skipped
// otherwise (and under -short).
package screenshots

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sluice-io/sluice/internal/browsertest"
	"github.com/sluice-io/sluice/internal/testutil"
)

// DirEnv names the folder the screenshots are written to.
const DirEnv = "SLUICE_SCREENSHOTS_DIR"

func TestScreenshots(t *testing.T) {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		t.Skip("set " + DirEnv + " (make screenshots) to render the console's pages")
	}
	testutil.Heavy(t, "Chromium")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d := newDemo(t)
	op := d.session("otto")

	// A PagerDuty notifier and the rules: billing's lag fires at once,
	// analytics' is pending for 10 minutes, and a Burrow status rule.
	_, loc := op.post("/alerts/notifiers", "/alerts/notifiers", url.Values{"name": {"on-call (PagerDuty)"}, "type": {"pagerduty"},
		"url": {d.pd.srv.URL + "/v2/enqueue"}, "secret": {pdKey}, "enabled": {"1"}})
	nid := strings.TrimPrefix(loc, "/alerts/notifiers/")
	for _, r := range []url.Values{
		{"name": {"billing lag"}, "kind": {"lag_records"}, "severity": {"critical"}, "threshold": {"500"}, "for": {"0"}, "clear_for": {"2m"},
			"scope_pattern": {"billing*"}, "description": {"Runbook: https://wiki.example/runbooks/billing-lag"}},
		{"name": {"analytics lag"}, "kind": {"lag_seconds"}, "severity": {"warning"}, "threshold": {"5m"}, "for": {"10m"}, "clear_for": {"2m"},
			"scope_pattern": {"analytics"}},
		{"name": {"consumer stuck"}, "kind": {"group_status"}, "severity": {"error"}, "min_status": {"ERR"}, "for": {"5m"}, "clear_for": {"5m"}},
		{"name": {"partitions offline"}, "kind": {"offline_partitions"}, "severity": {"critical"}, "threshold": {"0"}, "for": {"0"}, "clear_for": {"1m"}},
	} {
		r.Set("enabled", "1")
		r.Add("notifiers", nid)
		if code, body := op.post("/alerts/rules/new", "/alerts/rules", r); code != 303 {
			t.Fatalf("rule %s: %d %.300s", r.Get("name"), code, body)
		}
	}
	// The comparison ORDER vs ORDERNEW, as JSON, ignoring nothing yet.
	if code, body := op.post("/comparisons/new", "/comparisons", url.Values{"name": {"orders v2 cut-over"}, "left": {"ORDER"}, "right": {"ORDERNEW"},
		"pairing": {"key"}, "values": {"json"}, "start": {"earliest"}, "window": {"30s"}, "mode": {"bounded"},
		"min_records": {"1000"}, "max_missing": {"0"}, "max_duplicates": {"0"}, "max_out_of_order": {"-1"}, "max_unkeyed": {"0"}}); code != 303 {
		t.Fatalf("comparison: %d %.300s", code, body)
	}
	testutil.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		if len(d.pd.Events("trigger")) == 0 {
			return fmt.Errorf("no trigger reached the PagerDuty receiver")
		}
		return nil
	})

	b := browsertest.New(t, d.console)
	b.Shots = dir
	b.Visit("/login")
	b.Screenshot("00-sign-in")
	b.Do("sign in",
		chromedp.SendKeys(chromedp.ID("f-username"), demoAdmin),
		chromedp.SendKeys(chromedp.ID("f-password"), demoPassword),
		chromedp.Submit(chromedp.ID("f-password")),
	)
	b.WaitText("Brokers up")
	b.WaitText("billing lag")

	shot := func(name, path, wait string) {
		t.Helper()
		b.Visit(path)
		if wait != "" {
			b.WaitText(wait)
		}
		b.Screenshot(name)
	}
	pages := []struct{ name, path, wait string }{
		{"01-overview", "/", "billing lag"},
		{"02-brokers", "/brokers", "controller"},
		{"03-topics", "/topics", "ORDERNEW"},
		{"04-topic-ORDER", "/topics/ORDER", "Partitions"},
		{"05-topic-create", "/topics/new", "Create topic"},
		{"06-messages-ORDER-json", "/topics/ORDER/messages?format=json&limit=20", "ORD-"},
		{"07-messages-search", "/topics/ORDER/messages?field=value&q=TEA-SENCHA&format=json&limit=20", "Found"},
		{"08-messages-binary", "/topics/payments.dlq/messages?limit=20", "PAY-"},
		{"09-messages-compacted", "/topics/customers/messages?from=earliest&format=json&limit=50", "Ada Lovelace"},
		{"10-groups", "/groups", "billing"},
		{"11-group-billing", "/groups/billing", "Lag history"},
		{"12-group-shipping", "/groups/shipping", "Lag history"},
		{"12-group-invoicing", "/groups/invoicing", "msg/s"},
		{"12-transactions", "/transactions", "payments-writer-2"},
		{"12-topic-payments", "/topics/payments", "in open transactions"},
		{"13-alerts", "/alerts", "billing lag"},
		{"14-alert-rules", "/alerts/rules", "billing lag"},
		{"15-alert-rule", "/alerts/rules/1", "billing lag"},
		{"16-alert-new-rule", "/alerts/rules/new", "New alert rule"},
		{"17-alert-silences", "/alerts/silences", "Silences"},
		{"18-alert-history", "/alerts/history", "firing"},
		{"19-alert-notifiers", "/alerts/notifiers", "on-call"},
		{"20-alert-deliveries", "/alerts/deliveries", "on-call"},
		{"21-comparisons", "/comparisons", "orders v2 cut-over"},
		{"22-comparison", "/comparisons/1", "orders v2 cut-over"},
		{"23-comparison-new", "/comparisons/new", "New comparison"},
		{"24-users", "/users", "otto"},
		{"25-audit", "/audit", "alert.rule.create"},
		{"26-account", "/account", "Change your password"},
		{"27-not-found", "/topics/nope", "There is no topic nope"},
	}
	for _, p := range pages {
		shot(p.name, p.path, p.wait)
	}

	// Dark: the system's setting.
	ctx := b.Ctx
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, path, wait string }{
		{"30-dark-overview", "/", "billing lag"},
		{"31-dark-messages", "/topics/ORDER/messages?format=json&limit=10", "ORD-"},
		{"32-dark-group", "/groups/billing", "Lag history"},
		{"33-dark-alerts", "/alerts", "billing lag"},
		{"34-dark-comparison", "/comparisons/1", "orders v2 cut-over"},
	} {
		shot(p.name, p.path, p.wait)
	}
	chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})

	// Phone width.
	if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, path, wait string }{
		{"40-phone-overview", "/", "billing lag"},
		{"41-phone-messages", "/topics/ORDER/messages?format=json&limit=5", "ORD-"},
		{"42-phone-group", "/groups/billing", "Lag history"},
		{"43-phone-alerts", "/alerts", "billing lag"},
	} {
		shot(p.name, p.path, p.wait)
	}
	b.Do("open the menu", chromedp.Click(chromedp.CSS(`label[for="navtoggle"]`)))
	b.Screenshot("44-phone-menu")
	chromedp.Call(ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
	t.Logf("wrote the screenshots to %s in %v", dir, time.Since(start).Round(time.Second))
}

var _ = context.Background

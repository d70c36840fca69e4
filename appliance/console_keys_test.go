package appliance

import (
	"strings"
	"testing"
	"time"
)

// TestConsoleHardeningKeys: the console's keys for trusted proxies, the
// audit log's retention and access entries, and the notifiers' allowed
// targets load with their defaults, take values, and refuse bad ones
// naming the key.
func TestConsoleHardeningKeys(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ConsoleTrustedProxies) != 0 || c.ConsoleAuditRetentionDays != 365 || c.ConsoleAuditMaxRows != 1_000_000 ||
		!c.ConsoleAuditAccessEnable || len(c.AlertingAllowedTargets) != 0 {
		t.Fatalf("defaults: %v %d %d %v %v", c.ConsoleTrustedProxies, c.ConsoleAuditRetentionDays, c.ConsoleAuditMaxRows, c.ConsoleAuditAccessEnable, c.AlertingAllowedTargets)
	}
	c, err = Load("", []string{
		"console.trusted.proxies=10.0.0.0/8, 192.0.2.7",
		"console.audit.retention.days=30",
		"console.audit.max.rows=5000",
		"console.audit.access.enable=false",
		"alerting.allowed.targets=127.0.0.1:9093,alertmanager.internal:9093,10.1.0.0/16",
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.ConsoleTrustedProxies, ",") != "10.0.0.0/8,192.0.2.7" || c.ConsoleAuditRetentionDays != 30 || c.ConsoleAuditMaxRows != 5000 ||
		c.ConsoleAuditAccessEnable || len(c.AlertingAllowedTargets) != 3 {
		t.Fatalf("loaded: %+v", c)
	}
	if time.Duration(c.ConsoleAuditRetentionDays)*24*time.Hour != 30*24*time.Hour {
		t.Fatal("retention")
	}
	for kv, key := range map[string]string{
		"console.trusted.proxies=proxy.example":       "console.trusted.proxies",
		"console.audit.retention.days=0":              "console.audit.retention.days",
		"console.audit.max.rows=10":                   "console.audit.max.rows",
		"console.audit.access.enable=maybe":           "console.audit.access.enable",
		"alerting.allowed.targets=10.0.0.0/40":        "alerting.allowed.targets",
		"alerting.allowed.targets=alertmanager.local": "alerting.allowed.targets",
	} {
		if _, err := Load("", []string{kv}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", kv, err)
		}
	}
}

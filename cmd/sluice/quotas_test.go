package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQuotasCommand: `sluice quotas set/list/delete` round trip, with
// defaults, and the usage errors.
func TestQuotasCommand(t *testing.T) {
	b := startTestBroker(t, testBrokerKinds(false)[0])
	waitForBroker(t, b.addr)
	run := func(args ...string) (int, string, string) { return runCLI(t, b.addr, "", args...) }

	for _, args := range [][]string{
		{"quotas", "set", "--user", "alice", "--producer-byte-rate", "1048576", "--request-percentage", "25"},
		{"quotas", "set", "--user", "alice", "--default", "client-id", "--consumer-byte-rate", "2000"},
		{"quotas", "set", "--default", "client-id", "--producer-byte-rate", "500000"},
	} {
		if code, out, errs := run(args...); code != 0 || !strings.Contains(out, "set") {
			t.Fatalf("%v: exit %d: %s %s", args, code, out, errs)
		}
	}
	code, out, errs := run("quotas", "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"- <default> producer_byte_rate 500000",
		"alice <default> consumer_byte_rate 2000",
		"alice - producer_byte_rate 1048576",
		"alice - request_percentage 25",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run("quotas", "list", "--user", "alice", "--strict", "-o", "json")
	var got []quotaJSON
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].Quotas["producer_byte_rate"] != 1048576 {
		t.Fatalf("list --user alice --strict: exit %d: %s", code, out)
	}
	if code, out, errs := run("quotas", "delete", "--user", "alice", "--key", "request_percentage"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d: %s %s", code, out, errs)
	}
	if code, out, _ := run("quotas", "list", "--user", "alice", "--strict"); code != 0 || strings.Contains(out, "request_percentage") || !strings.Contains(out, "producer_byte_rate") {
		t.Fatalf("after delete: exit %d:\n%s", code, out)
	}
	// Refusals: the broker's (a fractional byte rate) and the CLI's.
	if code, _, errs := run("quotas", "set", "--client-id", "x", "--producer-byte-rate", "1.5"); code != 1 || !strings.Contains(errs, "fractional") {
		t.Errorf("fractional rate: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{
		{"quotas", "set", "--producer-byte-rate", "10"},
		{"quotas", "set", "--user", "a"},
		{"quotas", "set", "--user", "a", "--default", "user", "--producer-byte-rate", "10"},
		{"quotas", "delete", "--user", "a", "--key", "nope"},
	} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
}

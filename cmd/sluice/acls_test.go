package main

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestACLsCLI: sluice acls add, list and remove against a broker with
// Kafka's authorizer (the CLI's principal, User:ANONYMOUS, a super user):
// what add stores list shows, with each of kafka-acls.sh's filters, and
// remove takes away only what its flags select; bad flags are usage
// errors before anything is sent.
func TestACLsCLI(t *testing.T) {
	c := testcluster.New(t, testcluster.LogLevel(slog.LevelWarn), testcluster.Settings(
		"broker.id=1", "offsets.topic.replication.factor=1",
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"super.users=User:ANONYMOUS"))
	waitForBroker(t, c.Addr())
	run := func(wantCode int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, c.Addr(), "", args...)
		if code != wantCode {
			t.Fatalf("sluice %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out, errOut)
		}
		return out + errOut
	}
	list := func(args ...string) []aclJSON {
		t.Helper()
		var rows []aclJSON
		out := run(0, append([]string{"acls", "list", "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("list %v: %v\n%s", args, err, out)
		}
		return rows
	}

	out := run(0, "acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "describe",
		"--topic", "orders-", "--resource-pattern-type", "prefixed")
	for _, want := range []string{"RESOURCE-TYPE", "Topic", "orders-", "prefixed", "User:alice", "Read", "Describe", "Allow"} {
		if !strings.Contains(out, want) {
			t.Fatalf("acls add printed no %q:\n%s", want, out)
		}
	}
	run(0, "acls", "add", "--allow-principal", "User:bob", "--consumer", "--topic", "payments", "--group", "billing")
	run(0, "acls", "add", "--deny-principal", "User:alice", "--deny-host", "10.0.0.9", "--operation", "Read", "--topic", "orders-secret")
	run(0, "acls", "add", "--allow-principal", "User:admin", "--operation", "Alter", "--cluster")

	if rows := list(); len(rows) != 7 {
		t.Fatalf("every ACL: %d rows: %+v", len(rows), rows)
	}
	if rows := list("--principal", "User:bob"); len(rows) != 3 {
		t.Fatalf("bob's ACLs: %+v", rows)
	}
	// The ACLs that apply to orders-secret: the two prefixed ones and the Deny.
	rows := list("--topic", "orders-secret", "--resource-pattern-type", "match")
	if len(rows) != 3 {
		t.Fatalf("ACLs applying to orders-secret: %+v", rows)
	}
	if rows := list("--group", "billing"); len(rows) != 1 || rows[0].Operation != "Read" || rows[0].ResourceType != "Group" {
		t.Fatalf("billing's ACLs: %+v", rows)
	}
	if rows := list("--cluster"); len(rows) != 1 || rows[0].Name != "kafka-cluster" {
		t.Fatalf("the cluster's ACLs: %+v", rows)
	}

	out = run(0, "acls", "remove", "--topic", "payments", "--allow-principal", "User:bob", "--operation", "Read")
	if !strings.Contains(out, "payments") || strings.Count(out, "User:bob") != 1 {
		t.Fatalf("remove printed:\n%s", out)
	}
	if rows := list("--principal", "User:bob"); len(rows) != 2 {
		t.Fatalf("bob's ACLs after removing Read on payments: %+v", rows)
	}
	run(0, "acls", "remove", "--topic", "orders-", "--resource-pattern-type", "prefixed")
	if rows := list("--principal", "User:alice"); len(rows) != 1 || rows[0].Permission != "Deny" {
		t.Fatalf("alice's ACLs after removing the prefix's: %+v", rows)
	}

	for _, bad := range [][]string{
		{"acls", "add", "--operation", "Read", "--topic", "t"},                                         // no principal
		{"acls", "add", "--allow-principal", "User:a", "--topic", "t"},                                 // no operation
		{"acls", "add", "--allow-principal", "User:a", "--operation", "Read"},                          // no resource
		{"acls", "add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"},           // not Type:name
		{"acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"},           // no such operation
		{"acls", "add", "--allow-principal", "User:a", "--operation", "ClusterAction", "--topic", "t"}, // not a topic's
		{"acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t", "--resource-pattern-type", "match"},
		{"acls", "remove", "--allow-principal", "User:a"}, // no resource
	} {
		run(exitUsage, bad...)
	}
	if rows := list(); len(rows) != 4 {
		t.Fatalf("refused commands changed the ACLs: %+v", rows)
	}
}

// TestACLsCLIWithoutAuthorizer: a broker without an authorizer is named as
// the reason, with the key that turns it on.
func TestACLsCLIWithoutAuthorizer(t *testing.T) {
	b := startServeBroker(t)
	waitForBroker(t, b.addr)
	code, _, errOut := runCLI(t, b.addr, "", "acls", "list")
	if code != 1 || !strings.Contains(errOut, "SECURITY_DISABLED") || !strings.Contains(errOut, "authorizer.class.name") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/internal/kclient"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
)

// TestUsersCommand: `sluice users set/list/delete` over a SASL_SSL listener,
// authenticated by a --command-config file as Kafka's tools take it; the
// user it creates logs in, the deleted one no longer does.
func TestUsersCommand(t *testing.T) {
	ca := testutil.NewCA(t, "")
	srv := ca.Server(t, "broker")
	internal, external := testutil.FreeAddr(t), testutil.FreeAddr(t)
	c := testcluster.New(t, testcluster.Settings(
		fmt.Sprintf("listeners=INTERNAL://%s,SASL_SSL://%s", internal, external),
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL",
		"inter.broker.listener.name=INTERNAL",
		"ssl.keystore.location="+srv.KeystorePath,
		"sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
		"connection.failed.authentication.delay.ms=0",
		"group.initial.rebalance.delay.ms=0",
	))
	// The first user, written into the store directly.
	admin, _ := security.ScramMechanismNamed("SCRAM-SHA-512")
	cred, err := admin.NewCredential("admin-secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if errs := c.App().Coordinator().AlterScramCredentials(ctx, []cluster.ScramChange{{User: "admin", Mechanism: "SCRAM-SHA-512", Credential: &cred}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	dir := t.TempDir()
	cmdConfig := filepath.Join(dir, "admin.properties")
	os.WriteFile(cmdConfig, []byte(`security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
  username="admin" password="${env:SLUICE_TEST_ADMIN_PW}";
ssl.truststore.location=`+ca.TrustPath+"\n"), 0o600)
	t.Setenv("SLUICE_TEST_ADMIN_PW", "admin-secret")

	run := func(stdin string, args ...string) (int, string, string) {
		return runCLI(t, external, stdin, append(args, "--command-config", cmdConfig)...)
	}
	if code, out, errs := run("carol-pw\n", "users", "set", "carol", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096", "--password-stdin"); code != 0 || !strings.Contains(out, "set") {
		t.Fatalf("users set: %d %s %s", code, out, errs)
	}
	login := func(user, pw string) error {
		s, err := kclient.Parse(map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
			"sasl.username": user, "sasl.password": pw, "ssl.truststore.location": ca.TrustPath})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(s.Opts(), kgo.SeedBrokers(external), kgo.RequestRetries(0))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}
	if err := login("carol", "carol-pw"); err != nil {
		t.Fatalf("carol logs in: %v", err)
	}
	code, out, errs := run("", "users", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("users list: %d %s", code, errs)
	}
	var users []userJSON
	if err := json.Unmarshal([]byte(out), &users); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(users) != 2 || users[0].Name != "admin" || users[1].Name != "carol" || users[1].Credentials[0] != (credentialJSON{"SCRAM-SHA-256", 4096}) {
		t.Fatalf("users list: %+v", users)
	}
	if code, out, _ := run("", "users", "list"); code != 0 || !strings.Contains(out, "carol  SCRAM-SHA-256  4096") {
		t.Fatalf("users list table:\n%s", out)
	}
	// Errors: no password, bad iterations, a missing user.
	if code, _, errs := run("\n", "users", "set", "dan", "--password-stdin"); code != 1 || !strings.Contains(errs, "empty") {
		t.Fatalf("empty password: %d %s", code, errs)
	}
	if code, _, errs := run("x\n", "users", "set", "dan", "--iterations", "100", "--password-stdin"); code != 2 || !strings.Contains(errs, "iterations") {
		t.Fatalf("bad iterations: %d %s", code, errs)
	}
	if code, _, errs := run("", "users", "delete", "nobody"); code != 1 || !strings.Contains(errs, "no such user") {
		t.Fatalf("delete nobody: %d %s", code, errs)
	}
	if code, out, errs := run("", "users", "delete", "carol"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("users delete: %d %s %s", code, out, errs)
	}
	if err := login("carol", "carol-pw"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a deleted user: %v", err)
	}
	// Without the command config, the SASL_SSL listener refuses the CLI.
	if code, _, _ := runCLI(t, external, "", "users", "list", "--timeout", "3s"); code != 1 {
		t.Fatalf("no --command-config: exit %d", code)
	}
	// A bad command config is named.
	bad := filepath.Join(dir, "bad.properties")
	os.WriteFile(bad, []byte("security.protocol=SASL_SSL\n"), 0o600)
	if code, _, errs := runCLI(t, external, "", "users", "list", "--command-config", bad); code != 1 || !strings.Contains(errs, "needs sasl.mechanism") {
		t.Fatalf("bad command config: %d %s", code, errs)
	}

	// sluice compare takes the same file.
	s, err := kclient.Parse(map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
		"sasl.username": "admin", "sasl.password": "admin-secret", "ssl.truststore.location": ca.TrustPath})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(s.Opts(), kgo.SeedBrokers(external), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "left", Key: []byte("k"), Value: []byte("v")}, &kgo.Record{Topic: "right", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCompareCmd(t, "--brokers", external, "--command-config", cmdConfig, "--left", "left", "--right", "right", "--until-end"); code != 0 {
		t.Fatalf("compare over SASL_SSL: %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCompareCmd(t, "--brokers", external, "--command-config", bad, "--left", "left", "--right", "right", "--until-end"); code != 2 || !strings.Contains(errs, "needs sasl.mechanism") {
		t.Fatalf("compare with a bad command config: %d %s", code, errs)
	}

	// So does sluice perf.
	if code, out, errs := perfRunEnv(t, external, "produce", "--command-config", cmdConfig, "--topic", "perf-sasl", "--num-records", "100", "--record-size", "100", "--progress", "0"); code != 0 {
		t.Fatalf("perf produce over SASL_SSL: %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := perfRunEnv(t, external, "consume", "--command-config", cmdConfig, "--topic", "perf-sasl", "--num-records", "100", "--progress", "0"); code != 0 {
		t.Fatalf("perf consume over SASL_SSL: %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := perfRunEnv(t, external, "produce", "--command-config", bad, "--num-records", "1"); code != 2 || !strings.Contains(errs, "needs sasl.mechanism") {
		t.Fatalf("perf with a bad command config: %d %s", code, errs)
	}
}

package appliance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/consolestate"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
)

// The process's own clients (here the schema registry, which writes
// _schemas through one) connect with the console.kafka.* settings to the
// listener of their security protocol: SASL_SSL with SCRAM, a CA from a
// file, the password from the environment.
func TestOwnClientsUseConsoleKafkaSettings(t *testing.T) {
	ca := testutil.NewCA(t, "")
	srv := ca.Server(t, "broker")
	internal, external, regAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	t.Setenv("SLUICE_TEST_CONSOLE_PW", "console-secret")
	app := startApplianceIn(t, t.TempDir(),
		fmt.Sprintf("listeners=INTERNAL://%s,SASL_SSL://%s", internal, external),
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL",
		"inter.broker.listener.name=INTERNAL",
		"ssl.keystore.location="+srv.KeystorePath,
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"schema.registry.listen="+regAddr,
		"console.kafka.security.protocol=SASL_SSL",
		"console.kafka.sasl.mechanism=SCRAM-SHA-512",
		"console.kafka.sasl.username=console",
		"console.kafka.sasl.password=${env:SLUICE_TEST_CONSOLE_PW}",
		"console.kafka.ssl.truststore.location="+ca.TrustPath,
	)
	defer app.Close()
	if got := app.BootstrapAddrs(); !slices.Equal(got, []string{external}) {
		t.Fatalf("own clients bootstrap from %v, want the SASL_SSL listener %s", got, external)
	}
	mech, _ := security.ScramMechanismNamed("SCRAM-SHA-512")
	cred, _ := mech.NewCredential("console-secret", 4096)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if errs := app.Coordinator().AlterScramCredentials(ctx, []cluster.ScramChange{{User: "console", Mechanism: "SCRAM-SHA-512", Credential: &cred}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if st, body := httpDo(t, "POST", "http://"+regAddr+"/subjects/orders-value/versions", "", "", testAvro); st != 200 || body != `{"id":1}` {
		t.Fatalf("register a schema through the SASL_SSL client: %d %s", st, body)
	}
}

// The console's own topics (__sluice_console, its replicated state, and
// __sluice_console_lag, the lag history) are written and read with the
// console.kafka.* settings too: on a broker whose only listener of the
// console's protocol is SSL, the console creates both and its state
// replica catches up.
func TestConsoleTopicsUseConsoleKafkaSettings(t *testing.T) {
	testutil.Heavy(t, "a broker with its console (about 5 s)")
	ca := testutil.NewCA(t, "")
	srv := ca.Server(t, "broker")
	internal, external := testutil.FreeAddr(t), testutil.FreeAddr(t)
	start := time.Now()
	app := startApplianceIn(t, t.TempDir(),
		fmt.Sprintf("listeners=INTERNAL://%s,SSL://%s", internal, external),
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name=INTERNAL",
		"ssl.keystore.location="+srv.KeystorePath,
		"console.listen="+testutil.FreeAddr(t),
		"console.lag.sample.interval.ms=1000",
		"console.kafka.security.protocol=SSL",
		"console.kafka.ssl.truststore.location="+ca.TrustPath,
	)
	defer app.Close()
	// Start waits up to 30 s for the state replica to catch up, and goes
	// on without it (with a warning) when the topic does not answer.
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("start took %v: the console's state topic did not answer", d)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(internal))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testutil.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, consolestate.StateTopic, consolestate.LagTopic)
		if err != nil {
			return err
		}
		for _, topic := range []string{consolestate.StateTopic, consolestate.LagTopic} {
			if !td.Has(topic) || td[topic].Err != nil {
				return fmt.Errorf("%s not created by the console", topic)
			}
		}
		return nil
	})
}

// Security settings that cannot work stop the start with a message naming
// the key.
func TestSecurityConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		settings []string
		want     string
	}{
		{[]string{"listeners=SSL://" + testutil.FreeAddr(t)}, "ssl.keystore.location"},
		{[]string{"listeners=PLAINTEXT://" + testutil.FreeAddr(t), "console.kafka.security.protocol=SSL", "schema.registry.listen=" + testutil.FreeAddr(t)}, "console.kafka.security.protocol=SSL: no listener"},
		{[]string{"listeners=PLAINTEXT://" + testutil.FreeAddr(t), "console.kafka.ssl.keymanager.algorithm=x"}, "ssl.keymanager.algorithm"},
		{[]string{"listeners=SASL_PLAINTEXT://" + testutil.FreeAddr(t), "sasl.enabled.mechanisms=SCRAM-SHA-512",
			"console.kafka.security.protocol=SASL_PLAINTEXT", "console.kafka.sasl.mechanism=SCRAM-SHA-512", "console.kafka.sasl.username=a", "console.kafka.sasl.password=b"}, "sasl.jaas.config"},
	} {
		cfg, err := Load("", append([]string{"log.dirs=" + t.TempDir(), "console.listen="}, tc.settings...))
		if err != nil {
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: %v, want %q", tc.settings, err, tc.want)
			}
			continue
		}
		app, err := New(cfg, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = app.Start(ctx)
		cancel()
		app.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: start: %v, want %q", tc.settings, err, tc.want)
		}
	}
}

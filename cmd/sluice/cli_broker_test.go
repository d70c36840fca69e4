package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// Which brokers the CLI tests talk to:
//
//	SLUICE_TEST_BROKERS=host:port  a running broker (it must hold no topics or
//	                               groups, or the golden files will not match)
//	SLUICE_TEST_BROKER=serve       Sluice's own broker, run in this process on
//	                               free ports (internal/testcluster)
//	SLUICE_TEST_BROKER=kfake       franz-go's in-process Kafka
//
// By default the golden test runs against both serve and kfake (the CLI
// against Sluice, and against a reference Kafka implementation), the other
// tests against serve. The golden files are per kind (testdata/cli/<kind>/),
// because brokers differ in ids, racks, member ids and error texts.
const (
	testBrokersEnv    = "SLUICE_TEST_BROKERS"
	testBrokerKindEnv = "SLUICE_TEST_BROKER"
)

// testBroker is a broker the CLI tests talk to.
type testBroker struct {
	addr string // bootstrap host:port
	kind string // "external", "serve" or "kfake"
}

// testBrokerKinds lists the kinds of broker a test runs against (see above);
// all is whether the default is every kind rather than serve alone.
func testBrokerKinds(all bool) []string {
	if os.Getenv(testBrokersEnv) != "" {
		return []string{"external"}
	}
	if k := os.Getenv(testBrokerKindEnv); k != "" {
		return []string{k}
	}
	if all {
		return []string{"serve", "kfake"}
	}
	return []string{"serve"}
}

// startTestBroker starts a broker of the given kind; it is stopped when the
// test ends.
func startTestBroker(t *testing.T, kind string) testBroker {
	t.Helper()
	switch kind {
	case "external":
		return testBroker{addr: os.Getenv(testBrokersEnv), kind: kind}
	case "serve":
		return startServeBroker(t)
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("golden-cluster"))
		if err != nil {
			t.Fatalf("kfake: %v", err)
		}
		t.Cleanup(c.Close)
		return testBroker{addr: c.ListenAddrs()[0], kind: "kfake"}
	}
	t.Fatalf("%s=%q: want serve or kfake", testBrokerKindEnv, kind)
	return testBroker{}
}

// startServeBroker starts Sluice's broker in this process, single node,
// wired as `sluice serve` wires it (testcluster), with its data in a
// temporary directory and the console off.
func startServeBroker(t *testing.T) testBroker {
	t.Helper()
	// SLUICE_TEST_SERVE_LOG=debug (or info, ...) shows the broker's log.
	opts := []testcluster.Option{testcluster.LogLevel(slog.LevelWarn)}
	if v := os.Getenv("SLUICE_TEST_SERVE_LOG"); v != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(v)); err != nil {
			t.Fatalf("SLUICE_TEST_SERVE_LOG=%q: %v", v, err)
		}
		opts = []testcluster.Option{testcluster.LogLevel(level), testcluster.LogTo(os.Stderr)}
	}
	c := testcluster.New(t, append(opts, testcluster.Settings(
		"broker.id=1",
		"num.partitions=1",
		"auto.create.topics.enable=false",
		"offsets.topic.replication.factor=1",
		"group.initial.rebalance.delay.ms=0",
	))...)
	return testBroker{addr: c.Addr(), kind: "serve"}
}

// waitForBroker polls until the broker answers metadata with a controller.
func waitForBroker(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m, err := adm.BrokerMetadata(ctx)
		if err == nil && (m.Controller < 0 || len(m.Brokers) == 0) {
			err = fmt.Errorf("no controller elected yet (controller %d, %d brokers)", m.Controller, len(m.Brokers))
		}
		if err != nil {
			return fmt.Errorf("broker at %s: %w", addr, err)
		}
		return nil
	})
}

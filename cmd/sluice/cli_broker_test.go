package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Which brokers the CLI tests talk to:
//
//	SLUICE_TEST_BROKERS=host:port  a running broker (it must hold no topics or
//	                               groups, or the golden files will not match)
//	SLUICE_TEST_BROKER=serve       Sluice's own broker: `sluice serve`, run in
//	                               this process on free ports
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

// startServeBroker runs `sluice serve` in this process, single node, with its
// data in a temporary directory and the console off.
func startServeBroker(t *testing.T) testBroker {
	t.Helper()
	serve, ok := commands["serve"]
	if !ok {
		t.Fatal("the serve command is not part of this binary")
	}
	dir := t.TempDir()
	addr := testutil.FreeAddr(t)
	level := os.Getenv("SLUICE_TEST_SERVE_LOG") // e.g. debug, to see the broker's log
	if level == "" {
		level = "warn"
	}
	args := []string{"--log-level", level}
	for _, kv := range []string{
		"listeners=PLAINTEXT://" + addr,
		"log.dirs=" + filepath.Join(dir, "kafka"),
		"console.data.dir=" + filepath.Join(dir, "console"),
		"console.listen=",
		"broker.id=1",
		"num.partitions=1",
		"auto.create.topics.enable=false",
		"offsets.topic.replication.factor=1",
		"group.initial.rebalance.delay.ms=0",
	} {
		args = append(args, "--override", kv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- serve.run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("sluice serve exited %d", code)
			}
		case <-time.After(30 * time.Second):
			t.Error("sluice serve did not stop within 30s")
		}
	})
	// Fail fast when serve exits at once (bad config, port taken).
	select {
	case code := <-done:
		t.Fatalf("sluice serve exited %d at start", code)
	case <-time.After(50 * time.Millisecond):
	}
	return testBroker{addr: addr, kind: "serve"}
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

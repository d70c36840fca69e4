package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/testutil"
)

func perfRun(t *testing.T, mode string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return perfRunEnv(t, "", mode, args...)
}

// perfRunEnv runs sluice perf with $SLUICE_BROKERS set to brokers (unset
// when empty), whatever the test process's own environment says.
func perfRunEnv(t *testing.T, brokers, mode string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == brokersEnv {
			return brokers
		}
		return ""
	}
	code = perfMain(ctx, mode, args, &out, &errb, getenv)
	return code, out.String(), errb.String()
}

// TestPerfBrokersFromEnv: $SLUICE_BROKERS is the default of --brokers, as
// for every other subcommand, and --brokers wins over it.
func TestPerfBrokersFromEnv(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	live := strings.Join(c.ListenAddrs(), ",")
	dead := testutil.FreeAddr(t)

	code, out, errOut := perfRunEnv(t, live, "produce", "--topic", "env", "--num-records", "200", "--progress", "0")
	if code != 0 || !strings.Contains(out, "200 records") {
		t.Fatalf("produce with $SLUICE_BROKERS: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = perfRunEnv(t, dead, "consume", "--brokers", live, "--topic", "env", "--num-records", "200", "--progress", "0")
	if code != 0 {
		t.Fatalf("--brokers over $SLUICE_BROKERS: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = perfRunEnv(t, dead, "produce", "--topic", "env", "--setup-timeout", "1s", "--progress", "0")
	if code != 1 || !strings.Contains(out+errOut, dead) {
		t.Fatalf("with a dead $SLUICE_BROKERS: exit %d, want 1 naming %s\nstdout: %s\nstderr: %s", code, dead, out, errOut)
	}
}

func TestPerfProduceConsumeAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")

	code, out, errOut := perfRun(t, "produce", "--brokers", brokers, "--topic", "cli", "--num-records", "3000",
		"--record-size", "200", "--partitions", "3", "--acks", "all", "--compression", "zstd", "--payload", "text",
		"--producers", "2", "--linger", "1ms", "--output", "json", "--progress", "100ms")
	if code != 0 {
		t.Fatalf("produce exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var res perf.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("produce --output json is not one JSON object: %v\n%s", err, out)
	}
	if res.Mode != "produce" || res.Records != 3000 || res.Bytes != 3000*200 || res.Errors != 0 {
		t.Fatalf("produce summary: %+v", res)
	}
	if res.Latency == nil || res.Latency.Count != 3000 || res.Latency.P999 < res.Latency.P50 {
		t.Fatalf("produce latency: %+v", res.Latency)
	}
	if res.Config["compression"] != "zstd" || res.Config["partitions"] != float64(3) {
		t.Fatalf("produce config echo: %v", res.Config)
	}

	code, out, errOut = perfRun(t, "consume", "--brokers", brokers, "--topic", "cli", "--num-records", "3000",
		"--consumers", "3")
	if code != 0 {
		t.Fatalf("consume exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"3000 records consumed", "records/s", "MiB/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("consume text summary lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = perfRun(t, "e2e", "--brokers", brokers, "--topic", "cli-e2e", "--throughput", "1000",
		"--duration", "1s", "--output", "json", "--progress", "200ms")
	if code != 0 {
		t.Fatalf("e2e exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	res = perf.Result{}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("e2e JSON: %v\n%s", err, out)
	}
	if res.Records != 1000 || res.Latency == nil || res.Latency.Count != 1000 || res.ProduceLatency == nil {
		t.Fatalf("e2e summary: %+v", res)
	}
	if !strings.Contains(errOut, "e2e") || !strings.Contains(errOut, "records/s") {
		t.Errorf("no progress line on stderr: %q", errOut)
	}

	// Asking for more than the topic holds fails with a clear message.
	code, out, _ = perfRun(t, "consume", "--brokers", brokers, "--topic", "cli", "--num-records", "3001",
		"--idle-timeout", "300ms", "--progress", "0")
	if code != 1 || !strings.Contains(out, "read 3000 of 3001 records") {
		t.Fatalf("short consume: exit %d, output %q", code, out)
	}
}

func TestPerfBadInput(t *testing.T) {
	addr := testutil.FreeAddr(t)
	for _, tc := range []struct {
		mode string
		args []string
		code int
		want string
	}{
		{"fly", nil, exitUsage, "unknown mode"},
		{"produce", []string{"--num-records", "x"}, exitUsage, "invalid value"},
		{"produce", []string{"--output", "yaml"}, exitUsage, "--output"},
		{"produce", []string{"--partitions", "0"}, exitUsage, "--partitions"},
		{"produce", []string{"--idempotent", "maybe"}, exitUsage, "--idempotent"},
		{"produce", []string{"stray"}, exitUsage, "unexpected arguments"},
		{"produce", []string{"--brokers", addr, "--acks", "2"}, exitUsage, "acks must be 0, 1 or all"},
		{"produce", []string{"--brokers", addr, "--compression", "brotli"}, exitUsage, "compression must be"},
		{"produce", []string{"--brokers", addr, "--payload", "zeros"}, exitUsage, "payload must be"},
		{"produce", []string{"--brokers", addr, "--acks", "1", "--idempotent", "true"}, exitUsage, "needs acks=all"},
		{"consume", []string{"--brokers", addr, "--num-records", "0"}, exitUsage, "must be positive"},
		{"produce", []string{"--brokers", addr, "--setup-timeout", "1s"}, 1, addr},
		{"e2e", []string{"--brokers", addr, "--record-size", "4"}, 1, "at least 8 bytes"},
		{"consume", []string{"--brokers", addr, "--setup-timeout", "1s"}, 1, addr},
	} {
		code, out, errOut := perfRun(t, tc.mode, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("perf %s %v: exit %d, want %d with %q\nstdout: %s\nstderr: %s",
				tc.mode, tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
}

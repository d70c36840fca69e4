package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/perf/kafkaperf"
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

// TestPerfLoadFlags: the load mode is the default when the first argument
// is a flag, --rate takes records/s or a byte rate, and bad values are
// usage errors naming the flag.
func TestPerfLoadFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		mode    string
		restLen int
	}{
		{[]string{"--producers", "2"}, "load", 2},
		{[]string{"-rate=5"}, "load", 1},
		{[]string{"load", "--producers", "2"}, "load", 2},
		{[]string{"produce", "--num-records", "1"}, "produce", 2},
	} {
		mode, rest := perfMode(tc.args)
		if mode != tc.mode || len(rest) != tc.restLen {
			t.Errorf("perfMode(%q) = %q, %q", tc.args, mode, rest)
		}
	}

	for _, tc := range []struct {
		rate string
		size int
		want float64
	}{
		{"10000", 100, 10000},
		{"-1", 100, -1},
		{"0", 100, -1},
		{"20MiB/s", 1024, 20 * 1024},
		{"20MiB", 1024, 20 * 1024},
		{"1 GiB/s", 1 << 20, 1024},
		{"500KiB/s", 512, 1000},
		{"1MB/s", 1000, 1000},
		{"2.5kB/s", 10, 250},
		{"100B/s", 10, 10},
	} {
		got, err := kafkaperf.ParseRate(tc.rate, tc.size)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q, %d) = %v, %v; want %v", tc.rate, tc.size, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "fast", "10MiB/h", "-5MiB/s", "0MiB/s", "NaN", "Inf", "1e400"} {
		if v, err := kafkaperf.ParseRate(bad, 100); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", bad, v)
		}
	}
	if _, err := kafkaperf.ParseRate("1MiB/s", 0); err == nil || !strings.Contains(err.Error(), "record size") {
		t.Errorf("a byte rate with 0-byte records: %v", err)
	}

	// Every flag reaches the configuration.
	var errb bytes.Buffer
	f, code := parsePerfFlags("load", []string{"--brokers", "a:1,b:2", "--producers", "3", "--consumers", "4", "--topics", "5",
		"--partitions", "6", "--rate", "1MiB/s", "--record-size", "1024", "--duration", "90s", "--group", "g",
		"--acks", "all", "--replication-factor", "3", "--fetch-max-partition-bytes", "4096", "--idle-timeout", "3s"},
		&errb, func(string) string { return "" })
	if f == nil {
		t.Fatalf("parsing load flags: exit %d: %s", code, errb.String())
	}
	lc, err := f.loadConfig(f.common(&errb))
	if err != nil {
		t.Fatal(err)
	}
	if lc.Producers != 3 || lc.Consumers != 4 || lc.Topics != 5 || lc.Partitions != 6 || lc.Throughput != 1024 ||
		lc.Duration != 90*time.Second || lc.Group != "g" || lc.Acks != "all" || lc.ReplicationFactor != 3 ||
		lc.FetchMaxPartitionBytes != 4096 || lc.IdleTimeout != 3*time.Second || len(lc.Brokers) != 2 {
		t.Fatalf("load config %+v", lc)
	}

	addr := testutil.FreeAddr(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topics", "0"}, "--topics"},
		{[]string{"--consumers", "-1"}, "--consumers"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--rate", "lots"}, "--rate"},
		{[]string{"--producers", "0"}, "--producers"},
		{[]string{"--partitions", "0"}, "--partitions"},
		{[]string{"--fetch-max-partition-bytes", "-1"}, "--fetch-max-partition-bytes"},
		{[]string{"--record-size", "4"}, "record-size 8"},
		{[]string{"--throughput", "5"}, "flag provided but not defined"},
		{[]string{"--output", "csv"}, "--output"},
	} {
		code, out, errOut := perfRun(t, "load", append([]string{"--brokers", addr}, tc.args...)...)
		if code != exitUsage || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("perf load %v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, code, exitUsage, tc.want, out, errOut)
		}
	}
	// Nothing listens: a clear error, exit 1.
	code, out, errOut := perfRun(t, "load", "--brokers", addr, "--setup-timeout", "1s", "--duration", "1s")
	if code != 1 || !strings.Contains(out+errOut, addr) {
		t.Errorf("perf load against nothing: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// TestPerfLoadAgainstServe runs the load mode the way a user sizing a
// cluster would, against Sluice's own broker in this process: the JSON
// summary has both sides with exact tails, the progress lines show the
// p99 so far, and the broker holds exactly the records produced.
func TestPerfLoadAgainstServe(t *testing.T) {
	testutil.Heavy(t, "a load run against sluice serve, ~4 s")
	b := startServeBroker(t)
	waitForBroker(t, b.addr)
	code, out, errOut := perfRun(t, "load", "--brokers", b.addr, "--producers", "2", "--consumers", "2",
		"--topics", "2", "--partitions", "3", "--rate", "2000", "--duration", "2s", "--record-size", "200",
		"--acks", "all", "--output", "json", "--progress", "250ms")
	if code != 0 {
		t.Fatalf("perf load exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var res perf.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--output json is not one JSON object: %v\n%s", err, out)
	}
	p, c := res.Produce, res.Consume
	if res.Mode != "load" || p == nil || c == nil {
		t.Fatalf("load JSON: %s", out)
	}
	if p.Records < 3600 || p.Records > 4001 || c.Records != p.Records || p.Errors != 0 || res.FirstError != "" {
		t.Fatalf("produced %d, consumed %d, errors %d (%s); want about 4000 each", p.Records, c.Records, p.Errors, res.FirstError)
	}
	if p.RecordsPerSec < 1600 || p.RecordsPerSec > 2400 || p.MiBPerSec <= 0 {
		t.Fatalf("produce rate %.0f records/s, %.3f MiB/s; want about 2000", p.RecordsPerSec, p.MiBPerSec)
	}
	for name, l := range map[string]*perf.Latency{"produce": p.Latency, "e2e": c.Latency} {
		// Under 16,384 values every percentile is exact: p99.9 and max
		// are recorded latencies, ordered.
		if l == nil || l.Count != uint64(p.Records) || !(l.Min <= l.P50 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
			t.Fatalf("%s latency %+v", name, l)
		}
	}
	if len(p.Samples) < 6 || len(c.Samples) < 6 {
		t.Fatalf("samples: %d produce, %d consume", len(p.Samples), len(c.Samples))
	}
	if s := p.Samples[len(p.Samples)/2]; s.P99SoFar == nil || s.RecordsPerSec < 1000 {
		t.Fatalf("a produce sample mid-run: %+v", s)
	}
	for _, want := range []string{"produce", "consume", "records/s", "MiB/s", "p99", "so far"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lines lack %q:\n%s", want, errOut)
		}
	}

	// The broker holds what was acknowledged, on both topics.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "sluice-perf-0", "sluice-perf-1")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	parts := 0
	ends.Each(func(o kadm.ListedOffset) {
		total += o.Offset
		parts++
	})
	if total != p.Records || parts != 6 {
		t.Fatalf("the broker holds %d records in %d partitions, want %d in 6", total, parts, p.Records)
	}

	// The text summary is a table with a row per side.
	code, out, errOut = perfRun(t, "load", "--brokers", b.addr, "--topic", "text", "--rate", "1000",
		"--duration", "1s", "--progress", "0")
	if code != 0 {
		t.Fatalf("perf load (text) exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "produce") || !strings.HasPrefix(lines[3], "consume") ||
		!strings.Contains(lines[1], "p99.9") || errOut != "" {
		t.Fatalf("text summary:\n%s\nstderr: %s", out, errOut)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/zktest"
)

func TestParseProc(t *testing.T) {
	// The command name may hold spaces and parentheses; fields count from
	// the last ')'. utime 250 + stime 50 ticks.
	line := []byte("4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 0 0\n")
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 300 / clockTicks; math.Abs(got-want) > 1e-9 {
		t.Fatalf("cpu seconds %v, want %v", got, want)
	}
	for _, bad := range []string{"", "12 noparen S 1", "1 (x) S 1 2 3"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("malformed stat %q accepted", bad)
		}
	}
	// This process's own figures are readable and sane.
	if cpu, err := cpuSeconds(os.Getpid()); err != nil || cpu < 0 {
		t.Fatalf("own cpu: %v, %v", cpu, err)
	}
	rss, err := peakRSSKiB(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("own VmHWM: %v, %v", rss, err)
	}
	if _, err := parseVmHWM(strings.NewReader("Name:\tx\nVmRSS:\t 10 kB\n")); err == nil {
		t.Fatal("status without VmHWM accepted")
	}
	if v, err := parseVmHWM(strings.NewReader("Name:\tx\nVmHWM:\t  123456 kB\n")); err != nil || v != 123456 {
		t.Fatalf("VmHWM = %v, %v", v, err)
	}
	m := describeMachine()
	if m.Cores < 1 || m.Kernel == "" {
		t.Fatalf("machine: %+v", m)
	}
}

func TestConfig(t *testing.T) {
	c, err := parseConfig([]string{"--smoke"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Records != 20_000 || c.Runs != 1 || len(c.Sizes) != 1 || c.E2ESecs != 2 || c.Out != "" {
		t.Fatalf("smoke defaults: %+v", c)
	}
	c, err = parseConfig([]string{"--smoke", "--records", "500", "--runs", "2"})
	if err != nil || c.Records != 500 || c.Runs != 2 {
		t.Fatalf("explicit flags under --smoke: %+v %v", c, err)
	}
	c, err = parseConfig(nil)
	if err != nil || c.Records != 1_000_000 || c.Runs != 3 || len(c.Sizes)*len(c.Partitions)*len(c.Acks)*len(c.Compression) != 16 ||
		c.Out != "BENCHMARKS.md" {
		t.Fatalf("full defaults: %+v %v", c, err)
	}
	// Replication 3: a smaller matrix by default (6 partitions, no
	// compression), each setting still overridable.
	c, err = parseConfig([]string{"--replication", "3"})
	if err != nil || c.Replication != 3 || !slices.Equal(c.Sizes, []int{100, 1024}) || !slices.Equal(c.Partitions, []int{6}) ||
		!slices.Equal(c.Acks, []string{"1", "all"}) || !slices.Equal(c.Compression, []string{"none"}) || !c.E2E || c.Out != "BENCHMARKS.md" {
		t.Fatalf("replication 3 defaults: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"--replication", "3", "--partitions", "1,12", "--compression", "none,zstd", "--sizes", "512", "--acks", "all"})
	if err != nil || !slices.Equal(c.Partitions, []int{1, 12}) || !slices.Equal(c.Compression, []string{"none", "zstd"}) ||
		!slices.Equal(c.Sizes, []int{512}) || !slices.Equal(c.Acks, []string{"all"}) {
		t.Fatalf("replication 3 with explicit flags: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"--replication", "3", "--smoke"})
	if err != nil || c.Records != 20_000 || c.Runs != 1 || !slices.Equal(c.Sizes, []int{100}) || !slices.Equal(c.Partitions, []int{6}) ||
		!slices.Equal(c.Acks, []string{"1", "all"}) || !slices.Equal(c.Compression, []string{"none"}) || c.Out != "" {
		t.Fatalf("replication 3 smoke defaults: %+v %v", c, err)
	}
	c, err = parseConfig(nil)
	if err != nil || !slices.Equal(c.Systems, []string{"sluice", "kfake", "nats", "rabbitmq-stream", "rabbitmq-quorum"}) {
		t.Fatalf("default systems: %v %v", c.Systems, err)
	}
	c, err = parseConfig([]string{"--systems", "rabbitmq-quorum,sluice"})
	if err != nil || !slices.Equal(c.Systems, []string{"rabbitmq-quorum", "sluice"}) {
		t.Fatalf("--systems rabbitmq-quorum,sluice: %v %v", c.Systems, err)
	}
	for _, args := range [][]string{
		{"--systems", "rabbitmq"},
		{"--replication", "0"},
		{"--replication", "6"},
		{"--systems", "kafka"},
		{"--sizes", "0"},
		{"--acks", "0"},
		{"--compression", "brotli"},
		{"--runs", "0"},
	} {
		if _, err := parseConfig(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parseConfig([]string{"--replication", "-1"}); err == nil || !strings.Contains(err.Error(), "--replication -1") {
		t.Errorf("replication -1: %v", err)
	}
}

// TestClusterCommands: with three brokers every system starts a cluster of
// three on distinct loopback ports and data directories, Sluice's brokers
// with their own broker.id, ZooKeeper and the replication settings, NATS's
// routed to each other; the clients get every broker.
func TestClusterCommands(t *testing.T) {
	sys := newSystems(paths{Sluice: "bin/sluice", KfakeServer: "kfakeserver", NatsPerf: "natsperf", NatsServer: "nats-server",
		SluiceServe: "serve --override listeners=PLAINTEXT://127.0.0.1:{port} --override log.dirs={dir}/kafka", SluiceCluster: defaultSluiceCluster})
	l := layout{Brokers: 3, Ports: []int{9001, 9002, 9003}, Peers: []int{9101, 9102, 9103}, Monitor: []int{9201, 9202, 9203},
		Dir: "/d", ZK: "127.0.0.1:2181"}

	sl := sys["sluice"].procs(l)
	if len(sl) != 3 {
		t.Fatalf("sluice cluster: %d processes", len(sl))
	}
	for i, p := range sl {
		argv := strings.Join(p.Argv, " ")
		for _, want := range []string{
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d ", 9001+i),
			fmt.Sprintf("log.dirs=/d/broker-%d/kafka ", i+1),
			fmt.Sprintf("broker.id=%d ", i+1),
			"zookeeper.connect=127.0.0.1:2181/sluice-bench ",
			"default.replication.factor=3 ", "min.insync.replicas=2 ", "zookeeper.session.timeout.ms=6000 ",
		} {
			if !strings.Contains(argv, want) {
				t.Errorf("sluice broker %d lacks %q: %s", i+1, want, argv)
			}
		}
		if p.Wait != fmt.Sprintf("127.0.0.1:%d", 9001+i) {
			t.Errorf("sluice broker %d waits on %s", i+1, p.Wait)
		}
	}
	if got := sys["sluice"].addr(l); got != "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003" {
		t.Errorf("sluice client address %q", got)
	}
	// One broker: no cluster settings, the measurement's own directory.
	one := layout{Brokers: 1, Ports: []int{9001}, Peers: []int{9101}, Monitor: []int{9201}, Dir: "/d"}
	if argv := strings.Join(sys["sluice"].procs(one)[0].Argv, " "); strings.Contains(argv, "zookeeper") || !strings.Contains(argv, "log.dirs=/d/kafka") {
		t.Errorf("single sluice broker: %s", argv)
	}

	kf := sys["kfake"].procs(l)
	if len(kf) != 1 || !slices.Contains(kf[0].Argv, "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003") {
		t.Errorf("kfake cluster: %+v", kf)
	}

	ns := sys["nats"].procs(l)
	if len(ns) != 3 {
		t.Fatalf("nats cluster: %d processes", len(ns))
	}
	for i, p := range ns {
		argv := strings.Join(p.Argv, " ")
		for _, want := range []string{
			fmt.Sprintf("-sd /d/broker-%d ", i+1), fmt.Sprintf("-p %d ", 9001+i), fmt.Sprintf("--server_name n%d ", i+1),
			"--cluster_name bench ", fmt.Sprintf("--cluster nats://127.0.0.1:%d ", 9101+i), fmt.Sprintf("-m %d", 9201+i),
		} {
			if !strings.Contains(argv+" ", want) {
				t.Errorf("nats server %d lacks %q: %s", i+1, want, argv)
			}
		}
		routes := p.Argv[slices.Index(p.Argv, "--routes")+1]
		if strings.Count(routes, "nats://") != 2 || strings.Contains(routes, fmt.Sprint(9101+i)) {
			t.Errorf("nats server %d routes %q", i+1, routes)
		}
	}
	if got := sys["nats"].addr(l); got != "nats://127.0.0.1:9001,nats://127.0.0.1:9002,nats://127.0.0.1:9003" {
		t.Errorf("nats client address %q", got)
	}
	w := workload{Size: 100, Partitions: 6, Acks: "all", Compression: "none", Replication: 3}
	if argv := strings.Join(sys["sluice"].client("produce", w, "a,b,c", 10, 1, 1), " "); !strings.Contains(argv, "--brokers a,b,c ") ||
		!strings.Contains(argv, "--replication-factor 3 ") {
		t.Errorf("sluice perf produce: %s", argv)
	}
	if argv := strings.Join(sys["nats"].client("produce", w, "a,b,c", 10, 1, 1), " "); !strings.Contains(argv, "--replicas 3 ") {
		t.Errorf("natsperf produce: %s", argv)
	}
	if w.String() != "100 B, 6 part., acks=all, none, RF 3" {
		t.Errorf("workload %q", w)
	}
}

// TestRabbitCommands: a RabbitMQ measurement starts its own epmd first, then
// a node with every location under the measurement's directory, listening
// on loopback only, its config file written before the start; the clients
// speak AMQP 0-9-1 to it with the queue type of the system.
func TestRabbitCommands(t *testing.T) {
	sys := newSystems(paths{RabbitPerf: "rabbitperf", RabbitServer: "/rs", Epmd: "/epmd"})
	l := layout{Brokers: 1, Ports: []int{5001}, Peers: []int{5002}, Monitor: []int{5003}, Dir: "/d"}
	for key, qt := range map[string]string{"rabbitmq-stream": "stream", "rabbitmq-quorum": "quorum"} {
		s := sys[key]
		ps := s.procs(l)
		if len(ps) != 2 {
			t.Fatalf("%s: %d processes", key, len(ps))
		}
		epmd, node := ps[0], ps[1]
		if strings.Join(epmd.Argv, " ") != "/epmd -port 5003 -address 127.0.0.1" || epmd.Stage != 0 || !epmd.Helper ||
			epmd.Wait != "127.0.0.1:5003" {
			t.Errorf("%s epmd: %+v", key, epmd)
		}
		argv := strings.Join(node.Argv, " ")
		for _, want := range []string{"env ", "HOME=/d/home ", "ERL_EPMD_PORT=5003 ", "RABBITMQ_NODENAME=bench5001@localhost ",
			"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 ", "RABBITMQ_NODE_PORT=5001 ", "RABBITMQ_DIST_PORT=5002 ",
			"RABBITMQ_CONFIG_FILE=/d/rabbitmq.conf ", "RABBITMQ_MNESIA_BASE=/d/mnesia ", "RABBITMQ_CONF_ENV_FILE=/d/", " /rs"} {
			if !strings.Contains(argv+" ", want) {
				t.Errorf("%s node lacks %q: %s", key, want, argv)
			}
		}
		if node.Stage != 1 || node.Helper || !node.MeasureChild || node.Wait != "127.0.0.1:5001" || node.StartTimeout < time.Minute {
			t.Errorf("%s node: %+v", key, node)
		}
		if conf := node.Files["/d/rabbitmq.conf"]; !strings.Contains(conf, "listeners.tcp.1 = 127.0.0.1:5001\n") {
			t.Errorf("%s rabbitmq.conf:\n%s", key, conf)
		}
		if _, ok := node.Files["/d/enabled_plugins"]; !ok {
			t.Errorf("%s: no enabled_plugins file", key)
		}
		if got := s.addr(l); got != "amqp://guest:guest@127.0.0.1:5001/" {
			t.Errorf("%s address %q", key, got)
		}
		w := workload{Size: 1024, Partitions: 6, Acks: "all", Compression: "none"}
		if argv := strings.Join(s.client("produce", w, "amqp://x/", 10, 1, 1), " ") + " "; !strings.Contains(argv, "--queue-type "+qt+" ") ||
			!strings.Contains(argv, "--partitions 6 ") || !strings.Contains(argv, "--record-size 1024 ") || !strings.Contains(argv, "--url amqp://x/ ") {
			t.Errorf("%s produce: %s", key, argv)
		}
		if argv := strings.Join(s.client("e2e", w, "amqp://x/", 10, 500, 3), " ") + " "; !strings.Contains(argv, "--throughput 500 ") ||
			!strings.Contains(argv, "--duration 3s ") {
			t.Errorf("%s e2e: %s", key, argv)
		}
		if s.unsupported(w) != "" || s.unsupported(workload{Compression: "zstd"}) == "" ||
			s.unsupported(workload{Compression: "none", Replication: 3}) == "" {
			t.Errorf("%s: wrong unsupported workloads", key)
		}
	}
}

func res(rate, mib, p99 float64, cpu float64) *result {
	r := &perf.Result{Records: 1_000_000, RecordsPerSec: rate, MiBPerSec: mib,
		Latency: &perf.Latency{P50: p99 / 2, P95: p99 * 0.9, P99: p99, P999: p99 * 1.1, Max: p99 * 2}}
	return &result{Result: r, BrokerCPU: cpu, Command: []string{"bin/sluice", "perf", "produce"}}
}

func TestReport(t *testing.T) {
	ws := []workload{{Size: 100, Partitions: 1, Acks: "1", Compression: "none"}}
	e2e := workload{E2E: true, Size: 100, Partitions: 1, Acks: "1", Compression: "none"}
	w := ws[0].String()
	ms := []measurement{
		{System: "Sluice", Workload: w, Run: 1, Produce: res(1e6, 95, 10, 0.5), Consume: res(2e6, 190, 0, 0.1), PeakRSSKiB: 100 << 10},
		{System: "Sluice", Workload: w, Run: 2, Produce: res(3e6, 285, 20, 0.7), Consume: res(2e6, 190, 0, 0.1), PeakRSSKiB: 120 << 10},
		{System: "Sluice", Workload: w, Run: 3, Produce: res(2e6, 190, 30, 0.6), Consume: res(2e6, 190, 0, 0.1), PeakRSSKiB: 110 << 10},
		{System: "kfake", Workload: w, Run: 1, Produce: res(1e6, 95, 5, 0.3), Consume: res(1e6, 95, 0, 0.2)},
		{System: "kfake", Workload: w, Run: 2, Err: "produce: boom"},
		{System: "Sluice", Workload: e2e.String(), Run: 1, E2E: res(1e4, 1, 2.5, 0.4)},
	}
	sys := newSystems(paths{Sluice: "bin/sluice", KfakeServer: "kfakeserver", NatsPerf: "natsperf", NatsServer: "nats-server"})
	r := report{cfg: &config{Records: 1_000_000, Runs: 3, E2E: true, E2ERate: 10_000, E2ESecs: 10, Systems: []string{"sluice", "kfake"},
		Sizes: []int{100}, Partitions: []int{1}, Acks: []string{"1"}, Compression: []string{"none"}, Note: "a test note"},
		systems: []*system{sys["sluice"], sys["kfake"]}, workloads: ws, e2e: e2e, ms: ms,
		versions: map[string]string{"Sluice": "sluice 0.1.0"}, began: time.Now(), raw: "/tmp/x/results.json"}

	s := r.stat(w, "Sluice", produceRate)
	if s.median() != 2e6 || s.min() != 1e6 || s.max() != 3e6 {
		t.Fatalf("median/min/max %v %v %v", s.median(), s.min(), s.max())
	}
	if even := (stat{vals: []float64{4, 1, 3, 2}}).median(); even != 2.5 {
		t.Fatalf("even median %v", even)
	}
	if got := r.rateCell(w, "Sluice", produceRate, produceMiB); got != "2.00 M/s (1.00 M–3.00 M), 190 MiB/s" {
		t.Fatalf("rate cell %q", got)
	}
	if got := r.ratio(w, "Sluice", "kfake", produceRate); got != "2.00×" {
		t.Fatalf("ratio %q", got)
	}
	md := r.markdown()
	for _, want := range []string{
		"## Produce throughput", "## Consume from the start", "## Broker cost", "## End-to-end latency",
		"| 100 B, 1 part., acks=1, none | 2.00 M/s (1.00 M–3.00 M), 190 MiB/s | 1.00 M/s, 95.0 MiB/s | 2.00× |",
		"0.60 / 0.10 s, 120 MiB", // CPU s per M records (median), peak RSS (max)
		"a test note", "sluice 0.1.0",
		"kfake, 100 B, 1 part., acks=1, none, run 2: produce: boom",
		"= 2.00× (target ≥ 1×): met",
		"end-to-end p99 at 10000 records/s: 2.500 ms (target < 3 ms): met",
		"BENCH_RECORDS=1000000 BENCH_RUNS=3",
		"bin/sluice perf produce",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
}

// TestReportReplicated: a replication factor 3 report says so in its title,
// settings and table titles, says what the CPU and RSS figures sum, skips
// the single-broker targets and shows every broker's command.
func TestReportReplicated(t *testing.T) {
	ws := []workload{{Size: 100, Partitions: 6, Acks: "all", Compression: "none", Replication: 3}}
	e2e := workload{E2E: true, Size: 100, Partitions: 1, Acks: "1", Compression: "none", Replication: 3}
	w := ws[0].String()
	ms := []measurement{
		{System: "Sluice", Workload: w, Run: 1, Produce: res(1e6, 95, 10, 0.5), Consume: res(2e6, 190, 0, 0.1), PeakRSSKiB: 300 << 10},
		{System: "kfake", Workload: w, Run: 1, Produce: res(1e6, 95, 5, 0.3), Consume: res(1e6, 95, 0, 0.2), PeakRSSKiB: 100 << 10},
		{System: "Sluice", Workload: e2e.String(), Run: 1, E2E: res(1e4, 1, 2.5, 0.4)},
	}
	sys := newSystems(paths{Sluice: "bin/sluice", KfakeServer: "kfakeserver", NatsPerf: "natsperf", NatsServer: "nats-server",
		SluiceServe: "serve --override listeners=PLAINTEXT://127.0.0.1:{port}", SluiceCluster: defaultSluiceCluster})
	r := report{cfg: &config{Records: 1_000_000, Runs: 1, E2E: true, E2ERate: 10_000, E2ESecs: 10, Systems: []string{"sluice", "kfake"},
		Sizes: []int{100}, Partitions: []int{6}, Acks: []string{"all"}, Compression: []string{"none"}, Replication: 3},
		systems: []*system{sys["sluice"], sys["kfake"]}, workloads: ws, e2e: e2e, ms: ms, began: time.Now(), raw: "/tmp/x/results.json"}
	md := r.markdown()
	for _, want := range []string{
		"# Side-by-side benchmark, replication factor 3: Sluice, kfake",
		"**Replication factor 3**", "min.insync.replicas 2", "ZooKeeper's CPU and memory are not counted",
		"**sum over the broker processes**", "**sum of the broker processes' VmHWM**",
		"## Produce throughput (records/s, MiB/s) — replication factor 3",
		"## Consume from the start (records/s, MiB/s) — replication factor 3",
		"## Broker cost, summed over the 3 broker processes: CPU seconds per million records (produce / consume), peak RSS — replication factor 3",
		"## End-to-end latency at 10000 records/s for 10 s (ms, medians of runs; max is the worst run) — replication factor 3",
		"| 100 B, 6 part., acks=all, none, RF 3 | 1.00 M/s, 95.0 MiB/s | 1.00 M/s, 95.0 MiB/s | 1.00× |",
		"0.50 / 0.10 s, 300 MiB",
		"not checked against them",
		"BENCH_REPLICATION=3",
		"broker.id=3 ", "ZooKeeper first",
		"kfakeserver --listen 127.0.0.1:0,127.0.0.1:0,127.0.0.1:0",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
	if strings.Contains(md, "(target") {
		t.Errorf("replicated report checked against the single-broker targets:\n%s", md)
	}
}

// TestSmokeRun runs the harness's smoke mode against kfake and NATS
// JetStream (and Sluice when its broker is built in): every system starts,
// every workload measures, the report and the raw results are written.
func TestSmokeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs brokers")
	}
	dir, natsServer := buildBinaries(t)
	c, err := parseConfig([]string{"--smoke", "--records", "5000", "--e2e-seconds", "1", "--profile",
		"--sluice", filepath.Join(dir, "sluice"), "--kfake", filepath.Join(dir, "kfakeserver"),
		"--natsperf", filepath.Join(dir, "natsperf"), "--nats-server", natsServer,
		"--out", filepath.Join(dir, "perf.md"), "--workdir", filepath.Join(dir, "work")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := bench(ctx, c); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(c.WorkDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ms []measurement
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatal(err)
	}
	measured := map[string]int{}
	for _, m := range ms {
		if strings.HasPrefix(m.Err, "n/a") {
			continue
		}
		if m.Err != "" {
			t.Errorf("%s %s: %s", m.System, m.Workload, m.Err)
			continue
		}
		switch {
		case m.E2E != nil:
			if m.E2E.Records != int64(c.E2ERate*c.E2ESecs) || m.E2E.Latency == nil {
				t.Errorf("%s e2e: %+v", m.System, m.E2E.Result)
			}
		default:
			if m.Produce.Records != c.Records || m.Consume.Records < c.Records || m.PeakRSSKiB <= 0 || m.Produce.BrokerCPU < 0 {
				t.Errorf("%s %s: produce %d consume %d rss %d", m.System, m.Workload, m.Produce.Records, m.Consume.Records, m.PeakRSSKiB)
			}
		}
		measured[m.System]++
	}
	// kfake: 2 workloads + e2e; NATS: 1 workload (no zstd) + e2e.
	if measured["kfake"] != 3 || measured["NATS JetStream"] != 2 {
		t.Fatalf("measurements per system: %v", measured)
	}
	for _, want := range []string{"## Produce throughput", "kfake", "NATS JetStream", "| 100 B, 1 part., acks=1, none |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(string(md), "## Failed measurements") {
		t.Errorf("smoke run had failures:\n%s", md)
	}
	// --profile: Sluice's phases are profiled and summarized (kfake and
	// NATS are not).
	t.Logf("measurements per system: %v", measured)
	if measured["Sluice"] > 0 {
		for _, want := range []string{"## Profiles of the Sluice broker", "| 100 B, 1 part., acks=1, none | produce |", "| e2e 100 B, 1 part., acks=1 | e2e |", "CPU:"} {
			if !strings.Contains(string(md), want) {
				t.Errorf("report lacks %q", want)
			}
		}
		for _, m := range ms {
			if m.System != "Sluice" {
				continue
			}
			for phase, pf := range m.Profiles {
				if pf.Err != "" || pf.CPU == "" || pf.AllocsEnd == "" || (phase == "e2e" && pf.Trace == "") {
					t.Errorf("Sluice %s %s profiles: %+v", m.Workload, phase, pf)
				}
			}
		}
	}
}

// TestSmokeRunRabbitMQ runs the smoke mode against the two RabbitMQ
// systems: every node starts and measures, its broker figures are the
// Erlang VM's (not the start script's), and no process outlives the run.
func TestSmokeRunRabbitMQ(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary and runs RabbitMQ nodes")
	}
	if _, err := os.Stat(defaultRabbitServer); err != nil {
		t.Skip("rabbitmq-server not installed (scripts/bench.sh installs it)")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "rabbitperf"), "./rabbitperf")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building rabbitperf: %v\n%s", err, b)
	}
	c, err := parseConfig([]string{"--smoke", "--records", "3000", "--e2e-seconds", "1", "--e2e-rate", "1000",
		"--systems", "rabbitmq-stream,rabbitmq-quorum", "--rabbitperf", filepath.Join(dir, "rabbitperf"),
		"--out", filepath.Join(dir, "perf.md"), "--workdir", filepath.Join(dir, "work")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := bench(ctx, c); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(c.WorkDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ms []measurement
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatal(err)
	}
	measured := map[string]int{}
	for _, m := range ms {
		switch {
		case strings.HasPrefix(m.Err, "n/a"):
			continue
		case m.Err != "":
			t.Errorf("%s %s: %s", m.System, m.Workload, m.Err)
			continue
		case m.E2E != nil:
			if m.E2E.Records != int64(c.E2ERate*c.E2ESecs) || m.E2E.Latency == nil {
				t.Errorf("%s e2e: %+v", m.System, m.E2E.Result)
			}
		default:
			if m.Produce.Records != c.Records || m.Consume.Records != c.Records || m.Produce.Latency == nil || m.Produce.BrokerCPU <= 0 {
				t.Errorf("%s %s: produce %+v consume %+v", m.System, m.Workload, m.Produce.Result, m.Consume.Result)
			}
		}
		// The Erlang VM holds tens of MiB; the start script a few hundred KiB.
		if m.PeakRSSKiB < 20<<10 {
			t.Errorf("%s %s: peak RSS %d KiB is not the Erlang VM's", m.System, m.Workload, m.PeakRSSKiB)
		}
		measured[m.System]++
	}
	// Each: the uncompressed workload and e2e (zstd is n/a).
	if measured["RabbitMQ stream"] != 2 || measured["RabbitMQ quorum"] != 2 {
		t.Fatalf("measurements per system: %v", measured)
	}
	for _, want := range []string{"| workload | RabbitMQ stream | RabbitMQ quorum |", "rabbitmq-server 3.", "amqp091-go v1.16.0",
		"cat > ", "listeners.tcp.1 = 127.0.0.1:0"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// No node or epmd of the run is left: none lists the run's directory.
	out, _ := exec.Command("ps", "-eo", "args").Output()
	if strings.Contains(string(out), c.WorkDir) {
		t.Errorf("processes of the run still running:\n%s", out)
	}
}

// buildBinaries builds sluice, kfakeserver and natsperf into a temporary
// directory, skipping the test when nats-server is missing or cmd/sluice
// does not build at the moment.
func buildBinaries(t *testing.T) (dir, natsServer string) {
	t.Helper()
	natsServer = "/usr/sbin/nats-server"
	if _, err := os.Stat(natsServer); err != nil {
		t.Skip("nats-server not installed (apt-get install nats-server)")
	}
	dir = t.TempDir()
	// bin/sluice is built in the main module (the repository root), the
	// helpers in this one.
	for pkg, out := range map[string]string{"./cmd/sluice": "sluice", "./kfakeserver": "kfakeserver", "./natsperf": "natsperf"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		cmd.Dir = ".."
		if out == "sluice" {
			cmd.Dir = "../.."
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			if out == "sluice" {
				t.Skipf("cmd/sluice does not build right now (another package in progress?): %v\n%s", err, b)
			}
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
	}
	return dir, natsServer
}

// TestSmokeRunReplicated runs a replication factor 3 smoke run: each system
// starts as a three-broker cluster (Sluice with ZooKeeper), every
// measurement succeeds, the report says replication factor 3 and every
// process is gone afterwards.
func TestSmokeRunReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and runs clusters")
	}
	if err := zktest.Available(); err != nil {
		t.Skipf("ZooKeeper is needed for a Sluice cluster: %v", err)
	}
	dir, natsServer := buildBinaries(t)
	c, err := parseConfig([]string{"--smoke", "--replication", "3", "--records", "5000", "--acks", "all", "--e2e-seconds", "1",
		"--sluice", filepath.Join(dir, "sluice"), "--kfake", filepath.Join(dir, "kfakeserver"),
		"--natsperf", filepath.Join(dir, "natsperf"), "--nats-server", natsServer,
		"--out", filepath.Join(dir, "perf.md"), "--workdir", filepath.Join(dir, "work")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A cluster stops whole: the brokers and ZooKeeper.
	sys := newSystems(c.paths)
	logs := filepath.Join(dir, "deploy-logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := deploy(ctx, sys["sluice"], 3, filepath.Join(dir, "deploy"), logs, "deploy", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.procs) != 3 || d.zk == nil || strings.Count(d.addr, ",") != 2 {
		t.Fatalf("sluice cluster: %d processes, zookeeper %v, address %q", len(d.procs), d.zk != nil, d.addr)
	}
	if rss, err := d.peakRSSKiB(); err != nil || rss <= 0 {
		t.Fatalf("summed RSS %v, %v", rss, err)
	}
	zkAddr := d.zk.Addr()
	d.stop()
	for _, p := range d.procs {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.pid())); err == nil {
			t.Errorf("broker %d still running after stop", p.pid())
		}
	}
	if conn, err := net.DialTimeout("tcp", zkAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("ZooKeeper still answers on %s after stop", zkAddr)
	}

	if err := bench(ctx, c); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(c.WorkDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ms []measurement
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatal(err)
	}
	measured := map[string]int{}
	for _, m := range ms {
		if m.Err != "" {
			t.Errorf("%s %s: %s", m.System, m.Workload, m.Err)
			continue
		}
		if m.E2E == nil && (m.Produce.Records != c.Records || m.Consume.Records < c.Records || m.PeakRSSKiB <= 0) {
			t.Errorf("%s %s: produce %d consume %d rss %d", m.System, m.Workload, m.Produce.Records, m.Consume.Records, m.PeakRSSKiB)
		}
		measured[m.System]++
	}
	if measured["Sluice"] != 2 || measured["kfake"] != 2 || measured["NATS JetStream"] != 2 {
		t.Fatalf("measurements per system: %v", measured)
	}
	for _, want := range []string{"# Side-by-side benchmark, replication factor 3", "| 100 B, 6 part., acks=all, none, RF 3 |",
		"— replication factor 3", "<!-- make bench rf3: begin -->"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Every Sluice measurement ran three brokers and a ZooKeeper.
	for _, f := range []string{"broker-1.log", "broker-2.log", "broker-3.log", "zookeeper.log"} {
		if m, _ := filepath.Glob(filepath.Join(c.WorkDir, "logs", "sluice-*-"+f)); len(m) != 2 {
			t.Errorf("sluice logs *-%s: %v", f, m)
		}
	}
}

func TestParsePprofTotals(t *testing.T) {
	out := "Showing nodes accounting for 1.79MB, 55.91% of 3.21MB total\n"
	if got := parseAccounted(out); got != 1.79*(1<<20) {
		t.Errorf("accounted %v", got)
	}
	if got := parseTotal(out); got != 3.21*(1<<20) {
		t.Errorf("total %v", got)
	}
	if got := parseAccounted("Showing nodes accounting for 29245, 100% of 29245 total"); got != 29245 {
		t.Errorf("objects %v", got)
	}
	if got := parseTotal("Duration: 1s, Total samples = 250ms (25%)\nShowing nodes accounting for 250ms, 100% of 250ms total"); got != 0.25 {
		t.Errorf("cpu %v", got)
	}
	if got := parseTotal("no header"); got != 0 {
		t.Errorf("no header: %v", got)
	}
}

// TestWriteReportSplices: the report replaces what lies between the markers
// of BENCHMARKS.md, one heading level down, and nothing else; a file without
// markers is the report.
func TestWriteReportSplices(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "B.md")
	doc := "# Benchmarks\n\nintro\n\n" + reportBegin + "\nold table\n" + reportEnd + "\n\n## Storage\nkept\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(p, "# Side by side\n\n## Produce\n```\n# not a heading\n```\n", 1); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	want := "# Benchmarks\n\nintro\n\n" + reportBegin + "\n## Side by side\n\n### Produce\n```\n# not a heading\n```\n" + reportEnd + "\n\n## Storage\nkept\n"
	if string(b) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b, want)
	}
	q := filepath.Join(dir, "new.md")
	if err := writeReport(q, "# R\n", 1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(q); string(b) != "# R\n" {
		t.Fatalf("no markers: %q", b)
	}

	// A replication factor 3 report never touches the single-broker one:
	// without its own markers it is appended between new ones...
	rf3Begin, rf3End := "<!-- make bench rf3: begin -->", "<!-- make bench rf3: end -->"
	if b, e := reportMarkers(3); b != rf3Begin || e != rf3End {
		t.Fatalf("rf3 markers %q %q", b, e)
	}
	if err := writeReport(p, "# RF3 run\n", 3); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	want += "\n" + rf3Begin + "\n## RF3 run\n" + rf3End + "\n"
	if string(b) != want {
		t.Fatalf("rf3 appended, got:\n%s\nwant:\n%s", b, want)
	}
	// ...which the next replication factor 3 run replaces, and a single-broker
	// run leaves alone.
	if err := writeReport(p, "# RF3 again\n", 3); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(p, "# RF1 again\n", 1); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	want = "# Benchmarks\n\nintro\n\n" + reportBegin + "\n## RF1 again\n" + reportEnd + "\n\n## Storage\nkept\n\n" +
		rf3Begin + "\n## RF3 again\n" + rf3End + "\n"
	if string(b) != want {
		t.Fatalf("rf3 replaced, got:\n%s\nwant:\n%s", b, want)
	}
	// A replicated report into a file that does not exist yet.
	n := filepath.Join(dir, "rf3.md")
	if err := writeReport(n, "# X\n", 3); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(n); string(b) != rf3Begin+"\n## X\n"+rf3End+"\n" {
		t.Fatalf("new rf3 file: %q", b)
	}
}

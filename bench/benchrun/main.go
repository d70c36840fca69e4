// Command benchrun is the side-by-side benchmark behind `make bench`: it
// starts each system on loopback (Sluice, franz-go's kfake, NATS JetStream
// with file storage), runs the same workloads against each in one run —
// alternating the systems' order from run to run — and writes a Markdown
// report with medians and ranges, ratios to the peers, the broker's CPU
// seconds per million records and its peak RSS, the machine, the versions
// and the exact commands.
//
// Every broker is a fresh process with a fresh data directory for each
// measurement, and the load generator is a separate process, so the broker's
// CPU time (utime+stime from /proc/<pid>/stat before and after a phase) is
// its own. Settings come from flags, whose defaults come from BENCH_*
// environment variables (see scripts/bench.sh).
//
// With --replication N > 1 each measurement starts a cluster of N brokers of
// every system instead (see cluster.go): CPU and peak RSS are then summed
// over the broker processes, and the report goes between BENCHMARKS.md's
// "make bench rfN" markers, next to the single-broker one.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/zktest"
)

type config struct {
	paths
	Systems     []string
	Records     int64
	Runs        int
	Sizes       []int
	Partitions  []int
	Acks        []string
	Compression []string
	Replication int
	E2E         bool
	E2ERate     int
	E2ESecs     int
	Out         string
	WorkDir     string
	Note        string
	Smoke       bool
	Profile     bool
	Timeout     time.Duration
}

// defaultSluiceCluster is what each Sluice broker of a cluster adds to
// --sluice-serve. Controlled shutdown is off: the harness stops every broker
// of a measurement at once and throws the data away, so moving leadership
// first would only make each measurement wait for retries.
const defaultSluiceCluster = "--override broker.id={id} --override zookeeper.connect={zk}/sluice-bench " +
	"--override default.replication.factor={rf} --override min.insync.replicas={minisr} " +
	"--override zookeeper.session.timeout.ms=6000 --override controlled.shutdown.enable=false"

// allSystems are the systems benchrun knows, in their default order.
var allSystems = []string{"sluice", "kfake", "nats", "rabbitmq-stream", "rabbitmq-quorum", "sluice-ssl", "sluice-sasl-ssl", "kfake-ssl"}

// defaultSystems are the systems run when --systems is not given: the TLS
// ones are asked for by name (BENCH_SYSTEMS=sluice,sluice-ssl,sluice-sasl-ssl).
var defaultSystems = allSystems[:5]

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(env(name, "")); err == nil {
		return v
	}
	return def
}

func parseConfig(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	var systems, sizes, parts, acks, comp string
	var records int64
	fs.StringVar(&c.Sluice, "sluice", env("BENCH_SLUICE", "bin/sluice"), "the sluice binary (broker and `sluice perf` client)")
	fs.StringVar(&c.SluiceServe, "sluice-serve", env("BENCH_SLUICE_SERVE",
		"serve --override listeners=PLAINTEXT://127.0.0.1:{port} --override log.dirs={dir}/kafka --override console.listen= --override console.data.dir={dir}/console"),
		"arguments of the Sluice broker; {port} and {dir} are filled in")
	fs.StringVar(&c.SluiceCluster, "sluice-cluster", env("BENCH_SLUICE_CLUSTER", defaultSluiceCluster),
		"arguments added to each Sluice broker of a cluster (--replication > 1); {id}, {zk}, {rf} and {minisr} are filled in")
	fs.StringVar(&c.KfakeServer, "kfake", env("BENCH_KFAKE", "bin/bench/kfakeserver"), "the kfake launcher")
	fs.StringVar(&c.NatsPerf, "natsperf", env("BENCH_NATSPERF", "bin/bench/natsperf"), "the NATS load generator")
	fs.StringVar(&c.NatsServer, "nats-server", env("BENCH_NATS_SERVER", "/usr/sbin/nats-server"), "the nats-server binary")
	fs.StringVar(&c.RabbitPerf, "rabbitperf", env("BENCH_RABBITPERF", "bin/bench/rabbitperf"), "the RabbitMQ load generator")
	fs.StringVar(&c.RabbitServer, "rabbitmq-server", env("BENCH_RABBITMQ_SERVER", defaultRabbitServer), "RabbitMQ's start script")
	fs.StringVar(&c.Epmd, "epmd", env("BENCH_EPMD", defaultEpmd), "Erlang's port mapper daemon, one per RabbitMQ node")
	fs.StringVar(&systems, "systems", env("BENCH_SYSTEMS", strings.Join(defaultSystems, ",")),
		"systems to run, first is the one the ratios are of: "+strings.Join(allSystems, ", "))
	fs.Int64Var(&records, "records", int64(envInt("BENCH_RECORDS", 1_000_000)), "records per produce/consume workload")
	fs.IntVar(&c.Runs, "runs", envInt("BENCH_RUNS", 3), "runs of every workload on every system")
	fs.StringVar(&sizes, "sizes", env("BENCH_SIZES", "100,1024"), "record sizes in bytes")
	fs.StringVar(&parts, "partitions", env("BENCH_PARTITIONS", "1,6"), "partition counts (default 6 with --replication > 1)")
	fs.StringVar(&acks, "acks", env("BENCH_ACKS", "1,all"), "acks settings")
	fs.StringVar(&comp, "compression", env("BENCH_COMPRESSION", "none,zstd"), "codecs (default none with --replication > 1)")
	fs.IntVar(&c.Replication, "replication", envInt("BENCH_REPLICATION", 1),
		"replication factor, 1 to 5: above 1, a cluster of that many brokers of each system (Sluice with ZooKeeper), "+
			"and the report goes between BENCHMARKS.md's \"make bench rf<N>\" markers")
	fs.BoolVar(&c.E2E, "e2e", env("BENCH_E2E", "1") != "0", "run the end-to-end latency workload")
	fs.IntVar(&c.E2ERate, "e2e-rate", envInt("BENCH_E2E_RATE", 10_000), "end-to-end rate, records/s")
	fs.IntVar(&c.E2ESecs, "e2e-seconds", envInt("BENCH_E2E_SECONDS", 10), "end-to-end duration, seconds")
	fs.StringVar(&c.Out, "out", env("BENCH_OUT", ""), "Markdown report (default BENCHMARKS.md, between its \"make bench\" markers, \"make bench rf<N>\" ones with --replication N > 1; stdout with --smoke)")
	fs.StringVar(&c.WorkDir, "workdir", env("BENCH_WORKDIR", ""), "logs, data and raw results (default: a new temp dir)")
	fs.StringVar(&c.Note, "note", env("BENCH_NOTE", ""), "a sentence on the conditions of the run, for the report")
	fs.BoolVar(&c.Smoke, "smoke", env("BENCH_SMOKE", "0") == "1", "a quick run: 20,000 records, 1 run, two workloads (with --replication > 1: 6 partitions, acks 1 and all), 2 s e2e")
	fs.BoolVar(&c.Profile, "profile", env("BENCH_PROFILE", "0") == "1", "capture the Sluice broker's CPU and allocation profiles of every phase (and a trace of e2e); of broker 1 in a cluster")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "limit of one load generator run")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.Records = records
	// Smoke mode and replication change the defaults of only what was not
	// set explicitly (flag or environment variable).
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	unset := func(flag, envName string) bool { return !set[flag] && os.Getenv(envName) == "" }
	if c.Replication > 1 {
		// A cluster costs three times the processes: the replicated matrix
		// is the 6-partition, uncompressed half of the single-broker one.
		if unset("partitions", "BENCH_PARTITIONS") {
			parts = "6"
		}
		if unset("compression", "BENCH_COMPRESSION") {
			comp = "none"
		}
	}
	if c.Smoke {
		if unset("records", "BENCH_RECORDS") {
			c.Records = 20_000
		}
		if unset("runs", "BENCH_RUNS") {
			c.Runs = 1
		}
		if unset("sizes", "BENCH_SIZES") {
			sizes = "100"
		}
		if c.Replication <= 1 {
			if unset("partitions", "BENCH_PARTITIONS") {
				parts = "1"
			}
			if unset("acks", "BENCH_ACKS") {
				acks = "1"
			}
			if unset("compression", "BENCH_COMPRESSION") {
				comp = "none,zstd"
			}
		}
		if unset("e2e-rate", "BENCH_E2E_RATE") {
			c.E2ERate = 2_000
		}
		if unset("e2e-seconds", "BENCH_E2E_SECONDS") {
			c.E2ESecs = 2
		}
	}
	var err error
	c.Systems = splitList(systems)
	if c.Sizes, err = intList(sizes); err != nil {
		return nil, fmt.Errorf("--sizes: %w", err)
	}
	if c.Partitions, err = intList(parts); err != nil {
		return nil, fmt.Errorf("--partitions: %w", err)
	}
	c.Acks = splitList(acks)
	c.Compression = splitList(comp)
	for _, a := range c.Acks {
		if a != "1" && a != "all" {
			return nil, fmt.Errorf("--acks: want 1 or all, got %q", a)
		}
	}
	for _, s := range c.Systems {
		if !slices.Contains(allSystems, s) {
			return nil, fmt.Errorf("--systems: unknown system %q (want some of %s)", s, strings.Join(allSystems, ", "))
		}
	}
	for _, v := range c.Compression {
		switch v {
		case "none", "gzip", "snappy", "lz4", "zstd":
		default:
			return nil, fmt.Errorf("--compression: unknown codec %q", v)
		}
	}
	if c.Records <= 0 || c.Runs <= 0 || c.E2ERate <= 0 || c.E2ESecs <= 0 || len(c.Systems) == 0 {
		return nil, errors.New("records, runs, e2e rate and seconds must be positive and at least one system given")
	}
	if c.Replication < 1 || c.Replication > 5 {
		return nil, fmt.Errorf("--replication %d: want 1 (one broker per system) up to 5 (a cluster of that many brokers)", c.Replication)
	}
	if c.Out == "" && !c.Smoke {
		c.Out = "BENCHMARKS.md"
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// measurement is one system on one workload in one run.
type measurement struct {
	System   string  `json:"system"`
	Workload string  `json:"workload"`
	Run      int     `json:"run"`
	Order    int     `json:"order"` // position of the system in this run's rotation
	Produce  *result `json:"produce,omitempty"`
	Consume  *result `json:"consume,omitempty"`
	E2E      *result `json:"e2e,omitempty"`
	// Broker CPU seconds per phase, and its peak RSS over the workload.
	PeakRSSKiB int64  `json:"peak_rss_kib"`
	Err        string `json:"error,omitempty"`
	// Profiles by phase (--profile, Sluice only).
	Profiles map[string]*profileFiles `json:"profiles,omitempty"`
}

type result struct {
	*perf.Result
	BrokerCPU float64  `json:"broker_cpu_seconds"`
	ClientCPU float64  `json:"client_cpu_seconds"`
	Command   []string `json:"command"`
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	c, err := parseConfig(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "benchrun: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "benchrun: %v\n", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, c *config) error {
	began := time.Now()
	if c.WorkDir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return err
		}
		c.WorkDir = d
	}
	if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return err
	}
	mach := describeMachine()
	if slices.ContainsFunc(c.Systems, func(s string) bool { return strings.HasSuffix(s, "-ssl") }) {
		f, err := writeTLSFiles(filepath.Join(c.WorkDir, "tls"))
		if err != nil {
			return fmt.Errorf("certificates of the TLS systems: %w", err)
		}
		c.paths.TLS = f
	}
	all := newSystems(c.paths)
	var systems []*system
	skipped := map[string]string{}
	versions := map[string]string{}
	for _, key := range c.Systems {
		sys := all[key]
		if why := preflight(ctx, c, sys); why != "" {
			skipped[sys.Name] = why
			fmt.Fprintf(os.Stderr, "benchrun: skipping %s: %s\n", sys.Name, why)
			continue
		}
		versions[sys.Name] = sys.version(ctx)
		systems = append(systems, sys)
	}
	if len(systems) == 0 {
		return errors.New("no system can run")
	}
	versions["sluice perf client"] = sluicePerfClientVersion(ctx, c.Sluice)

	var workloads []workload
	for _, size := range c.Sizes {
		for _, p := range c.Partitions {
			for _, a := range c.Acks {
				for _, comp := range c.Compression {
					workloads = append(workloads, workload{Size: size, Partitions: p, Acks: a, Compression: comp, Replication: c.Replication})
				}
			}
		}
	}
	e2e := workload{E2E: true, Size: 100, Partitions: 1, Acks: "1", Compression: "none", Replication: c.Replication}
	total := len(workloads) * c.Runs * len(systems)
	if c.E2E {
		total += c.Runs * len(systems)
	}
	fmt.Fprintf(os.Stderr, "benchrun: %d measurements (%d workloads x %d runs x %d systems, e2e %v); work dir %s\n",
		total, len(workloads), c.Runs, len(systems), c.E2E, c.WorkDir)

	var ms []measurement
	done := 0
	doOne := func(w workload) {
		for run := range c.Runs {
			for i := range systems {
				// Rotate the order every run, so no system always goes first
				// (page cache, CPU frequency, neighbours' builds).
				sys := systems[(i+run)%len(systems)]
				done++
				var m measurement
				if why := sys.unsupported(w); why != "" {
					m = measurement{System: sys.Name, Workload: w.String(), Run: run + 1, Err: "n/a: " + why}
				} else {
					m = measure(ctx, c, sys, w, run+1)
				}
				m.Order = i + 1
				ms = append(ms, m)
				fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", done, total, oneLine(m))
				if ctx.Err() != nil {
					return
				}
			}
		}
	}
	for _, w := range workloads {
		doOne(w)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if c.E2E {
		doOne(e2e)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	raw := filepath.Join(c.WorkDir, "results.json")
	if b, err := json.MarshalIndent(ms, "", "  "); err == nil {
		if err := os.WriteFile(raw, b, 0o644); err != nil {
			return err
		}
	}
	loadEnd := loadAvg()
	var profiles []profileSection
	if c.Profile {
		profiles = summarizeProfiles(ctx, c, ms)
	}
	rep := report{
		cfg: c, machine: mach, loadEnd: loadEnd, versions: versions, skipped: skipped,
		systems: systems, workloads: workloads, e2e: e2e, ms: ms, began: began, took: time.Since(began),
		goVersion: runtime.Version(), raw: raw, profiles: profiles,
	}
	md := rep.markdown()
	if c.Out == "" || c.Out == "-" {
		fmt.Print(md)
	} else {
		if err := os.MkdirAll(filepath.Dir(c.Out), 0o755); err != nil {
			return err
		}
		if err := writeReport(c.Out, md, c.Replication); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "benchrun: wrote %s\n", c.Out)
	}
	fmt.Fprintf(os.Stderr, "benchrun: raw results and logs in %s (%s)\n", c.WorkDir, time.Since(began).Round(time.Second))
	return nil
}

// preflight returns why sys cannot run here, or "".
func preflight(ctx context.Context, c *config, sys *system) string {
	need := []string{c.Sluice} // every Kafka system is driven by `sluice perf`
	switch sys.Key {
	case "kfake":
		need = append(need, c.KfakeServer)
	case "nats":
		need = []string{c.NatsServer, c.NatsPerf}
	case "rabbitmq-stream", "rabbitmq-quorum":
		need = []string{c.RabbitServer, c.Epmd, c.RabbitPerf, "erl"}
	}
	for _, p := range need {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Sprintf("%s not found (%v)", p, err)
		}
	}
	if sys.Key == "sluice" {
		out, _ := exec.CommandContext(ctx, c.Sluice, "help").CombinedOutput()
		if !bytes.Contains(out, []byte("\n  serve ")) {
			return "bin/sluice has no serve command yet"
		}
	}
	if c.Replication > 1 && sys.zookeeper {
		if err := zktest.Available(); err != nil {
			return fmt.Sprintf("a cluster needs ZooKeeper: %v (apt-get install zookeeper)", err)
		}
	}
	return ""
}

// sluicePerfClientVersion names the franz-go client built into bin/sluice.
func sluicePerfClientVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).Output()
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "dep" && f[1] == "github.com/twmb/franz-go" {
			return "franz-go kgo " + f[2]
		}
	}
	return "unknown"
}

// measure starts a fresh broker (or cluster) and runs one workload against it.
func measure(ctx context.Context, c *config, sys *system, w workload, run int) measurement {
	m := measurement{System: sys.Name, Workload: w.String(), Run: run}
	tag := fmt.Sprintf("%s-%s-r%d", sys.Key, slug(w.String()), run)
	dir := filepath.Join(c.WorkDir, "data", tag)
	logDir := filepath.Join(c.WorkDir, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.Err = err.Error()
		return m
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		m.Err = err.Error()
		return m
	}
	defer os.RemoveAll(dir) // a 1 KiB workload leaves a gigabyte per system per run
	var env []string
	var prof *profiler
	if c.Profile && strings.HasPrefix(sys.Key, "sluice") {
		port, err := freePort()
		if err != nil {
			m.Err = err.Error()
			return m
		}
		addr := localAddr(port)
		env = append(env, "SLUICE_PPROF_LISTEN="+addr)
		prof = newProfiler(addr, filepath.Join(c.WorkDir, "profiles"), tag)
	}
	srv, err := deploy(ctx, sys, max(c.Replication, 1), dir, logDir, tag, env)
	if err != nil {
		m.Err = err.Error()
		return m
	}
	defer srv.stop()
	if prof != nil {
		if err := prof.waitReady(ctx); err != nil {
			m.Err = err.Error()
			return m
		}
		m.Profiles = map[string]*profileFiles{}
	}
	clientLog := filepath.Join(logDir, tag+"-client.log")

	phases := []string{"produce", "consume"}
	if w.E2E {
		phases = []string{"e2e"}
	}
	for _, phase := range phases {
		argv := sys.client(phase, w, srv.addr, c.Records, c.E2ERate, c.E2ESecs)
		// Profiling starts before the CPU clock and stops after it, so the
		// forced collections of the allocation snapshots are not counted.
		var pf *profileFiles
		var waitTrace func() error
		if prof != nil {
			var perr error
			if pf, perr = prof.begin(ctx, phase); perr != nil {
				pf = &profileFiles{Err: perr.Error()}
			} else if phase == "e2e" {
				secs := max(1, min(3, c.E2ESecs/3))
				waitTrace = prof.trace(ctx, phase, time.Duration(c.E2ESecs)*time.Second/3, secs, pf)
			}
			m.Profiles[phase] = pf
		}
		cpu0, err := srv.cpuSeconds()
		if err != nil {
			m.Err = err.Error()
			return m
		}
		res, err := runClient(ctx, c.Timeout, argv, clientLog)
		if res != nil {
			if cpu1, cerr := srv.cpuSeconds(); cerr == nil {
				res.BrokerCPU = cpu1 - cpu0
			}
			switch phase {
			case "produce":
				m.Produce = res
			case "consume":
				m.Consume = res
			default:
				m.E2E = res
			}
		}
		if pf != nil && pf.Err == "" {
			if waitTrace != nil {
				if terr := waitTrace(); terr != nil {
					pf.Err = "trace: " + terr.Error()
				}
			}
			if perr := prof.end(ctx, phase, pf); perr != nil {
				pf.Err = perr.Error()
			}
		}
		if err != nil {
			m.Err = fmt.Sprintf("%s: %v", phase, err)
			break
		}
		if phase == "consume" && m.Produce != nil && res.Records < m.Produce.Records {
			m.Err = fmt.Sprintf("consume read %d of the %d records produced", res.Records, m.Produce.Records)
			break
		}
	}
	if rss, err := srv.peakRSSKiB(); err == nil {
		m.PeakRSSKiB = rss
	}
	return m
}

// runClient runs one load generator and parses its JSON result. A run whose
// result reports failed records returns the result and an error.
func runClient(ctx context.Context, timeout time.Duration, argv []string, logPath string) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, logf
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	logf.Write(stdout.Bytes())
	line := lastLine(stdout.Bytes())
	var pr perf.Result
	if len(line) == 0 || json.Unmarshal(line, &pr) != nil {
		if runErr == nil {
			runErr = errors.New("no JSON result on stdout")
		}
		return nil, fmt.Errorf("%s: %w (log %s: %s)", filepath.Base(argv[0]), runErr, logPath, tail(logPath, 3))
	}
	res := &result{Result: &pr, Command: argv}
	if st := cmd.ProcessState; st != nil {
		res.ClientCPU = (st.UserTime() + st.SystemTime()).Seconds()
	}
	if pr.Errors > 0 || pr.FirstError != "" {
		return res, fmt.Errorf("%d errors: %s", pr.Errors, pr.FirstError)
	}
	if runErr != nil {
		return res, runErr
	}
	return res, nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == ',' || r == '=' || r == '.':
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
				b.WriteByte('-')
			}
		}
	}
	return strings.Trim(b.String(), "-")
}

func oneLine(m measurement) string {
	s := fmt.Sprintf("%-14s %-36s run %d:", m.System, m.Workload, m.Run)
	if m.Produce != nil {
		s += fmt.Sprintf(" produce %s rec/s %.1f MiB/s p99 %s ms cpu %.2fs;", fmtRate(m.Produce.RecordsPerSec),
			m.Produce.MiBPerSec, latP99(m.Produce), m.Produce.BrokerCPU)
	}
	if m.Consume != nil {
		s += fmt.Sprintf(" consume %s rec/s %.1f MiB/s cpu %.2fs;", fmtRate(m.Consume.RecordsPerSec),
			m.Consume.MiBPerSec, m.Consume.BrokerCPU)
	}
	if m.E2E != nil && m.E2E.Latency != nil {
		s += fmt.Sprintf(" e2e p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms;", m.E2E.Latency.P50, m.E2E.Latency.P99,
			m.E2E.Latency.P999, m.E2E.Latency.Max)
	}
	if m.PeakRSSKiB > 0 {
		s += fmt.Sprintf(" rss %d MiB", m.PeakRSSKiB/1024)
	}
	if m.Err != "" {
		s += " ERROR " + m.Err
	}
	return s
}

func latP99(r *result) string {
	if r.Latency == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Latency.P99)
}

// The markers between which writeReport puts the report in a file that has
// them (BENCHMARKS.md), leaving the rest of the file as it is.
const (
	reportBegin = "<!-- make bench: begin -->"
	reportEnd   = "<!-- make bench: end -->"
)

// reportMarkers returns the markers of a run with replication factor rf:
// those above for 1, "<!-- make bench rf3: begin -->" and its end for 3, so
// a replicated run never overwrites the single-broker report.
func reportMarkers(rf int) (begin, end string) {
	if rf <= 1 {
		return reportBegin, reportEnd
	}
	return fmt.Sprintf("<!-- make bench rf%d: begin -->", rf), fmt.Sprintf("<!-- make bench rf%d: end -->", rf)
}

// writeReport writes md, the report of a run with replication factor rf, to
// path: between the run's markers, its headings one level down, when the
// file has both. Otherwise a single-broker report (rf 1) becomes the whole
// file, and a replicated one is appended to the end of the file (created if
// need be) between its markers, so the rest of the file stays.
func writeReport(path, md string, rf int) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	begin, end := reportMarkers(rf)
	before, rest, ok1 := strings.Cut(string(old), begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		if rf <= 1 {
			return os.WriteFile(path, []byte(md), 0o644)
		}
		before, after = string(old), "\n"
		if before != "" {
			before = strings.TrimRight(before, "\n") + "\n\n"
		}
	}
	return os.WriteFile(path, []byte(before+begin+"\n"+demoteHeadings(md)+end+after), 0o644)
}

// demoteHeadings puts every Markdown heading outside code fences one level
// down ("# x" becomes "## x").
func demoteHeadings(md string) string {
	lines := strings.Split(md, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(l, "#") {
			lines[i] = "#" + l
		}
	}
	return strings.Join(lines, "\n")
}

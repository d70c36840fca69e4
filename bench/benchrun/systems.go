package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// workload is one cell of the matrix: a produce run followed by a consume
// of what it wrote, or an end-to-end latency run.
type workload struct {
	E2E         bool
	Size        int
	Partitions  int
	Acks        string
	Compression string
	Replication int
}

func (w workload) String() string {
	var s string
	if w.E2E {
		s = fmt.Sprintf("e2e %d B, %d part., acks=%s", w.Size, w.Partitions, w.Acks)
	} else {
		s = fmt.Sprintf("%s, %d part., acks=%s, %s", sizeName(w.Size), w.Partitions, w.Acks, w.Compression)
	}
	if w.Replication > 1 {
		s += fmt.Sprintf(", RF %d", w.Replication)
	}
	return s
}

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// payloadFor is the payload kind a workload sends: incompressible random
// bytes without compression, compressible text with a codec (random bytes
// would make the producer send the batch uncompressed, and a "zstd" row
// would measure nothing but a failed compression attempt).
func (w workload) payloadFor() string {
	if w.Compression == "none" {
		return "random"
	}
	return "text"
}

// system is one broker under test: how to start it and how to load it.
type system struct {
	Key  string // sluice, kfake, nats
	Name string // as printed in the report
	// procs returns the processes of one measurement laid out as l: one
	// broker, or with l.Brokers > 1 a cluster of them.
	procs func(l layout) []procSpec
	// client returns the load generator argv of one phase (produce,
	// consume, e2e) against addr.
	client  func(phase string, w workload, addr string, n int64, e2eRate, e2eSecs int) []string
	version func(ctx context.Context) string
	// unsupported returns why a workload cannot run on this system, or "".
	unsupported func(w workload) string
	// addr is the client address of the brokers laid out as l.
	addr func(l layout) string
	// ready, when set, waits until a cluster laid out as l has formed (every
	// process already accepts connections).
	ready func(ctx context.Context, l layout) error
	// zookeeper is set when a cluster of this system needs ZooKeeper.
	zookeeper bool
	// setup, when set, prepares every measurement once its processes are
	// up (and a cluster has formed): users, a check of the client listener.
	setup func(ctx context.Context, l layout) error
}

// layout is where the processes of one measurement listen and keep data.
type layout struct {
	Brokers int    // 1, or the replication factor
	Ports   []int  // client port of each broker
	Peers   []int  // cluster port of each broker (NATS routes)
	Monitor []int  // HTTP monitoring port of each broker (NATS)
	Dir     string // the measurement's data directory
	ZK      string // ZooKeeper's client address (Sluice with Brokers > 1)
}

// newLayout picks free loopback ports for n brokers with their data under
// dir.
func newLayout(n int, dir string) (layout, error) {
	l := layout{Brokers: n, Dir: dir}
	for range n {
		var ps [3]int
		for i := range ps {
			p, err := freePort()
			if err != nil {
				return l, err
			}
			ps[i] = p
		}
		l.Ports, l.Peers, l.Monitor = append(l.Ports, ps[0]), append(l.Peers, ps[1]), append(l.Monitor, ps[2])
	}
	return l, nil
}

// exampleLayout is a layout for the report's commands: port 0 and dir
// stand for what each measurement picks.
func exampleLayout(n int) layout {
	z := make([]int, n)
	return layout{Brokers: n, Ports: z, Peers: z, Monitor: z, Dir: "<tmpdir>", ZK: "127.0.0.1:0"}
}

// brokerDir is broker i's data directory: the measurement's own for a
// single broker, a subdirectory of it for each broker of a cluster.
func (l layout) brokerDir(i int) string {
	if l.Brokers <= 1 {
		return l.Dir
	}
	return filepath.Join(l.Dir, fmt.Sprintf("broker-%d", i+1))
}

// procSpec is one process of a system under test.
type procSpec struct {
	Argv []string
	Wait string // host:port that accepts connections once the process is up
	// Dirs are created and Files written (path: content) before the
	// process starts.
	Dirs  []string
	Files map[string]string
	// Stage orders the start: every process of stage 0 is up before any
	// of stage 1 starts.
	Stage int
	// Helper processes (epmd) are not counted in the broker's CPU and RSS.
	Helper bool
	// MeasureChild counts the process's child (the Erlang VM under
	// rabbitmq-server's shell script) instead of the process itself.
	MeasureChild bool
	// StartTimeout bounds the wait for Wait to accept connections; 0 is
	// 30 s.
	StartTimeout time.Duration
}

type paths struct {
	Sluice, KfakeServer, NatsPerf, NatsServer string
	RabbitPerf, RabbitServer, Epmd            string
	SluiceServe                               string    // template with {port} and {dir}
	SluiceCluster                             string    // added for a cluster: {id}, {zk}, {rf}, {minisr}
	TLS                                       *tlsFiles // certificates of the TLS systems (nil: none asked for)
}

// expand splits tmpl into arguments and fills in its {placeholders}.
func expand(tmpl string, vars map[string]string) []string {
	var kv []string
	for k, v := range vars {
		kv = append(kv, "{"+k+"}", v)
	}
	r := strings.NewReplacer(kv...)
	var out []string
	for _, f := range strings.Fields(tmpl) {
		out = append(out, r.Replace(f))
	}
	return out
}

// addrList joins the client addresses of every broker of l.
func addrList(l layout, format func(port int) string) string {
	s := make([]string, len(l.Ports))
	for i, p := range l.Ports {
		s[i] = format(p)
	}
	return strings.Join(s, ",")
}

// kafkaClient is `sluice perf` for the two Kafka-protocol systems.
func kafkaClient(p paths) func(string, workload, string, int64, int, int) []string {
	return func(phase string, w workload, addr string, n int64, rate, secs int) []string {
		switch phase {
		case "produce":
			return []string{p.Sluice, "perf", "produce", "--brokers", addr, "--topic", "bench",
				"--num-records", strconv.FormatInt(n, 10), "--record-size", strconv.Itoa(w.Size),
				"--partitions", strconv.Itoa(w.Partitions), "--replication-factor", strconv.Itoa(max(w.Replication, 1)),
				"--acks", w.Acks, "--compression", w.Compression, "--payload", w.payloadFor(),
				"--linger", "5ms", "--output", "json"}
		case "consume":
			return []string{p.Sluice, "perf", "consume", "--brokers", addr, "--topic", "bench",
				"--num-records", strconv.FormatInt(n, 10), "--output", "json"}
		default:
			return []string{p.Sluice, "perf", "e2e", "--brokers", addr, "--topic", "e2e",
				"--throughput", strconv.Itoa(rate), "--duration", strconv.Itoa(secs) + "s",
				"--record-size", strconv.Itoa(w.Size), "--partitions", strconv.Itoa(w.Partitions),
				"--replication-factor", strconv.Itoa(max(w.Replication, 1)),
				"--acks", w.Acks, "--linger", "0", "--output", "json"}
		}
	}
}

func versionOf(ctx context.Context, argv ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("unknown (%s: %v)", strings.Join(argv, " "), err)
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func localAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func newSystems(p paths) map[string]*system {
	return map[string]*system{
		"sluice": {
			Key: "sluice", Name: "Sluice",
			procs: func(l layout) []procSpec {
				var out []procSpec
				for i, port := range l.Ports {
					vars := map[string]string{"port": strconv.Itoa(port), "dir": l.brokerDir(i)}
					argv := append([]string{p.Sluice}, expand(p.SluiceServe, vars)...)
					if l.Brokers > 1 {
						argv = append(argv, expand(p.SluiceCluster, map[string]string{
							"id": strconv.Itoa(i + 1), "zk": l.ZK, "rf": strconv.Itoa(l.Brokers),
							"minisr": strconv.Itoa(l.Brokers/2 + 1),
						})...)
					}
					out = append(out, procSpec{Argv: argv, Wait: localAddr(port)})
				}
				return out
			},
			client: kafkaClient(p),
			version: func(ctx context.Context) string {
				return versionOf(ctx, p.Sluice, "version")
			},
			unsupported: func(workload) string { return "" },
			addr:        func(l layout) string { return addrList(l, localAddr) },
			ready:       kafkaReady,
			zookeeper:   true,
		},
		"kfake": {
			Key: "kfake", Name: "kfake",
			// One process holds every broker of a kfake cluster.
			procs: func(l layout) []procSpec {
				return []procSpec{{Argv: []string{p.KfakeServer, "--listen", addrList(l, localAddr)}, Wait: localAddr(l.Ports[len(l.Ports)-1])}}
			},
			client: kafkaClient(p),
			version: func(ctx context.Context) string {
				return versionOf(ctx, p.KfakeServer, "--version") + " (in memory)"
			},
			unsupported: func(workload) string { return "" },
			addr:        func(l layout) string { return addrList(l, localAddr) },
			ready:       kafkaReady,
		},
		"sluice-ssl":      tlsSystem(p, "sluice-ssl", "SSL"),
		"sluice-sasl-ssl": tlsSystem(p, "sluice-sasl-ssl", "SASL_SSL"),
		"kfake-ssl":       kfakeTLSSystem(p),
		"rabbitmq-stream": rabbitSystem(p, "rabbitmq-stream", "RabbitMQ stream", "stream"),
		"rabbitmq-quorum": rabbitSystem(p, "rabbitmq-quorum", "RabbitMQ quorum", "quorum"),
		"nats": {
			Key: "nats", Name: "NATS JetStream",
			procs: func(l layout) []procSpec {
				var out []procSpec
				for i, port := range l.Ports {
					argv := []string{p.NatsServer, "-js", "-sd", l.brokerDir(i), "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
					if l.Brokers > 1 {
						var routes []string
						for j, peer := range l.Peers {
							if j != i {
								routes = append(routes, "nats://"+localAddr(peer))
							}
						}
						argv = append(argv, "--server_name", fmt.Sprintf("n%d", i+1), "--cluster_name", "bench",
							"--cluster", "nats://"+localAddr(l.Peers[i]), "--routes", strings.Join(routes, ","),
							"-m", strconv.Itoa(l.Monitor[i]))
					}
					out = append(out, procSpec{Argv: argv, Wait: localAddr(port)})
				}
				return out
			},
			client: func(phase string, w workload, addr string, n int64, rate, secs int) []string {
				base := []string{p.NatsPerf, phase, "--server", addr, "--record-size", strconv.Itoa(w.Size),
					"--partitions", strconv.Itoa(w.Partitions), "--replicas", strconv.Itoa(max(w.Replication, 1)),
					"--output", "json"}
				switch phase {
				case "produce":
					return append(base, "--stream", "bench", "--num-records", strconv.FormatInt(n, 10),
						"--acks", w.Acks, "--payload", w.payloadFor())
				case "consume":
					return append(base, "--stream", "bench", "--num-records", strconv.FormatInt(n, 10))
				default:
					return append(base, "--stream", "e2e", "--throughput", strconv.Itoa(rate),
						"--duration", strconv.Itoa(secs)+"s", "--acks", w.Acks)
				}
			},
			version: func(ctx context.Context) string {
				return versionOf(ctx, p.NatsServer, "--version") + ", client " + versionOf(ctx, p.NatsPerf, "version")
			},
			unsupported: func(w workload) string {
				if w.Compression != "none" {
					return "JetStream in nats-server 2.9 does not compress messages"
				}
				return ""
			},
			addr: func(l layout) string {
				return addrList(l, func(port int) string { return "nats://" + localAddr(port) })
			},
			ready: natsReady,
		},
	}
}

// server is one running broker process.
type server struct {
	argv    []string
	spec    procSpec
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
	child   int // the measured child's pid, once found (MeasureChild)
}

// pid is the process whose CPU and memory are the broker's: the process
// itself, or with MeasureChild its first child.
func (s *server) pid() int {
	if !s.spec.MeasureChild {
		return s.cmd.Process.Pid
	}
	if s.child == 0 {
		s.child = firstChild(s.cmd.Process.Pid)
	}
	if s.child == 0 {
		return s.cmd.Process.Pid
	}
	return s.child
}

// firstChild returns the first child of pid listed by /proc, or 0.
func firstChild(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

// startProc starts one process of sys, logging to logPath, and waits until
// spec.Wait accepts connections.
func startProc(ctx context.Context, name string, spec procSpec, logPath string, env ...string) (*server, error) {
	argv := spec.Argv
	for _, d := range spec.Dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for path, content := range spec.Files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should benchrun die without stopping it, the broker goes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	s := &server{argv: argv, spec: spec, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	wait := spec.StartTimeout
	if wait <= 0 {
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("tcp", spec.Wait, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited at start (%v); log %s: %s", name, s.waitErr, logPath, tail(logPath, 5))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not listen on %s within %v; log %s", name, spec.Wait, wait, logPath)
		}
	}
}

// stop asks the broker to exit, waits up to 20s, then kills it.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	child := 0
	if s.spec.MeasureChild {
		child = s.pid()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		if child != 0 && child != s.cmd.Process.Pid {
			_ = syscall.Kill(child, syscall.SIGKILL) // no longer anyone's to stop
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n lines of a file, joined by " | ".
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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
	if w.E2E {
		return fmt.Sprintf("e2e %d B, %d part., acks=%s", w.Size, w.Partitions, w.Acks)
	}
	s := fmt.Sprintf("%s, %d part., acks=%s, %s", sizeName(w.Size), w.Partitions, w.Acks, w.Compression)
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
	// start returns the argv of the broker listening on port with its data
	// under dir.
	start func(port int, dir string) []string
	// client returns the load generator argv of one phase (produce,
	// consume, e2e) against addr.
	client  func(phase string, w workload, addr string, n int64, e2eRate, e2eSecs int) []string
	version func(ctx context.Context) string
	// unsupported returns why a workload cannot run on this system, or "".
	unsupported func(w workload) string
	// addr formats the client address of a broker listening on port.
	addr func(port int) string
}

type paths struct {
	Sluice, KfakeServer, NatsPerf, NatsServer string
	SluiceServe                               string // template with {port} and {dir}
}

func expand(tmpl string, port int, dir string) []string {
	r := strings.NewReplacer("{port}", strconv.Itoa(port), "{dir}", dir)
	var out []string
	for _, f := range strings.Fields(tmpl) {
		out = append(out, r.Replace(f))
	}
	return out
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
			start: func(port int, dir string) []string {
				return append([]string{p.Sluice}, expand(p.SluiceServe, port, dir)...)
			},
			client: kafkaClient(p),
			version: func(ctx context.Context) string {
				return versionOf(ctx, p.Sluice, "version")
			},
			unsupported: func(workload) string { return "" },
			addr:        localAddr,
		},
		"kfake": {
			Key: "kfake", Name: "kfake",
			start: func(port int, dir string) []string {
				return []string{p.KfakeServer, "--listen", localAddr(port)}
			},
			client: kafkaClient(p),
			version: func(ctx context.Context) string {
				return versionOf(ctx, p.KfakeServer, "--version") + " (in memory)"
			},
			unsupported: func(workload) string { return "" },
			addr:        localAddr,
		},
		"nats": {
			Key: "nats", Name: "NATS JetStream",
			start: func(port int, dir string) []string {
				return []string{p.NatsServer, "-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
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
			addr: func(port int) string { return "nats://" + localAddr(port) },
		},
	}
}

// server is one running broker process.
type server struct {
	argv    []string
	cmd     *exec.Cmd
	addr    string
	logPath string
	exited  chan struct{}
	waitErr error
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// startServer starts sys with its data under dir, logging to logPath, and
// waits until its port accepts connections.
func startServer(ctx context.Context, sys *system, dir, logPath string, env ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	argv := sys.start(port, dir)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", sys.Name, err)
	}
	s := &server{argv: argv, cmd: cmd, addr: sys.addr(port), logPath: logPath, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", localAddr(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited at start (%v); log %s: %s", sys.Name, s.waitErr, logPath, tail(logPath, 5))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not listen on %d within 30s; log %s", sys.Name, port, logPath)
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
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
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

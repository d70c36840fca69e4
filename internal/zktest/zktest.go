// Package zktest runs a real ZooKeeper server for tests: Debian's zookeeper
// package (the jars under /usr/share/java, started with java) on a free
// 127.0.0.1 port with a temporary data directory. A Server can be stopped and
// started again on the same port and data directory (sessions and znodes
// survive, as they do when an operator restarts ZooKeeper), and a Proxy in
// front of it can cut clients off to make sessions expire.
//
// Nothing outside tests and benchmarks uses this package.
package zktest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// DefaultJar is where Debian's zookeeper package installs the server jar; its
// manifest's Class-Path names every dependency.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// Options configures a Server. Zero values take the defaults.
type Options struct {
	// TickTime is ZooKeeper's tickTime (default 200ms here, so that short
	// session timeouts are allowed: the server clamps a session timeout to
	// [MinSessionTimeout, MaxSessionTimeout]).
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout (defaults 1s and 60s).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// Dir is the data directory (default: a new temporary directory that
	// Close removes).
	Dir string
	// Port is the client port (default: a free one).
	Port int
	// StartTimeout bounds the wait for the server to answer (default 60s:
	// the JVM starts slowly on a busy machine).
	StartTimeout time.Duration
	// Log receives the server's output (default: kept in memory, see Output).
	Log io.Writer
	// TLS, when set, adds a secureClientPort (SecureAddr) served with
	// Netty, PEM key and trust stores, and x509 client identities (a
	// client's certificate subject is its identity in znode ACLs).
	TLS *TLSOptions
}

// TLSOptions configures the server's secureClientPort.
type TLSOptions struct {
	KeyStore   string // PEM file: the server's private key (PKCS#8) and certificate
	TrustStore string // PEM file: the CA client certificates must chain to
	ClientAuth string // need (default), want or none
}

// Server is one ZooKeeper server process.
type Server struct {
	opts    Options
	port    int
	tlsPort int // secureClientPort when Options.TLS is set
	dir     string
	ownsDir bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer // server output when Options.Log is nil
}

// Available reports whether the ZooKeeper jar and a java binary are installed.
func Available() error {
	if _, err := os.Stat(jarPath()); err != nil {
		return fmt.Errorf("zookeeper is not installed (%s): %w", jarPath(), err)
	}
	if _, err := exec.LookPath(javaPath()); err != nil {
		return fmt.Errorf("java is not installed: %w", err)
	}
	return nil
}

func jarPath() string {
	if p := os.Getenv("SLUICE_ZOOKEEPER_JAR"); p != "" {
		return p
	}
	return DefaultJar
}

func javaPath() string {
	if p := os.Getenv("SLUICE_JAVA"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/java"); err == nil {
		return "/usr/bin/java"
	}
	return "java"
}

// Start starts a server for a test and stops it (removing its data) when the
// test ends. It belongs to the heavy tier (testutil.Heavy: skipped under
// -short). When ZooKeeper is not installed the test fails, or is skipped
// with SLUICE_SKIP_MISSING_TOOLS=1.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	testutil.Heavy(tb, "ZooKeeper")
	if err := Available(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			tb.Skip(err)
		}
		tb.Fatalf("%v (run `make test-deps`)", err)
	}
	s, err := StartServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("zookeeper output (tail):\n%s", s.Output())
		}
		s.Close()
	})
	return s
}

// StartServer starts a server (for TestMain and benchmarks, which have no
// testing.TB). The caller must Close it.
func StartServer(opts Options) (*Server, error) {
	if opts.TickTime <= 0 {
		opts.TickTime = 200 * time.Millisecond
	}
	if opts.MinSessionTimeout <= 0 {
		opts.MinSessionTimeout = time.Second
	}
	if opts.MaxSessionTimeout <= 0 {
		opts.MaxSessionTimeout = 60 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	s := &Server{opts: opts, dir: opts.Dir, port: opts.Port}
	if s.dir != "" {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
	} else {
		d, err := os.MkdirTemp("", "sluice-zk-")
		if err != nil {
			return nil, fmt.Errorf("zktest: %w", err)
		}
		s.dir, s.ownsDir = d, true
	}
	freePort := func() (int, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("zktest: free port: %w", err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	// A port found free may be taken by another test's process before
	// ZooKeeper binds it: ports chosen here are chosen again then.
	for attempt := 1; ; attempt++ {
		var err error
		if opts.Port == 0 {
			if s.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		if opts.TLS != nil {
			if s.tlsPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		err = s.Start()
		if err == nil {
			return s, nil
		}
		if attempt < 3 && opts.Port == 0 && strings.Contains(err.Error(), "BindException") {
			s.mu.Lock()
			s.out.Reset()
			s.mu.Unlock()
			continue
		}
		s.Close()
		return nil, err
	}
}

// Addr is the server's client address, "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// SecureAddr is the server's TLS client address (Options.TLS).
func (s *Server) SecureAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort)) }

// Port is the server's client port.
func (s *Server) Port() int { return s.port }

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Output returns the last 8 KiB of the server's output (when Options.Log was
// not set).
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.out.Bytes()
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Start starts the server process (again, after Stop or Kill) on the same
// port and data directory and waits until it serves requests.
func (s *Server) Start() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("zktest: server already running")
	}
	cfg := filepath.Join(s.dir, "zoo.cfg")
	conf := fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
minSessionTimeout=%d
maxSessionTimeout=%d
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,stat,wchs,cons
forceSync=no
`, s.opts.TickTime.Milliseconds(), filepath.Join(s.dir, "data"), s.port,
		s.opts.MinSessionTimeout.Milliseconds(), s.opts.MaxSessionTimeout.Milliseconds())
	if t := s.opts.TLS; t != nil {
		auth := t.ClientAuth
		if auth == "" {
			auth = "need"
		}
		conf += fmt.Sprintf(`secureClientPort=%d
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=%s
ssl.keyStore.type=PEM
ssl.trustStore.location=%s
ssl.trustStore.type=PEM
ssl.clientAuth=%s
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
`, s.tlsPort, t.KeyStore, t.TrustStore, auth)
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("zktest: %w", err)
	}
	classpath := jarPath() + ":/usr/share/java/slf4j-simple.jar"
	if s.opts.TLS != nil {
		// Netty's codec, which the zookeeper jar's manifest leaves out.
		classpath += ":/usr/share/java/netty-codec.jar"
	}
	cmd := exec.Command(javaPath(),
		"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
		"-Dzookeeper.jmx.log4j.disable=true", "-Dzookeeper.admin.enableServer=false",
		"-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	var w io.Writer = lockedWriter{&s.mu, &s.out}
	if s.opts.Log != nil {
		w = s.opts.Log
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("zktest: start java: %w", err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() { cmd.Wait(); close(done) }()

	deadline := time.Now().Add(s.opts.StartTimeout)
	for {
		if s.serving() {
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			return fmt.Errorf("zktest: zookeeper exited during start: %s\n%s", cmd.ProcessState, s.Output())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("zktest: zookeeper did not answer ruok on %s within %v\n%s", s.Addr(), s.opts.StartTimeout, s.Output())
		}
	}
}

// serving reports whether the server answers requests: "ruok" says "imok"
// as soon as the port is open, "srvr" reports a mode only once the server
// serves sessions.
func (s *Server) serving() bool {
	reply, err := FourLetter(s.Addr(), "srvr", time.Second)
	return err == nil && strings.Contains(reply, "Mode:")
}

// Stop stops the server with SIGTERM (SIGKILL after 10s) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGTERM, 10*time.Second) }

// Kill stops the server with SIGKILL and waits for it.
func (s *Server) Kill() { s.signal(syscall.SIGKILL, 10*time.Second) }

func (s *Server) signal(sig syscall.Signal, grace time.Duration) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Close kills the server and removes the data directory it created.
func (s *Server) Close() {
	s.Kill()
	if s.ownsDir {
		os.RemoveAll(s.dir)
	}
}

// FourLetter sends one of ZooKeeper's four-letter commands and returns the
// reply.
func FourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil && len(b) == 0 {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// WatchCount returns the number of watches the server holds, data and
// child watches together ("mntr" zk_watch_count; "wchs" counts data
// watches only).
func (s *Server) WatchCount() (int, error) {
	out, err := FourLetter(s.Addr(), "mntr", 2*time.Second)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_watch_count"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("zktest: no zk_watch_count in mntr reply %q", out)
}

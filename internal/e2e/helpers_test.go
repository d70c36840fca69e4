package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testutil"
)

// node is one in-process broker, wired as it ships (testcluster), whose
// data directory and address survive restarts.
type node = testcluster.Node

// startNode starts an in-process broker on a free loopback port with its
// data in a temporary directory and the given settings.
func startNode(t testing.TB, settings ...string) *node {
	t.Helper()
	return testcluster.New(t, testcluster.Settings(settings...), testcluster.LogLevel(slog.LevelDebug)).Node(0)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ---- the sluice binary ----

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// sluiceBinary returns the sluice binary: $SLUICE_BIN when set, else
// cmd/sluice built once per test run into a temporary directory with the
// Makefile's flags (-trimpath, CGO_ENABLED=0), so that after `make build` the
// compiled packages come from the build cache.
func sluiceBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SLUICE_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/sluice")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is the sluice binary running `serve`.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	dir    string
	stderr *testutil.LockedBuffer
	done   chan error
}

// startProc runs `sluice serve` with its data in dir and waits until it
// accepts connections.
func startProc(t testing.TB, dir, addr string, extra ...string) *proc {
	t.Helper()
	bin := sluiceBinary(t)
	args := []string{"serve",
		"--override", "listeners=PLAINTEXT://" + addr,
		"--override", "log.dirs=" + filepath.Join(dir, "kafka"),
		"--override", "console.listen=",
	}
	for _, e := range extra {
		args = append(args, "--override", e)
	}
	p := &proc{t: t, addr: addr, dir: dir, stderr: &testutil.LockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	p.cmd.Stdout = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("sluice serve output:\n%s", p.stderr.String())
		}
	})
	testutil.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("sluice exited early: %v\n%s", err, p.stderr.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		c.Close()
		return nil
	})
	return p
}

// signal sends sig and waits (bounded) for the process to exit; it returns
// the exit code and how long the exit took.
func (p *proc) signal(sig syscall.Signal, within time.Duration) (int, time.Duration) {
	p.t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("sluice did not exit within %v of %v; output:\n%s", within, sig, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// runTool runs an external program with a timeout and returns its stdout;
// the test fails on a non-zero exit.
func runTool(t testing.TB, timeout time.Duration, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

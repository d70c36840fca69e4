package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"strconv"
	"sync"
	"time"
)

// The profiling hook: when SLUICE_PPROF_LISTEN is set (host:port, loopback
// recommended: the endpoints reveal memory contents and a CPU profile costs a
// few percent while it runs), every sluice command — `serve` above all —
// serves Go's net/http/pprof endpoints there for the life of the process:
//
//	SLUICE_PPROF_LISTEN=127.0.0.1:6060 sluice serve --config /etc/sluice/server.properties
//	go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=30
//	curl -o trace.out 'http://127.0.0.1:6060/debug/pprof/trace?seconds=5'
//
// Besides the standard endpoints, /debug/pprof/cpu/start and
// /debug/pprof/cpu/stop bracket a CPU profile by hand (the benchmark harness
// profiles exactly one phase of a workload with them). SLUICE_PPROF_MUTEX_FRACTION
// and SLUICE_PPROF_BLOCK_RATE turn on the mutex and block profiles
// (runtime.SetMutexProfileFraction, runtime.SetBlockProfileRate).
//
// The hook lives here, in an init, so that `serve` and the appliance do not
// change for it. A bad address is reported on stderr and the command runs
// without the hook: a debugging aid never keeps the broker from starting.

const pprofEnv = "SLUICE_PPROF_LISTEN"

func init() {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return
	}
	if err := setProfileRates(); err != nil {
		fmt.Fprintf(os.Stderr, "sluice: %v\n", err)
	}
	ln, err := listenPprof(addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice: %s=%s: %v; running without the profiling endpoints\n", pprofEnv, addr, err)
		return
	}
	fmt.Fprintf(os.Stderr, "sluice: profiling endpoints on http://%s/debug/pprof/\n", ln.Addr())
	srv := &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
	// The server lives as long as the process: nothing to stop it for.
	go srv.Serve(ln)
}

// listenPprof binds addr, warning when it is not a loopback address.
func listenPprof(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("want host:port: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		fmt.Fprintf(os.Stderr, "sluice: warning: %s=%s is not a loopback address; the profiling endpoints expose memory contents\n", pprofEnv, addr)
	}
	return net.Listen("tcp", addr)
}

func setProfileRates() error {
	var errs []error
	if v := os.Getenv("SLUICE_PPROF_MUTEX_FRACTION"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("SLUICE_PPROF_MUTEX_FRACTION=%q: want a non-negative integer", v))
		} else {
			runtime.SetMutexProfileFraction(n)
		}
	}
	if v := os.Getenv("SLUICE_PPROF_BLOCK_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("SLUICE_PPROF_BLOCK_RATE=%q: want a non-negative integer (nanoseconds)", v))
		} else {
			runtime.SetBlockProfileRate(n)
		}
	}
	return errors.Join(errs...)
}

// pprofMux serves net/http/pprof on a mux of its own (not
// http.DefaultServeMux), plus the start/stop CPU profile pair.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // heap, allocs, goroutine, block, mutex, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var cp cpuProfile
	mux.HandleFunc("/debug/pprof/cpu/start", cp.start)
	mux.HandleFunc("/debug/pprof/cpu/stop", cp.stop)
	return mux
}

// cpuProfile is a CPU profile started and stopped by two requests.
type cpuProfile struct {
	mu      sync.Mutex
	buf     *bytes.Buffer // non-nil while running
	started time.Time
}

func (c *cpuProfile) start(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf != nil {
		http.Error(w, "a CPU profile is already running", http.StatusConflict)
		return
	}
	buf := new(bytes.Buffer)
	if err := rpprof.StartCPUProfile(buf); err != nil {
		// Another profile (/debug/pprof/profile) is running.
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	c.buf, c.started = buf, time.Now()
	fmt.Fprintln(w, "started")
}

func (c *cpuProfile) stop(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		http.Error(w, "no CPU profile is running (POST /debug/pprof/cpu/start first)", http.StatusConflict)
		return
	}
	rpprof.StopCPUProfile()
	buf := c.buf
	c.buf = nil
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="cpu.pprof"`)
	w.Header().Set("X-Profile-Seconds", strconv.FormatFloat(time.Since(c.started).Seconds(), 'f', 3, 64))
	w.Write(buf.Bytes())
}

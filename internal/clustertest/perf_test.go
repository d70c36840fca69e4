package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/perf"
)

// The measurement harness of the cluster benchmarks: a cluster of three
// brokers without the console (benchCluster), `sluice perf` runs against it,
// the brokers' CPU time from /proc, and CPU profiles of the brokers while a
// run lasts ($SLUICE_CLUSTER_PROFILE=dir).

var (
	benchShared     *testCluster
	benchSharedErr  error
	benchSharedOnce sync.Once
)

// benchCluster is a cluster for benchmarks: three brokers alone (no console,
// no schema registry, whose background work would count in the brokers' CPU),
// replica.lag.time.max.ms at Kafka's 30 s unless $SLUICE_CLUSTER_LAG_MS
// says otherwise, and the profiling endpoints on every broker. Started on
// first use, stopped when the package's tests end.
func benchCluster(tb testing.TB) *testCluster {
	tb.Helper()
	benchSharedOnce.Do(func() {
		lag := "30000"
		if v := os.Getenv("SLUICE_CLUSTER_LAG_MS"); v != "" {
			lag = v
		}
		benchShared, benchSharedErr = startCluster(clusterOptions{pprof: true,
			overrides: []string{"replica.lag.time.max.ms=" + lag}})
		if benchSharedErr != nil && benchShared != nil {
			benchShared.close()
			benchShared = nil
		}
	})
	if benchSharedErr != nil {
		tb.Fatal(benchSharedErr)
	}
	return benchShared
}

// perfRun runs `sluice perf` against the cluster and decodes its JSON
// summary.
func (c *testCluster) perfRun(tb testing.TB, args ...string) perf.Result {
	tb.Helper()
	args = append([]string{"perf"}, args...)
	args = append(args, "--brokers", strings.Join(c.seeds(), ","), "--progress", "0", "--output", "json")
	args = append(args, c.cliArgs()...)
	cmd := exec.Command(c.bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("sluice %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var res perf.Result
	if err := json.Unmarshal(out, &res); err != nil {
		tb.Fatalf("%v: %s", err, out)
	}
	if res.Errors != 0 {
		tb.Fatalf("sluice %s: %d errors (%s)", strings.Join(args, " "), res.Errors, res.FirstError)
	}
	return res
}

// cpuTime is the process's CPU time (utime + stime) from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name (which may hold spaces), from
	// field 3 on: utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	const hz = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / hz, nil
}

// minorFaults is the process's minor page faults so far (minflt) from /proc.
func minorFaults(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 8 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strconv.ParseInt(f[7], 10, 64) // field 10, minflt
}

// brokerFaults is the minor page faults of each running broker so far, by
// id: a steadier measure than CPU time on a shared machine, and a dear one
// on a virtual machine (each fault is a trap into the kernel, and on this
// VM's paravirtualised page tables into the hypervisor too).
func (c *testCluster) brokerFaults() map[int32]int64 {
	out := map[int32]int64{}
	for _, b := range c.brokers {
		b.mu.Lock()
		cmd := b.cmd
		b.mu.Unlock()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		if n, err := minorFaults(cmd.Process.Pid); err == nil {
			out[b.id] = n
		}
	}
	return out
}

// faultsSince is the minor page faults of the brokers since before (summed).
func (c *testCluster) faultsSince(before map[int32]int64) int64 {
	var sum int64
	for id, n := range c.brokerFaults() {
		if b, ok := before[id]; ok {
			sum += n - b
		}
	}
	return sum
}

// brokerCPU is the CPU time used so far by each running broker, by id.
func (c *testCluster) brokerCPU() map[int32]time.Duration {
	out := map[int32]time.Duration{}
	for _, b := range c.brokers {
		b.mu.Lock()
		cmd := b.cmd
		b.mu.Unlock()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		if d, err := cpuTime(cmd.Process.Pid); err == nil {
			out[b.id] = d
		}
	}
	return out
}

// cpuSince is the CPU time the brokers used since before (summed).
func (c *testCluster) cpuSince(before map[int32]time.Duration) time.Duration {
	var sum time.Duration
	for id, d := range c.brokerCPU() {
		if b, ok := before[id]; ok {
			sum += d - b
		}
	}
	return sum
}

// profileDir is where CPU profiles of the brokers go ($SLUICE_CLUSTER_PROFILE;
// "" when not profiling).
func profileDir() string { return os.Getenv("SLUICE_CLUSTER_PROFILE") }

// profileBrokers takes a CPU profile of every broker for d (starting now,
// in the background) into $SLUICE_CLUSTER_PROFILE/<name>-broker<id>.pprof;
// the returned function waits for them. Without the variable, or for a
// cluster without the profiling endpoints, it does nothing.
func (c *testCluster) profileBrokers(tb testing.TB, name string, d time.Duration) (wait func()) {
	dir := profileDir()
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, b := range c.brokers {
		if b.pprof == "" || !b.running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.pprof, max(int(d.Seconds()), 1))
			ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				tb.Logf("profile broker %d: %v", b.id, err)
				return
			}
			defer resp.Body.Close()
			path := filepath.Join(dir, fmt.Sprintf("%s-broker%d.pprof", name, b.id))
			f, err := os.Create(path)
			if err != nil {
				tb.Logf("profile broker %d: %v", b.id, err)
				return
			}
			defer f.Close()
			if _, err := io.Copy(f, resp.Body); err != nil {
				tb.Logf("profile broker %d: %v", b.id, err)
				return
			}
			tb.Logf("CPU profile of broker %d: %s", b.id, path)
		}()
	}
	return wg.Wait
}

// profileBrokersWhile starts a CPU profile on every broker (the profiling
// endpoints' /debug/pprof/cpu/start) and returns the function that stops
// them and writes $SLUICE_CLUSTER_PROFILE/<name>-broker<id>.pprof: a
// profile of exactly the phase between the two calls, however long it
// lasts. Without the variable, or for a cluster without the profiling
// endpoints, it does nothing.
func (c *testCluster) profileBrokersWhile(tb testing.TB, name string) (stop func()) {
	dir := profileDir()
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	var started []*brokerProc
	for _, b := range c.brokers {
		if b.pprof == "" || !b.running() {
			continue
		}
		resp, err := http.Post(fmt.Sprintf("http://%s/debug/pprof/cpu/start", b.pprof), "", nil)
		if err != nil {
			tb.Logf("profile broker %d: %v", b.id, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			tb.Logf("profile broker %d: start: %s", b.id, resp.Status)
			continue
		}
		started = append(started, b)
	}
	return func() {
		for _, b := range started {
			resp, err := http.Post(fmt.Sprintf("http://%s/debug/pprof/cpu/stop", b.pprof), "", nil)
			if err != nil {
				tb.Logf("profile broker %d: %v", b.id, err)
				continue
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-broker%d.pprof", name, b.id))
			f, err := os.Create(path)
			if err == nil {
				_, err = io.Copy(f, resp.Body)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			resp.Body.Close()
			if err != nil {
				tb.Logf("profile broker %d: %v", b.id, err)
				continue
			}
			tb.Logf("CPU profile of broker %d: %s", b.id, path)
		}
	}
}

// benchName makes a sub-benchmark name usable in a file name.
func benchName(tb testing.TB) string {
	return strings.NewReplacer("/", "_", "=", "-").Replace(tb.Name())
}

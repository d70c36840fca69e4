// Package clustertest runs Sluice as a cluster: ZooKeeper (Debian's, started
// by the tests on a free port) and three `sluice serve` processes on
// 127.0.0.1, 127.0.0.2 and 127.0.0.3, driven with franz-go's kgo and kadm.
// One cluster is shared by the tests of the package, which run one after
// another; each leaves every broker running. $SLUICE_CLUSTER_SECURITY=sasl_ssl
// runs every cluster with a SASL_SSL inter-broker listener, the authorizer
// on and the tests' clients logged in over it (security_test.go).
package clustertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/internal/zktest"
)

// sessionTimeout is zookeeper.session.timeout.ms of the test brokers: how
// long a broker killed with kill -9 stays registered.
const sessionTimeout = 6 * time.Second

// lagMax is replica.lag.time.max.ms of the test brokers (short, so that a
// stopped follower leaves the ISR quickly).
const lagMax = 3 * time.Second

// lagMaxFor is lagMax, or $SLUICE_CLUSTER_LAG_MS for benchmarks that want
// Kafka's default (30000).
func lagMaxFor() time.Duration {
	if ms, err := strconv.Atoi(os.Getenv("SLUICE_CLUSTER_LAG_MS")); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return lagMax
}

// testCluster is ZooKeeper and three brokers.
type testCluster struct {
	opts    clusterOptions
	sec     *clusterSecurity // a SASL_SSL cluster's (nil: PLAINTEXT)
	zk      *zktest.Server
	bin     string
	dir     string
	brokers []*brokerProc
}

// shared is the cluster the tests share, started by the first test that
// asks for it (sharedCluster): a benchmark that starts a cluster of its own
// (scale_test.go) does not pay for one it does not use.
var (
	shared     *testCluster
	sharedErr  error
	sharedOnce sync.Once
)

// sharedCluster returns the shared cluster, starting it on first use.
func sharedCluster(tb testing.TB) *testCluster {
	tb.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = startCluster(clusterOptions{console: true})
		if sharedErr != nil && shared != nil {
			shared.close()
			shared = nil
		}
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The whole package is the heavy tier: every test calls
		// testutil.Heavy and is skipped; no cluster is started.
		os.Exit(m.Run())
	}
	// 10,000 partitions (BenchmarkTenThousandPartitions) need more open
	// files than the usual default; brokers inherit the limit.
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 200000 {
		want := syscall.Rlimit{Cur: 200000, Max: max(lim.Max, 200000)}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
			want.Cur, want.Max = lim.Max, lim.Max
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
		}
	}
	code := func() int {
		if err := zktest.Available(); err != nil {
			if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
				fmt.Println("skipping cluster tests:", err)
				return 0
			}
			fmt.Fprintf(os.Stderr, "%v (run `make test-deps`)\n", err)
			return 1
		}
		defer func() {
			if shared != nil {
				shared.close()
			}
			if benchShared != nil {
				benchShared.close()
			}
			if binDir != "" {
				os.RemoveAll(binDir)
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}

// clusterOptions shape a cluster of three brokers.
type clusterOptions struct {
	// console runs the web console and the schema registry on every host,
	// as the shared cluster does (as in production); scale measurements
	// run the brokers alone.
	console bool
	// overrides are added to every broker's (later ones win).
	overrides []string
	// pprof gives every broker the profiling endpoints
	// (SLUICE_PPROF_LISTEN) on a free port of its host.
	pprof bool
	// security is "plaintext" or "sasl_ssl" (security_test.go); ""
	// takes $SLUICE_CLUSTER_SECURITY.
	security string
}

// The sluice binary the clusters run, built once per test binary (every
// cluster of the package runs the same one); binDir is removed by TestMain.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// sluiceBinary returns $SLUICE_BIN, or builds the sluice binary on first
// use.
func sluiceBinary() (string, error) {
	if bin := os.Getenv("SLUICE_BIN"); bin != "" {
		return bin, nil
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "sluice-bin-"); binErr != nil {
			return
		}
		bin := filepath.Join(binDir, "sluice")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/sluice")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	return binPath, binErr
}

func startCluster(opts clusterOptions) (*testCluster, error) {
	var err error
	if opts.security == "" {
		if opts.security, err = securityFromEnv(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "sluice-cluster-")
	if err != nil {
		return nil, err
	}
	c := &testCluster{dir: dir, opts: opts}
	if c.bin, err = sluiceBinary(); err != nil {
		return c, err
	}
	if c.zk, err = zktest.StartServer(zktest.Options{Dir: filepath.Join(dir, "zk")}); err != nil {
		return c, err
	}
	if opts.security == securitySASLSSL {
		if c.sec, err = setupSASLSSL(filepath.Join(dir, "tls"), c.zk.Addr()); err != nil {
			return c, err
		}
	}
	for i := 1; i <= 3; i++ {
		host := fmt.Sprintf("127.0.0.%d", i)
		// Four ports held open together, so the kernel cannot hand the
		// same free port out twice (a console and a registry on one port).
		var ports [4]int
		var held []net.Listener
		for j := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				for _, h := range held {
					h.Close()
				}
				return c, fmt.Errorf("free port on %s: %w", host, err)
			}
			held = append(held, l)
			ports[j] = l.Addr().(*net.TCPAddr).Port
		}
		for _, h := range held {
			h.Close()
		}
		at := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
		b := &brokerProc{c: c, id: int32(i), addr: at(ports[0]), dir: filepath.Join(dir, fmt.Sprintf("broker-%d", i))}
		if opts.console {
			b.console, b.srAddr = at(ports[1]), at(ports[2])
		}
		if opts.pprof {
			b.pprof = at(ports[3])
		}
		c.brokers = append(c.brokers, b)
	}
	// Start them together (each waits for its listener).
	errs := make(chan error, 3)
	for _, b := range c.brokers {
		go func() { errs <- b.start() }()
	}
	for range c.brokers {
		if err := <-errs; err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *testCluster) close() {
	for _, b := range c.brokers {
		b.kill()
	}
	if c.zk != nil {
		c.zk.Close()
	}
	if os.Getenv("SLUICE_KEEP_CLUSTER") != "" {
		fmt.Println("cluster files kept in", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

// brokerProc is one `sluice serve` process; its data directory survives
// restarts.
type brokerProc struct {
	c       *testCluster
	id      int32
	addr    string
	dir     string
	console string // the web console's address (every host runs one, as in production)
	srAddr  string // the schema registry's address (every host runs one)
	pprof   string // the profiling endpoints' address ("": none)

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	out    *testutil.LockedBuffer
}

// brokerArgs are the overrides every test broker runs with.
func (b *brokerProc) args() []string {
	over := []string{
		"broker.id=" + strconv.Itoa(int(b.id)),
		"listeners=PLAINTEXT://" + b.addr,
		"log.dirs=" + filepath.Join(b.dir, "data"),
		"console.listen=" + b.console,
		"schema.registry.listen=" + b.srAddr,
		"console.data.dir=" + filepath.Join(b.dir, "console"),
		"console.lag.sample.interval.ms=1000",
		"alerting.evaluation.interval.ms=500",
		"alerting.allowed.targets=127.0.0.0/8", // the tests' PagerDuty stand-in
		"zookeeper.connect=" + b.c.zk.Addr() + zkChroot,
		"zookeeper.session.timeout.ms=" + strconv.Itoa(int(sessionTimeout.Milliseconds())),
		"replica.lag.time.max.ms=" + strconv.Itoa(int(lagMaxFor().Milliseconds())),
		"replica.fetch.backoff.ms=200",
		"controlled.shutdown.retry.backoff.ms=500",
		"leader.imbalance.check.interval.seconds=3600",
		"group.initial.rebalance.delay.ms=0",
		"offsets.topic.num.partitions=6",
		"num.partitions=1",
	}
	if b.c.sec != nil {
		over = append(over, b.c.sec.brokerArgs(b.addr)...)
	}
	over = append(over, b.c.opts.overrides...)
	level := os.Getenv("SLUICE_BROKER_LOG_LEVEL")
	if level == "" {
		level = "debug"
	}
	args := []string{"serve", "--log-level", level}
	for _, o := range over {
		args = append(args, "--override", o)
	}
	return args
}

// start runs the broker and waits until it accepts connections.
func (b *brokerProc) start() error {
	b.mu.Lock()
	if b.cmd != nil {
		b.mu.Unlock()
		return fmt.Errorf("broker %d already running", b.id)
	}
	if b.out == nil {
		b.out = &testutil.LockedBuffer{}
	}
	fmt.Fprintf(b.out, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	os.MkdirAll(b.dir, 0o755)
	logf, err := os.OpenFile(b.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	cmd := exec.Command(b.c.bin, b.args()...)
	if b.pprof != "" {
		cmd.Env = append(os.Environ(), "SLUICE_PPROF_LISTEN="+b.pprof)
	}
	w := io.MultiWriter(b.out, logf)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		b.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	b.cmd, b.done, b.paused = cmd, done, false
	b.mu.Unlock()
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("broker %d exited during start: %v\n%s", b.id, cmd.ProcessState, b.tail())
		default:
		}
		if c, err := net.DialTimeout("tcp", b.addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %d did not listen within 60s\n%s", b.id, b.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logPath is where the broker's output is kept, across restarts.
func (b *brokerProc) logPath() string { return filepath.Join(b.dir, "broker.log") }

func (b *brokerProc) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// signal sends sig; for SIGKILL and SIGTERM it waits for the exit.
func (b *brokerProc) signal(sig syscall.Signal) {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	if cmd == nil {
		b.mu.Unlock()
		return
	}
	fmt.Fprintf(b.out, "=== %v %s\n", sig, time.Now().Format(time.RFC3339Nano))
	if b.paused && (sig == syscall.SIGKILL || sig == syscall.SIGTERM) {
		cmd.Process.Signal(syscall.SIGCONT)
		b.paused = false
	}
	cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		b.paused = true
	case syscall.SIGCONT:
		b.paused = false
	}
	b.mu.Unlock()
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		b.mu.Lock()
		b.cmd = nil
		b.mu.Unlock()
	}
}

func (b *brokerProc) kill()   { b.signal(syscall.SIGKILL) }
func (b *brokerProc) term()   { b.signal(syscall.SIGTERM) }
func (b *brokerProc) pause()  { b.signal(syscall.SIGSTOP) }
func (b *brokerProc) resume() { b.signal(syscall.SIGCONT) }

func (b *brokerProc) outLen() int {
	if b.out == nil {
		return 0
	}
	return b.out.Len()
}

func (b *brokerProc) outSince(mark int) string {
	s := b.out.String()
	if mark > len(s) {
		return ""
	}
	return s[mark:]
}

func (b *brokerProc) tail() string {
	s := b.out.String()
	if len(s) > 64<<10 {
		s = s[len(s)-64<<10:]
	}
	return s
}

// ---- per-test helpers ----

// healthy makes every broker run (restarting stopped ones, resuming paused
// ones) and waits until all three are registered, with the broker output
// shown if the test failed.
func healthy(t *testing.T) *testCluster {
	t.Helper()
	c := sharedCluster(t)
	marks := make([]int, len(c.brokers))
	for i, b := range c.brokers {
		marks[i] = b.outLen()
	}
	t.Cleanup(func() {
		// A broker built with -race (SLUICE_BIN) reports data races on its
		// output; any during the test fails it.
		for i, b := range c.brokers {
			if out := b.outSince(marks[i]); strings.Contains(out, "WARNING: DATA RACE") || strings.Contains(out, "panic:") {
				t.Errorf("broker %d reported a data race or a panic:\n%s", b.id, out)
			}
		}
		if t.Failed() || os.Getenv("CLUSTERTEST_LOGS") != "" {
			for _, b := range c.brokers {
				t.Logf("---- broker %d output (tail) ----\n%s", b.id, b.tail())
			}
		}
	})
	for _, b := range c.brokers {
		b.mu.Lock()
		paused := b.paused
		b.mu.Unlock()
		if paused {
			b.resume()
		}
		if !b.running() {
			if err := b.start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitLive(t, c, 3, 60*time.Second)
	return c
}

// restoreAfter makes every broker run again when the test ends.
func restoreAfter(t *testing.T, c *testCluster) {
	t.Cleanup(func() {
		for _, b := range c.brokers {
			b.mu.Lock()
			paused := b.paused
			b.mu.Unlock()
			if paused {
				b.resume()
			}
			if !b.running() {
				if err := b.start(); err != nil {
					t.Error(err)
				}
			}
		}
	})
}

func (c *testCluster) seeds() []string {
	var s []string
	for _, b := range c.brokers {
		s = append(s, b.addr)
	}
	return s
}

func (c *testCluster) broker(id int32) *brokerProc { return c.brokers[id-1] }

// client returns a kgo client seeded with every broker, closed with the test.
func (c *testCluster) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, c.clientOpts()...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (c *testCluster) admin(t *testing.T) *kadm.Client {
	return kadm.NewClient(c.client(t))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// metadataFrom asks one broker for the metadata of topics (nil: all).
func metadataFrom(ctx context.Context, b *brokerProc, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.MetadataMinAge(10 * time.Millisecond)}, b.c.clientOpts()...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no seed")
	}
	resp, err := seeds[0].RetriableRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// partitionInfo is one partition as a broker's Metadata shows it.
type partitionInfo struct {
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32
	Offline             []int32
	Err                 int16
}

// partitionsFrom returns the topic's partitions as broker b sees them.
func partitionsFrom(ctx context.Context, b *brokerProc, topic string) (map[int32]partitionInfo, error) {
	md, err := metadataFrom(ctx, b, topic)
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("metadata of %s from broker %d: %+v", topic, b.id, md.Topics)
	}
	out := map[int32]partitionInfo{}
	for _, p := range md.Topics[0].Partitions {
		out[p.Partition] = partitionInfo{p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas, p.ErrorCode}
	}
	return out, nil
}

// liveBrokers is the broker ids a running broker's Metadata lists.
func liveBrokers(ctx context.Context, c *testCluster) ([]int32, error) {
	var lastErr error
	for _, b := range c.brokers {
		if !b.running() {
			continue
		}
		md, err := metadataFrom(ctx, b)
		if err != nil {
			lastErr = err
			continue
		}
		var ids []int32
		for _, br := range md.Brokers {
			ids = append(ids, br.NodeID)
		}
		slices.Sort(ids)
		return ids, nil
	}
	return nil, fmt.Errorf("no broker answered: %v", lastErr)
}

func waitLive(t *testing.T, c *testCluster, n int, timeout time.Duration) {
	t.Helper()
	testutil.CheckFor(t, timeout, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, b := range c.brokers {
			if !b.running() {
				continue
			}
			md, err := metadataFrom(ctx, b)
			if err != nil {
				return err
			}
			if len(md.Brokers) != n {
				return fmt.Errorf("broker %d lists %d brokers, want %d", b.id, len(md.Brokers), n)
			}
		}
		return nil
	})
}

// createTopic creates a topic with the given assignment (replica lists) and
// configs, and waits until every partition has a leader and a full ISR.
func createTopic(t *testing.T, c *testCluster, name string, assignment [][]int32, configs map[string]*string) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	for p, reps := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, v
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, c.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error %d %v", name, code, resp.Topics[0].ErrorMessage)
	}
	waitISR(t, c, name, func(p int32, pi partitionInfo) error {
		if len(pi.ISR) != len(assignment[p]) || pi.Leader != assignment[p][0] {
			return fmt.Errorf("partition %d: %+v", p, pi)
		}
		return nil
	})
}

// waitISR waits until every running broker's metadata of topic satisfies
// cond for every partition.
func waitISR(t *testing.T, c *testCluster, topic string, cond func(p int32, pi partitionInfo) error) {
	t.Helper()
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, b := range c.brokers {
			if !b.running() {
				continue
			}
			b.mu.Lock()
			paused := b.paused
			b.mu.Unlock()
			if paused {
				continue
			}
			ps, err := partitionsFrom(ctx, b, topic)
			if err != nil {
				return err
			}
			for p, pi := range ps {
				if err := cond(p, pi); err != nil {
					return fmt.Errorf("%s on broker %d: %w", topic, b.id, err)
				}
			}
		}
		return nil
	})
}

func strp(s string) *string { return &s }

// numbered returns the record values "0".."n-1" offset by from.
func value(i int) []byte { return []byte(strconv.Itoa(i)) }

// readAll consumes topic-partition from the start up to its high watermark
// and returns the values.
func readAll(t *testing.T, c *testCluster, topic string, partition int32) []string {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	adm := c.admin(t)
	var end int64
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		o, ok := offs.Lookup(topic, partition)
		if !ok || o.Err != nil {
			return fmt.Errorf("end offset of %s-%d: %+v", topic, partition, o)
		}
		end = o.Offset
		return nil
	})
	cl := c.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	var out []string
	var last int64 = -1
	for last+1 < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s-%d: got to offset %d of %d", topic, partition, last, end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error (retried): %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end {
				return
			}
			out = append(out, string(r.Value))
			last = r.Offset
		})
	}
	return out
}

// checkExactlyOnceInOrder: the values read are strictly increasing numbers
// (no duplicate, no reordering), and every acknowledged one is there.
func checkExactlyOnceInOrder(t *testing.T, read []string, acked map[int]bool) {
	t.Helper()
	prev := -1
	seen := map[int]bool{}
	for i, s := range read {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("record %d: value %q", i, s)
		}
		if n <= prev {
			t.Fatalf("record %d: value %d after %d (duplicate or out of order)", i, n, prev)
		}
		prev = n
		seen[n] = true
	}
	var missing []int
	for n := range acked {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("%d acknowledged records lost, first %v", len(missing), missing[:min(10, len(missing))])
	}
}

// describeControllerFrom returns the controller id per DescribeCluster of b.
func controllerFrom(ctx context.Context, b *brokerProc) (int32, error) {
	md, err := metadataFrom(ctx, b)
	if err != nil {
		return -1, err
	}
	return md.ControllerID, nil
}

func joinIDs(ids []int32) string {
	var s []string
	for _, id := range ids {
		s = append(s, strconv.Itoa(int(id)))
	}
	return strings.Join(s, ",")
}

// alterReq is a reassignment request for one partition.
func alterReq(topic string, partition int32, replicas ...int32) kadm.AlterPartitionAssignmentsReq {
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, partition, replicas)
	return req
}

// electPreferred runs a preferred leader election for one partition and
// fails the test unless it elected or was not needed.
func electPreferred(t *testing.T, c *testCluster, topic string, partition int32) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		rs, err := c.admin(t).ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return err
		}
		r := rs[topic][partition]
		if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			return fmt.Errorf("preferred election of %s-%d: %v %s", topic, partition, r.Err, r.ErrMessage)
		}
		return nil
	})
}

// zkChroot is the chroot the test brokers use.
const zkChroot = "/sluice"

// zkConn is a plain ZooKeeper client on the cluster's ZooKeeper (reconnecting
// across its restarts), closed with the test.
func (c *testCluster) zkConn(t *testing.T) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{c.zk.Addr()}, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	// A zookeeper session.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if conn.State() != zk.StateHasSession {
			return errors.New(conn.State().String())
		}
		return nil
	})
	return conn
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// registrationsOf returns, for each registered broker, the session that
// owns its /brokers/ids/<id> znode.
func registrationsOf(zc *zk.Conn, c *testCluster) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, b := range c.brokers {
		ok, st, err := zc.Exists(fmt.Sprintf("%s/brokers/ids/%d", zkChroot, b.id))
		if err != nil {
			return nil, err
		}
		if ok {
			out[b.id] = st.EphemeralOwner
		}
	}
	return out, nil
}

// registrations is registrationsOf, once every broker is registered.
func (c *testCluster) registrations(t *testing.T, zc *zk.Conn) map[int32]int64 {
	t.Helper()
	var regs map[int32]int64
	// Every broker registered.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		if regs, err = registrationsOf(zc, c); err != nil {
			return err
		}
		if len(regs) != len(c.brokers) {
			return fmt.Errorf("registered: %v", regs)
		}
		return nil
	})
	return regs
}

// zkControllerInfo is /controller's owner and /controller_epoch.
type zkControllerInfo struct {
	Session int64
	Epoch   string
}

func (c *testCluster) zkController(t *testing.T, zc *zk.Conn) zkControllerInfo {
	t.Helper()
	var info zkControllerInfo
	// A controller in zookeeper.
	testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		_, st, err := zc.Get(zkChroot + "/controller")
		if err != nil {
			return err
		}
		e, _, err := zc.Get(zkChroot + "/controller_epoch")
		if err != nil {
			return err
		}
		info = zkControllerInfo{Session: st.EphemeralOwner, Epoch: string(e)}
		return nil
	})
	return info
}

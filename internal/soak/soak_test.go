//go:build soak

package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/perf/kafkaperf"
	"github.com/sluice-io/sluice/internal/zktest"
)

// settings are the soak's knobs, from SOAK_* environment variables.
type settings struct {
	Duration, Interval, Warmup time.Duration
	Rate                       string // as sluice perf --rate
	Partitions, RecordSize     int
	Producers                  int
	SegmentBytes               int // each partition keeps 4 segments of these
	Limits                     limits
	Out                        string // Markdown report, appended
	Dir                        string // kept when set
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 5m", name, v)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envFloat(t *testing.T, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		t.Fatalf("%s=%q: want a number of 0 or more", name, v)
	}
	return f
}

func readSettings(t *testing.T) settings {
	s := settings{Duration: envDuration(t, "SOAK_DURATION", 5*time.Minute)}
	// The short run samples often and allows more growth a minute: its
	// few minutes of noisy samples fit a slope less tightly than an hour's.
	long := s.Duration > 15*time.Minute
	def := struct {
		interval, warmup time.Duration
		lim              limits
		segment          int
	}{30 * time.Second, 2 * time.Minute, limits{RSSMiB: 8, Goroutines: 10, OpenFiles: 5}, 4 << 20}
	if long {
		def.interval, def.warmup, def.lim, def.segment = 5*time.Minute, 10*time.Minute, limits{RSSMiB: 1, Goroutines: 2, OpenFiles: 1}, 8<<20
	}
	s.Interval = envDuration(t, "SOAK_INTERVAL", def.interval)
	s.Warmup = envDuration(t, "SOAK_WARMUP", def.warmup)
	s.Rate = os.Getenv("SOAK_RATE")
	if s.Rate == "" {
		s.Rate = "20MiB/s"
	}
	s.Partitions = envInt(t, "SOAK_PARTITIONS", 100)
	s.RecordSize = envInt(t, "SOAK_RECORD_SIZE", 1024)
	s.Producers = envInt(t, "SOAK_PRODUCERS", 2)
	s.SegmentBytes = envInt(t, "SOAK_SEGMENT_BYTES", def.segment)
	s.Limits = limits{
		RSSMiB:     envFloat(t, "SOAK_MAX_RSS_SLOPE", def.lim.RSSMiB),
		Goroutines: envFloat(t, "SOAK_MAX_GOROUTINE_SLOPE", def.lim.Goroutines),
		OpenFiles:  envFloat(t, "SOAK_MAX_FD_SLOPE", def.lim.OpenFiles),
	}
	s.Out = os.Getenv("SOAK_OUT")
	s.Dir = os.Getenv("SOAK_DIR")
	if s.Warmup+3*s.Interval > s.Duration {
		t.Fatalf("SOAK_DURATION %v leaves fewer than 3 samples of SOAK_INTERVAL %v after SOAK_WARMUP %v", s.Duration, s.Interval, s.Warmup)
	}
	if s.RecordSize < perf.SendTimeBytes {
		t.Fatalf("SOAK_RECORD_SIZE must be at least %d", perf.SendTimeBytes)
	}
	return s
}

// Broker settings of the soak cluster beyond each broker's own addresses:
// ZooKeeper's session timeout as in production (18 s), the console's
// background work every 5 s so that a leak in it shows within minutes.
var brokerOverrides = []string{
	"zookeeper.session.timeout.ms=18000",
	"default.replication.factor=3",
	"min.insync.replicas=2",
	"offsets.topic.replication.factor=3",
	"group.initial.rebalance.delay.ms=0",
	"console.lag.sample.interval.ms=5000",
	"alerting.evaluation.interval.ms=5000",
	// Retention enforced every 10 s rather than 5 min, so the soak topic
	// stays at its retention from the first minutes on.
	"log.retention.check.interval.ms=10000",
}

// topicConfigs keeps 4 segments of segmentBytes per partition: with the
// defaults (20 MiB/s over 100 partitions, 4 MiB segments for the short
// run, 8 MiB for the hour) a segment rolls every 20 s (40 s) and the
// oldest is deleted as often from the first 100 s (200 s) on, so file
// handles come and go all along, the brokers reach their steady state
// within the warm-up, and the disk holds a few GB whatever the duration.
func topicConfigs(segmentBytes int) map[string]*string {
	return map[string]*string{
		"segment.bytes":   kadm.StringPtr(strconv.Itoa(segmentBytes)),
		"retention.bytes": kadm.StringPtr(strconv.Itoa(4 * segmentBytes)),
	}
}

const (
	soakTopic   = "soak"
	leftTopic   = "soak-left"
	rightTopic  = "soak-right"
	zkChroot    = "/soak"
	adminUser   = "soak"
	adminPass   = "soak-password-1"
	mirrorRate  = 200 // keyed records/s to each compared topic
	e2eMembers  = 3
	extraGroups = 2
)

type broker struct {
	id      int
	addr    string
	console string
	dir     string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (b *broker) pid() int { return b.cmd.Process.Pid }

// TestSoak runs the soak (see the package documentation).
func TestSoak(t *testing.T) {
	s := readSettings(t)
	if err := zktest.Available(); err != nil {
		t.Skipf("ZooKeeper is needed: %v (make test-deps)", err)
	}
	dir := s.Dir
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rate, err := kafkaperf.ParseRate(s.Rate, s.RecordSize)
	if err != nil {
		t.Fatalf("SOAK_RATE %v", err)
	}
	bin := sluiceBinary(t, dir)
	raiseFileLimit()

	ctx, cancel := context.WithTimeout(context.Background(), s.Duration+10*time.Minute)
	defer cancel()

	zkLog, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer zkLog.Close()
	zks, err := zktest.StartServer(zktest.Options{Dir: filepath.Join(dir, "zookeeper"), Log: zkLog})
	if err != nil {
		t.Fatal(err)
	}
	defer zks.Close()

	brokers := make([]*broker, 3)
	for i := range brokers {
		b := &broker{id: i + 1, addr: freeAddr(t), console: freeAddr(t), dir: filepath.Join(dir, fmt.Sprintf("broker-%d", i+1))}
		brokers[i] = b
		// The console's first admin, in each console's database: any of
		// them may lead.
		addUser(t, bin, filepath.Join(b.dir, "console"))
	}
	for _, b := range brokers {
		startBroker(t, bin, b, zks.Addr())
	}
	defer func() {
		for _, b := range brokers {
			stopBroker(b)
		}
	}()
	seeds := []string{brokers[0].addr, brokers[1].addr, brokers[2].addr}
	waitCluster(t, ctx, seeds)

	adm, admCl := adminClient(t, seeds)
	defer admCl.Close()
	createTopics(t, ctx, adm, s.Partitions, s.SegmentBytes)

	leader := consoleLeader(t, ctx, zks.Addr(), brokers)
	t.Logf("broker %d's console leads; its console is %s", leader.id, leader.console)
	web := signIn(t, ctx, leader.console)
	createComparison(t, ctx, web)
	createAlertRule(t, ctx, web)

	// Everything below runs until loadCtx ends; each goroutine is waited.
	loadCtx, stopAll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tail := &tailCounts{}
	wg.Add(1)
	go func() { defer wg.Done(); tail.run(loadCtx, web, leader.console) }()
	var mirrorErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mirror(loadCtx, seeds); err != nil {
			mirrorErr.Store(err.Error())
		}
	}()
	var groupRecords [extraGroups]atomic.Int64
	for g := range extraGroups {
		wg.Add(1)
		go func() { defer wg.Done(); consumeGroup(loadCtx, seeds, fmt.Sprintf("soak-g%d", g+2), &groupRecords[g]) }()
	}

	// Two samplers: every broker's RSS, goroutines and open files six
	// times a window (the slopes are fitted to all of them), and on every
	// progress sample of the load a row of the window's medians.
	start := time.Now()
	var (
		pmu    sync.Mutex
		points []point
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		tk := time.NewTicker(max(s.Interval/6, time.Second))
		defer tk.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-tk.C:
				p := point{At: time.Since(start), Brokers: readBrokers(sampleCtx, brokers)}
				pmu.Lock()
				points = append(points, p)
				pmu.Unlock()
			}
		}
	}()
	type tick struct {
		track string
		s     perf.Sample
	}
	ticks := make(chan tick, 64)
	var rows []row
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var pending *row
		var last time.Duration
		for tk := range ticks {
			if tk.track == "produce" {
				at := time.Since(start)
				pmu.Lock()
				r := windowRow(points, last, at, len(brokers))
				pmu.Unlock()
				last = at
				leaderCounts(ctx, leader, tail, &r)
				r.ProduceRate, r.MiBRate = tk.s.RecordsPerSec, tk.s.MiBPerSec
				r.ProduceP99, r.E2EP99 = orNaN(tk.s.P99), math.NaN()
				pending = &r
				continue
			}
			if pending == nil {
				continue
			}
			pending.ConsumeRate, pending.E2EP99 = tk.s.RecordsPerSec, orNaN(tk.s.P99)
			rows = append(rows, *pending)
			fmt.Println(rowLine(*pending))
			pending = nil
		}
	}()

	progress, err := os.Create(filepath.Join(dir, "load-progress.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer progress.Close()
	fmt.Printf("soak: %v at %s (%.0f records/s of %d B) over %d partitions (RF 3, acks=all), 3 consumer groups, "+
		"tail, comparison and alert rule on broker %d's console; a row every %v, slopes after %v; data in %s\n",
		s.Duration, s.Rate, rate, s.RecordSize, s.Partitions, leader.id, s.Interval, s.Warmup, dir)
	res, loadErr := kafkaperf.Load(loadCtx, kafkaperf.LoadConfig{
		ProduceConfig: kafkaperf.ProduceConfig{
			Common: kafkaperf.Common{Brokers: seeds, Topic: soakTopic, Progress: progress, ProgressInterval: s.Interval,
				SetupTimeout: time.Minute, OnSample: func(track string, smp perf.Sample) { ticks <- tick{track, smp} }},
			RecordSize: s.RecordSize, Throughput: rate, Acks: "all", Partitions: int32(s.Partitions),
			ReplicationFactor: 3, Producers: s.Producers, Linger: 5 * time.Millisecond,
		},
		Consumers: e2eMembers, Group: "soak-e2e", Duration: s.Duration, IdleTimeout: 30 * time.Second,
	})
	close(ticks)
	<-sampled
	stopSampling()
	<-sampling
	// The last look at the console before everything stops.
	var final row
	leaderCounts(ctx, leader, tail, &final)
	stopAll()
	wg.Wait()

	report := summarize(t, s, rate, leader.id, rows, points, res, loadErr, final, tail, &groupRecords, mirrorErr.Load())
	fmt.Println(report)
	if s.Out != "" {
		f, err := os.OpenFile(s.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(report + "\n")
		f.Close()
	}
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// summarize checks the run and returns its Markdown report; failures are
// reported on t.
func summarize(t *testing.T, s settings, rate float64, leader int, rows []row, points []point, res *perf.Result, loadErr error,
	final row, tail *tailCounts, groups *[extraGroups]atomic.Int64, mirrorErr any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Soak of %v (`make soak SOAK_DURATION=%v`), %s on %s: %s of %d B records (%.0f records/s) over %d partitions, "+
		"replication factor 3, acks=all, %d producers; consumer group soak-e2e (%d members, end-to-end latency) and %d more groups; "+
		"broker %d's console: a live tail of the topic, a continuous comparison of two topics fed %d keyed records/s each, "+
		"an alert rule evaluated every 5 s; the topic keeps 4 segments of %d MiB per partition. A row every %v with each broker's medians "+
		"of the window (RSS, goroutines and open files are read six times a window); slopes are fitted to every reading after %v.\n\n",
		s.Duration, s.Duration, time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), s.Rate, s.RecordSize, rate, s.Partitions,
		s.Producers, e2eMembers, extraGroups, leader, mirrorRate, s.SegmentBytes>>20, s.Interval, s.Warmup)
	b.WriteString(table(rows))
	b.WriteString("\n")
	checks, err := checkSlopes(points, s.Warmup, s.Limits)
	if err != nil {
		t.Error(err)
	} else {
		b.WriteString(slopeTable(checks))
		for _, c := range checks {
			if c.Exceeded {
				t.Errorf("broker %d: %s grows %.2f a minute after warm-up (limit %.2f): %.0f → %.0f", c.Broker, c.What, c.PerMin, c.Limit, c.First, c.Last)
			}
		}
	}
	b.WriteString("\n")
	switch {
	case loadErr != nil:
		t.Errorf("load: %v", loadErr)
	case res == nil:
		t.Error("load: no result")
	default:
		if res.FirstError != "" || res.Errors > 0 {
			t.Errorf("load: %d errors, %s", res.Errors, res.FirstError)
		}
		var lp, le string
		if l := res.Produce.Latency; l != nil {
			lp = fmt.Sprintf("p50 %.2f, p99 %.2f, p99.9 %.2f, max %.1f ms", l.P50, l.P99, l.P999, l.Max)
		}
		if res.Consume != nil && res.Consume.Latency != nil {
			l := res.Consume.Latency
			le = fmt.Sprintf("p50 %.2f, p99 %.2f, p99.9 %.2f, max %.1f ms", l.P50, l.P99, l.P999, l.Max)
		}
		fmt.Fprintf(&b, "Whole run: %d records produced (%.0f records/s, %.2f MiB/s; send → ack %s), ", res.Produce.Records,
			res.Produce.RecordsPerSec, res.Produce.MiBPerSec, lp)
		if res.Consume != nil {
			fmt.Fprintf(&b, "%d received by soak-e2e (end to end %s), ", res.Consume.Records, le)
		}
		if res.Produce.RecordsPerSec < 0.9*rate {
			t.Errorf("produced %.0f records/s, under 90%% of the %.0f asked", res.Produce.RecordsPerSec, rate)
		}
	}
	fmt.Fprintf(&b, "%d and %d read by soak-g2 and soak-g3; the tail sent %d record rows (%d more counted as dropped) in %d events; "+
		"the comparison paired %.0f records; %.0f alert evaluations.\n",
		groups[0].Load(), groups[1].Load(), final.TailRecords, final.TailDropped, tail.events.Load(), final.Matched, final.Evaluations)
	if mirrorErr != nil {
		t.Errorf("feeding the compared topics: %v", mirrorErr)
	}
	if groups[0].Load() == 0 || groups[1].Load() == 0 {
		t.Errorf("consumer groups soak-g2 and soak-g3 read %d and %d records", groups[0].Load(), groups[1].Load())
	}
	if err := tail.err(); err != nil {
		t.Errorf("live tail: %v", err)
	}
	// Every window after the first saw the tail, the comparison and the
	// evaluator make progress.
	for i := 1; i < len(rows); i++ {
		p, r := rows[i-1], rows[i]
		if r.TailRecords <= p.TailRecords {
			t.Errorf("minute %.1f: the live tail sent no rows since the last sample", r.At.Minutes())
		}
		if r.Matched <= p.Matched {
			t.Errorf("minute %.1f: the comparison paired no records since the last sample (%.0f)", r.At.Minutes(), r.Matched)
		}
		if r.Evaluations <= p.Evaluations {
			t.Errorf("minute %.1f: no alert evaluation since the last sample (%.0f)", r.At.Minutes(), r.Evaluations)
		}
	}
	return b.String()
}

// machine describes the host in one phrase.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d × %s (load average at the end %s)", runtime.NumCPU(), model, load)
}

// rowLine is the live line of one row.
func rowLine(r row) string {
	var rss, gor, fds []string
	for _, s := range r.Brokers {
		rss = append(rss, fmt.Sprintf("%.0f", float64(s.RSSKiB)/1024))
		gor = append(gor, fmt.Sprintf("%.0f", s.Goroutines))
		fds = append(fds, strconv.Itoa(s.OpenFiles))
	}
	return fmt.Sprintf("soak %6.1f min: RSS MiB %s, goroutines %s, open files %s; %.0f rec/s %.2f MiB/s, produce p99 %.2f ms, e2e p99 %.2f ms; "+
		"tail %d rows, comparison %.0f pairs, %.0f alert evaluations",
		r.At.Minutes(), strings.Join(rss, "/"), strings.Join(gor, "/"), strings.Join(fds, "/"), r.ProduceRate, r.MiBRate,
		r.ProduceP99, r.E2EP99, r.TailRecords, r.Matched, r.Evaluations)
}

// readBrokers reads every broker's RSS, open files and goroutines now.
func readBrokers(ctx context.Context, brokers []*broker) []brokerSample {
	out := make([]brokerSample, len(brokers))
	for i, b := range brokers {
		var errs []string
		if v, err := procRSSKiB(b.pid()); err == nil {
			out[i].RSSKiB = v
		} else {
			errs = append(errs, err.Error())
		}
		if v, err := procOpenFiles(b.pid()); err == nil {
			out[i].OpenFiles = v
		} else {
			errs = append(errs, err.Error())
		}
		text, err := getText(ctx, "http://"+b.console+"/metrics")
		if err == nil {
			out[i].Goroutines, err = metricValue(text, "go_goroutines", nil)
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
		out[i].Err = strings.Join(errs, "; ")
	}
	return out
}

// leaderCounts fills in what the console leader's background work and the
// tail have done so far.
func leaderCounts(ctx context.Context, leader *broker, tail *tailCounts, r *row) {
	if text, err := getText(ctx, "http://"+leader.console+"/metrics"); err == nil {
		r.Matched, _ = metricValue(text, "sluice_migration_records", map[string]string{"outcome": "matched"})
		r.Evaluations, _ = metricValue(text, "sluice_alerting_evaluation_duration_seconds", nil)
	}
	r.TailRecords, r.TailDropped = tail.rows.Load(), tail.dropped.Load()
}

func getText(ctx context.Context, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return string(b), nil
}

// ---- the cluster ----

// sluiceBinary is $SLUICE_BIN, or cmd/sluice built into dir.
func sluiceBinary(t *testing.T, dir string) string {
	if bin := os.Getenv("SLUICE_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(dir, "sluice")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/sluice")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// raiseFileLimit lifts the soft open-files limit (the brokers inherit it).
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// addUser creates the console admin in the console database under dir.
func addUser(t *testing.T, bin, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "console", "user", "add", "--role", "admin", "--password-stdin", "--data-dir", dir, adminUser)
	cmd.Stdin = strings.NewReader(adminPass + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sluice console user add: %v\n%s", err, out)
	}
}

func startBroker(t *testing.T, bin string, b *broker, zkAddr string) {
	over := append([]string{
		"broker.id=" + strconv.Itoa(b.id),
		"listeners=PLAINTEXT://" + b.addr,
		"log.dirs=" + filepath.Join(b.dir, "data"),
		"console.listen=" + b.console,
		"console.data.dir=" + filepath.Join(b.dir, "console"),
		"schema.registry.listen=" + freeAddr(t),
		"zookeeper.connect=" + zkAddr + zkChroot,
	}, brokerOverrides...)
	args := []string{"serve", "--log-level", "info"}
	for _, o := range over {
		args = append(args, "--override", o)
	}
	logf, err := os.Create(filepath.Join(b.dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command(bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	b.done = make(chan struct{})
	go func() { b.cmd.Wait(); logf.Close(); close(b.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-b.done:
			t.Fatalf("broker %d exited at start; log %s", b.id, filepath.Join(b.dir, "broker.log"))
		default:
		}
		if c, err := net.DialTimeout("tcp", b.addr, time.Second); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d did not listen within 60s", b.id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopBroker stops b as systemd would: SIGTERM, then SIGKILL after 60 s.
func stopBroker(b *broker) {
	if b.cmd == nil || b.done == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(60 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
}

func adminClient(t *testing.T, seeds []string) (*kadm.Client, *kgo.Client) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl
}

// waitCluster waits until Metadata lists three brokers and a controller.
func waitCluster(t *testing.T, ctx context.Context, seeds []string) {
	adm, cl := adminClient(t, seeds)
	defer cl.Close()
	deadline := time.Now().Add(90 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := adm.BrokerMetadata(rctx)
		cancel()
		if err == nil && len(m.Brokers) == 3 && m.Controller >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not form within 90s: %v %+v", err, m)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func createTopics(t *testing.T, ctx context.Context, adm *kadm.Client, partitions, segmentBytes int) {
	for _, tc := range []struct {
		name  string
		parts int32
		cfg   map[string]*string
	}{{soakTopic, int32(partitions), topicConfigs(segmentBytes)}, {leftTopic, 3, nil}, {rightTopic, 3, nil}} {
		resp, err := adm.CreateTopic(ctx, tc.parts, 3, tc.cfg, tc.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("creating %s: %v", tc.name, err)
		}
	}
	// Every partition has a leader before the load starts.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		md, err := adm.Metadata(ctx, soakTopic, leftTopic, rightTopic)
		ready := err == nil
		if ready {
			for _, td := range md.Topics {
				if td.Err != nil {
					ready = false
				}
				for _, p := range td.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
					}
				}
			}
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics without leaders after 2 minutes: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// consoleLeader is the broker whose console holds /console_leader.
func consoleLeader(t *testing.T, ctx context.Context, zkAddr string, brokers []*broker) *broker {
	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		data, _, err := conn.Get(zkChroot + "/console_leader")
		if err == nil {
			var node struct {
				BrokerID int `json:"brokerid"`
			}
			if jerr := json.Unmarshal(data, &node); jerr == nil && node.BrokerID >= 1 && node.BrokerID <= len(brokers) {
				return brokers[node.BrokerID-1]
			}
			err = fmt.Errorf("/console_leader holds %q", data)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no console leader within a minute: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ---- the console ----

// console is a signed-in browser stand-in.
type console struct {
	base string
	hc   *http.Client
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// csrf loads page and returns its forms' CSRF token.
func (c *console) csrf(ctx context.Context, page string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+page, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	m := csrfRe.FindSubmatch(body)
	if m == nil {
		return "", fmt.Errorf("GET %s: %s, no form token", page, resp.Status)
	}
	return string(m[1]), nil
}

// post sends form from the page at from (its CSRF token) to path and
// returns the status and body; asJSON asks for a JSON answer.
func (c *console) post(ctx context.Context, from, path string, form url.Values, asJSON bool) (int, []byte, error) {
	tok, err := c.csrf(ctx, from)
	if err != nil {
		return 0, nil, err
	}
	form.Set("_csrf", tok)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if asJSON {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, body, nil
}

func signIn(t *testing.T, ctx context.Context, addr string) *console {
	jar, _ := cookiejar.New(nil)
	c := &console{base: "http://" + addr, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	deadline := time.Now().Add(time.Minute)
	for {
		status, body, err := c.post(ctx, "/login", "/login", url.Values{"username": {adminUser}, "password": {adminPass}}, false)
		// The sign-in redirects (303, followed) to the overview.
		if err == nil && status == http.StatusOK && !bytes.Contains(body, []byte(`name="password"`)) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("signing in to the console at %s: status %d, %v: %.300s", addr, status, err, body)
		}
		time.Sleep(time.Second)
	}
}

func createComparison(t *testing.T, ctx context.Context, c *console) {
	// The console learns of the new topics with its next metadata refresh.
	deadline := time.Now().Add(time.Minute)
	for {
		status, body, err := c.post(ctx, "/comparisons/new", "/comparisons", url.Values{
			"name": {"soak mirror"}, "left": {leftTopic}, "right": {rightTopic}, "pairing": {"key"}, "values": {"bytes"},
			"start": {"earliest"}, "mode": {"continuous"},
		}, true)
		if err == nil && status == http.StatusCreated {
			return
		}
		if time.Now().After(deadline) || !bytes.Contains(body, []byte("There is no topic")) {
			t.Fatalf("creating the comparison: status %d, %v: %.600s", status, err, body)
		}
		time.Sleep(time.Second)
	}
}

func createAlertRule(t *testing.T, ctx context.Context, c *console) {
	status, body, err := c.post(ctx, "/alerts/rules/new", "/alerts/rules", url.Values{
		"name": {"soak lag"}, "kind": {"lag_records"}, "severity": {"warning"}, "threshold": {"100000000"},
		"for": {"1m"}, "clear_for": {"1m"}, "scope_pattern": {"*"}, "enabled": {"1"},
	}, true)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("creating the alert rule: status %d, %v: %.600s", status, err, body)
	}
}

// tailCounts is what the live tail received.
type tailCounts struct {
	rows, dropped, events atomic.Int64
	mu                    sync.Mutex
	failure               error
}

func (tc *tailCounts) err() error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.failure
}

var rowRe = regexp.MustCompile(`<tr`)

// run keeps the console's live tail of the soak topic open until ctx ends,
// counting the rows and the dropped records it reports. A stream that ends
// or fails before ctx is a failure.
func (tc *tailCounts) run(ctx context.Context, c *console, addr string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/topics/"+soakTopic+"/messages/tail", nil)
	if err != nil {
		tc.fail(err)
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := &http.Client{Jar: c.hc.Jar} // no timeout: the stream lasts the run
	resp, err := hc.Do(req)
	if err != nil {
		tc.fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		tc.fail(fmt.Errorf("GET tail: %s, %s", resp.Status, resp.Header.Get("Content-Type")))
		return
	}
	r := newSSEReader(resp.Body)
	for {
		event, data, err := r.next()
		if err != nil {
			if ctx.Err() == nil {
				tc.fail(fmt.Errorf("the stream ended after %d events: %v", tc.events.Load(), err))
			}
			return
		}
		tc.events.Add(1)
		switch event {
		case "records":
			tc.rows.Add(int64(len(rowRe.FindAllStringIndex(data, -1))))
		case "dropped":
			if n, err := strconv.ParseInt(strings.TrimSpace(firstNumber(data)), 10, 64); err == nil {
				tc.dropped.Add(n)
			}
		case "end":
			if ctx.Err() == nil {
				tc.fail(fmt.Errorf("the console ended the stream: %s", data))
			}
			return
		}
	}
}

func (tc *tailCounts) fail(err error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.failure == nil {
		tc.failure = err
	}
}

var numberRe = regexp.MustCompile(`\d+`)

func firstNumber(s string) string { return numberRe.FindString(s) }

// ---- the other clients ----

// mirror produces the same keyed records to both compared topics at
// mirrorRate each until ctx ends.
func mirror(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var fail atomic.Value
	pacer := perf.NewPacer(mirrorRate, time.Now())
	for i := int64(0); ; i++ {
		if pacer.Wait(ctx, i) != nil {
			break
		}
		key := []byte("order-" + strconv.FormatInt(i, 10))
		value := []byte(`{"id":` + strconv.FormatInt(i, 10) + `,"amount":` + strconv.FormatInt(i%1000, 10) + `}`)
		for _, topic := range []string{leftTopic, rightTopic} {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, context.Canceled) {
					fail.CompareAndSwap(nil, err.Error())
				}
			})
		}
		if f := fail.Load(); f != nil {
			return fmt.Errorf("%v", f)
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl.Flush(fctx)
	return nil
}

// consumeGroup reads the soak topic as a member of group until ctx ends.
func consumeGroup(ctx context.Context, seeds []string, group string, n *atomic.Int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(soakTopic))
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		n.Add(int64(fs.NumRecords()))
	}
}

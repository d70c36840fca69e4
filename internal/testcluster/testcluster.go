// Package testcluster starts Sluice brokers inside the test process, wired
// exactly as they ship: each broker is an appliance.App (the production
// wiring of coordinator, storage, protocol listener, broker, group
// coordinator and controller) on a free loopback port with its data in the
// test's temporary directory, stopped when the test ends.
//
//	c := testcluster.New(t)                       // one broker, no ZooKeeper
//	c := testcluster.New(t, testcluster.Settings("num.partitions=3"))
//	zk := zktest.Start(t, zktest.Options{})       // heavy tier
//	c := testcluster.New(t, testcluster.Brokers(3), testcluster.ZooKeeper(zk.Addr()))
//
// A broker keeps its port and data directory across Stop and Start, so a
// test can restart it. The brokers' log is kept and shown when the test
// fails. The console and the schema registry are off unless a setting turns
// them on. Only tests use this package; the tests of package appliance
// itself cannot (appliance's in-package tests would import it back).
package testcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/appliance"
	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/internal/testutil"
)

// StartTimeout bounds one broker's start (a busy 2-core machine recovering
// logs is slow).
const StartTimeout = 60 * time.Second

type options struct {
	brokers   int
	zookeeper string
	settings  []string
	perBroker map[int][]string
	level     slog.Level
	logTo     io.Writer
}

// An Option configures New.
type Option func(*options)

// Brokers sets how many brokers to start (default 1). More than one needs
// ZooKeeper.
func Brokers(n int) Option { return func(o *options) { o.brokers = n } }

// ZooKeeper makes the brokers keep their metadata in the ZooKeeper at
// connect (host:port, with a chroot if wanted), as zookeeper.connect does;
// by default a single broker keeps it in its data directory. The caller
// starts ZooKeeper (zktest.Start, which puts the test in the heavy tier).
func ZooKeeper(connect string) Option { return func(o *options) { o.zookeeper = connect } }

// Settings adds server.properties settings ("key=value") for every broker,
// applied after the cluster's own (listeners, log.dirs, ...), so they may
// override them.
func Settings(kv ...string) Option {
	return func(o *options) { o.settings = append(o.settings, kv...) }
}

// BrokerSettings adds settings for the i-th broker (from 0) only, after
// those of Settings.
func BrokerSettings(i int, kv ...string) Option {
	return func(o *options) {
		if o.perBroker == nil {
			o.perBroker = map[int][]string{}
		}
		o.perBroker[i] = append(o.perBroker[i], kv...)
	}
}

// LogLevel sets the level of the brokers' log kept for a failing test
// (default Info).
func LogLevel(l slog.Level) Option { return func(o *options) { o.level = l } }

// LogTo writes the brokers' log to w as well (os.Stderr: to watch it while
// the test runs).
func LogTo(w io.Writer) Option { return func(o *options) { o.logTo = w } }

// Cluster is the running brokers of one test.
type Cluster struct {
	t     testing.TB
	nodes []*Node
	log   testutil.LockedBuffer
}

// Node is one broker: its address and data directory survive Stop/Start.
type Node struct {
	c        *Cluster
	index    int
	dir      string
	addr     string
	settings []string
	logger   *slog.Logger
	app      *appliance.App
}

// New starts the brokers; they stop when the test ends. It fails the test
// when one does not start.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	o := options{brokers: 1, level: slog.LevelInfo}
	for _, opt := range opts {
		opt(&o)
	}
	if o.brokers > 1 && o.zookeeper == "" {
		t.Fatal("testcluster: more than one broker needs testcluster.ZooKeeper")
	}
	c := &Cluster{t: t}
	// Registered first, so it runs last: the log includes the shutdown.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log:\n%s", c.log.String())
		}
	})
	for i := range o.brokers {
		n := &Node{c: c, index: i, dir: t.TempDir(), addr: testutil.FreeAddr(t)}
		n.settings = []string{
			"listeners=PLAINTEXT://" + n.addr,
			"log.dirs=" + filepath.Join(n.dir, "kafka"),
			"console.data.dir=" + filepath.Join(n.dir, "console"),
			"console.listen=",
			"schema.registry.listen=",
		}
		if o.zookeeper != "" {
			n.settings = append(n.settings, "zookeeper.connect="+o.zookeeper, "broker.id="+strconv.Itoa(i+1))
		}
		n.settings = append(n.settings, o.settings...)
		n.settings = append(n.settings, o.perBroker[i]...)
		c.nodes = append(c.nodes, n)
	}
	var w io.Writer = &c.log
	if o.logTo != nil {
		w = io.MultiWriter(&c.log, o.logTo)
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: o.level}))
	for _, n := range c.nodes {
		n.logger = logger.With("node", n.index)
		n.start()
		t.Cleanup(n.Stop)
	}
	c.waitMembership(len(c.nodes))
	return c
}

// waitMembership waits until every running broker's metadata image lists
// want brokers: a broker starts before its peers' registrations reach it,
// and a topic created in that moment with replication factor want would be
// refused (INVALID_REPLICATION_FACTOR). A cluster that does not converge
// within StartTimeout fails the test.
func (c *Cluster) waitMembership(want int) {
	c.t.Helper()
	if want < 2 {
		return
	}
	deadline := time.Now().Add(StartTimeout)
	for {
		short := ""
		for _, n := range c.nodes {
			if b := n.Broker(); b != nil {
				if got := len(b.Image().Brokers); got < want {
					short = fmt.Sprintf("broker %d knows %d of %d brokers", n.index, got, want)
					break
				}
			}
		}
		if short == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testcluster: %s after %v", short, StartTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (n *Node) start() {
	t := n.c.t
	t.Helper()
	cfg, err := appliance.Load("", n.settings)
	if err != nil {
		t.Fatalf("testcluster: broker %d: %v", n.index, err)
	}
	app, err := appliance.New(cfg, n.logger)
	if err != nil {
		t.Fatalf("testcluster: broker %d: %v", n.index, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatalf("testcluster: start broker %d: %v", n.index, err)
	}
	n.app = app
}

// Nodes returns every broker, running or stopped, in start order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the i-th broker (from 0).
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Addrs returns the listener address of every running broker: the
// bootstrap list of a client.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.nodes {
		if n.app != nil {
			out = append(out, n.addr)
		}
	}
	return out
}

// Addr returns the first broker's address.
func (c *Cluster) Addr() string { return c.nodes[0].addr }

// App returns the first broker's appliance.
func (c *Cluster) App() *appliance.App { return c.nodes[0].App() }

// Broker returns the first broker's *broker.Broker.
func (c *Cluster) Broker() *broker.Broker { return c.nodes[0].Broker() }

// Client returns a franz-go client bootstrapped from every running broker,
// closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	return newClient(c.t, c.Addrs(), opts)
}

// Admin returns a kadm client (over a new Client).
func (c *Cluster) Admin() *kadm.Client { return kadm.NewClient(c.Client()) }

// Log returns what the brokers logged so far.
func (c *Cluster) Log() string { return c.log.String() }

// CreateTopic creates a topic with partitions partitions and replication
// factor rf (-1: the broker's default) and the given configs, and fails the
// test when that fails.
func (c *Cluster) CreateTopic(name string, partitions int32, rf int16, configs map[string]*string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Admin().CreateTopic(ctx, partitions, rf, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
}

// Addr is the broker's listener address (the same across restarts).
func (n *Node) Addr() string { return n.addr }

// Dir is the broker's data directory: its log dir is Dir()/kafka.
func (n *Node) Dir() string { return n.dir }

// LogDir is the broker's log.dirs.
func (n *Node) LogDir() string { return filepath.Join(n.dir, "kafka") }

// App returns the broker's appliance (nil while stopped).
func (n *Node) App() *appliance.App { return n.app }

// Broker returns the broker's *broker.Broker (nil while stopped).
func (n *Node) Broker() *broker.Broker {
	if n.app == nil {
		return nil
	}
	return n.app.Broker()
}

// ID returns the broker's id (after it started once).
func (n *Node) ID() int32 {
	if n.app == nil {
		return -1
	}
	return n.app.BrokerID()
}

// Running reports whether the broker runs.
func (n *Node) Running() bool { return n.app != nil }

// Client returns a franz-go client bootstrapped from this broker alone,
// closed when the test ends.
func (n *Node) Client(opts ...kgo.Opt) *kgo.Client {
	n.c.t.Helper()
	return newClient(n.c.t, []string{n.addr}, opts)
}

// Admin returns a kadm client of this broker (over a new Client).
func (n *Node) Admin() *kadm.Client { return kadm.NewClient(n.Client()) }

// Stop shuts the broker down as the service does (appliance.App.Close) and
// fails the test when that reports an error. Stopping a stopped broker does
// nothing.
func (n *Node) Stop() {
	if n.app == nil {
		return
	}
	err := n.app.Close()
	n.app = nil
	if err != nil {
		n.c.t.Errorf("testcluster: close broker %d: %v", n.index, err)
	}
}

// Start starts a stopped broker again, with the same address, data
// directory and settings.
func (n *Node) Start() {
	n.c.t.Helper()
	if n.app != nil {
		n.c.t.Fatalf("testcluster: broker %d is running", n.index)
	}
	n.start()
	running := 0
	for _, m := range n.c.nodes {
		if m.app != nil {
			running++
		}
	}
	n.c.waitMembership(running)
}

// Restart stops and starts the broker.
func (n *Node) Restart() {
	n.c.t.Helper()
	n.Stop()
	n.Start()
}

func newClient(t testing.TB, seeds []string, opts []kgo.Opt) *kgo.Client {
	t.Helper()
	if len(seeds) == 0 {
		t.Fatal("testcluster: no broker is running")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(fmt.Errorf("testcluster: client: %w", err))
	}
	t.Cleanup(cl.Close)
	return cl
}

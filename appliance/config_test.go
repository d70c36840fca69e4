package appliance

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/group"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/record"
)

func TestDefaultsAreKafkas(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Listeners) != 1 || c.Listeners[0].String() != "PLAINTEXT://:9092" {
		t.Fatalf("listeners %v", c.Listeners)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"broker.id", c.BrokerID, int32(-1)},
		{"log.dirs", strings.Join(c.LogDirs, ","), "./data/kafka"},
		{"num.partitions", c.NumPartitions, int32(1)},
		{"default.replication.factor", c.DefaultReplicationFactor, int16(1)},
		{"min.insync.replicas", c.MinInsyncReplicas, int32(1)},
		{"auto.create.topics.enable", c.AutoCreateTopics, true},
		{"log.retention (168h)", c.LogRetentionMs, int64(168 * 3600 * 1000)},
		{"log.retention.bytes", c.LogRetentionBytes, int64(-1)},
		{"log.segment.bytes", c.LogSegmentBytes, int64(1 << 30)},
		{"log.roll (168h)", c.LogRollMs, int64(168 * 3600 * 1000)},
		{"log.cleanup.policy", c.LogCleanupPolicy, "delete"},
		{"log.flush.interval.messages", c.LogFlushIntervalMessages, int64(math.MaxInt64)},
		{"log.flush.interval.ms", c.LogFlushIntervalMs, int64(math.MaxInt64)},
		{"message.max.bytes", c.MessageMaxBytes, int32(1048588)},
		{"socket.request.max.bytes", c.SocketRequestMaxBytes, int32(104857600)},
		{"offsets.topic.num.partitions", c.OffsetsTopicNumPartitions, int32(50)},
		{"offsets.topic.replication.factor", c.OffsetsTopicReplicationFactor, int16(3)},
		{"offsets.retention.minutes", c.OffsetsRetentionMinutes, int32(10080)},
		{"group.initial.rebalance.delay.ms", c.GroupInitialRebalanceDelayMs, int32(3000)},
		{"group.min.session.timeout.ms", c.GroupMinSessionTimeoutMs, int32(6000)},
		{"group.max.session.timeout.ms", c.GroupMaxSessionTimeoutMs, int32(1800000)},
		{"zookeeper.connect", c.ZookeeperConnect, ""},
		{"zookeeper.session.timeout.ms", c.ZookeeperSessionTimeoutMs, int32(18000)},
		{"zookeeper.connection.timeout.ms", c.ZookeeperConnectionTimeoutMs, int32(18000)},
		{"replica.lag.time.max.ms", c.ReplicaLagTimeMaxMs, int64(30000)},
		{"unclean.leader.election.enable", c.UncleanLeaderElectionEnable, false},
		{"auto.leader.rebalance.enable", c.AutoLeaderRebalanceEnable, true},
		{"console.listen", c.ConsoleListen, ":8080"},
		{"console.data.dir", c.ConsoleDataDir, "./data/console"},
		{"metrics.listen", c.MetricsListen, ""},
		{"metrics.path", c.MetricsPath, "/metrics"},
		{"log.retention.check.interval.ms", c.LogRetentionCheckInterval, 5 * time.Minute},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	// A Config built by hand gets the same values from EnsureDefaults.
	var hand Config
	hand.EnsureDefaults()
	if hand.LogRetentionMs != c.LogRetentionMs || hand.SocketRequestMaxBytes != c.SocketRequestMaxBytes || len(hand.Listeners) != 1 {
		t.Fatalf("EnsureDefaults differs from Load: %+v", hand)
	}
	if err := hand.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestLoadFileAndOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	os.WriteFile(path, []byte(`# a comment
! another comment
broker.id = 3
listeners=PLAINTEXT://127.0.0.1:9093,\
  PLAINTEXT2://127.0.0.1:9094
log.dirs: /var/lib/a, /var/lib/b
log.retention.hours=1
log.retention.minutes=30
num.partitions 6
console.listen=
`), 0o644)
	_, err := Load(path, nil)
	if err == nil || !strings.Contains(err.Error(), "listeners") {
		t.Fatalf("non-PLAINTEXT listener: %v", err)
	}
	os.WriteFile(path, []byte("broker.id = 3\nlisteners=PLAINTEXT://127.0.0.1:9093\nlog.dirs: /var/lib/a, /var/lib/b\nlog.retention.hours=1\nlog.retention.minutes=30\nnum.partitions 6\nconsole.listen=\n"), 0o644)
	c, err := Load(path, []string{"num.partitions=8", "log.segment.bytes=1048576"})
	if err != nil {
		t.Fatal(err)
	}
	if c.BrokerID != 3 || c.Listeners[0].Addr() != "127.0.0.1:9093" || len(c.LogDirs) != 2 || c.LogDirs[1] != "/var/lib/b" {
		t.Fatalf("%+v", c)
	}
	if c.LogRetentionMs != 30*60*1000 {
		t.Fatalf("minutes should win over hours: %d", c.LogRetentionMs)
	}
	if c.NumPartitions != 8 || c.LogSegmentBytes != 1<<20 {
		t.Fatalf("overrides not applied: %d %d", c.NumPartitions, c.LogSegmentBytes)
	}
	if c.ConsoleListen != "" {
		t.Fatalf("empty console.listen should disable the console, got %q", c.ConsoleListen)
	}
	if c.Given["num.partitions"] != "8" || c.Given["log.retention.minutes"] != "30" {
		t.Fatalf("given keys %v", c.Given)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		key       string
	}{
		{[]string{"no.such.key=1"}, "no.such.key"},
		{[]string{"num.partitions=abc"}, "num.partitions"},
		{[]string{"num.partitions=0"}, "num.partitions"},
		{[]string{"auto.create.topics.enable=yes"}, "auto.create.topics.enable"},
		{[]string{"listeners=PLAINTEXT://nohostport"}, "listeners"},
		{[]string{"log.retention.ms=soon"}, "log.retention.ms"},
		{[]string{"log.cleanup.policy=shred"}, "log.cleanup.policy"},
		{[]string{"compression.type=brotli"}, "compression.type"},
		{[]string{"socket.request.max.bytes=0"}, "socket.request.max.bytes"},
		{[]string{"console.tls.cert=/a.pem"}, "console.tls.cert"},
		{[]string{"metrics.path=metrics"}, "metrics.path"},
		{[]string{"zookeeper.connect=zk1"}, "zookeeper.connect"},
		{[]string{"group.min.session.timeout.ms=10", "group.max.session.timeout.ms=5"}, "group.max.session.timeout.ms"},
		{[]string{"advertised.listeners=PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"},
		{[]string{"noequals"}, "noequals"},
	} {
		_, err := Load("", tc.overrides)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%v: error %v does not name %s", tc.overrides, err, tc.key)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.properties")
	os.WriteFile(path, []byte("num.partitions=2\nlog.retention.hourz=5\n"), 0o644)
	if _, err := Load(path, nil); err == nil || !strings.Contains(err.Error(), "log.retention.hourz") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("unknown key in file: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("missing config file accepted")
	}
}

func TestAdvertisedEndpoints(t *testing.T) {
	c, _ := Load("", []string{"listeners=PLAINTEXT://127.0.0.1:0"})
	eps := c.AdvertisedEndpoints(map[string]int{"PLAINTEXT": 45678})
	if eps[0].Host != "127.0.0.1" || eps[0].Port != 45678 {
		t.Fatalf("%v", eps)
	}
	c, _ = Load("", []string{"advertised.listeners=PLAINTEXT://broker.example:19092"})
	if eps := c.AdvertisedEndpoints(nil); eps[0].Host != "broker.example" || eps[0].Port != 19092 {
		t.Fatalf("%v", eps)
	}
	c, _ = Load("", nil)
	if eps := c.AdvertisedEndpoints(map[string]int{"PLAINTEXT": 9092}); eps[0].Host == "" || eps[0].Port != 9092 {
		t.Fatalf("wildcard listener advertised as %v", eps)
	}
}

// TestGroupKeys: the group coordinator's configuration comes from the
// table: its defaults are the table's, a value given in the properties file
// reaches it the way groups.go passes it, and an out-of-range value is
// refused naming the key.
func TestGroupKeys(t *testing.T) {
	d := DefaultConfig()
	if g := group.NewConfig(&d.Config); g != group.DefaultConfig() || g.SegmentBytes != 100<<20 || g.MinSessionTimeout != 6*time.Second ||
		g.MaxSize != math.MaxInt32 || g.OffsetsRetention != 7*24*time.Hour || g.LoadBufferSize != 5<<20 {
		t.Errorf("coordinator defaults %+v", g)
	}
	c, err := Load("", []string{
		"group.max.size=7",
		"offsets.retention.check.interval.ms=1500",
		"offsets.commit.timeout.ms=2500",
		"offset.metadata.max.bytes=0",
		"offsets.load.buffer.size=65536",
		"offsets.retention.minutes=60",
	})
	if err != nil {
		t.Fatal(err)
	}
	gc := group.NewConfig(&c.Config)
	if gc.MaxSize != 7 || gc.OffsetsRetentionCheckInterval != 1500*time.Millisecond || gc.CommitTimeout != 2500*time.Millisecond ||
		gc.MaxMetadataBytes != 0 || gc.LoadBufferSize != 65536 || gc.OffsetsRetention != time.Hour {
		t.Fatalf("coordinator config %+v", gc)
	}
	if err := gc.Validate(); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{"group.max.size=0", "offsets.retention.check.interval.ms=0", "offsets.commit.timeout.ms=-1",
		"offset.metadata.max.bytes=-1", "offsets.load.buffer.size=0", "group.max.size=many", "offsets.topic.segment.bytes=13"} {
		key, _, _ := strings.Cut(bad, "=")
		if _, err := Load("", []string{bad}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v, want one naming %s", bad, err, key)
		}
	}
	gc.MaxSize, gc.MaxSessionTimeout = 0, time.Second
	if err := gc.Validate(); err == nil || !strings.Contains(err.Error(), "group.max.size") || !strings.Contains(err.Error(), "group.max.session.timeout.ms") {
		t.Errorf("coordinator config validated with the table's rules: %v", err)
	}
}

// TestDocsHaveOneReference: the keys are described in one place,
// docs/configuration.md (generated from the table and checked fresh by
// package config), which README.md links to; no other page repeats a key
// in a table of its own, where it would drift from the table.
func TestDocsHaveOneReference(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	pages = append(pages, filepath.Join("..", "README.md"))
	names := map[string]bool{}
	for _, k := range append(config.Keys(), config.TopicKeys()...) {
		names[k.Name] = true
	}
	for _, page := range pages {
		if filepath.Base(page) == "configuration.md" {
			continue
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(page) == "README.md" && !strings.Contains(string(b), "docs/configuration.md") {
			t.Errorf("README.md does not link to docs/configuration.md")
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "| `") {
				continue
			}
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			if names[cell] {
				t.Errorf("%s:%d: a table row for the key %s; link to docs/configuration.md instead", page, i+1, cell)
			}
		}
	}
}

// TestTableLimits: the ranges and defaults of the table that stand for
// another package's limit or default agree with it.
func TestTableLimits(t *testing.T) {
	for _, tc := range []struct {
		key     string
		ok, bad int64
	}{
		{"num.partitions", cluster.MaxRecordsPerRequest - 1, cluster.MaxRecordsPerRequest},
		{"offsets.topic.num.partitions", cluster.MaxRecordsPerRequest - 4, cluster.MaxRecordsPerRequest - 3},
		{"message.decompressed.max.bytes", record.MaxDecompressedBatchBytesLimit, record.MaxDecompressedBatchBytesLimit + 1},
	} {
		if _, err := Load("", []string{fmt.Sprintf("%s=%d", tc.key, tc.ok)}); err != nil {
			t.Errorf("%s=%d: %v", tc.key, tc.ok, err)
		}
		if _, err := Load("", []string{fmt.Sprintf("%s=%d", tc.key, tc.bad)}); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s=%d: %v, want an error naming the key", tc.key, tc.bad, err)
		}
	}
	c := DefaultConfig()
	if c.ConnectionsMaxIdleMs != protocol.DefaultConnectionsMaxIdle.Milliseconds() || c.SocketRequestReadTimeoutMs != protocol.DefaultRequestReadTimeout.Milliseconds() ||
		c.MaxConnections != protocol.DefaultMaxConnections || c.MaxConnectionsPerIP != protocol.DefaultMaxConnectionsPerIP ||
		c.QueuedMaxRequestBytes != protocol.DefaultQueuedMaxRequestBytes || c.MessageDecompressedMaxBytes != record.DefaultMaxDecompressedBatchBytes {
		t.Errorf("the table's defaults differ from the protocol server's and the log's own: %+v", c.Config)
	}
}

// TestDocsPropertiesExamples: every properties example in README.md and
// the pages under docs/ loads as written: known keys, no trailing comments
// (the format has none, so they would become part of the value), and the
// configuration file is named server.properties wherever a page names its
// path.
func TestDocsPropertiesExamples(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	pages = append(pages, filepath.Join("..", "README.md"))
	var all strings.Builder
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteString("\n")
	}
	doc := all.String()
	blocks := 0
	for rest := doc; ; {
		i := strings.Index(rest, "```properties\n")
		if i < 0 {
			break
		}
		rest = rest[i+len("```properties\n"):]
		end := strings.Index(rest, "```")
		if end < 0 {
			t.Fatal("unterminated properties block")
		}
		block := rest[:end]
		rest = rest[end:]
		blocks++
		props, err := config.ReadProperties(strings.NewReader(block))
		if err != nil {
			t.Errorf("docs: properties block %d: %v\n%s", blocks, err, block)
			continue
		}
		given := map[string]string{}
		for _, p := range props {
			if _, ok := config.Lookup(p.Key); !ok {
				t.Errorf("docs: properties block %d: unknown key %q", blocks, p.Key)
			}
			given[p.Key] = p.Value
		}
		c, err := config.Parse(given)
		if err != nil {
			t.Errorf("docs: properties block %d: %v", blocks, err)
			continue
		}
		if w := c.Warnings(); len(w) > 0 {
			t.Errorf("docs: properties block %d: %v", blocks, w)
		}
	}
	if blocks == 0 {
		t.Fatal("README.md and docs/ have no properties examples")
	}
	if strings.Contains(doc, "/etc/sluice/sluice.properties") {
		t.Error("the docs name /etc/sluice/sluice.properties; the file is /etc/sluice/server.properties")
	}
}

package config

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEveryFieldHasOneKey: every field of Config (but Given) and of Topic
// is bound by exactly one key of the tables, so a field cannot be added
// without its key, nor a key bound twice.
func TestEveryFieldHasOneKey(t *testing.T) {
	bound := func(v reflect.Value, ptrs []any) map[string]int {
		out := map[string]int{}
		var walk func(v reflect.Value, prefix string)
		walk = func(v reflect.Value, prefix string) {
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if f.Anonymous {
					walk(v.Field(i), prefix+f.Name+".")
					continue
				}
				if f.Name == "Given" || f.Name == "Ignored" {
					continue
				}
				n := 0
				for _, p := range ptrs {
					if reflect.ValueOf(p).Pointer() == v.Field(i).Addr().Pointer() && reflect.TypeOf(p).Elem() == f.Type {
						n++
					}
				}
				out[prefix+f.Name] = n
			}
		}
		walk(v, "")
		return out
	}
	var c Config
	var ptrs []any
	for i := range keys {
		if keys[i].field != nil {
			ptrs = append(ptrs, keys[i].field(&c))
		}
	}
	for name, n := range bound(reflect.ValueOf(&c).Elem(), ptrs) {
		if n != 1 {
			t.Errorf("Config.%s is bound by %d keys, want 1", name, n)
		}
	}
	var tc Topic
	ptrs = nil
	for i := range topicKeys {
		ptrs = append(ptrs, topicKeys[i].tfield(&tc))
	}
	for name, n := range bound(reflect.ValueOf(&tc).Elem(), ptrs) {
		if n != 1 {
			t.Errorf("Topic.%s is bound by %d topic configs, want 1", name, n)
		}
	}
}

// TestTables: the defaults parse and validate, every key has a type, a
// group and a doc, and every topic config has a broker key that takes its
// default from the table.
func TestTables(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	for _, k := range Keys() {
		if k.Type == 0 || k.Group == nil || k.Doc == "" || !strings.HasSuffix(k.Doc, ".") {
			t.Errorf("%s: type %v, group %v, doc %q: each needs a type, a group and a doc sentence", k.Name, k.Type, k.Group, k.Doc)
		}
		if k.field == nil && k.synonymOf == "" && !k.prefix {
			t.Errorf("%s has no field and is no synonym (nor a prefix)", k.Name)
		}
	}
	topic := DefaultTopic()
	if err := topic.Validate(); err != nil {
		t.Fatalf("the topic defaults do not validate: %v", err)
	}
	for _, k := range TopicKeys() {
		b, ok := Lookup(k.BrokerKey)
		if !ok || b.Topic != k.Name || b.Mode != ClusterWide {
			t.Errorf("%s: broker key %s is not linked back, or not cluster-wide", k.Name, k.BrokerKey)
		}
		if k.Default == "" || k.Doc == "" {
			t.Errorf("%s: default %q, doc %q", k.Name, k.Default, k.Doc)
		}
	}
	// Kafka's topic defaults, which the broker keys' defaults give.
	want := Topic{Log: Log{
		SegmentBytes: 1 << 30, SegmentMs: 7 * 24 * 3600 * 1000, SegmentIndexBytes: 10 << 20, IndexIntervalBytes: 4096,
		RetentionMs: 7 * 24 * 3600 * 1000, RetentionBytes: -1, Cleanup: "delete", DeleteRetentionMs: 24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5, FlushMessages: math.MaxInt64, FlushMs: math.MaxInt64,
		MessageTimestampType: "CreateTime", CompressionType: "producer", MaxMessageBytes: 1048588,
	}, MinInsyncReplicas: 1}
	if topic != want {
		t.Fatalf("topic defaults\n%+v, want\n%+v", topic, want)
	}
}

// TestSynonyms: the finest retention key given wins, a negative value in
// any of them means forever, log.dir stands in for log.dirs, and the
// connection timeout falls back to the session timeout.
func TestSynonyms(t *testing.T) {
	for _, tc := range []struct {
		given map[string]string
		ms    int64
	}{
		{nil, 168 * 3600 * 1000},
		{map[string]string{"log.retention.hours": "1"}, 3600 * 1000},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "30"}, 30 * 60 * 1000},
		{map[string]string{"log.retention.minutes": "30", "log.retention.ms": "5"}, 5},
		{map[string]string{"log.retention.hours": "-5"}, -1},
	} {
		c, err := Parse(tc.given)
		if err != nil {
			t.Fatal(err)
		}
		if c.LogRetentionMs != tc.ms {
			t.Errorf("%v: log.retention.ms %d, want %d", tc.given, c.LogRetentionMs, tc.ms)
		}
		if d := c.TopicDefaults()["retention.ms"]; d.Value != formatInt(tc.ms) || d.Static != (len(tc.given) > 0) {
			t.Errorf("%v: topic default %+v", tc.given, d)
		}
	}
	c, _ := Parse(map[string]string{"log.retention.hours": "2", "log.dir": "/a, /b", "log.roll.hours": "1", "zookeeper.session.timeout.ms": "9000"})
	if d := c.TopicDefaults()["retention.ms"]; d.BrokerKey != "log.retention.hours" || d.Value != "7200000" || !d.Static {
		t.Errorf("retention.ms default %+v, want log.retention.hours 7200000 static", d)
	}
	if strings.Join(c.LogDirs, ",") != "/a,/b" || c.LogRollMs != 3600*1000 || c.ZookeeperConnectionTimeoutMs != 9000 {
		t.Errorf("log.dirs %v, log.roll.ms %d, zookeeper.connection.timeout.ms %d", c.LogDirs, c.LogRollMs, c.ZookeeperConnectionTimeoutMs)
	}
	if d := c.TopicDefaults()["segment.ms"]; d.BrokerKey != "log.roll.hours" || d.Value != "3600000" {
		t.Errorf("segment.ms default %+v", d)
	}
	if d := c.TopicDefaults()["flush.ms"]; d.BrokerKey != "log.flush.interval.ms" || d.Value != "9223372036854775807" || d.Static {
		t.Errorf("flush.ms default %+v", d)
	}
	for _, bad := range []map[string]string{{"log.retention.hours": "soon"}, {"log.retention.hours": "9223372036854775807"}} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "log.retention.hours") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func formatInt(n int64) string {
	var v int64 = n
	return format(&v)
}

// TestEnsureDefaults: a Config built in code gets the same values as the
// defaults, except for the fields set and the keys recorded as given.
func TestEnsureDefaults(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	d := Default()
	c.Given, d.Given = nil, nil
	if !reflect.DeepEqual(&c, d) {
		t.Fatalf("EnsureDefaults\n%+v\ndiffers from Default\n%+v", c, *d)
	}
	c = Config{ZookeeperSessionTimeoutMs: 5000, NumPartitions: 3, Given: map[string]string{"group.initial.rebalance.delay.ms": "0"}}
	c.EnsureDefaults()
	if c.ZookeeperConnectionTimeoutMs != 5000 || c.NumPartitions != 3 || c.GroupInitialRebalanceDelayMs != 0 || c.LogRetentionMs != d.LogRetentionMs {
		t.Fatalf("%d %d %d %d", c.ZookeeperConnectionTimeoutMs, c.NumPartitions, c.GroupInitialRebalanceDelayMs, c.LogRetentionMs)
	}
}

// TestValidateNamesTheKey: a value out of range and a pair that does not
// fit are refused, naming the key.
func TestValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		given map[string]string
		key   string
	}{
		{map[string]string{"num.partitions": "0"}, "num.partitions"},
		{map[string]string{"num.partitions": "10000"}, "num.partitions"},
		{map[string]string{"log.segment.bytes": "13"}, "log.segment.bytes"},
		{map[string]string{"log.index.size.max.bytes": "47"}, "log.index.size.max.bytes"},
		{map[string]string{"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio"},
		{map[string]string{"metrics.path": "x"}, "metrics.path"},
		{map[string]string{"console.listen": "nope"}, "console.listen"},
		{map[string]string{"schema.registry.auth": "digest"}, "schema.registry.auth"},
		{map[string]string{"zookeeper.connect": "zk1"}, "zookeeper.connect"},
		{map[string]string{"zookeeper.connection.timeout.ms": "0"}, "zookeeper.connection.timeout.ms"},
		{map[string]string{"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"}, "group.max.session.timeout.ms"},
		{map[string]string{"replica.fetch.wait.max.ms": "30000"}, "replica.fetch.wait.max.ms"},
		{map[string]string{"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name"},
		{map[string]string{"schema.registry.tls.key": "/k.pem"}, "schema.registry.tls.cert"},
		{map[string]string{"queued.max.request.bytes": "10"}, "queued.max.request.bytes"},
		{map[string]string{"log.dirs": " , "}, "log.dirs"},
	} {
		c, err := Parse(tc.given)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%v: error %v does not name %s", tc.given, err, tc.key)
		}
	}
	for _, tc := range []struct{ given map[string]string }{
		{map[string]string{"log.cleanup.policy": "shred"}},
		{map[string]string{"log.cleanup.policy": "delete,"}},
		{map[string]string{"compression.type": "brotli"}},
		{map[string]string{"log.message.timestamp.type": "createtime"}},
		{map[string]string{"auto.create.topics.enable": "yes"}},
	} {
		if _, err := Parse(tc.given); err == nil {
			t.Errorf("%v accepted", tc.given)
		}
	}
	// Normalised as Kafka does.
	c, err := Parse(map[string]string{"compression.type": "LZ4", "log.cleanup.policy": "compact, delete", "schema.registry.auth": " Basic "})
	if err != nil {
		t.Fatal(err)
	}
	if c.CompressionType != "lz4" || c.LogCleanupPolicy != "compact,delete" || c.SchemaRegistryAuth != "basic" {
		t.Fatalf("%q %q %q", c.CompressionType, c.LogCleanupPolicy, c.SchemaRegistryAuth)
	}
	// A hand-built Config is checked the same way.
	c = Default()
	c.CompressionType = "brotli"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "compression.type") {
		t.Fatalf("hand-built compression.type: %v", err)
	}
}

// TestCheck: another package's configuration is validated with the
// table's rules.
func TestCheck(t *testing.T) {
	if err := Check("group.max.size", int32(0)); err == nil || !strings.Contains(err.Error(), "group.max.size") {
		t.Errorf("group.max.size 0: %v", err)
	}
	if err := Check("offsets.commit.timeout.ms", time.Millisecond); err != nil {
		t.Errorf("offsets.commit.timeout.ms 1ms: %v", err)
	}
	if err := Check("offsets.commit.timeout.ms", time.Duration(0)); err == nil {
		t.Error("offsets.commit.timeout.ms 0 accepted")
	}
}

func TestTopicConfigs(t *testing.T) {
	k, ok := LookupTopic("retention.ms")
	if !ok || k.BrokerKey != "log.retention.ms" || k.Default != "604800000" || k.Type != Long {
		t.Fatalf("retention.ms: %+v", k)
	}
	if _, ok := LookupTopic("log.retention.ms"); ok {
		t.Fatal("a broker key is a topic config")
	}
	topic := DefaultTopic()
	for name, v := range map[string]string{"cleanup.policy": "compact, delete", "compression.type": "GZIP", "segment.bytes": " 2048 ", "unclean.leader.election.enable": "TRUE"} {
		k, _ := LookupTopic(name)
		if err := k.Set(&topic, v); err != nil {
			t.Fatalf("%s=%s: %v", name, v, err)
		}
	}
	if topic.Cleanup != "compact,delete" || topic.CompressionType != "gzip" || topic.SegmentBytes != 2048 || !topic.UncleanLeaderElectionEnable {
		t.Fatalf("%+v", topic)
	}
	for name, v := range map[string]string{"cleanup.policy": "shred", "compression.type": "none", "segment.bytes": "big", "message.timestamp.type": "Now", "unclean.leader.election.enable": "1"} {
		k, _ := LookupTopic(name)
		if err := k.Set(&topic, v); err == nil {
			t.Errorf("%s=%s accepted", name, v)
		}
	}
	// Ranges are Validate's; the log's part leaves out min.insync.replicas.
	topic = DefaultTopic()
	topic.SegmentBytes = 13
	if err := topic.Validate(); err == nil || !strings.Contains(err.Error(), "segment.bytes") {
		t.Fatalf("segment.bytes 13: %v", err)
	}
	topic = DefaultTopic()
	topic.MinInsyncReplicas = 0
	if err := topic.Validate(); err == nil || !strings.Contains(err.Error(), "min.insync.replicas") {
		t.Fatalf("min.insync.replicas 0: %v", err)
	}
	if err := topic.Log.Validate(); err != nil {
		t.Fatalf("the log's part: %v", err)
	}
}

func TestParseCleanupPolicy(t *testing.T) {
	for s, want := range map[string]CleanupPolicy{
		"delete": {Delete: true}, "compact": {Compact: true}, "compact,delete": {true, true}, "delete, compact": {true, true}, "compact,compact": {Compact: true},
	} {
		if got, err := ParseCleanupPolicy(s); err != nil || got != want {
			t.Errorf("%q: %+v %v", s, got, err)
		}
	}
	for _, s := range []string{"", "shred", "delete,", "compact;delete"} {
		if _, err := ParseCleanupPolicy(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestValidateTopicName(t *testing.T) {
	for _, ok := range []string{"a", "orders.v2", "__consumer_offsets", "A-Z_0.9", strings.Repeat("x", 249)} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, want := range map[string]TopicNameProblem{
		"": TopicNameEmpty, ".": TopicNameDots, "..": TopicNameDots, strings.Repeat("x", 250): TopicNameTooLong,
		"a b": TopicNameBadChar, "naïve": TopicNameBadChar, "a/b": TopicNameBadChar,
	} {
		err := ValidateTopicName(name)
		e, ok := err.(*TopicNameError)
		if !ok || e.Problem != want {
			t.Errorf("%q: %v, want problem %d", name, err, want)
		}
	}
	if e := ValidateTopicName("naïve").(*TopicNameError); e.Char != 'ï' {
		t.Errorf("bad character %q, want ï", e.Char)
	}
}

func TestPropertiesEscapes(t *testing.T) {
	props, err := ReadProperties(strings.NewReader("a\\ b=c\\td\\u0041\nkey : value with spaces  \nempty\ncrlf=x\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"a b", "c\tdA"}, {"key", "value with spaces  "}, {"empty", ""}, {"crlf", "x"}}
	if len(props) != len(want) {
		t.Fatalf("%v", props)
	}
	for i, w := range want {
		if props[i].Key != w[0] || props[i].Value != w[1] {
			t.Errorf("property %d = %q=%q, want %q=%q", i, props[i].Key, props[i].Value, w[0], w[1])
		}
	}
}

func TestWarnings(t *testing.T) {
	c, err := Parse(map[string]string{"broker.rack": "eu-west-1a  # optional"})
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "broker.rack") {
		t.Fatalf("%v", w)
	}
	for _, v := range []string{"a#b", "x", "#start", "https://h/p#frag"} {
		if trailingComment(v) {
			t.Errorf("%q taken for a trailing comment", v)
		}
	}
}

// TestTopicChoices: the configs that take one of a few words offer them.
func TestTopicChoices(t *testing.T) {
	for name, want := range map[string]string{"cleanup.policy": "delete|compact|compact,delete", "compression.type": "producer|uncompressed|gzip|snappy|lz4|zstd",
		"message.timestamp.type": "CreateTime|LogAppendTime", "unclean.leader.election.enable": "true|false", "retention.ms": ""} {
		k, ok := LookupTopic(name)
		if !ok {
			t.Fatalf("no topic config %s", name)
		}
		if got := strings.Join(k.Choices(), "|"); got != want {
			t.Errorf("%s choices %q, want %q", name, got, want)
		}
	}
}

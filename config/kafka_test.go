package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kafkaStock is Apache Kafka 3.9.0's config/server.properties, as it ships.
const kafkaStock = "testdata/kafka-3.9-server.properties"

// TestKafkaStockServerProperties: Kafka's own server.properties loads; the
// keys Sluice has take effect, and the keys it has no use for are accepted
// and named in exactly one warning.
func TestKafkaStockServerProperties(t *testing.T) {
	c, err := Load(kafkaStock, nil)
	if err != nil {
		t.Fatalf("Kafka 3.9's server.properties refused: %v", err)
	}
	if c.TransactionStateLogReplicationFactor != 1 || c.TransactionStateLogMinISR != 1 {
		t.Errorf("the file's transaction.state.log.* keys not applied: %d %d", c.TransactionStateLogReplicationFactor, c.TransactionStateLogMinISR)
	}
	if c.BrokerID != 0 || c.ZookeeperConnect != "localhost:2181" || c.LogDirs[0] != "/tmp/kafka-logs" ||
		c.LogRetentionMs != 168*3600*1000 || c.GroupInitialRebalanceDelayMs != 0 || c.OffsetsTopicReplicationFactor != 1 {
		t.Errorf("Sluice's keys of the file not applied: %+v", c)
	}
	// The file sets num.recovery.threads.per.data.dir=1: Sluice reads it
	// (the start's log loading).
	if c.NumRecoveryThreadsPerDataDir != 1 {
		t.Errorf("num.recovery.threads.per.data.dir=1 of the file not applied: %d", c.NumRecoveryThreadsPerDataDir)
	}
	// The file's transaction.state.log.* keys are Sluice's own since
	// transactions: applied, not ignored.
	ignored := []string{"num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes"}
	w := c.Warnings()
	if len(w) != 1 {
		t.Fatalf("want one warning, got %q", w)
	}
	for _, k := range ignored {
		if !strings.Contains(w[0], k) {
			t.Errorf("warning %q does not name %s", w[0], k)
		}
		if _, ok := c.Ignored[k]; !ok {
			t.Errorf("%s not recorded as ignored", k)
		}
	}
	if len(c.Ignored) != len(ignored) {
		t.Errorf("ignored %v, want exactly %v", c.Ignored, ignored)
	}
}

// TestTypoStopsWithSuggestion: a key neither Sluice nor Kafka has stops the
// start, naming its line and the key it probably meant.
func TestTypoStopsWithSuggestion(t *testing.T) {
	stock, err := os.ReadFile(kafkaStock)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, append(stock, "log.retention.hour=24\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "log.retention.hour"`) ||
		!strings.Contains(err.Error(), `did you mean "log.retention.hours"`) || !strings.Contains(err.Error(), "line 139") {
		t.Fatalf("typo: %v", err)
	}
	// A typo of a key only Kafka has is suggested that key; overrides too.
	_, err = Load("", []string{"num.netwrok.threads=3"})
	if err == nil || !strings.Contains(err.Error(), `did you mean "num.network.threads"`) || !strings.Contains(err.Error(), "--override") {
		t.Fatalf("override typo: %v", err)
	}
	// Far from every key: no suggestion, but a clear refusal.
	_, err = Parse(map[string]string{"completely.unrelated.setting": "1"})
	if err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "neither Sluice nor Apache Kafka") {
		t.Fatalf("unrelated key: %v", err)
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{
		"log.retention.hour":       "log.retention.hours",
		"num.partition":            "num.partitions",
		"zookeeper.conect":         "zookeeper.connect",
		"auto.create.topic.enable": "auto.create.topics.enable",
		"num.io.thread":            "num.io.threads",
		"console.listn":            "console.listen",
		"x":                        "",
		"abcdefghijklmnop":         "",
	} {
		if got := Suggest(in); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "abd", 1}, {"abc", "ab", 1}, {"kitten", "sitting", 3}} {
		if d := editDistance(tc.a, tc.b, 10); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}

// TestKafkaKeyTables ties Sluice's tables to Kafka's names: every topic
// config of Kafka is honoured or accepted, every key Sluice takes from
// Kafka's names is one of Kafka's, and Kafka's per-listener keys are known.
func TestKafkaKeyTables(t *testing.T) {
	for name := range kafkaTopicIndex {
		_, honoured := LookupTopic(name)
		_, accepted := LookupAcceptedTopic(name)
		if honoured == accepted {
			t.Errorf("Kafka topic config %s: honoured %v, accepted %v; want exactly one", name, honoured, accepted)
		}
	}
	for i := range topicKeys {
		if !KafkaTopicKey(topicKeys[i].Name) {
			t.Errorf("topic config %s is not Kafka's", topicKeys[i].Name)
		}
	}
	// The broker key behind each topic config is Kafka's first synonym of it.
	for i := range topicKeys {
		tk := &topicKeys[i]
		if syn := kafkaTopicSynonyms[tk.Name]; len(syn) == 0 || syn[0] != tk.BrokerKey {
			t.Errorf("topic config %s: broker key %s, Kafka's synonyms %v", tk.Name, tk.BrokerKey, syn)
		}
	}
	for _, name := range []string{"broker.id", "log.dirs", "zookeeper.connect", "message.max.bytes", "log.retention.hours"} {
		if _, ok := KafkaBrokerKey(name); !ok {
			t.Errorf("%s is not in Kafka's table", name)
		}
	}
	if len(kafkaBrokerIndex) < 300 || len(kafkaTopicIndex) < 30 {
		t.Errorf("Kafka's tables look truncated: %d broker keys, %d topic configs", len(kafkaBrokerIndex), len(kafkaTopicIndex))
	}
	for name, want := range map[string]string{
		"num.network.threads":                           "SocketServerConfigs.CONFIG_DEF",
		"process.roles":                                 "KRaftConfigs.CONFIG_DEF",
		"log.retention.hours":                           "LogConfig.SERVER_CONFIG_DEF",
		"leader.replication.throttled.rate":             "QuotaConfigs.brokerQuotaConfigs",
		"listener.name.internal.ssl.keystore.location":  "BrokerSecurityConfigs.CONFIG_DEF (per listener)",
		"listener.name.sasl_ssl.plain.sasl.jaas.config": "BrokerSecurityConfigs.CONFIG_DEF (per listener and mechanism)",
	} {
		if got, ok := KafkaBrokerKey(name); !ok || got != want {
			t.Errorf("KafkaBrokerKey(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"listener.name.x", "listener.name.x.no.such", "log.retention.hour"} {
		if _, ok := KafkaBrokerKey(name); ok {
			t.Errorf("%s taken for a Kafka key", name)
		}
	}
}

// TestAcceptedTopicConfigs: Kafka's topic configs Sluice does not act on
// are checked for type and range, and their broker-level default comes
// from Kafka's broker key when the file sets it.
func TestAcceptedTopicConfigs(t *testing.T) {
	k, ok := LookupAcceptedTopic("max.compaction.lag.ms")
	if !ok {
		t.Fatal("max.compaction.lag.ms not accepted")
	}
	if err := k.CheckValue("3600000"); err != nil {
		t.Error(err)
	}
	if _, err := k.ParseValue("soon"); err == nil {
		t.Error("a non-number accepted")
	}
	if err := k.CheckValue("0"); err == nil {
		t.Error("0 accepted (Kafka: at least 1)")
	}
	re, _ := LookupAcceptedTopic("remote.storage.enable")
	if re.CheckValue("false") != nil || re.CheckValue("true") == nil {
		t.Error("remote.storage.enable: want false accepted and true refused")
	}
	gz, _ := LookupAcceptedTopic("compression.gzip.level")
	for v, good := range map[string]bool{"-1": true, "1": true, "9": true, "0": false, "10": false, "99999999999": false} {
		if err := gz.CheckValue(v); (err == nil) != good {
			t.Errorf("compression.gzip.level=%s: %v", v, err)
		}
	}
	c, err := Parse(map[string]string{"log.cleaner.max.compaction.lag.ms": "7200000", "log.roll.jitter.hours": "2"})
	if err != nil {
		t.Fatal(err)
	}
	d := c.TopicDefaults()
	if got := d["max.compaction.lag.ms"]; !got.Static || got.Value != "7200000" || got.BrokerKey != "log.cleaner.max.compaction.lag.ms" {
		t.Errorf("max.compaction.lag.ms default %+v", got)
	}
	if got := d["segment.jitter.ms"]; !got.Static || got.Value != "7200000" || got.BrokerKey != "log.roll.jitter.hours" {
		t.Errorf("segment.jitter.ms default %+v", got)
	}
	if got := d["preallocate"]; got.Static || got.Value != "false" {
		t.Errorf("preallocate default %+v", got)
	}
}

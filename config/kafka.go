package config

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Kafka's own config names (kafkakeys.go, generated from Kafka's source by
// scripts/kafkakeys.py) let a server.properties or a topic spec written
// for Kafka work unchanged:
//
//   - a broker key Sluice has behaves as the table says;
//   - a broker key only Kafka has (num.network.threads, process.roles, the
//     JVM's and KRaft's keys) is accepted and ignored, and the broker logs
//     one warning at start naming every such key (Config.Warnings);
//   - a key neither has (a typo) stops the start, naming the closest known
//     key ("did you mean");
//   - a topic config only Kafka has (max.compaction.lag.ms, ...) is
//     accepted with its type and range checked, kept on the topic and
//     shown by DescribeConfigs (acceptedTopicKeys), but has no effect
//     (the throttled-replica lists aside, which the broker reads from the
//     topic's configs: throttle.go).

// kafkaKeySet is the names one of Kafka's ConfigDefs defines.
type kafkaKeySet struct {
	Source string // the Java class and ConfigDef, e.g. ZkConfigs.CONFIG_DEF
	File   string // the file of Kafka's repository that holds it
	Names  []string
}

var kafkaBrokerIndex, kafkaTopicIndex map[string]*kafkaKeySet

func indexKafka(sets []kafkaKeySet) map[string]*kafkaKeySet {
	out := map[string]*kafkaKeySet{}
	for i := range sets {
		for _, n := range sets[i].Names {
			out[n] = &sets[i]
		}
	}
	return out
}

// listenerPrefix starts Kafka's per-listener keys:
// listener.name.<listener>.<key> (listener.name.internal.ssl.keystore.location).
const listenerPrefix = "listener.name."

// KafkaBrokerKey reports whether name is a broker config of Apache Kafka
// 3.9, and where Kafka defines it ("ZkConfigs.CONFIG_DEF"). A per-listener
// key (listener.name.<listener>.<key>) is Kafka's when its key is a broker
// key of Kafka or of Sluice.
func KafkaBrokerKey(name string) (source string, ok bool) {
	if s, ok := kafkaBrokerIndex[name]; ok {
		return s.Source, true
	}
	if rest, ok := strings.CutPrefix(name, listenerPrefix); ok {
		if _, key, ok := strings.Cut(rest, "."); ok && key != "" {
			if s, ok := kafkaBrokerIndex[key]; ok {
				return s.Source + " (per listener)", true
			}
			if _, ok := Lookup(key); ok {
				return "listener.name.<listener>.<key>", true
			}
			// SASL's per-mechanism keys: listener.name.<l>.<mechanism>.sasl.jaas.config
			if _, key, ok := strings.Cut(key, "."); ok {
				if s, ok := kafkaBrokerIndex[key]; ok {
					return s.Source + " (per listener and mechanism)", true
				}
			}
		}
	}
	return "", false
}

// KafkaTopicKey reports whether name is a topic config of Apache Kafka 3.9.
func KafkaTopicKey(name string) bool {
	_, ok := kafkaTopicIndex[name]
	return ok
}

// unknownKeyError is the error for a broker key that neither Sluice nor
// Kafka knows, with the closest known key when one is close.
func unknownKeyError(name string) error {
	if s := Suggest(name); s != "" {
		return fmt.Errorf("unknown key %q (did you mean %q?)", name, s)
	}
	return fmt.Errorf("unknown key %q: neither Sluice nor Apache Kafka %s has it", name, kafkaVersion)
}

// known reports whether the broker key name is Sluice's or Kafka's.
func known(name string) bool {
	if _, ok := Lookup(name); ok {
		return true
	}
	_, ok := KafkaBrokerKey(name)
	return ok
}

// Suggest returns the broker key of Sluice or Kafka closest to name in
// edit distance, when it is close enough to be a typo of it (at most a
// third of the name's length, and at most 4 edits); "" when none is.
func Suggest(name string) string {
	limit := min(4, max(1, len(name)/3))
	best, bestD := "", limit+1
	try := func(k string) {
		if d := editDistance(name, k, bestD); d < bestD || d == bestD && best != "" && k < best {
			best, bestD = k, d
		}
	}
	for i := range keys {
		try(keys[i].Name)
	}
	for n := range kafkaBrokerIndex {
		try(n)
	}
	if bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or any value above
// bound once it is sure to exceed it.
func editDistance(a, b string, bound int) int {
	if d := len(a) - len(b); d > bound || -d > bound {
		return bound + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > bound {
			return bound + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ignoredWarning is the one warning naming the Kafka keys given that
// Sluice has no use for; "" when there are none.
func ignoredWarning(ignored map[string]string) string {
	if len(ignored) == 0 {
		return ""
	}
	names := make([]string, 0, len(ignored))
	for n := range ignored {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("config: %d Apache Kafka key(s) have no meaning for Sluice and are ignored: %s", len(names), strings.Join(names, ", "))
}

// acceptedTopicKeys is every topic config of Kafka that Sluice does not
// act on, sorted by name: accepted (type and range checked as Kafka does),
// kept with the topic and shown by DescribeConfigs with Kafka's default,
// so that a topic spec written for Kafka (MirrorMaker 2, Terraform,
// Strimzi) applies cleanly. BrokerKey is Kafka's broker key that gives the
// default (itself a key Sluice ignores); "" for none.
var acceptedTopicKeys = []Key{
	{Name: "compression.gzip.level", Type: Int, Default: "-1", BrokerKey: "compression.gzip.level",
		Doc: "Kafka's gzip level when the broker recompresses; Sluice recompresses at its codec's default level.", rule: gzipLevel},
	{Name: "compression.lz4.level", Type: Int, Default: "9", BrokerKey: "compression.lz4.level",
		Doc: "Kafka's lz4 level when the broker recompresses; Sluice recompresses at its codec's default level.", rule: between(1, 17)},
	{Name: "compression.zstd.level", Type: Int, Default: "3", BrokerKey: "compression.zstd.level",
		Doc: "Kafka's zstd level when the broker recompresses; Sluice recompresses at its codec's default level.", rule: between(-131072, 22)},
	{Name: "file.delete.delay.ms", Type: Long, Default: "60000", BrokerKey: "log.segment.delete.delay.ms",
		Doc: "How long Kafka keeps a deleted segment's file; Sluice removes it at once.", rule: atLeast(0)},
	{Name: "follower.replication.throttled.replicas", Type: List, Default: "", BrokerKey: "",
		Doc:  "Replicas whose follower-side replication is throttled to the follower's follower.replication.throttled.rate: partition:broker,... (the brokers that fetch those partitions) or * for every replica. Honoured by Sluice.",
		rule: throttledReplicasRule},
	{Name: "leader.replication.throttled.replicas", Type: List, Default: "", BrokerKey: "",
		Doc:  "Replicas whose leader-side replication is throttled to the leader's leader.replication.throttled.rate: partition:broker,... (the brokers that lead those partitions) or * for every replica. Honoured by Sluice.",
		rule: throttledReplicasRule},
	{Name: "local.retention.bytes", Type: Long, Default: "-2", BrokerKey: "log.local.retention.bytes",
		Doc: "Tiered storage's local retention; Sluice has no tiered storage.", rule: atLeast(-2)},
	{Name: "local.retention.ms", Type: Long, Default: "-2", BrokerKey: "log.local.retention.ms",
		Doc: "Tiered storage's local retention; Sluice has no tiered storage.", rule: atLeast(-2)},
	{Name: "max.compaction.lag.ms", Type: Long, Default: "9223372036854775807", BrokerKey: "log.cleaner.max.compaction.lag.ms",
		Doc: "Longest time a record stays uncompacted in Kafka; Sluice compacts by min.cleanable.dirty.ratio only.", rule: atLeast(1)},
	{Name: "message.downconversion.enable", Type: Boolean, Default: "true", BrokerKey: "log.message.downconversion.enable",
		Doc: "Whether Kafka down-converts for old fetch versions; Sluice serves v0/v1 fetches as it always does."},
	{Name: "message.format.version", Type: String, Default: "3.0-IV1", BrokerKey: "log.message.format.version",
		Doc: "Deprecated in Kafka 3.0 and ignored by it when the inter-broker protocol is 3.0 or later; ignored here too."},
	{Name: "message.timestamp.after.max.ms", Type: Long, Default: "9223372036854775807", BrokerKey: "log.message.timestamp.after.max.ms",
		Doc: "Kafka refuses a record timestamped this far in the future; not enforced by Sluice.", rule: atLeast(0)},
	{Name: "message.timestamp.before.max.ms", Type: Long, Default: "9223372036854775807", BrokerKey: "log.message.timestamp.before.max.ms",
		Doc: "Kafka refuses a record timestamped this far in the past; not enforced by Sluice.", rule: atLeast(0)},
	{Name: "message.timestamp.difference.max.ms", Type: Long, Default: "9223372036854775807", BrokerKey: "log.message.timestamp.difference.max.ms",
		Doc: "Deprecated in Kafka 3.6 for message.timestamp.before.max.ms and message.timestamp.after.max.ms; not enforced by Sluice.", rule: atLeast(0)},
	{Name: "preallocate", Type: Boolean, Default: "false", BrokerKey: "log.preallocate",
		Doc: "Whether Kafka preallocates a new segment file; Sluice never does."},
	{Name: "remote.log.copy.disable", Type: Boolean, Default: "false", BrokerKey: "",
		Doc: "Tiered storage; Sluice has none."},
	{Name: "remote.log.delete.on.disable", Type: Boolean, Default: "false", BrokerKey: "",
		Doc: "Tiered storage; Sluice has none."},
	{Name: "remote.storage.enable", Type: Boolean, Default: "false", BrokerKey: "",
		Doc: "Tiered storage; Sluice has none, so only false is accepted (Kafka refuses true too while the broker's remote.log.storage.system.enable is false).",
		rule: Rule{Doc: "false", check: func(v any) error {
			if v.(bool) {
				return fmt.Errorf("tiered storage is not supported by this broker")
			}
			return nil
		}}},
	{Name: "segment.jitter.ms", Type: Long, Default: "0", BrokerKey: "log.roll.jitter.ms",
		Doc: "Random jitter Kafka subtracts from segment.ms; Sluice rolls at segment.ms exactly.", rule: atLeast(0)},
}

var gzipLevel = Rule{Doc: "-1 or 1 to 9", check: func(v any) error {
	if n := v.(int64); n != -1 && (n < 1 || n > 9) {
		return fmt.Errorf("must be -1 or between 1 and 9")
	}
	return nil
}}

var acceptedTopicIndex map[string]*Key

// initKafka indexes Kafka's names and the accepted topic configs; the init
// of keys.go calls it once its own tables are indexed.
func initKafka() {
	kafkaBrokerIndex = indexKafka(kafkaBrokerKeys)
	kafkaTopicIndex = indexKafka(kafkaTopicKeys)
	acceptedTopicIndex = make(map[string]*Key, len(acceptedTopicKeys))
	for i := range acceptedTopicKeys {
		k := &acceptedTopicKeys[i]
		if i > 0 && acceptedTopicKeys[i-1].Name >= k.Name {
			panic("config: acceptedTopicKeys must be sorted by name: " + k.Name)
		}
		if topicIndex[k.Name] != nil || !KafkaTopicKey(k.Name) {
			panic("config: accepted topic config " + k.Name + " must be Kafka's and not one Sluice honours")
		}
		if err := k.CheckValue(k.Default); err != nil {
			panic("config: default of " + k.Name + ": " + err.Error())
		}
		acceptedTopicIndex[k.Name] = k
	}
}

// AcceptedTopicKeys returns the topic configs of Kafka that Sluice accepts
// without acting on them, sorted by name.
func AcceptedTopicKeys() []Key { return slices.Clone(acceptedTopicKeys) }

// LookupAcceptedTopic returns the accepted topic config name.
func LookupAcceptedTopic(name string) (*Key, bool) {
	k, ok := acceptedTopicIndex[name]
	return k, ok
}

// ParseValue checks that v is a value of the key's type and words (the
// error is Kafka's INVALID_CONFIG); CheckValue also runs its range rule.
func (k *Key) ParseValue(v string) (any, error) {
	if k.norm != nil {
		v = k.norm(v)
	}
	if k.syntax.check != nil {
		if err := k.syntax.check(v); err != nil {
			return nil, err
		}
	}
	var p any
	switch k.Type {
	case Boolean:
		p = new(bool)
	case Short, Int, Long:
		p = new(int64)
	case Double:
		p = new(float64)
	case List:
		p = new([]string)
	default:
		p = new(string)
	}
	if err := parseInto(p, v); err != nil {
		return nil, err
	}
	if n, ok := p.(*int64); ok {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		switch k.Type {
		case Short:
			lo, hi = math.MinInt16, math.MaxInt16
		case Int:
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if *n < lo || *n > hi {
			return nil, fmt.Errorf("not a %s", k.Type)
		}
	}
	return p, nil
}

// CheckValue checks v against the key's type, words and range.
func (k *Key) CheckValue(v string) error {
	p, err := k.ParseValue(v)
	if err != nil {
		return err
	}
	if k.rule.check != nil {
		return k.rule.check(value(p))
	}
	return nil
}

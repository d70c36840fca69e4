package broker

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/record"
	"github.com/sluice-io/sluice/storage"
)

// ConfigSource is where a config value comes from; the values are Kafka's
// (DescribeConfigs config_source).
type ConfigSource int8

const (
	SourceUnknown      ConfigSource = 0
	SourceDynamicTopic ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG: set on the topic
	SourceStaticBroker ConfigSource = 4 // STATIC_BROKER_CONFIG: set in the broker's config file or an override
	SourceDefault      ConfigSource = 5 // DEFAULT_CONFIG: Kafka's default
)

// ConfigType is a config's type; the values are Kafka's (config_type, v3+).
type ConfigType int8

const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeShort   ConfigType = 4
	TypeLong    ConfigType = 5
	TypeDouble  ConfigType = 6
	TypeList    ConfigType = 7
)

// ConfigSynonym is one source a config's value could come from, in
// precedence order (DescribeConfigs include_synonyms).
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry is one config as DescribeConfigs shows it.
type ConfigEntry struct {
	Name      string
	Value     *string // nil for a sensitive or unset value
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Type      ConfigType
	Doc       string
	Synonyms  []ConfigSynonym
}

// TopicDefault is the broker-level value behind a topic config: the value of
// its broker key (log.retention.ms for retention.ms, ...) and whether that
// key was set explicitly.
type TopicDefault struct {
	BrokerKey string
	Value     string
	Static    bool // set in the config file or an override
}

// topicConfig is one topic-level config Sluice honours.
type topicConfig struct {
	name      string
	brokerKey string
	def       string // Kafka's default
	typ       ConfigType
	doc       string
	// apply stores the parsed value into cfg; it returns an error for a
	// value that does not parse (INVALID_CONFIG).
	apply func(cfg *topicSettings, v string) error
}

// topicSettings is a topic's effective configuration.
type topicSettings struct {
	log           storage.LogConfig
	minISR        int32
	uncleanLeader bool
}

// topicConfigs lists every topic config, sorted by name.
var topicConfigs = []topicConfig{
	{"cleanup.policy", "log.cleanup.policy", "delete", TypeList, "delete, compact, or both",
		func(c *topicSettings, v string) error {
			v = strings.ReplaceAll(v, " ", "")
			for _, p := range strings.Split(v, ",") {
				if p != "delete" && p != "compact" {
					return fmt.Errorf("%q is not delete or compact", p)
				}
			}
			c.log.Cleanup = v
			return nil
		}},
	{"compression.type", "compression.type", "producer", TypeString, "final compression of the topic's batches: producer keeps the producer's",
		func(c *topicSettings, v string) error {
			v = strings.ToLower(v)
			if _, _, err := record.ParseCompressionType(v); err != nil {
				return err
			}
			c.log.CompressionType = v
			return nil
		}},
	{"delete.retention.ms", "log.cleaner.delete.retention.ms", "86400000", TypeLong, "how long tombstones are kept after compaction",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.DeleteRetentionMs) }},
	{"flush.messages", "log.flush.interval.messages", strconv.FormatInt(math.MaxInt64, 10), TypeLong, "fsync after this many messages",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.FlushMessages) }},
	{"flush.ms", "log.flush.interval.ms", strconv.FormatInt(math.MaxInt64, 10), TypeLong, "fsync when unflushed data is this old",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.FlushMs) }},
	{"index.interval.bytes", "log.index.interval.bytes", "4096", TypeInt, "bytes between offset index entries",
		func(c *topicSettings, v string) error { return setInt32(v, &c.log.IndexIntervalBytes) }},
	{"max.message.bytes", "message.max.bytes", "1048588", TypeInt, "largest record batch accepted",
		func(c *topicSettings, v string) error { return setInt32(v, &c.log.MaxMessageBytes) }},
	{"message.timestamp.type", "log.message.timestamp.type", "CreateTime", TypeString, "CreateTime or LogAppendTime",
		func(c *topicSettings, v string) error {
			if v != "CreateTime" && v != "LogAppendTime" {
				return fmt.Errorf("%q is not CreateTime or LogAppendTime", v)
			}
			c.log.MessageTimestampType = v
			return nil
		}},
	{"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", "0.5", TypeDouble, "dirty ratio that triggers compaction",
		func(c *topicSettings, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			c.log.MinCleanableDirtyRatio = f
			return nil
		}},
	{"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "0", TypeLong, "minimum age of a record before compaction",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.MinCompactionLagMs) }},
	{"min.insync.replicas", "min.insync.replicas", "1", TypeInt, "acks=all produce needs at least this many in-sync replicas",
		func(c *topicSettings, v string) error { return setInt32(v, &c.minISR) }},
	{"retention.bytes", "log.retention.bytes", "-1", TypeLong, "partition size beyond which old segments are deleted; -1 = none",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.RetentionBytes) }},
	{"retention.ms", "log.retention.ms", "604800000", TypeLong, "age beyond which old segments are deleted; -1 = forever",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.RetentionMs) }},
	{"segment.bytes", "log.segment.bytes", "1073741824", TypeInt, "segment size before a roll",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.SegmentBytes) }},
	{"segment.index.bytes", "log.index.size.max.bytes", "10485760", TypeInt, "preallocated size of a segment's index",
		func(c *topicSettings, v string) error { return setInt32(v, &c.log.SegmentIndexBytes) }},
	{"segment.ms", "log.roll.ms", "604800000", TypeLong, "segment age before a roll",
		func(c *topicSettings, v string) error { return setInt64(v, &c.log.SegmentMs) }},
	{"unclean.leader.election.enable", "unclean.leader.election.enable", "false", TypeBoolean, "let a replica outside the ISR lead when no ISR member is alive",
		func(c *topicSettings, v string) error {
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(v)))
			if err != nil {
				return fmt.Errorf("%q is not true or false", v)
			}
			c.uncleanLeader = b
			return nil
		}},
}

func lookupTopicConfig(name string) (*topicConfig, bool) {
	i, ok := slices.BinarySearchFunc(topicConfigs, name, func(c topicConfig, n string) int { return strings.Compare(c.name, n) })
	if !ok {
		return nil, false
	}
	return &topicConfigs[i], true
}

// TopicConfigNames returns the topic configs Sluice accepts, sorted.
func TopicConfigNames() []string {
	out := make([]string, len(topicConfigs))
	for i, c := range topicConfigs {
		out[i] = c.name
	}
	return out
}

func setInt64(v string, dst *int64) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", v)
	}
	*dst = n
	return nil
}

func setInt32(v string, dst *int32) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not a 32-bit integer", v)
	}
	*dst = int32(n)
	return nil
}

// defaultValue is the broker-level value of c: the broker's setting when
// known, else Kafka's default.
func (b *Broker) defaultValue(c *topicConfig) (string, ConfigSource) {
	return defaultValue(b.cfg.TopicDefaults, c)
}

func defaultValue(defaults map[string]TopicDefault, c *topicConfig) (string, ConfigSource) {
	if d, ok := defaults[c.name]; ok {
		if d.Static {
			return d.Value, SourceStaticBroker
		}
		return d.Value, SourceDefault
	}
	return c.def, SourceDefault
}

// settings computes a topic's effective configuration from the broker-level
// values and the topic's overrides. The overrides must have passed
// validateTopicConfigs.
func (b *Broker) settings(overrides map[string]string) (topicSettings, error) {
	return settings(b.cfg.TopicDefaults, overrides)
}

func settings(defaults map[string]TopicDefault, overrides map[string]string) (topicSettings, error) {
	s := topicSettings{log: storage.DefaultLogConfig(), minISR: 1}
	for i := range topicConfigs {
		c := &topicConfigs[i]
		v, ok := overrides[c.name]
		if !ok {
			v, _ = defaultValue(defaults, c)
		}
		if err := c.apply(&s, v); err != nil {
			return s, errorf(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", v, c.name, err)
		}
	}
	return s, nil
}

// TopicLogConfig is the storage configuration of a topic with the given
// overrides on top of the broker-level defaults (falling back to the
// defaults alone where an override is bad). The appliance uses it for logs
// found on disk at start, before the broker exists.
func TopicLogConfig(defaults map[string]TopicDefault, overrides map[string]string) storage.LogConfig {
	s, err := settings(defaults, overrides)
	if err != nil {
		s, _ = settings(defaults, nil)
	}
	return s.log
}

// TopicConfigBrokerKey returns the broker key behind a topic config
// (retention.ms -> log.retention.ms) and Kafka's default for it.
func TopicConfigBrokerKey(name string) (brokerKey, kafkaDefault string, ok bool) {
	c, ok := lookupTopicConfig(name)
	if !ok {
		return "", "", false
	}
	return c.brokerKey, c.def, true
}

// validateTopicConfigs checks config overrides for a topic whose replication
// factor is rf (0 = unknown): an unknown name or a value that does not parse
// is INVALID_CONFIG, as in Kafka; a value that parses but is out of range or
// contradicts the broker (max.message.bytes above socket.request.max.bytes,
// min.insync.replicas above the replication factor) is POLICY_VIOLATION.
func (b *Broker) validateTopicConfigs(overrides map[string]string, rf int) error {
	for name, v := range overrides {
		c, ok := lookupTopicConfig(name)
		if !ok {
			return errorf(kerr.InvalidConfig, "Unknown topic config name: %s", name)
		}
		var s topicSettings
		s.log = storage.DefaultLogConfig()
		if err := c.apply(&s, v); err != nil {
			return errorf(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", v, name, err)
		}
	}
	s, err := b.settings(overrides)
	if err != nil {
		return err
	}
	if err := s.log.Validate(); err != nil {
		return errorf(kerr.PolicyViolation, "%v", err)
	}
	if s.minISR < 1 {
		return errorf(kerr.PolicyViolation, "min.insync.replicas %d must be at least 1", s.minISR)
	}
	// The cross-checks apply to values set on the topic: the broker's own
	// defaults are the operator's business.
	if _, ok := overrides["min.insync.replicas"]; ok && rf > 0 && int(s.minISR) > rf {
		return errorf(kerr.PolicyViolation, "min.insync.replicas %d is larger than the replication factor %d: acks=all produce could never succeed", s.minISR, rf)
	}
	if _, ok := overrides["max.message.bytes"]; ok && b.cfg.MaxRequestBytes > 0 && s.log.MaxMessageBytes > b.cfg.MaxRequestBytes {
		return errorf(kerr.PolicyViolation, "max.message.bytes %d is larger than socket.request.max.bytes %d: such batches could never arrive", s.log.MaxMessageBytes, b.cfg.MaxRequestBytes)
	}
	return nil
}

// describeTopicConfigs lists every topic config of a topic with the given
// overrides, with its value and source, and the synonyms when asked.
func (b *Broker) describeTopicConfigs(overrides map[string]string, synonyms bool) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicConfigs))
	for i := range topicConfigs {
		c := &topicConfigs[i]
		def, defSource := b.defaultValue(c)
		e := ConfigEntry{Name: c.name, Type: c.typ, Doc: c.doc}
		if v, ok := overrides[c.name]; ok {
			e.Value, e.Source = &v, SourceDynamicTopic
		} else {
			v := def
			e.Value, e.Source = &v, defSource
		}
		if synonyms {
			if v, ok := overrides[c.name]; ok {
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: c.name, Value: v, Source: SourceDynamicTopic})
			}
			if defSource == SourceStaticBroker {
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: b.cfg.TopicDefaults[c.name].BrokerKey, Value: def, Source: SourceStaticBroker})
			}
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: c.brokerKey, Value: c.def, Source: SourceDefault})
		}
		out = append(out, e)
	}
	return out
}

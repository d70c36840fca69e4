package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Log is the part of a topic's configuration that its partitions' logs
// honour (storage.LogConfig embeds it), with Kafka's topic config names.
type Log struct {
	SegmentBytes           int64   // segment.bytes
	SegmentMs              int64   // segment.ms
	SegmentIndexBytes      int32   // segment.index.bytes
	IndexIntervalBytes     int32   // index.interval.bytes
	RetentionMs            int64   // retention.ms; -1 = forever
	RetentionBytes         int64   // retention.bytes; -1 = no limit
	Cleanup                string  // cleanup.policy: "delete" | "compact" | "compact,delete"
	DeleteRetentionMs      int64   // delete.retention.ms
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio
	MinCompactionLagMs     int64   // min.compaction.lag.ms
	FlushMessages          int64   // flush.messages (1 = fsync every append)
	FlushMs                int64   // flush.ms
	MessageTimestampType   string  // message.timestamp.type: "CreateTime" | "LogAppendTime"
	CompressionType        string  // compression.type: "producer"|"uncompressed"|"gzip"|"snappy"|"lz4"|"zstd"
	MaxMessageBytes        int32   // max.message.bytes
}

// Topic is a topic's effective configuration: every topic config Sluice
// honours, typed.
type Topic struct {
	Log
	MinInsyncReplicas           int32 // min.insync.replicas
	UncleanLeaderElectionEnable bool  // unclean.leader.election.enable
}

// topicKeys is every topic config Sluice honours, sorted by name. Each
// names the broker key that gives its default when the topic does not set
// it; that broker key takes its type and rules from here, and its default
// is the topic config's default. A new topic config: add it here, with a
// field in Log or Topic, and its broker key in keys.go.
var topicKeys = []Key{
	{Name: "cleanup.policy", Type: List, BrokerKey: "log.cleanup.policy",
		Doc:  "delete removes old segments by retention.ms and retention.bytes; compact keeps the latest record of each key; compact,delete does both.",
		norm: withoutSpaces, syntax: cleanupPolicyRule,
		tfield: func(t *Topic) any { return &t.Cleanup }},
	{Name: "compression.type", BrokerKey: "compression.type",
		Doc:  "Final compression of the topic's batches: producer keeps the producer's codec; the others recompress.",
		norm: lower, syntax: oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
		tfield: func(t *Topic) any { return &t.CompressionType }},
	{Name: "delete.retention.ms", BrokerKey: "log.cleaner.delete.retention.ms",
		Doc:  "How long a compacted topic keeps tombstones (records without a value) after compaction.",
		rule: atLeast(0), tfield: func(t *Topic) any { return &t.DeleteRetentionMs }},
	{Name: "flush.messages", BrokerKey: "log.flush.interval.messages",
		Doc:  "fsync after this many records; 1 = fsync every append. The default never forces one by count.",
		rule: atLeast(1), tfield: func(t *Topic) any { return &t.FlushMessages }},
	{Name: "flush.ms", BrokerKey: "log.flush.interval.ms",
		Doc:  "fsync when this long has passed since the last flush. The default never forces one by time.",
		rule: atLeast(0), tfield: func(t *Topic) any { return &t.FlushMs }},
	{Name: "index.interval.bytes", BrokerKey: "log.index.interval.bytes",
		Doc:  "Bytes of records between offset index entries.",
		rule: atLeast(0), tfield: func(t *Topic) any { return &t.IndexIntervalBytes }},
	{Name: "max.message.bytes", BrokerKey: "message.max.bytes",
		Doc:  "Largest record batch accepted; a larger one is refused with MESSAGE_TOO_LARGE.",
		rule: atLeast(0), tfield: func(t *Topic) any { return &t.MaxMessageBytes }},
	{Name: "message.timestamp.type", BrokerKey: "log.message.timestamp.type",
		Doc:    "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's time (the batch CRC is recomputed).",
		syntax: oneOf("CreateTime", "LogAppendTime"),
		tfield: func(t *Topic) any { return &t.MessageTimestampType }},
	{Name: "min.cleanable.dirty.ratio", BrokerKey: "log.cleaner.min.cleanable.ratio",
		Doc:  "Compact when the uncompacted bytes reach this share of all cleanable bytes.",
		rule: ratio(), tfield: func(t *Topic) any { return &t.MinCleanableDirtyRatio }},
	{Name: "min.compaction.lag.ms", BrokerKey: "log.cleaner.min.compaction.lag.ms",
		Doc:  "Records younger than this are never compacted.",
		rule: atLeast(0), tfield: func(t *Topic) any { return &t.MinCompactionLagMs }},
	{Name: "min.insync.replicas", BrokerKey: "min.insync.replicas", replication: true,
		Doc:  "acks=all produce fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than this. Set on a topic, it may not exceed the replication factor.",
		rule: atLeast(1), tfield: func(t *Topic) any { return &t.MinInsyncReplicas }},
	{Name: "retention.bytes", BrokerKey: "log.retention.bytes",
		Doc:    "Delete the oldest segments while the partition stays at least this big; -1 = no size limit.",
		tfield: func(t *Topic) any { return &t.RetentionBytes }},
	{Name: "retention.ms", BrokerKey: "log.retention.ms",
		Doc:  "Delete whole segments whose newest record is older than this; -1 = keep forever. Retention never deletes the active segment nor anything at or above the high watermark.",
		rule: atLeast(-1), tfield: func(t *Topic) any { return &t.RetentionMs }},
	{Name: "segment.bytes", Type: Int, BrokerKey: "log.segment.bytes",
		Doc:  "Roll the active segment when it would grow past this.",
		rule: between(14, math.MaxInt32), tfield: func(t *Topic) any { return &t.SegmentBytes }},
	{Name: "segment.index.bytes", BrokerKey: "log.index.size.max.bytes",
		Doc:  "Preallocated size of a segment's offset and time indexes; a full index also rolls the segment.",
		rule: atLeast(4 * 12), tfield: func(t *Topic) any { return &t.SegmentIndexBytes }},
	{Name: "segment.ms", BrokerKey: "log.roll.ms",
		Doc:  "Roll when the segment's first batch is older than this.",
		rule: atLeast(1), tfield: func(t *Topic) any { return &t.SegmentMs }},
	{Name: "unclean.leader.election.enable", BrokerKey: "unclean.leader.election.enable", replication: true,
		Doc:    "Let a live replica outside the ISR lead when no ISR member is live (acknowledged records may be lost).",
		tfield: func(t *Topic) any { return &t.UncleanLeaderElectionEnable }},
}

// cleanupPolicyRule accepts what ParseCleanupPolicy does.
var cleanupPolicyRule = Rule{Doc: "delete, compact or compact,delete", words: []string{"delete", "compact", "compact,delete"}, check: func(v any) error {
	_, err := ParseCleanupPolicy(v.(string))
	return err
}}

// CleanupPolicy is cleanup.policy parsed.
type CleanupPolicy struct{ Compact, Delete bool }

// ParseCleanupPolicy reads cleanup.policy or log.cleanup.policy: delete,
// compact, or both comma-separated in either order.
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	var p CleanupPolicy
	for _, part := range strings.Split(s, ",") {
		switch part = strings.TrimSpace(part); part {
		case "compact":
			p.Compact = true
		case "delete":
			p.Delete = true
		default:
			return CleanupPolicy{}, fmt.Errorf("unknown policy %q: want delete, compact or compact,delete", part)
		}
	}
	return p, nil
}

// TopicKeys returns every topic config Sluice honours, sorted by name.
func TopicKeys() []Key { return append([]Key(nil), topicKeys...) }

// LookupTopic returns the topic config name.
func LookupTopic(name string) (*Key, bool) {
	k, ok := topicIndex[name]
	return k, ok
}

// Set parses v into the field of t of the topic config k. The error is a
// value that does not parse or is not one of the config's words (Kafka's
// INVALID_CONFIG); ranges are Topic.Validate's.
func (k *Key) Set(t *Topic, v string) error { return k.store(k.tfield(t), v) }

// DefaultTopic returns the topic configuration with every config at its
// default (Kafka's).
func DefaultTopic() Topic { return defaultTopic }

var defaultTopic Topic

// Validate checks every config's range; the error names the config.
func (t *Topic) Validate() error { return t.validate(false) }

// Validate checks the range of every config the log honours; the error
// names the config.
func (l *Log) Validate() error {
	t := Topic{Log: *l}
	return t.validate(true)
}

func (t *Topic) validate(logOnly bool) error {
	for i := range topicKeys {
		k := &topicKeys[i]
		if logOnly && k.replication {
			continue
		}
		if err := k.check(k.tfield(t)); err != nil {
			return err
		}
	}
	return nil
}

// TopicDefault is the broker-level value behind a topic config: the value
// of its broker key (log.retention.ms for retention.ms, after synonyms) and
// which key gave it.
type TopicDefault struct {
	BrokerKey string // the key given (log.retention.hours), else the topic config's broker key
	Value     string
	Static    bool // set in the config file or an override
	// Level is where Value comes from; a dynamic broker config
	// (TopicDefaultsWith) is LevelDynamicBroker or LevelDynamicDefault.
	Level Level
}

// TopicDefaults maps each topic config to its broker-level value in c.
func (c *Config) TopicDefaults() map[string]TopicDefault {
	out := make(map[string]TopicDefault, len(topicKeys))
	for i := range topicKeys {
		t := &topicKeys[i]
		b, _ := Lookup(t.BrokerKey)
		d := TopicDefault{BrokerKey: b.Name, Value: format(b.field(c))}
		for _, name := range append([]string{b.Name}, b.Synonyms...) {
			if _, ok := c.Given[name]; ok {
				d.BrokerKey, d.Static, d.Level = name, true, LevelStatic
				break
			}
		}
		out[t.Name] = d
	}
	// The topic configs Sluice only accepts: Kafka's broker key, when the
	// file gave one (Ignored), else Kafka's default.
	for i := range acceptedTopicKeys {
		t := &acceptedTopicKeys[i]
		d := TopicDefault{BrokerKey: t.BrokerKey, Value: t.Default}
		if t.BrokerKey == "" {
			d.BrokerKey = t.Name
		}
		for _, name := range kafkaTopicSynonyms[t.Name] {
			v, ok := c.Ignored[name]
			if !ok {
				continue
			}
			if strings.HasSuffix(name, ".hours") { // log.roll.jitter.hours
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 && n <= math.MaxInt64/3600000 {
					v = strconv.FormatInt(n*3600000, 10)
				}
			}
			if t.CheckValue(v) == nil {
				d.BrokerKey, d.Value, d.Static, d.Level = name, v, true, LevelStatic
			}
			break
		}
		out[t.Name] = d
	}
	return out
}

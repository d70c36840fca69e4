package storage

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/record"
)

// TopicPartition names a partition; String is its directory name.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// parseTopicPartition reads a directory name <topic>-<partition>. The topic
// may itself contain '-', so the partition is after the last one.
func parseTopicPartition(name string) (TopicPartition, error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, fmt.Errorf("%q is not in the form <topic>-<partition>", name)
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || name[i+1] == '+' {
		return TopicPartition{}, fmt.Errorf("%q is not in the form <topic>-<partition>", name)
	}
	tp := TopicPartition{Topic: name[:i], Partition: int32(p)}
	if err := validTopicName(tp.Topic); err != nil {
		return TopicPartition{}, fmt.Errorf("%q: %w", name, err)
	}
	return tp, nil
}

// validTopicName applies Kafka's rule: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("illegal topic name %q", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("illegal character %q in topic name %q", c, t)
		}
	}
	return nil
}

// LogConfig holds the topic-level configs the log honours, with Kafka's names
// and defaults (DefaultLogConfig).
type LogConfig struct {
	SegmentBytes           int64   // segment.bytes, 1073741824
	SegmentMs              int64   // segment.ms, 604800000
	SegmentIndexBytes      int32   // segment.index.bytes, 10485760
	IndexIntervalBytes     int32   // index.interval.bytes, 4096
	RetentionMs            int64   // retention.ms, 604800000; -1 = forever
	RetentionBytes         int64   // retention.bytes, -1
	Cleanup                string  // cleanup.policy: "delete" | "compact" | "compact,delete"
	DeleteRetentionMs      int64   // delete.retention.ms, 86400000
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio, 0.5
	MinCompactionLagMs     int64   // min.compaction.lag.ms, 0
	FlushMessages          int64   // flush.messages, math.MaxInt64 (1 = fsync every append)
	FlushMs                int64   // flush.ms, math.MaxInt64
	MessageTimestampType   string  // message.timestamp.type: "CreateTime" | "LogAppendTime"
	CompressionType        string  // compression.type: "producer"|"uncompressed"|"gzip"|"snappy"|"lz4"|"zstd"
	MaxMessageBytes        int32   // max.message.bytes, 1048588
}

// DefaultLogConfig returns Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 3600 * 1000,
		SegmentIndexBytes:      10 << 20,
		IndexIntervalBytes:     4096,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		Cleanup:                "delete",
		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		MessageTimestampType:   "CreateTime",
		CompressionType:        "producer",
		MaxMessageBytes:        1048588,
	}
}

// Smallest values accepted, as Kafka's LogConfig validators do.
const (
	minSegmentBytes      = 14 // LegacyRecord.RECORD_OVERHEAD_V0
	minSegmentIndexBytes = 4 * 12
)

// Validate reports the first config value Kafka would refuse.
func (c *LogConfig) Validate() error {
	switch {
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("segment.bytes %d must be in [%d, %d]", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case c.SegmentMs < 1:
		return fmt.Errorf("segment.ms %d must be at least 1", c.SegmentMs)
	case c.SegmentIndexBytes < minSegmentIndexBytes:
		return fmt.Errorf("segment.index.bytes %d must be at least %d", c.SegmentIndexBytes, minSegmentIndexBytes)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("index.interval.bytes %d must not be negative", c.IndexIntervalBytes)
	case c.RetentionMs < -1:
		return fmt.Errorf("retention.ms %d must be -1 or more", c.RetentionMs)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("delete.retention.ms %d must not be negative", c.DeleteRetentionMs)
	case c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1:
		return fmt.Errorf("min.cleanable.dirty.ratio %v must be in [0, 1]", c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0:
		return fmt.Errorf("min.compaction.lag.ms %d must not be negative", c.MinCompactionLagMs)
	case c.FlushMessages < 1:
		return fmt.Errorf("flush.messages %d must be at least 1", c.FlushMessages)
	case c.FlushMs < 0:
		return fmt.Errorf("flush.ms %d must not be negative", c.FlushMs)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("max.message.bytes %d must not be negative", c.MaxMessageBytes)
	}
	switch c.MessageTimestampType {
	case "", "CreateTime", "LogAppendTime":
	default:
		return fmt.Errorf("message.timestamp.type %q must be CreateTime or LogAppendTime", c.MessageTimestampType)
	}
	if _, _, err := record.ParseCompressionType(c.CompressionType); err != nil {
		return err
	}
	if _, _, err := parseCleanupPolicy(c.Cleanup); err != nil {
		return err
	}
	return nil
}

// parseCleanupPolicy reads cleanup.policy ("delete", "compact", both in
// either order, comma separated).
func parseCleanupPolicy(s string) (compact, del bool, err error) {
	if s == "" {
		return false, true, nil
	}
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return false, false, fmt.Errorf("cleanup.policy %q: unknown policy %q", s, p)
		}
	}
	return compact, del, nil
}

func (c *LogConfig) compact() bool { v, _, _ := parseCleanupPolicy(c.Cleanup); return v }
func (c *LogConfig) deletes() bool { _, v, _ := parseCleanupPolicy(c.Cleanup); return v }

// maxIndexEntries is how many entries of size n a segment.index.bytes file holds.
func (c *LogConfig) maxIndexBytes(entry int) int {
	return int(c.SegmentIndexBytes) / entry * entry
}

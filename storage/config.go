package storage

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/config"
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

// validTopicName applies Kafka's rule (config.ValidateTopicName).
func validTopicName(t string) error {
	if err := config.ValidateTopicName(t); err != nil {
		return fmt.Errorf("illegal topic name: %w", err)
	}
	return nil
}

// LogConfig holds the topic configs the log honours (config.Log: Kafka's
// names, the types and rules of the config table, and Validate).
type LogConfig struct {
	config.Log
}

// minSegmentIndexBytes is the smallest index a segment is given whatever
// its config says (segment.index.bytes refuses less: the config table's
// rule, which a test ties to this).
const minSegmentIndexBytes = 4 * 12

// DefaultLogConfig returns Kafka's defaults, from the config table.
func DefaultLogConfig() LogConfig { return LogConfig{Log: config.DefaultTopic().Log} }

// parseCleanupPolicy reads cleanup.policy (config.ParseCleanupPolicy); ""
// (a LogConfig built in code) deletes.
func parseCleanupPolicy(s string) (compact, del bool, err error) {
	if s == "" {
		return false, true, nil
	}
	p, err := config.ParseCleanupPolicy(s)
	if err != nil {
		return false, false, fmt.Errorf("cleanup.policy %q: %w", s, err)
	}
	return p.Compact, p.Delete, nil
}

func (c *LogConfig) compact() bool { v, _, _ := parseCleanupPolicy(c.Cleanup); return v }
func (c *LogConfig) deletes() bool { _, v, _ := parseCleanupPolicy(c.Cleanup); return v }

// maxIndexEntries is how many entries of size n a segment.index.bytes file holds.
func (c *LogConfig) maxIndexBytes(entry int) int {
	return int(c.SegmentIndexBytes) / entry * entry
}

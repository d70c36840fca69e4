package group

import (
	"errors"
	"time"

	"github.com/sluice-io/sluice/config"
)

// Config is the group coordinator's configuration: the offsets.* and
// group.* keys of the config table, typed for the coordinator. The table
// (package config) is where they are defined, with their defaults and
// rules; NewConfig takes them from a loaded configuration.
type Config struct {
	NumPartitions                 int32         // offsets.topic.num.partitions
	ReplicationFactor             int16         // offsets.topic.replication.factor
	SegmentBytes                  int64         // offsets.topic.segment.bytes
	MinSessionTimeout             time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout             time.Duration // group.max.session.timeout.ms
	InitialRebalanceDelay         time.Duration // group.initial.rebalance.delay.ms
	MaxSize                       int32         // group.max.size
	OffsetsRetention              time.Duration // offsets.retention.minutes
	OffsetsRetentionCheckInterval time.Duration // offsets.retention.check.interval.ms
	CommitTimeout                 time.Duration // offsets.commit.timeout.ms
	MaxMetadataBytes              int           // offset.metadata.max.bytes
	LoadBufferSize                int32         // offsets.load.buffer.size
}

// NewConfig takes the coordinator's keys from c.
func NewConfig(c *config.Config) Config {
	ms := func(n int32) time.Duration { return time.Duration(n) * time.Millisecond }
	return Config{
		NumPartitions:                 c.OffsetsTopicNumPartitions,
		ReplicationFactor:             c.OffsetsTopicReplicationFactor,
		SegmentBytes:                  c.OffsetsTopicSegmentBytes,
		MinSessionTimeout:             ms(c.GroupMinSessionTimeoutMs),
		MaxSessionTimeout:             ms(c.GroupMaxSessionTimeoutMs),
		InitialRebalanceDelay:         ms(c.GroupInitialRebalanceDelayMs),
		MaxSize:                       c.GroupMaxSize,
		OffsetsRetention:              time.Duration(c.OffsetsRetentionMinutes) * time.Minute,
		OffsetsRetentionCheckInterval: c.OffsetsRetentionCheckInterval,
		CommitTimeout:                 c.OffsetsCommitTimeout,
		MaxMetadataBytes:              int(c.OffsetMetadataMaxBytes),
		LoadBufferSize:                c.OffsetsLoadBufferSize,
	}
}

// DefaultConfig returns Kafka's defaults (the config table's).
func DefaultConfig() Config { return NewConfig(config.Default()) }

// Validate checks each setting with its key's rule in the config table;
// the error names the key.
func (c *Config) Validate() error {
	ms := func(d time.Duration) int32 { return int32(min(d.Milliseconds(), 1<<31-1)) }
	return errors.Join(
		config.Check("offsets.topic.num.partitions", c.NumPartitions),
		config.Check("offsets.topic.replication.factor", c.ReplicationFactor),
		config.Check("offsets.topic.segment.bytes", c.SegmentBytes),
		config.Check("group.min.session.timeout.ms", ms(c.MinSessionTimeout)),
		config.Check("group.max.session.timeout.ms", ms(c.MaxSessionTimeout)),
		config.CheckSessionTimeouts(c.MinSessionTimeout.Milliseconds(), c.MaxSessionTimeout.Milliseconds()),
		config.Check("group.initial.rebalance.delay.ms", ms(c.InitialRebalanceDelay)),
		config.Check("group.max.size", c.MaxSize),
		config.Check("offsets.retention.minutes", int32(min(c.OffsetsRetention/time.Minute, 1<<31-1))),
		config.Check("offsets.retention.check.interval.ms", c.OffsetsRetentionCheckInterval),
		config.Check("offsets.commit.timeout.ms", c.CommitTimeout),
		config.Check("offset.metadata.max.bytes", int32(min(c.MaxMetadataBytes, 1<<31-1))),
		config.Check("offsets.load.buffer.size", c.LoadBufferSize),
	)
}

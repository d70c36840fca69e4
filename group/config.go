package group

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Config is the group coordinator's configuration, with Kafka's broker
// config names and defaults.
type Config struct {
	NumPartitions         int32         // offsets.topic.num.partitions, 50
	ReplicationFactor     int16         // offsets.topic.replication.factor, 3
	SegmentBytes          int64         // offsets.topic.segment.bytes, 104857600
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms, 6000
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms, 1800000
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms, 3000
	MaxSize               int32         // group.max.size, unlimited (MaxInt32)
	// OffsetsRetention is offsets.retention.minutes (10080, 7 days).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms (600000).
	OffsetsRetentionCheckInterval time.Duration
	CommitTimeout                 time.Duration // offsets.commit.timeout.ms, 5000
	MaxMetadataBytes              int           // offset.metadata.max.bytes, 4096
	LoadBufferSize                int32         // offsets.load.buffer.size, 5242880
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		NumPartitions:                 50,
		ReplicationFactor:             3,
		SegmentBytes:                  100 << 20,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		InitialRebalanceDelay:         3 * time.Second,
		MaxSize:                       math.MaxInt32,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		CommitTimeout:                 5 * time.Second,
		MaxMetadataBytes:              4096,
		LoadBufferSize:                5 << 20,
	}
}

// ConfigKeys lists the property names Set understands.
var ConfigKeys = []string{
	"offsets.topic.num.partitions",
	"offsets.topic.replication.factor",
	"offsets.topic.segment.bytes",
	"group.min.session.timeout.ms",
	"group.max.session.timeout.ms",
	"group.initial.rebalance.delay.ms",
	"group.max.size",
	"offsets.retention.minutes",
	"offsets.retention.check.interval.ms",
	"offsets.commit.timeout.ms",
	"offset.metadata.max.bytes",
	"offsets.load.buffer.size",
}

// Set sets one property by its Kafka name. known is false for a key that
// is not a group coordinator setting; err reports a bad value.
func (c *Config) Set(key, value string) (known bool, err error) {
	num := func(bits int) (int64, error) {
		n, err := strconv.ParseInt(value, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("group: %s=%q: not an integer", key, value)
		}
		return n, nil
	}
	ms := func() (time.Duration, error) {
		n, err := num(64)
		return time.Duration(n) * time.Millisecond, err
	}
	switch key {
	case "offsets.topic.num.partitions":
		n, err := num(32)
		c.NumPartitions = int32(n)
		return true, err
	case "offsets.topic.replication.factor":
		n, err := num(16)
		c.ReplicationFactor = int16(n)
		return true, err
	case "offsets.topic.segment.bytes":
		c.SegmentBytes, err = num(64)
		return true, err
	case "group.min.session.timeout.ms":
		c.MinSessionTimeout, err = ms()
		return true, err
	case "group.max.session.timeout.ms":
		c.MaxSessionTimeout, err = ms()
		return true, err
	case "group.initial.rebalance.delay.ms":
		c.InitialRebalanceDelay, err = ms()
		return true, err
	case "group.max.size":
		n, err := num(32)
		c.MaxSize = int32(n)
		return true, err
	case "offsets.retention.minutes":
		n, err := num(64)
		c.OffsetsRetention = time.Duration(n) * time.Minute
		return true, err
	case "offsets.retention.check.interval.ms":
		c.OffsetsRetentionCheckInterval, err = ms()
		return true, err
	case "offsets.commit.timeout.ms":
		c.CommitTimeout, err = ms()
		return true, err
	case "offset.metadata.max.bytes":
		n, err := num(32)
		c.MaxMetadataBytes = int(n)
		return true, err
	case "offsets.load.buffer.size":
		n, err := num(32)
		c.LoadBufferSize = int32(n)
		return true, err
	}
	return false, nil
}

// Validate reports the first setting out of range, naming its key.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, key, msg string) {
		if !ok {
			errs = append(errs, fmt.Errorf("group: %s %s", key, msg))
		}
	}
	check(c.NumPartitions >= 1, "offsets.topic.num.partitions", "must be at least 1")
	check(c.ReplicationFactor >= 1, "offsets.topic.replication.factor", "must be at least 1")
	check(c.SegmentBytes >= 14, "offsets.topic.segment.bytes", "must be at least 14")
	check(c.MinSessionTimeout >= 0, "group.min.session.timeout.ms", "must not be negative")
	check(c.MaxSessionTimeout >= c.MinSessionTimeout, "group.max.session.timeout.ms", "must not be below group.min.session.timeout.ms")
	check(c.InitialRebalanceDelay >= 0, "group.initial.rebalance.delay.ms", "must not be negative")
	check(c.MaxSize >= 1, "group.max.size", "must be at least 1")
	check(c.OffsetsRetention >= time.Minute, "offsets.retention.minutes", "must be at least 1")
	check(c.OffsetsRetentionCheckInterval > 0, "offsets.retention.check.interval.ms", "must be positive")
	check(c.CommitTimeout > 0, "offsets.commit.timeout.ms", "must be positive")
	check(c.MaxMetadataBytes >= 0, "offset.metadata.max.bytes", "must not be negative")
	check(c.LoadBufferSize >= 1, "offsets.load.buffer.size", "must be at least 1")
	return errors.Join(errs...)
}

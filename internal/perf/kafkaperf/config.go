// Package kafkaperf is the Kafka-protocol load generator behind `sluice
// perf`: produce, consume and end-to-end workloads driven through franz-go's
// kgo against any broker that speaks the Kafka protocol (Sluice, Apache
// Kafka, Redpanda, kfake). It measures with the stdlib-only core in
// internal/perf.
package kafkaperf

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/perf"
)

// Common holds what every workload needs.
type Common struct {
	Brokers []string // seed brokers, host:port
	Topic   string
	// Progress receives a progress line every ProgressInterval; nil or a
	// zero interval prints none. Notes (a topic that already existed with
	// another partition count) go here too.
	Progress         io.Writer
	ProgressInterval time.Duration
	// SetupTimeout bounds reaching the brokers and creating the topic.
	SetupTimeout time.Duration
	// OnSample, when set, gets every progress Sample as it is taken (every
	// ProgressInterval), with its track's label ("produce", "consume",
	// "e2e"): a soak test's view of a run while it lasts.
	OnSample func(track string, s perf.Sample)
	// ClientOpts are added to every client's options: TLS and SASL
	// (sluice perf --command-config).
	ClientOpts []kgo.Opt
}

// clientOpts are the options every client of a run starts with: the seed
// brokers and ClientOpts.
func (c *Common) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)
}

// track is the progress Track of a meter labelled label.
func (c *Common) track(label, latency string, m *perf.Meter) perf.Track {
	t := perf.Track{Label: label, Meter: m, Latency: latency}
	if c.OnSample != nil {
		fn := c.OnSample
		t.OnSample = func(s perf.Sample) { fn(label, s) }
	}
	return t
}

// progress starts the progress line of one meter.
func (c *Common) progress(label string, m *perf.Meter) *perf.Progress {
	return perf.StartTracks(c.Progress, c.ProgressInterval, []perf.Track{c.track(label, "latency", m)})
}

// Validate checks c and fills in defaults.
func (c *Common) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("no brokers given")
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return errors.New("empty broker address")
		}
	}
	if c.Topic == "" {
		return errors.New("no topic given")
	}
	if c.SetupTimeout <= 0 {
		c.SetupTimeout = 30 * time.Second
	}
	return nil
}

func (c *Common) note(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", args...)
	}
}

// ProduceConfig configures a produce run (and the producing half of e2e).
type ProduceConfig struct {
	Common
	NumRecords int64
	RecordSize int
	// Throughput caps records per second across all producers; 0 or less
	// is no cap.
	Throughput float64
	// Acks is "0", "1" or "all" ("-1" is accepted for all).
	Acks string
	// Idempotent chooses the idempotent producer; nil means on for
	// acks=all and off otherwise, as the Java producer does.
	Idempotent  *bool
	Linger      time.Duration
	BatchBytes  int32  // largest record batch; 0 is the client default (1,000,012)
	Compression string // none, gzip, snappy, lz4, zstd
	// Partitions is the partition count to create the topic with when it
	// does not exist. ReplicationFactor likewise; -1 is the broker default.
	Partitions        int32
	ReplicationFactor int16
	Producers         int
	// MaxInflight is produce requests in flight per broker when idempotency
	// is off (with it on the client allows 5). 0 means 5, the Java default.
	MaxInflight int
	// MaxBuffered bounds records buffered in each producer; 0 is the client
	// default (50,000).
	MaxBuffered int
	// Payload is perf.PayloadRandom (the default) or perf.PayloadText.
	Payload string
	// DeliveryTimeout fails a record not acknowledged within it; 0 means 30s.
	DeliveryTimeout time.Duration
}

// Validate checks c and fills in defaults; Produce and EndToEnd call it too.
func (c *ProduceConfig) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if c.NumRecords <= 0 {
		return fmt.Errorf("number of records must be positive, got %d", c.NumRecords)
	}
	if c.RecordSize < 0 {
		return fmt.Errorf("record size must not be negative, got %d", c.RecordSize)
	}
	if c.Producers <= 0 {
		c.Producers = 1
	}
	if int64(c.Producers) > c.NumRecords {
		c.Producers = int(c.NumRecords)
	}
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.BatchBytes < 0 {
		return fmt.Errorf("batch bytes must not be negative, got %d", c.BatchBytes)
	}
	if c.Linger < 0 {
		return fmt.Errorf("linger must not be negative, got %v", c.Linger)
	}
	if c.Linger > time.Minute {
		return fmt.Errorf("linger must be at most 1m, got %v", c.Linger)
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 5
	}
	if c.MaxBuffered < 0 {
		return fmt.Errorf("max buffered records must not be negative, got %d", c.MaxBuffered)
	}
	if c.DeliveryTimeout <= 0 {
		c.DeliveryTimeout = 30 * time.Second
	}
	if c.Payload == "" {
		c.Payload = perf.PayloadRandom
	}
	if c.Payload != perf.PayloadRandom && c.Payload != perf.PayloadText {
		return fmt.Errorf("payload must be %s or %s, got %q", perf.PayloadRandom, perf.PayloadText, c.Payload)
	}
	if _, err := ackOpt(c.Acks); err != nil {
		return err
	}
	if c.Acks == "-1" {
		c.Acks = "all"
	}
	if c.Idempotent != nil && *c.Idempotent && c.Acks != "all" {
		return fmt.Errorf("the idempotent producer needs acks=all, got acks=%s", c.Acks)
	}
	if _, err := compressionOpt(c.Compression); err != nil {
		return err
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	return nil
}

func (c *ProduceConfig) idempotent() bool {
	if c.Idempotent != nil {
		return *c.Idempotent
	}
	return c.Acks == "all"
}

func ackOpt(acks string) (kgo.Acks, error) {
	switch acks {
	case "0":
		return kgo.NoAck(), nil
	case "1", "":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	}
	return kgo.Acks{}, fmt.Errorf("acks must be 0, 1 or all, got %q", acks)
}

func compressionOpt(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression must be none, gzip, snappy, lz4 or zstd, got %q", name)
}

// producerOpts returns the kgo options of one producer client.
func (c *ProduceConfig) producerOpts() []kgo.Opt {
	acks, _ := ackOpt(c.Acks)
	codec, _ := compressionOpt(c.Compression)
	opts := append(c.clientOpts(),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerLinger(c.Linger),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout),
	)
	if !c.idempotent() {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(c.MaxInflight))
	}
	if c.BatchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(c.BatchBytes))
	}
	if c.MaxBuffered > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(c.MaxBuffered))
	}
	return opts
}

func (c *ProduceConfig) echo() map[string]any {
	return map[string]any{
		"brokers":            strings.Join(c.Brokers, ","),
		"topic":              c.Topic,
		"num_records":        c.NumRecords,
		"record_size":        c.RecordSize,
		"throughput":         c.Throughput,
		"acks":               c.Acks,
		"idempotent":         c.idempotent(),
		"linger_ms":          float64(c.Linger) / 1e6,
		"batch_bytes":        c.BatchBytes,
		"compression":        c.Compression,
		"partitions":         c.Partitions,
		"replication_factor": c.ReplicationFactor,
		"producers":          c.Producers,
		"payload":            c.Payload,
	}
}

// ConsumeConfig configures a consume run.
type ConsumeConfig struct {
	Common
	// NumRecords is how many records to read from the start of the topic.
	NumRecords int64
	// Consumers splits the topic's partitions among this many clients.
	Consumers int
	// Group, when set, consumes as members of this consumer group instead
	// of assigning partitions directly (which needs no group coordinator).
	Group string
	// FetchMaxPartitionBytes is the most one fetch returns per partition;
	// 0 is the client default (1 MiB).
	FetchMaxPartitionBytes int32
	// IdleTimeout ends the run with an error when no record arrives for
	// this long; 0 means 10s.
	IdleTimeout time.Duration
}

// Validate checks c and fills in defaults; Consume calls it too.
func (c *ConsumeConfig) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if c.NumRecords <= 0 {
		return fmt.Errorf("number of records must be positive, got %d", c.NumRecords)
	}
	if c.Consumers <= 0 {
		c.Consumers = 1
	}
	if c.FetchMaxPartitionBytes < 0 {
		return fmt.Errorf("fetch max partition bytes must not be negative, got %d", c.FetchMaxPartitionBytes)
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Second
	}
	return nil
}

// E2EConfig configures an end-to-end latency run: records are produced at
// a fixed rate and a consumer in the same process measures the time from
// each record's send to its receipt.
type E2EConfig struct {
	ProduceConfig
	// IdleTimeout ends the wait for the last records when none arrives for
	// this long after producing finished; 0 means 10s.
	IdleTimeout time.Duration
}

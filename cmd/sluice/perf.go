package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/perf"
	"github.com/sluice-io/sluice/internal/perf/kafkaperf"
)

func init() {
	register(&command{
		name:    "perf",
		summary: "load-test any Kafka-protocol broker: perf [load] --producers N --consumers M ..., perf produce|consume|e2e",
		run:     runPerf,
	})
}

const perfUsage = `Usage: sluice perf [load] [flags]
       sluice perf <produce|consume|e2e> [flags]

  load      (the default when the first argument is a flag) size a cluster:
            --producers N clients produce to --topics T topics of
            --partitions P partitions at --rate R in total for --duration D,
            while --consumers M clients in one consumer group read every
            record back. A progress line every second on stderr (records/s,
            MiB/s and p99 of each side, p99 of the run so far), then a table:
            records/s, MiB/s and latency percentiles (send to acknowledgement
            for produce, end to end for consume), p99.9 and max exact.
              sluice perf --producers 4 --consumers 4 --topics 2 --partitions 12 \
                --rate 20MiB/s --duration 1m --acks all --replication-factor 3
  produce   write --num-records records as fast as allowed; report records/s,
            MiB/s and send-to-acknowledgement latency percentiles
  consume   read --num-records records from the start of the topic as fast as
            the brokers serve them; report records/s and MiB/s
  e2e       produce at a fixed --throughput for --duration while consuming,
            and report end-to-end latency percentiles (linger 0 by default)

A progress line goes to stderr every --progress; the summary goes to stdout
(one JSON object with --output json). The exit code is 1 when any record
failed or a consume/e2e run did not get every record.

Run 'sluice perf <mode> --help' for the flags of one mode.
`

func runPerf(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stdout, perfUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	mode, rest := perfMode(args)
	return perfMain(ctx, mode, rest, os.Stdout, os.Stderr, os.Getenv)
}

// perfMode splits `sluice perf` arguments into the mode and its flags: a
// first argument that is a flag means the load mode.
func perfMode(args []string) (string, []string) {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		return "load", args
	}
	return args[0], args[1:]
}

// perfFlags holds every flag of the three modes; each mode registers the
// ones it uses.
type perfFlags struct {
	brokers, topic, acks, compression, payload, output, group, idempotent string
	commandConfig                                                         string
	numRecords                                                            int64
	recordSize, producers, consumers, maxInflight, maxBuffered            int
	partitions, batchBytes, fetchMaxPartitionBytes                        int
	replicationFactor, topics                                             int
	throughput                                                            float64
	rate                                                                  string
	linger, progress, duration, deliveryTimeout, idleTimeout, setup       time.Duration
}

// perfMain is `sluice perf MODE ARGS`; getenv reads $SLUICE_BROKERS, the
// default of --brokers as for every other subcommand.
func perfMain(ctx context.Context, mode string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	f, code := parsePerfFlags(mode, args, stderr, getenv)
	if f == nil {
		return code
	}
	common := f.common(stderr)
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "sluice perf %s: %v\n", mode, err)
		return exitUsage
	}
	if f.commandConfig != "" {
		sec, err := (&clientFlags{commandConfig: f.commandConfig}).security()
		if err != nil {
			return usageErr(err)
		}
		common.ClientOpts = sec
	}
	var (
		res *perf.Result
		err error
	)
	switch mode {
	case "load":
		lc, lerr := f.loadConfig(common)
		if lerr != nil {
			return usageErr(lerr)
		}
		if verr := lc.Validate(); verr != nil {
			return usageErr(verr)
		}
		res, err = kafkaperf.Load(ctx, lc)
	case "produce", "e2e":
		pc, perr := f.produceConfig(common)
		if perr != nil {
			return usageErr(perr)
		}
		if mode == "e2e" && pc.NumRecords == 0 {
			pc.NumRecords = int64(f.throughput * f.duration.Seconds())
		}
		if verr := pc.Validate(); verr != nil {
			return usageErr(verr)
		}
		if mode == "produce" {
			res, err = kafkaperf.Produce(ctx, pc)
		} else {
			res, err = kafkaperf.EndToEnd(ctx, kafkaperf.E2EConfig{ProduceConfig: pc, IdleTimeout: f.idleTimeout})
		}
	case "consume":
		cc := kafkaperf.ConsumeConfig{
			Common:                 common,
			NumRecords:             f.numRecords,
			Consumers:              f.consumers,
			Group:                  f.group,
			FetchMaxPartitionBytes: int32(f.fetchMaxPartitionBytes),
			IdleTimeout:            f.idleTimeout,
		}
		if verr := cc.Validate(); verr != nil {
			return usageErr(verr)
		}
		res, err = kafkaperf.Consume(ctx, cc)
	}
	fail := func(err error) int {
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintf(stderr, "sluice perf %s: %v\n", mode, err)
		return 1
	}
	if res == nil {
		return fail(err)
	}
	if f.output == "json" {
		if werr := res.WriteJSON(stdout); werr != nil {
			return fail(werr)
		}
	} else if werr := res.WriteText(stdout); werr != nil {
		return fail(werr)
	}
	switch {
	case err != nil:
		return fail(err)
	case res.Errors > 0 || res.FirstError != "":
		return 1
	}
	return 0
}

// common is what every mode's configuration shares; progress lines go to
// stderr.
func (f *perfFlags) common(stderr io.Writer) kafkaperf.Common {
	return kafkaperf.Common{
		Brokers:          perfSplitList(f.brokers),
		Topic:            f.topic,
		Progress:         stderr,
		ProgressInterval: f.progress,
		SetupTimeout:     f.setup,
	}
}

// parsePerfFlags parses the flags of one mode; it returns nil and the exit
// code when the command should stop (usage error or --help).
func parsePerfFlags(mode string, args []string, stderr io.Writer, getenv func(string) string) (*perfFlags, int) {
	f := &perfFlags{}
	defBrokers := getenv(brokersEnv)
	if defBrokers == "" {
		defBrokers = "127.0.0.1:9092"
	}
	fs := flag.NewFlagSet("sluice perf "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.brokers, "brokers", defBrokers, "comma-separated seed brokers (host:port); $"+brokersEnv+" sets the default")
	fs.StringVar(&f.commandConfig, "command-config", "", "properties `FILE` of Kafka client settings (security.protocol, sasl.*, ssl.*), as Kafka's tools take it")
	fs.StringVar(&f.topic, "topic", "sluice-perf", "topic to use")
	fs.StringVar(&f.output, "output", "text", "summary format: text or json")
	fs.DurationVar(&f.progress, "progress", time.Second, "interval of the progress line on stderr (0: none)")
	fs.DurationVar(&f.setup, "setup-timeout", 30*time.Second, "how long to wait for the brokers and the topic")

	produceFlags := func(defRecords int64, defThroughput float64, defLinger time.Duration) {
		if mode == "load" {
			fs.Int64Var(&f.numRecords, "num-records", 0, "stop after this many records (0: produce for --duration)")
		} else {
			fs.Int64Var(&f.numRecords, "num-records", defRecords, "records to produce")
			fs.Float64Var(&f.throughput, "throughput", defThroughput, "records/s cap across all producers (-1: no cap)")
		}
		fs.IntVar(&f.recordSize, "record-size", 100, "bytes per record value")
		fs.StringVar(&f.acks, "acks", "1", "acknowledgements: 0, 1 or all")
		fs.StringVar(&f.idempotent, "idempotent", "auto", "idempotent producer: true, false, or auto (on for acks=all)")
		fs.DurationVar(&f.linger, "linger", defLinger, "how long a partition's batch waits for more records")
		fs.IntVar(&f.batchBytes, "batch-bytes", 0, "largest record batch in bytes (0: client default, 1000012)")
		fs.StringVar(&f.compression, "compression", "none", "codec: none, gzip, snappy, lz4 or zstd")
		fs.IntVar(&f.partitions, "partitions", 1, "partitions to create the topic with when it does not exist")
		fs.IntVar(&f.replicationFactor, "replication-factor", 1, "replication factor to create the topic with (-1: broker default)")
		fs.IntVar(&f.producers, "producers", 1, "producer clients, each sending its share of the records")
		fs.IntVar(&f.maxInflight, "max-inflight", 5, "produce requests in flight per broker without idempotency")
		fs.IntVar(&f.maxBuffered, "max-buffered", 0, "records buffered per producer (0: client default, 50000)")
		fs.StringVar(&f.payload, "payload", perf.PayloadRandom, "value bytes: random (incompressible) or text (words; zstd shrinks it to ~35%)")
		fs.DurationVar(&f.deliveryTimeout, "delivery-timeout", 30*time.Second, "fail a record not acknowledged within this")
	}
	switch mode {
	case "load":
		produceFlags(0, -1, 5*time.Millisecond)
		fs.StringVar(&f.rate, "rate", "-1", "records/s across all producers, or bytes/s of record values with a unit "+
			"(20MiB/s, 500KiB/s, 1GB/s); -1: no cap")
		fs.IntVar(&f.topics, "topics", 1, "topics to spread records over: --topic itself when 1, else <topic>-0 .. <topic>-(T-1)")
		fs.IntVar(&f.consumers, "consumers", 1, "members of the consumer group reading every record back (0: produce only)")
		fs.StringVar(&f.group, "group", "", "consumer group (default: a new group sluice-perf-<time>, deleted at the end)")
		fs.DurationVar(&f.duration, "duration", 30*time.Second, "how long to produce")
		fs.IntVar(&f.fetchMaxPartitionBytes, "fetch-max-partition-bytes", 0, "most bytes per partition per fetch (0: client default, 1 MiB)")
		fs.DurationVar(&f.idleTimeout, "idle-timeout", 10*time.Second, "after producing, give up on missing records after this long without one")
	case "produce":
		produceFlags(1_000_000, -1, 5*time.Millisecond)
	case "e2e":
		produceFlags(0, 10_000, 0)
		fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to produce (--num-records = throughput x duration unless given)")
		fs.DurationVar(&f.idleTimeout, "idle-timeout", 10*time.Second, "give up on missing records after this long without one")
	case "consume":
		fs.Int64Var(&f.numRecords, "num-records", 1_000_000, "records to read from the start of the topic")
		fs.IntVar(&f.consumers, "consumers", 1, "consumer clients; partitions are dealt among them")
		fs.StringVar(&f.group, "group", "", "consume as this consumer group (default: assign partitions directly)")
		fs.IntVar(&f.fetchMaxPartitionBytes, "fetch-max-partition-bytes", 0, "most bytes per partition per fetch (0: client default, 1 MiB)")
		fs.DurationVar(&f.idleTimeout, "idle-timeout", 10*time.Second, "give up after this long without a record")
	default:
		fmt.Fprintf(stderr, "sluice perf: unknown mode %q (want load, produce, consume or e2e)\n\n%s", mode, perfUsage)
		return nil, exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice perf %s: unexpected arguments %q\n", mode, fs.Args())
		return nil, exitUsage
	}
	if f.output != "text" && f.output != "json" {
		fmt.Fprintf(stderr, "sluice perf %s: --output must be text or json, got %q\n", mode, f.output)
		return nil, exitUsage
	}
	return f, 0
}

func (f *perfFlags) produceConfig(common kafkaperf.Common) (kafkaperf.ProduceConfig, error) {
	pc := kafkaperf.ProduceConfig{
		Common:          common,
		NumRecords:      f.numRecords,
		RecordSize:      f.recordSize,
		Throughput:      f.throughput,
		Acks:            f.acks,
		Linger:          f.linger,
		Compression:     f.compression,
		Producers:       f.producers,
		MaxInflight:     f.maxInflight,
		MaxBuffered:     f.maxBuffered,
		Payload:         f.payload,
		DeliveryTimeout: f.deliveryTimeout,
	}
	if f.numRecords < 0 {
		return pc, fmt.Errorf("--num-records must not be negative, got %d", f.numRecords)
	}
	if f.batchBytes < 0 || f.batchBytes > 1<<30 {
		return pc, fmt.Errorf("--batch-bytes must be between 0 and 1 GiB, got %d", f.batchBytes)
	}
	pc.BatchBytes = int32(f.batchBytes)
	if f.partitions < 1 || f.partitions > 1<<20 {
		return pc, fmt.Errorf("--partitions must be between 1 and 1048576, got %d", f.partitions)
	}
	pc.Partitions = int32(f.partitions)
	if f.replicationFactor == 0 || f.replicationFactor < -1 || f.replicationFactor > 1<<14 {
		return pc, fmt.Errorf("--replication-factor must be -1 or positive, got %d", f.replicationFactor)
	}
	pc.ReplicationFactor = int16(f.replicationFactor)
	if f.producers < 1 {
		return pc, fmt.Errorf("--producers must be at least 1, got %d", f.producers)
	}
	if f.duration < 0 {
		return pc, fmt.Errorf("--duration must not be negative, got %v", f.duration)
	}
	switch strings.ToLower(f.idempotent) {
	case "auto", "":
	default:
		b, err := strconv.ParseBool(f.idempotent)
		if err != nil {
			return pc, fmt.Errorf("--idempotent must be true, false or auto, got %q", f.idempotent)
		}
		pc.Idempotent = &b
	}
	return pc, nil
}

// loadConfig is the configuration of a load run.
func (f *perfFlags) loadConfig(common kafkaperf.Common) (kafkaperf.LoadConfig, error) {
	pc, err := f.produceConfig(common)
	lc := kafkaperf.LoadConfig{
		ProduceConfig:          pc,
		Topics:                 f.topics,
		Consumers:              f.consumers,
		Group:                  f.group,
		Duration:               f.duration,
		FetchMaxPartitionBytes: int32(f.fetchMaxPartitionBytes),
		IdleTimeout:            f.idleTimeout,
	}
	if err != nil {
		return lc, err
	}
	if f.topics < 1 {
		return lc, fmt.Errorf("--topics must be at least 1, got %d", f.topics)
	}
	if f.consumers < 0 {
		return lc, fmt.Errorf("--consumers must not be negative, got %d", f.consumers)
	}
	if f.duration <= 0 {
		return lc, fmt.Errorf("--duration must be positive, got %v", f.duration)
	}
	if f.fetchMaxPartitionBytes < 0 || f.fetchMaxPartitionBytes > 1<<30 {
		return lc, fmt.Errorf("--fetch-max-partition-bytes must be between 0 and 1 GiB, got %d", f.fetchMaxPartitionBytes)
	}
	rate, err := kafkaperf.ParseRate(f.rate, f.recordSize)
	if err != nil {
		return lc, fmt.Errorf("--rate %w", err)
	}
	lc.Throughput = rate
	return lc, nil
}

func perfSplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluice-io/sluice/migration"
	"github.com/sluice-io/sluice/schemareg/serde"
)

func init() {
	register(&command{
		name:    "compare",
		summary: "compare two topics record by record (ORDER vs ORDERNEW) and give a cut-over verdict",
		run: func(ctx context.Context, args []string) int {
			return compareMain(ctx, args, os.Stdout, os.Stderr, os.Getenv)
		},
	})
}

// Exit codes of sluice compare: a deploy pipeline gates on them.
const (
	compareReady    = 0 // verdict "ready to cut over"
	compareNotReady = 1 // verdict not ready, or the comparison could not run
)

// repeatedFlag is a repeatable string flag; unlike the other commands'
// lists it does not split at commas, which may occur in JSON paths.
type repeatedFlag []string

func (s *repeatedFlag) String() string     { return strings.Join(*s, " ") }
func (s *repeatedFlag) Set(v string) error { *s = append(*s, v); return nil }

const compareUsage = `Usage: sluice compare --brokers HOST:PORT --left TOPIC --right TOPIC [flags]

Reads both topics through the Kafka protocol, pairs their records by key,
compares each pair and prints a report with a verdict. Exits 0 when the
verdict is "ready to cut over", 1 when it is not (or the comparison could not
run), 2 on a usage error, 130 when a --until-end run is interrupted.

Without --until-end the comparison follows the topics until interrupted
(Ctrl-C) or until --duration has passed, then reports and exits by the
verdict. --brokers defaults to $SLUICE_BROKERS, then localhost:9092.

Examples:
  sluice compare --brokers localhost:9092 --left ORDER --right ORDERNEW --until-end
  sluice compare --brokers localhost:9092 --left ORDER --right ORDERNEW --until-end \
      --key json:order.id --json-values --ignore processed_at --ignore 'items[*].trace' \
      --tolerance 0.001 --window 30s --min-records 100000 --output json

Flags:
`

// compareMain is `sluice compare`; it returns the exit code.
func compareMain(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("sluice compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, compareUsage)
		fs.PrintDefaults()
	}
	def := migration.DefaultSpec()
	defBrokers := getenv("SLUICE_BROKERS")
	if defBrokers == "" {
		defBrokers = "localhost:9092"
	}
	var (
		brokers     = fs.String("brokers", defBrokers, "comma-separated bootstrap brokers, `HOST:PORT`")
		cmdConfig   = fs.String("command-config", "", "properties `FILE` of Kafka client settings (security.protocol, sasl.*, ssl.*), as Kafka's tools take it")
		left        = fs.String("left", "", "the reference `topic`, e.g. ORDER (required)")
		right       = fs.String("right", "", "the candidate `topic`, e.g. ORDERNEW (required)")
		key         = fs.String("key", "key", "pair records by the record key (`key`) or by a field of the JSON value (json:PATH, e.g. json:order.id)")
		ignore      repeatedFlag
		window      = fs.Duration("window", time.Duration(def.Window), "how long, in record time, a record waits for its partner before it counts as missing")
		untilEnd    = fs.Bool("until-end", false, "stop at the end offsets the topics have now (bounded); otherwise follow until interrupted or --duration")
		duration    = fs.Duration("duration", 0, "without --until-end: stop after this long and report")
		jsonValues  = fs.Bool("json-values", false, "compare values as JSON (member order ignored, numbers by value) instead of exact bytes")
		tolerance   = fs.Float64("tolerance", 0, "with --json-values: numbers within this absolute difference are equal")
		headers     = fs.Bool("headers", false, "compare record headers too")
		start       = fs.String("start", "earliest", "where to start: earliest, latest, or a time (RFC 3339 or Unix milliseconds)")
		minRecords  = fs.Int64("min-records", 1, "verdict: at least this many pairs compared")
		minSpan     = fs.Duration("min-span", 0, "verdict: the compared pairs cover at least this much record time")
		maxMissing  = fs.Int64("max-missing", 0, "verdict: at most this many missing records (both sides; -1 for no limit)")
		maxDup      = fs.Int64("max-duplicates", 0, "verdict: at most this many duplicates (-1 for no limit)")
		maxOOO      = fs.Int64("max-out-of-order", -1, "verdict: at most this many pairs out of order (-1 for no limit)")
		maxUnkeyed  = fs.Int64("max-unkeyed", 0, "verdict: at most this many records without a pairing key (-1 for no limit)")
		output      = fs.String("output", "table", "report format: table or json")
		examples    = fs.Int("examples", 10, "differences of each kind kept for the report")
		metaTimeout = fs.Duration("connect-timeout", 15*time.Second, "how long to wait for the brokers' metadata")
		verbose     = fs.Bool("v", false, "log progress to stderr every 2 seconds")
		decode      = fs.Bool("decode", false, "decode Confluent wire-format values (Avro, Protobuf, JSON Schema) to JSON before pairing and comparing; the report names the writer schemas each side used")
		registryURL = fs.String("schema-registry", "", "schema registry `URL` for --decode (default $"+schemaRegistryEnv+", else "+defaultSchemaRegistry+")")
		registryPw  = fs.String("schema-registry-auth", "", "`USER:PASSWORD` for the schema registry (default $"+schemaRegistryAuthEnv+")")
	)
	fs.Var(&ignore, "ignore", "with --json-values: a JSON `path` to leave out of the comparison (repeatable), e.g. processed_at or items[*].id; header:NAME ignores a header (with --headers)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice compare: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'sluice compare --help' for usage.")
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *left == "" || *right == "" {
		return usageErr("--left and --right are required")
	}
	if strings.TrimSpace(strings.ReplaceAll(*brokers, ",", "")) == "" {
		return usageErr("--brokers is empty")
	}
	if *output != "table" && *output != "json" {
		return usageErr("--output %q: want table or json", *output)
	}
	if *duration < 0 || (*duration > 0 && *untilEnd) {
		return usageErr("--duration is for comparisons without --until-end, and must be positive")
	}
	if *examples < 1 || *examples > 1000 {
		return usageErr("--examples: want 1 to 1000")
	}
	spec := migration.Spec{
		Left: *left, Right: *right, Key: *key, Values: "bytes", Ignore: ignore, Tolerance: *tolerance,
		Headers: *headers, Start: *start, Window: migration.Duration(*window), Bounded: *untilEnd, Decode: *decode,
		Criteria: migration.Criteria{
			MinRecords: *minRecords, MinSpan: migration.Duration(*minSpan), MaxMissing: *maxMissing,
			MaxDuplicates: *maxDup, MaxOutOfOrder: *maxOOO, MaxUnkeyed: *maxUnkeyed,
		},
	}
	if *jsonValues {
		spec.Values = "json"
	}
	if *minRecords < 1 {
		return usageErr("--min-records: want at least 1")
	}
	if err := spec.Validate(); err != nil {
		return usageErr("%v", err)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	var list []string
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			list = append(list, b)
		}
	}
	opts := migration.Options{Brokers: list, Logger: logger, ExampleLimit: *examples, MetadataTimeout: *metaTimeout}
	if *cmdConfig != "" {
		cf := clientFlags{commandConfig: *cmdConfig}
		sec, err := cf.security()
		if err != nil {
			return usageErr("%v", err)
		}
		opts.ClientOpts = sec
	}
	if *decode {
		src := serde.NewHTTPSource(firstNonEmpty(*registryURL, getenv(schemaRegistryEnv), defaultSchemaRegistry), nil)
		if user, pw, ok := strings.Cut(firstNonEmpty(*registryPw, getenv(schemaRegistryAuthEnv)), ":"); ok {
			src.User, src.Password = user, pw
		}
		opts.Schemas = src
	}
	cmp, err := migration.New(spec, opts)
	if err != nil {
		return usageErr("%v", err)
	}

	runCtx := ctx
	if *duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	progressDone := make(chan struct{})
	progressStopped := make(chan struct{})
	go func() {
		defer close(progressStopped)
		if !*verbose {
			return
		}
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-tick.C:
				s := cmp.Snapshot()
				c := s.Counters
				logger.Info("progress", "compared", c.Compared(), "mismatched", c.Mismatched, "missing", c.Missing(),
					"pending", c.PendingLeft+c.PendingRight, "remaining", s.Remaining())
			}
		}
	}()
	snap, err := cmp.Run(runCtx)
	close(progressDone)
	<-progressStopped
	stopped := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if err != nil && !(stopped && !spec.Bounded && !snap.Taken.IsZero()) {
		// A continuous comparison that was stopped reports what it saw;
		// anything else that ends in an error has nothing to report.
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "sluice compare: interrupted")
			return 130
		}
		fmt.Fprintf(stderr, "sluice compare: %v\n", err)
		return compareNotReady
	}
	report := migration.NewReport(spec, snap)
	if *output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice compare: write report: %v\n", err)
		return compareNotReady
	}
	if report.Verdict.Ready {
		return compareReady
	}
	return compareNotReady
}

package perf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"
)

// Load is the workload every load generator takes, with sluice perf's flag
// names: the benchmark harness runs natsperf and rabbitperf with the same
// flags it gives sluice perf, so one figure stands next to another.
type Load struct {
	NumRecords                       int64
	RecordSize                       int
	Throughput                       float64
	Duration, Progress, IdleTimeout  time.Duration
	Partitions, Producers, Consumers int
	MaxPending                       int
	Acks, Compression, Payload       string
	Output                           string
}

// LoadNames says what the system calls the pieces that flag help mentions.
type LoadNames struct {
	Partition     string // what stands for a partition, plural ("streams", "queues")
	Body          string // what a record is ("message payload", "message body")
	Acks          string // how --acks maps onto the system
	Pending       string // what --max-pending bounds
	NoCompression string // why --compression must be none ("" : compression is the tool's own flag)
}

// Flags registers the shared flags on fs with the defaults of mode (e2e:
// 10,000 records/s for 10 s).
func (l *Load) Flags(fs *flag.FlagSet, mode string, n LoadNames) {
	defRecords := int64(1_000_000)
	defThroughput, defDuration := -1.0, time.Duration(0)
	if mode == "e2e" {
		defRecords = 0 // throughput x duration
		defThroughput, defDuration = 10_000, 10*time.Second
	}
	fs.IntVar(&l.Partitions, "partitions", 1, n.Partition+" to spread records over (the analogue of partitions)")
	fs.Int64Var(&l.NumRecords, "num-records", defRecords, "records to produce or consume (e2e: throughput x duration unless given)")
	fs.IntVar(&l.RecordSize, "record-size", 100, "bytes per "+n.Body)
	fs.StringVar(&l.Output, "output", "text", "summary format: text or json")
	fs.DurationVar(&l.Progress, "progress", time.Second, "progress line interval on stderr (0: none)")
	fs.Float64Var(&l.Throughput, "throughput", defThroughput, "records/s cap across publishers (-1: none)")
	fs.DurationVar(&l.Duration, "duration", defDuration, "e2e: how long to publish (num-records = throughput x duration)")
	fs.IntVar(&l.Producers, "producers", 1, "publisher connections")
	fs.IntVar(&l.Consumers, "consumers", 1, "consumer connections ("+n.Partition+" are dealt among them)")
	fs.IntVar(&l.MaxPending, "max-pending", 4000, n.Pending+" outstanding per publisher")
	fs.StringVar(&l.Acks, "acks", "1", "accepted for symmetry with sluice perf: "+n.Acks)
	fs.StringVar(&l.Compression, "compression", "none", "must be none: "+n.NoCompression)
	fs.StringVar(&l.Payload, "payload", PayloadRandom, "payload bytes: random or text")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", 10*time.Second, "give up after this long without a message")
}

// Validate checks the shared flags for mode and derives what they imply:
// e2e's record count from throughput x duration, no more producers than
// records. noCompression is the reason given when --compression is not none.
func (l *Load) Validate(mode, noCompression string) error {
	switch mode {
	case "produce", "consume", "e2e":
	default:
		return fmt.Errorf("unknown mode %q (want produce, consume or e2e)", mode)
	}
	if l.Compression != "none" {
		return fmt.Errorf("--compression %q: %s", l.Compression, noCompression)
	}
	if l.Acks != "1" && l.Acks != "all" && l.Acks != "-1" {
		return fmt.Errorf("--acks must be 1 or all, got %q", l.Acks)
	}
	if l.Payload != PayloadRandom && l.Payload != PayloadText {
		return fmt.Errorf("--payload must be %s or %s, got %q", PayloadRandom, PayloadText, l.Payload)
	}
	if l.Partitions < 1 || l.Partitions > 10_000 || l.Producers < 1 || l.Consumers < 1 {
		return errors.New("--partitions (up to 10000), --producers and --consumers must be at least 1")
	}
	if l.MaxPending < 1 || l.MaxPending > 1_000_000 {
		return errors.New("--max-pending must be 1 to 1000000")
	}
	if l.RecordSize < 0 || l.RecordSize > 64<<20 {
		return fmt.Errorf("--record-size must be 0 to 64 MiB, got %d", l.RecordSize)
	}
	if l.Output != "text" && l.Output != "json" {
		return fmt.Errorf("--output must be text or json, got %q", l.Output)
	}
	if l.IdleTimeout <= 0 {
		return errors.New("--idle-timeout must be positive")
	}
	if mode == "e2e" {
		if l.Throughput <= 0 {
			return errors.New("e2e needs a positive --throughput")
		}
		if l.RecordSize < SendTimeBytes {
			return fmt.Errorf("e2e needs --record-size of at least %d", SendTimeBytes)
		}
		if l.NumRecords == 0 {
			l.NumRecords = int64(l.Throughput * l.Duration.Seconds())
		}
	}
	if l.NumRecords <= 0 {
		return fmt.Errorf("--num-records must be positive, got %d", l.NumRecords)
	}
	if int64(l.Producers) > l.NumRecords {
		l.Producers = int(l.NumRecords)
	}
	return nil
}

// Tool is a load generator for a system other than Kafka's protocol (the
// commands under bench/): its name, the system it reports, its flags and
// its three workloads. Main runs it as a command.
type Tool struct {
	Name, System string
	Version      func() string
	// Flags registers the tool's flags for mode on fs and returns its
	// shared Load (registered there with Load.Flags).
	Flags func(fs *flag.FlagSet, mode string) *Load
	// Validate checks the tool's own flags, after the shared ones.
	Validate func(mode string) error
	// NoCompression: why --compression must be none on this system.
	NoCompression string
	// Produce, Consume and EndToEnd run the workloads, with progress lines
	// on progress.
	Produce, Consume, EndToEnd func(ctx context.Context, progress io.Writer) (*Result, error)
}

// Main runs t as a command: `NAME produce|consume|e2e|version [flags]`; the
// result goes to stdout as text or JSON, errors to stderr. It returns the
// exit code: 2 for bad usage, 1 when the run failed or had errors.
func (t Tool) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: %s produce|consume|e2e|version [flags]\n", t.Name)
		return 2
	}
	mode := args[0]
	if mode == "version" {
		fmt.Fprintln(stdout, t.Version())
		return 0
	}
	fs := flag.NewFlagSet(t.Name+" "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	load := t.Flags(fs, mode)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s %s: unexpected arguments %q\n", t.Name, mode, fs.Args())
		return 2
	}
	err := load.Validate(mode, t.NoCompression)
	if err == nil && t.Validate != nil {
		err = t.Validate(mode)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", t.Name, mode, err)
		return 2
	}
	run := map[string]func(context.Context, io.Writer) (*Result, error){
		"produce": t.Produce, "consume": t.Consume, "e2e": t.EndToEnd,
	}[mode]
	res, err := run(ctx, stderr)
	if res == nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", t.Name, mode, err)
		return 1
	}
	res.System = t.System
	if load.Output == "json" {
		_ = res.WriteJSON(stdout)
	} else {
		_ = res.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", t.Name, mode, err)
		return 1
	}
	if res.Errors > 0 || res.FirstError != "" {
		return 1
	}
	return 0
}

// WaitIdle waits for done, and gives up when meter has counted no record
// for idle (the system stopped delivering) or ctx ends.
func WaitIdle(ctx context.Context, done <-chan struct{}, meter *Meter, idle time.Duration) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last, lastChange := meter.Records(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			if cur := meter.Records(); cur != last {
				last, lastChange = cur, now
			} else if now.Sub(lastChange) >= idle {
				return fmt.Errorf("no message arrived within %v", idle)
			}
		}
	}
}

// FirstError keeps the first error any goroutine sets.
type FirstError struct {
	mu  sync.Mutex
	err error
}

// Set records err if it is the first.
func (f *FirstError) Set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// Get is the first error set, or nil.
func (f *FirstError) Get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

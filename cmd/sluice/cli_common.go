package main

// Shared plumbing of the operator subcommands (topics, groups, configs,
// cluster, produce, consume): the flags every one of them takes, flag parsing
// that allows flags after positional arguments, table and JSON output, the
// Kafka clients, and the mapping of errors to exit codes:
//
//	0   success
//	1   the operation failed (unreachable brokers, a Kafka error, bad data)
//	2   the command line could not be parsed (unknown flag, missing argument)
//	130 interrupted

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/kclient"
)

// Defaults of the shared flags.
const (
	defaultBrokers = "localhost:9092"
	brokersEnv     = "SLUICE_BROKERS"
	defaultTimeout = 30 * time.Second
	cliClientID    = "sluice-cli"
)

// cliEnv is what an operator subcommand sees of the process. main uses the
// real one; tests substitute buffers.
type cliEnv struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

func osEnv() *cliEnv {
	return &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
}

// usageError is a command line that could not be understood: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// cliAction is one verb of a command with verbs (`sluice topics create`).
type cliAction struct {
	name    string
	args    string // synopsis of the arguments after the verb, for usage
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliRunners holds the operator subcommands by name, runnable with a
// substitute cliEnv (the tests use it).
var cliRunners = map[string]func(ctx context.Context, env *cliEnv, args []string) int{}

// registerCLI registers an operator subcommand with main's registry.
func registerCLI(name, summary string, run func(ctx context.Context, env *cliEnv, args []string) int) {
	cliRunners[name] = run
	register(&command{
		name:    name,
		summary: summary,
		run: func(ctx context.Context, args []string) int {
			return run(ctx, osEnv(), args)
		},
	})
}

// registerSimple registers a subcommand without verbs.
func registerSimple(name, summary string, run func(ctx context.Context, env *cliEnv, args []string) error) {
	registerCLI(name, summary, func(ctx context.Context, env *cliEnv, args []string) int {
		return exitCode(env, name, run(ctx, env, args))
	})
}

// registerVerbs registers a subcommand whose first argument picks an action.
func registerVerbs(name, summary string, actions []*cliAction) {
	registerCLI(name, summary, func(ctx context.Context, env *cliEnv, args []string) int {
		return runVerbs(ctx, env, name, actions, args)
	})
}

func runVerbs(ctx context.Context, env *cliEnv, name string, actions []*cliAction, args []string) int {
	if len(args) == 0 {
		verbsUsage(env.stderr, name, actions)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		verbsUsage(env.stdout, name, actions)
		return 0
	}
	for _, a := range actions {
		if a.name == args[0] {
			return exitCode(env, name+" "+a.name, a.run(ctx, env, args[1:]))
		}
	}
	fmt.Fprintf(env.stderr, "sluice %s: unknown action %q\n\n", name, args[0])
	verbsUsage(env.stderr, name, actions)
	return exitUsage
}

func verbsUsage(w io.Writer, name string, actions []*cliAction) {
	fmt.Fprintf(w, "Usage: sluice %s <action> [flags]\n\nActions:\n", name)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, a := range actions {
		fmt.Fprintf(tw, "  %s %s\t%s\n", a.name, a.args, a.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun 'sluice %s <action> --help' for the flags of one action.\n", name)
}

// exitCode prints err (if any) and maps it to the process exit code.
func exitCode(env *cliEnv, cmd string, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(env.stderr, "sluice %s: %v\nRun 'sluice %s --help' for usage.\n", cmd, err, cmd)
		return exitUsage
	case errors.Is(err, context.Canceled):
		return 130
	default:
		fmt.Fprintf(env.stderr, "sluice %s: %v\n", cmd, err)
		return 1
	}
}

// newFlags returns a flag set whose parse errors and help are reported the
// way exitCode expects. synopsis is the usage line after "sluice ".
func newFlags(env *cliEnv, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(synopsis, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: sluice %s\n\n%s\n\nFlags:\n", synopsis, description)
		fs.SetOutput(env.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parseArgs parses flags that may come before, between or after positional
// arguments (`topics create orders --partitions 3`), and returns the
// positional ones. Everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	// The flag package prints the usage on every parse error; we print it
	// only for --help and otherwise name the error alone.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, flag.ErrHelp
			}
			return nil, &usageError{msg: err.Error()}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// clientFlags are the flags every command that talks to the cluster takes.
type clientFlags struct {
	brokers       string
	output        string
	timeout       time.Duration
	commandConfig string // --command-config: Kafka client properties (internal/kclient)
}

// clusterFlags starts the command line of a command that talks to the
// cluster: a flag set (see newFlags) with the shared flags registered
// (--brokers, --timeout, and --output/-o when withOutput). The command adds
// its own flags, then calls parse.
func clusterFlags(env *cliEnv, synopsis, description string, withOutput bool) (*flag.FlagSet, *clientFlags) {
	cf := &clientFlags{}
	fs := newFlags(env, synopsis, description)
	cf.register(fs, env, withOutput)
	return fs, cf
}

func (f *clientFlags) register(fs *flag.FlagSet, env *cliEnv, withOutput bool) {
	def := env.getenv(brokersEnv)
	if def == "" {
		def = defaultBrokers
	}
	fs.StringVar(&f.brokers, "brokers", def, "bootstrap brokers host:port[,host:port...]; $"+brokersEnv+" sets the default")
	fs.DurationVar(&f.timeout, "timeout", defaultTimeout, "give up on the cluster after this long")
	fs.StringVar(&f.commandConfig, "command-config", "", "properties `FILE` of Kafka client settings (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take it")
	if withOutput {
		fs.StringVar(&f.output, "output", "table", "output format: table or json")
		fs.StringVar(&f.output, "o", "table", "shorthand for --output")
	}
}

// positional says how many positional arguments a command takes and what
// it says when it gets another number.
type positional struct {
	min, max int    // max < 0: no limit
	few      string // the usage error for fewer than min
	many     string // the usage error for more than max: a format taking the first extra argument
}

var (
	anyArgs = positional{max: -1}
	noArgs  = positional{many: "unexpected argument %q"}
)

// atLeastOne is one or more arguments, named what ("topic", "group").
func atLeastOne(what string) positional {
	return positional{min: 1, max: -1, few: "name at least one " + what}
}

// exactlyOne is one argument; wrong is the usage error for any other number.
func exactlyOne(wrong string) positional {
	return positional{min: 1, max: 1, few: wrong, many: wrong}
}

// parse parses the command line (flags may come before, between or after
// the positional arguments: parseArgs), checks the number of positional
// arguments, validates the shared flags, and returns the positional
// arguments. What is left to check is the command's own flags.
func (f *clientFlags) parse(fs *flag.FlagSet, args []string, want positional) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) < want.min:
		return nil, usagef("%s", want.few)
	case want.max >= 0 && len(pos) > want.max:
		if strings.Contains(want.many, "%q") {
			return nil, usagef(want.many, pos[want.max])
		}
		return nil, usagef("%s", want.many)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return pos, nil
}

func (f *clientFlags) validate() error {
	switch f.output {
	case "", "table", "json":
	default:
		return usagef("--output must be table or json, not %q", f.output)
	}
	if len(f.seeds()) == 0 {
		return usagef("--brokers is empty")
	}
	if f.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	return nil
}

func (f *clientFlags) json() bool { return f.output == "json" }

func (f *clientFlags) seeds() []string {
	var out []string
	for _, s := range strings.Split(f.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// client connects to the cluster and checks that a broker answers, so an
// unreachable cluster fails fast with a clear message instead of a timeout.
func (f *clientFlags) client(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(f.seeds()...),
		kgo.ClientID(cliClientID),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(f.timeout),
	}
	sec, err := f.security()
	if err != nil {
		return nil, err
	}
	opts = append(append(opts, sec...), extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, usagef("%v", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, min(f.timeout, 10*time.Second))
	defer cancel()
	if err := cl.Ping(pingCtx); err != nil {
		cl.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach any broker at %s: %w", f.brokers, err)
	}
	return cl, nil
}

// security returns the client options of --command-config.
func (f *clientFlags) security() ([]kgo.Opt, error) {
	if f.commandConfig == "" {
		return nil, nil
	}
	props, err := kclient.ReadFile(f.commandConfig)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	s, err := kclient.Parse(props)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", f.commandConfig, err)
	}
	return s.Opts(), nil
}

func (f *clientFlags) admin(ctx context.Context) (*kadm.Client, func(), error) {
	cl, err := f.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(f.timeout, time.Minute) / time.Millisecond))
	return adm, cl.Close, nil
}

// parseAndConnect is parse followed by adminSession, for a command whose
// own flags need no check before it connects.
func (f *clientFlags) parseAndConnect(ctx context.Context, fs *flag.FlagSet, args []string, want positional) (context.Context, *kadm.Client, []string, func(), error) {
	pos, err := f.parse(fs, args, want)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, adm, done, err := f.adminSession(ctx)
	return ctx, adm, pos, done, err
}

// adminSession connects an admin client (flags checked by parse); the
// returned context bounds the rest of the command by --timeout, and done
// closes the client and releases the context.
func (f *clientFlags) adminSession(ctx context.Context) (context.Context, *kadm.Client, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	adm, closeClient, err := f.admin(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, adm, func() { closeClient(); cancel() }, nil
}

// writeJSON writes v indented, with a trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// cliTable writes aligned columns.
type cliTable struct{ tw *tabwriter.Writer }

func newCLITable(w io.Writer, headers ...string) *cliTable {
	t := &cliTable{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.row(toAny(headers)...)
	return t
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (t *cliTable) row(cols ...any) {
	for i, c := range cols {
		if i > 0 {
			t.tw.Write([]byte{'\t'})
		}
		s := fmt.Sprint(c)
		if s == "" {
			s = "-"
		}
		// A tab or newline inside a cell would break the layout.
		s = strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
		t.tw.Write([]byte(s))
	}
	t.tw.Write([]byte{'\n'})
}

func (t *cliTable) flush() error { return t.tw.Flush() }

// int32List formats replica lists as "1,2,3".
func int32List(v []int32) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(int(n))
	}
	return strings.Join(s, ",")
}

// sortedInt32 returns a sorted copy (nil becomes empty, so JSON shows []).
func sortedInt32(v []int32) []int32 {
	out := append([]int32{}, v...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// cliKeyValues collects repeatable key=value flags.
type cliKeyValues []string

func (kv *cliKeyValues) String() string     { return strings.Join(*kv, " ") }
func (kv *cliKeyValues) Set(s string) error { *kv = append(*kv, s); return nil }

// pairs splits every entry at its first '='; the key must not be empty.
func (kv cliKeyValues) pairs(flagName string) ([][2]string, error) {
	out := make([][2]string, 0, len(kv))
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("--%s %q: want key=value", flagName, s)
		}
		out = append(out, [2]string{strings.TrimSpace(k), v})
	}
	return out, nil
}

// cliList collects a repeatable flag; each use may also be comma-separated.
type cliList []string

func (l *cliList) String() string { return strings.Join(*l, ",") }
func (l *cliList) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// errKafka turns a Kafka error into a readable message naming what failed.
// A request the client split over brokers fails as kadm's ShardErrors
// ("request X has 1 separate shard errors, first: ..."): its message is
// replaced by each broker's own error (its answer, or why it could not be
// asked).
func errKafka(what string, err error) error {
	var se *kadm.ShardErrors
	if !errors.As(err, &se) || len(se.Errs) == 0 {
		return fmt.Errorf("%s: %w", what, err)
	}
	var msgs []string
	seen := map[string]bool{}
	for _, e := range se.Errs {
		msg := e.Err.Error()
		if e.Broker.NodeID >= 0 {
			msg = fmt.Sprintf("broker %d: %s", e.Broker.NodeID, msg)
		}
		if !seen[msg] {
			seen[msg] = true
			msgs = append(msgs, msg)
		}
	}
	return &kafkaError{msg: what + ": " + strings.Join(msgs, "; "), err: err}
}

// kafkaError is an error with a message of its own that still unwraps to
// the client's error (for errors.Is, context cancellation above all).
type kafkaError struct {
	msg string
	err error
}

func (e *kafkaError) Error() string { return e.msg }
func (e *kafkaError) Unwrap() error { return e.err }

// requireBrokers checks that every id is a broker of the cluster: a request
// for another id goes nowhere, and the client says only "unknown broker".
func requireBrokers(ctx context.Context, adm *kadm.Client, ids []int32) error {
	if len(ids) == 0 {
		return nil
	}
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		return errKafka("list brokers", err)
	}
	known := bs.NodeIDs()
	for _, id := range ids {
		if !slices.Contains(known, id) {
			return fmt.Errorf("broker %d is not a broker of this cluster (its brokers: %s)", id, int32List(sortedInt32(known)))
		}
	}
	return nil
}

package main

// sluice consume: records to standard output, like
// kafka-console-consumer.sh and `kcat -C`.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	registerSimple("consume", "print the records of topics to standard output", consumeRun)
}

func consumeRun(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "consume TOPIC... [flags]",
		"Print records to standard output until --max-messages records were printed,\n"+
			"no record arrived for --idle-timeout, or the command is interrupted (all exit 0).\n\n"+
			"--from: earliest, latest (the default), an offset N, -N (N before the end),\n"+
			"or an RFC 3339 time. With --group the group's committed offsets win and --from\n"+
			"only applies to partitions without one; printed records are committed.\n\n"+
			"--format: value (the default), kv (key, separator, value), json (one object per\n"+
			"line; --output json is the same), or a template with kcat's verbs:\n"+
			"  %t topic  %p partition  %o offset  %T timestamp (ms)  %k key  %s value\n"+
			"  %K key size  %S value size  %h headers (k=v,...)  %%  \\n  \\t\n\n"+
			"--decode: keys and values in the Confluent wire format (Avro, Protobuf, JSON\n"+
			"Schema with a registry id) are printed as JSON, with schemas read from\n"+
			"--schema-registry (default $SLUICE_SCHEMA_REGISTRY, else http://localhost:8081);\n"+
			"--format json adds key_schema and value_schema (subject, version, id, type).\n\n"+
			"Example:\n  sluice consume orders --from earliest --max-messages 10 --format '%p:%o %k=%s\\n'", true)
	from := fs.String("from", "latest", "where to start: earliest, latest, N, -N or an RFC 3339 time")
	partition := fs.Int("partition", -1, "consume only this partition")
	group := fs.String("group", "", "consume as a member of this group and commit what was printed")
	maxMessages := fs.Int64("max-messages", 0, "exit after printing this many records (0: no limit)")
	idle := fs.Duration("idle-timeout", 0, "exit when no record arrived for this long (0: wait forever)")
	format := fs.String("format", "value", "value, kv, json or a template such as '%k=%s\\n'")
	keySep := fs.String("key-separator", "\t", "separator between key and value for --format kv")
	quiet := fs.Bool("quiet", false, "print no summary on standard error")
	decode := fs.Bool("decode", false, "decode Confluent wire-format keys and values (Avro, Protobuf, JSON Schema) to JSON")
	registryURL := fs.String("schema-registry", "", "schema registry URL for --decode (default $"+schemaRegistryEnv+", else http://localhost:8081)")
	registryAuth := fs.String("schema-registry-auth", "", "USER:PASSWORD for the schema registry (default $"+schemaRegistryAuthEnv+")")
	topics, err := cf.parse(fs, args, atLeastOne("topic"))
	if err != nil {
		return err
	}
	if *partition < -1 {
		return usagef("--partition must not be negative")
	}
	if *partition >= 0 && len(topics) != 1 {
		return usagef("--partition works with exactly one topic")
	}
	if *partition >= 0 && *group != "" {
		return usagef("--partition and --group exclude each other: a group assigns partitions itself")
	}
	if *maxMessages < 0 || *idle < 0 {
		return usagef("--max-messages and --idle-timeout must not be negative")
	}
	start, err := parseStartOffset(*from)
	if err != nil {
		return err
	}
	if cf.json() {
		*format = "json"
	}
	render, err := recordFormatter(*format, *keySep)
	if err != nil {
		return err
	}
	var decodeFailures int64
	if *decode {
		render = decodingFormatter(ctx, env, newSchemaDecoder(env, *registryURL, *registryAuth), *format, render, &decodeFailures)
	}

	// Check the topics (and partition) with a plain client first, so a typo
	// is an error rather than an endless wait.
	probe, err := cf.client(ctx)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, t := range topics {
		checkCtx, cancel := context.WithTimeout(ctx, cf.timeout)
		n, err := topicPartitions(checkCtx, probe, t)
		cancel()
		if err != nil {
			probe.Close()
			return err
		}
		if *partition >= n {
			probe.Close()
			return fmt.Errorf("topic %q has %d partitions; there is no partition %d", t, n, *partition)
		}
		counts[t] = n
	}
	probe.Close()

	opts := []kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond)}
	switch {
	case *group != "":
		opts = append(opts, kgo.ConsumerGroup(*group), kgo.ConsumeTopics(topics...),
			kgo.ConsumeResetOffset(start), kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll())
	default:
		assign := map[string]map[int32]kgo.Offset{}
		for _, t := range topics {
			assign[t] = map[int32]kgo.Offset{}
			for p := 0; p < counts[t]; p++ {
				if *partition < 0 || p == *partition {
					assign[t][int32(p)] = start
				}
			}
		}
		opts = append(opts, kgo.ConsumePartitions(assign))
	}
	cl, err := cf.client(ctx, opts...)
	if err != nil {
		return err
	}

	out := bufio.NewWriterSize(env.stdout, 64<<10)
	var printed int64
	var runErr error
poll:
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if *idle > 0 {
			pollCtx, cancel = context.WithTimeout(ctx, *idle)
		}
		limit := 0
		if *maxMessages > 0 {
			limit = int(*maxMessages - printed)
		}
		fetches := cl.PollRecords(pollCtx, limit)
		cancel()
		if ctx.Err() != nil {
			break // interrupted: a normal way to end a tail
		}
		if fetches.IsClientClosed() {
			break
		}
		idleOut := false
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				idleOut = true
				continue
			}
			runErr = fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
			break poll
		}
		var werr error
		fetches.EachRecord(func(r *kgo.Record) {
			if werr != nil {
				return
			}
			if werr = render(out, r); werr == nil {
				printed++
				if *group != "" {
					cl.MarkCommitRecords(r)
				}
			}
		})
		if werr == nil {
			werr = out.Flush()
		}
		if werr != nil {
			runErr = fmt.Errorf("write: %w", werr)
			break
		}
		if *group != "" {
			cl.AllowRebalance()
		}
		if (*maxMessages > 0 && printed >= *maxMessages) || (idleOut && fetches.NumRecords() == 0) {
			break
		}
	}
	if *group != "" {
		commitCtx, cancel := context.WithTimeout(context.Background(), cf.timeout)
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil && runErr == nil {
			runErr = fmt.Errorf("commit offsets of group %q: %w", *group, err)
		}
		cancel()
	}
	// Allowing rebalances first: a blocked rebalance would keep the
	// LeaveGroup of Close waiting forever.
	cl.CloseAllowingRebalance()
	if !*quiet {
		fmt.Fprintf(env.stderr, "consumed %d records\n", printed)
		if decodeFailures > 0 {
			fmt.Fprintf(env.stderr, "%d keys or values could not be decoded and were printed as they are\n", decodeFailures)
		}
	}
	return runErr
}

// parseStartOffset reads --from.
func parseStartOffset(s string) (kgo.Offset, error) {
	switch s {
	case "earliest", "beginning", "start":
		return kgo.NewOffset().AtStart(), nil
	case "latest", "end":
		return kgo.NewOffset().AtEnd(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return kgo.NewOffset().AtEnd().Relative(n), nil
		}
		return kgo.NewOffset().At(n), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return kgo.NewOffset().AfterMilli(t.UnixMilli()), nil
	}
	return kgo.Offset{}, usagef("--from %q: want earliest, latest, an offset, -N or an RFC 3339 time", s)
}

// recordFormatter returns the function that prints one record.
func recordFormatter(format, keySep string) (func(w *bufio.Writer, r *kgo.Record) error, error) {
	switch format {
	case "value":
		return func(w *bufio.Writer, r *kgo.Record) error {
			w.Write(r.Value)
			return w.WriteByte('\n')
		}, nil
	case "kv":
		return func(w *bufio.Writer, r *kgo.Record) error {
			w.Write(r.Key)
			w.WriteString(keySep)
			w.Write(r.Value)
			return w.WriteByte('\n')
		}, nil
	case "json":
		return func(w *bufio.Writer, r *kgo.Record) error {
			b, err := json.Marshal(recordToJSON(r))
			if err != nil {
				return err
			}
			w.Write(b)
			return w.WriteByte('\n')
		}, nil
	}
	if !strings.Contains(format, "%") {
		return nil, usagef("--format %q: want value, kv, json or a template with %%-verbs such as %%s", format)
	}
	tmpl, err := parseTemplate(format)
	if err != nil {
		return nil, err
	}
	return func(w *bufio.Writer, r *kgo.Record) error {
		for _, part := range tmpl {
			if part.verb == 0 {
				w.WriteString(part.lit)
				continue
			}
			switch part.verb {
			case 't':
				w.WriteString(r.Topic)
			case 'p':
				w.WriteString(strconv.Itoa(int(r.Partition)))
			case 'o':
				w.WriteString(strconv.FormatInt(r.Offset, 10))
			case 'T':
				w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
			case 'k':
				w.Write(r.Key)
			case 's':
				w.Write(r.Value)
			case 'K':
				w.WriteString(strconv.Itoa(len(r.Key)))
			case 'S':
				w.WriteString(strconv.Itoa(len(r.Value)))
			case 'h':
				for i, h := range r.Headers {
					if i > 0 {
						w.WriteByte(',')
					}
					w.WriteString(h.Key)
					w.WriteByte('=')
					w.Write(h.Value)
				}
			}
		}
		return nil // a write error surfaces at Flush
	}, nil
}

type templatePart struct {
	lit  string
	verb byte
}

func parseTemplate(format string) ([]templatePart, error) {
	var parts []templatePart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, templatePart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '%' && i+1 < len(format):
			i++
			switch v := format[i]; v {
			case '%':
				lit.WriteByte('%')
			case 't', 'p', 'o', 'T', 'k', 's', 'K', 'S', 'h':
				flush()
				parts = append(parts, templatePart{verb: v})
			default:
				return nil, usagef("--format: unknown verb %%%c", v)
			}
		case c == '%':
			return nil, usagef("--format: a lone %% at the end")
		case c == '\\' && i+1 < len(format):
			i++
			switch format[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(format[i])
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// recordJSON is one record in --format json. Keys, values and header values
// that are not valid UTF-8 are given in base64 under *_base64 instead.
type recordJSON struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"` // Unix milliseconds
	Key         *string      `json:"key"`
	KeyBase64   string       `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 string       `json:"value_base64,omitempty"`
	Headers     []headerJSON `json:"headers"`
}

type headerJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

func textOrBase64(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

func recordToJSON(r *kgo.Record) recordJSON {
	j := recordJSON{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UnixMilli(), Headers: []headerJSON{}}
	j.Key, j.KeyBase64 = textOrBase64(r.Key)
	j.Value, j.ValueBase64 = textOrBase64(r.Value)
	for _, h := range r.Headers {
		hj := headerJSON{Key: h.Key}
		hj.Value, hj.ValueBase64 = textOrBase64(h.Value)
		j.Headers = append(j.Headers, hj)
	}
	return j
}

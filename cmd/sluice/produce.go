package main

// sluice produce: one record per line of standard input, like
// kafka-console-producer.sh and `kcat -P`.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerSimple("produce", "write lines from standard input to a topic, one record per line", produceRun)
}

type produceJSON struct {
	Topic   string `json:"topic"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
}

func produceRun(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "produce TOPIC [flags] < lines",
		"Write each line of standard input to TOPIC as one record (an empty line is an\n"+
			"empty record). With --key-separator the text before the first separator is\n"+
			"the key; a line without it is an error. Records are acknowledged before the\n"+
			"command exits; the exit code is 1 if any record was not.\n\n"+
			"Example:\n  printf 'k1:hello\\nk2:world\\n' | sluice produce orders --key-separator : --header source=cli", true)
	keySep := fs.String("key-separator", "", "split each line into key and value at the first occurrence of this string")
	var headers cliKeyValues
	fs.Var(&headers, "header", "header key=value added to every record (repeatable)")
	partition := fs.Int("partition", -1, "write every record to this partition (default: by key hash, or spread when keyless)")
	acks := fs.String("acks", "all", "acknowledgements to wait for: all, 1 or 0")
	compression := fs.String("compression", "none", "none, gzip, snappy, lz4 or zstd")
	maxLine := fs.Int("max-line-bytes", 1<<20, "longest line accepted")
	quiet := fs.Bool("quiet", false, "print no summary")
	pos, err := cf.parse(fs, args, exactlyOne("name exactly one topic"))
	if err != nil {
		return err
	}
	topic := pos[0]
	hdrPairs, err := headers.pairs("header")
	if err != nil {
		return err
	}
	var recHeaders []kgo.RecordHeader
	for _, p := range hdrPairs {
		recHeaders = append(recHeaders, kgo.RecordHeader{Key: p[0], Value: []byte(p[1])})
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond)}
	switch *acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return usagef("--acks must be all, 1 or 0, not %q", *acks)
	}
	switch *compression {
	case "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return usagef("--compression must be none, gzip, snappy, lz4 or zstd, not %q", *compression)
	}
	if *partition < -1 {
		return usagef("--partition must not be negative")
	}
	if *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if *maxLine <= 0 {
		return usagef("--max-line-bytes must be positive")
	}
	opts = append(opts, kgo.ProducerBatchMaxBytes(int32(min(max(*maxLine+4096, 1<<20), 64<<20))))

	cl, err := cf.client(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := checkTopic(ctx, cf, cl, topic, int32(*partition)); err != nil {
		return err
	}

	var (
		acked, bytes atomic.Int64
		errMu        sync.Mutex
		firstErr     error
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
			return
		}
		acked.Add(1)
		bytes.Add(int64(len(r.Key) + len(r.Value)))
	}

	// Standard input is read on its own goroutine so an interrupt is noticed
	// while a terminal read blocks. It ends at EOF or a read error.
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(env.stdin)
		sc.Buffer(make([]byte, 0, 64<<10), *maxLine+1)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		if errors.Is(sc.Err(), bufio.ErrTooLong) {
			readErr <- fmt.Errorf("a line is longer than --max-line-bytes=%d", *maxLine)
			return
		}
		readErr <- sc.Err()
	}()

	var sent int64
	var stopErr error
read:
	for {
		select {
		case <-ctx.Done():
			stopErr = ctx.Err()
			break read
		case line, ok := <-lines:
			if !ok {
				break read
			}
			sent++
			r := &kgo.Record{Value: line, Headers: recHeaders}
			if *keySep != "" {
				k, v, found := strings.Cut(string(line), *keySep)
				if !found {
					stopErr = fmt.Errorf("line %d has no key separator %q", sent, *keySep)
					sent--
					break read
				}
				r.Key, r.Value = []byte(k), []byte(v)
			}
			if *partition >= 0 {
				r.Partition = int32(*partition)
			}
			cl.Produce(ctx, r, promise)
		}
	}
	if stopErr == nil {
		select {
		case stopErr = <-readErr:
			if stopErr != nil {
				stopErr = fmt.Errorf("read standard input: %w", stopErr)
			}
		default:
		}
	}
	// Wait for what was sent, even after an interrupt: those records may
	// already be on the broker.
	flushCtx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("waiting for acknowledgements: %w", err)
	}

	summary := produceJSON{Topic: topic, Records: acked.Load(), Bytes: bytes.Load()}
	if cf.json() {
		if err := writeJSON(env.stdout, summary); err != nil {
			return err
		}
	} else if !*quiet {
		fmt.Fprintf(env.stderr, "produced %d records (%d bytes) to %s\n", summary.Records, summary.Bytes, topic)
	}
	switch {
	case firstErr != nil:
		return fmt.Errorf("%d of %d records not acknowledged: %w", sent-acked.Load(), sent, firstErr)
	case errors.Is(stopErr, context.Canceled):
		return stopErr
	case stopErr != nil:
		return stopErr
	}
	return nil
}

// checkTopic fails clearly when the topic (or the partition, when >= 0) does
// not exist, instead of letting the client wait for it until the timeout.
func checkTopic(ctx context.Context, cf *clientFlags, cl *kgo.Client, topic string, partition int32) error {
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	parts, err := topicPartitions(ctx, cl, topic)
	if err != nil {
		return err
	}
	if partition >= int32(parts) {
		return fmt.Errorf("topic %q has %d partitions; there is no partition %d", topic, parts, partition)
	}
	return nil
}

// topicPartitions returns the partition count of a topic.
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, errKafka("metadata", err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return 0, fmt.Errorf("topic %q does not exist (create it with `sluice topics create %s`)", topic, topic)
			}
			return 0, errKafka("topic "+topic, err)
		}
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("topic %q: the broker did not describe it", topic)
}

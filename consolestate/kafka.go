// Package consolestate carries the console's replicated state over the
// cluster's own log: the Kafka side of consoledb's replica (KafkaLog: the
// compacted __sluice_console topic), the lag history topic
// (__sluice_console_lag: LagHistory publishes the leader's samples and
// materialises every host's lag_samples), the write lock of a single node
// (FileLock) and the cluster key's file. See DESIGN.md, "The console in a
// cluster".
package consolestate

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/consoledb"
)

// The console's topics.
const (
	StateTopic = "__sluice_console"
	LagTopic   = "__sluice_console_lag"
)

// MaxRecordBytes is the largest record batch the state topic takes
// (max.message.bytes): a comparison checkpoint must fit.
const MaxRecordBytes = 16 << 20

// DefaultLagRetention is how long the lag history topic keeps samples by
// default (console.lag.history.retention.ms).
const DefaultLagRetention = 7 * 24 * time.Hour

// TopicSpec is how a console topic is created.
type TopicSpec struct {
	Name string
	// ReplicationFactor wanted (default 3), capped at the live brokers
	// when the topic is created. min.insync.replicas is 2 when the factor
	// is 3 or more, else 1.
	ReplicationFactor int
	// Configs are the topic's configs besides min.insync.replicas.
	Configs map[string]string
	// WaitForBrokers, in a cluster, is how long creation waits for
	// ReplicationFactor live brokers before settling for fewer (the
	// brokers of a cluster start at about the same time).
	WaitForBrokers time.Duration
}

// StateTopicSpec is __sluice_console: compacted, tombstones kept 7 days,
// 16 MiB segments so that compaction has closed segments to clean.
func StateTopicSpec(rf int) TopicSpec {
	return TopicSpec{Name: StateTopic, ReplicationFactor: rf, Configs: map[string]string{
		"cleanup.policy":      "compact",
		"delete.retention.ms": strconv.FormatInt((7 * 24 * time.Hour).Milliseconds(), 10),
		"segment.bytes":       strconv.Itoa(16 << 20),
		"max.message.bytes":   strconv.Itoa(MaxRecordBytes),
	}}
}

// LagTopicSpec is __sluice_console_lag: deleted after retention, in
// segments of at most a day (or the retention, when shorter).
func LagTopicSpec(rf int, retention time.Duration) TopicSpec {
	if retention <= 0 {
		retention = DefaultLagRetention
	}
	seg := min(retention, 24*time.Hour)
	return TopicSpec{Name: LagTopic, ReplicationFactor: rf, Configs: map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   strconv.FormatInt(retention.Milliseconds(), 10),
		"segment.ms":     strconv.FormatInt(seg.Milliseconds(), 10),
	}}
}

// KafkaLog is a console topic on the cluster: a consoledb.Log. It creates
// the topic on first use. Appends are acks=all from an idempotent,
// zstd-compressing producer; Fetch reads partition 0 from any offset.
type KafkaLog struct {
	Brokers    []string
	ClientOpts []kgo.Opt
	Spec       TopicSpec
	Logger     *slog.Logger

	made time.Time

	mu       sync.Mutex
	producer *kgo.Client // Lock mu.
	consumer *kgo.Client // Lock mu (the consumer itself is used by Fetch's caller only).
	next     int64       // where consumer reads next. Lock mu.
	created  bool        // Lock mu.
	id       string      // Lock mu.
	idAt     time.Time   // Lock mu.
	closed   bool        // Lock mu.
}

// NewKafkaLog returns the log of spec on brokers.
func NewKafkaLog(brokers []string, spec TopicSpec, logger *slog.Logger, opts ...kgo.Opt) *KafkaLog {
	if spec.ReplicationFactor <= 0 {
		spec.ReplicationFactor = 3
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &KafkaLog{Brokers: brokers, ClientOpts: opts, Spec: spec, Logger: logger, made: time.Now(), next: -1}
}

var errClosed = errors.New("console log closed")

// LeaderMoveTimeout is how long a request of the console's clients rides
// out the state topic's partition without a usable leader (NOT_LEADER,
// LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS: a controlled shutdown or a
// failover moving its leadership) before it fails, within the caller's
// context: a rolling restart moves leadership in well under that.
const LeaderMoveTimeout = 15 * time.Second

// retryBackoff is the wait before retry n (from 1): 50 ms doubling to 1 s,
// quick when leadership moves in a moment, unhurried when it takes seconds.
// (kgo counts its retries: with a constant 100 ms its default 20 retries
// gave up after 2 s, in the middle of a leadership move.)
func retryBackoff(n int) time.Duration {
	return min(50*time.Millisecond<<min(max(n-1, 0), 5), time.Second)
}

// retryOpts make the clients' requests retry until LeaderMoveTimeout or
// their context ends rather than after a number of tries.
func retryOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RetryBackoffFn(retryBackoff),
		kgo.RequestRetries(math.MaxInt32),
		kgo.RetryTimeout(LeaderMoveTimeout),
	}
}

func (k *KafkaLog) client() (*kgo.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errClosed
	}
	if k.producer == nil {
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(k.Brokers...),
			kgo.ClientID("sluice-console"),
			kgo.DefaultProduceTopic(k.Spec.Name),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.ZstdCompression()),
			kgo.ProducerBatchMaxBytes(MaxRecordBytes),
			kgo.RecordDeliveryTimeout(LeaderMoveTimeout),
			kgo.MetadataMinAge(250 * time.Millisecond),
		}, append(retryOpts(), k.ClientOpts...)...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		k.producer = cl
	}
	return k.producer, nil
}

// ensureTopic creates the topic unless it exists.
func (k *KafkaLog) ensureTopic(ctx context.Context, cl *kgo.Client) error {
	k.mu.Lock()
	done := k.created
	k.mu.Unlock()
	if done {
		return nil
	}
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, k.Spec.Name)
	if err != nil {
		return fmt.Errorf("list %s: %w", k.Spec.Name, err)
	}
	if td, ok := tds[k.Spec.Name]; !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return fmt.Errorf("list brokers: %w", err)
		}
		rf := min(k.Spec.ReplicationFactor, len(brokers))
		if rf < k.Spec.ReplicationFactor && time.Since(k.made) < k.Spec.WaitForBrokers {
			return fmt.Errorf("%s: waiting for %d live brokers to create it (%d now)", k.Spec.Name, k.Spec.ReplicationFactor, len(brokers))
		}
		rf = max(rf, 1)
		configs := map[string]*string{}
		for key, v := range k.Spec.Configs {
			configs[key] = new(v)
		}
		isr := "1"
		if rf >= 3 {
			isr = "2"
		}
		configs["min.insync.replicas"] = &isr
		resp, err := adm.CreateTopic(ctx, 1, int16(rf), configs, k.Spec.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", k.Spec.Name, err)
		}
		if err == nil {
			k.Logger.Info("console topic created", "topic", k.Spec.Name, "replication_factor", rf, "min_insync_replicas", isr, "configs", k.Spec.Configs)
		}
		// Wait (a little) for the new partition to have a leader, so the
		// first reads and writes do not fail for a moment.
		for range 50 {
			offs, err := adm.ListEndOffsets(ctx, k.Spec.Name)
			if err == nil {
				if o, ok := offs.Lookup(k.Spec.Name, 0); ok && o.Err == nil {
					break
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	k.mu.Lock()
	k.created = true
	k.mu.Unlock()
	return nil
}

// retriable reports whether err is what a just-created (or moving)
// partition answers for a moment.
func retriable(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.LeaderNotAvailable) ||
		errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.NotEnoughReplicas) ||
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend) || errors.Is(err, kerr.RequestTimedOut) ||
		errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) ||
		errors.Is(err, kerr.OffsetNotAvailable) || connError(err)
}

// connError reports whether err is a connection to a broker refused or
// lost: the leader kgo's metadata still names has just stopped (kgo does
// not retry a request pinned to a broker it cannot dial).
func connError(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false // a net.Error too, but the caller's deadline
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// retryUntil waits before retry n of a call first made at start: it
// returns false (give up) when ctx ends or LeaderMoveTimeout has passed.
// kgo answers a partition without a leader in its metadata at once
// (LEADER_NOT_AVAILABLE, not retried), so the callers retry themselves.
func retryUntil(ctx context.Context, start time.Time, n int) bool {
	wait := retryBackoff(n)
	if time.Since(start)+wait > LeaderMoveTimeout {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}

// noLeaderError is the error after giving up: it says for how long.
func (k *KafkaLog) noLeaderError(op string, start time.Time, err error) error {
	return fmt.Errorf("%s %s: its partition had no usable leader for %v: %w", op, k.Spec.Name, time.Since(start).Round(100*time.Millisecond), err)
}

// Append implements consoledb.Log.
func (k *KafkaLog) Append(ctx context.Context, recs []consoledb.Record) (int64, error) {
	cl, err := k.client()
	if err != nil {
		return 0, err
	}
	if err := k.ensureTopic(ctx, cl); err != nil {
		return 0, err
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: k.Spec.Name, Partition: 0, Key: r.Key, Value: r.Value}
		for hk, hv := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: hk, Value: []byte(hv)})
		}
		krs[i] = kr
	}
	// kgo retries a batch answered with a retriable error itself (same
	// producer id and sequence numbers: the broker drops a copy it already
	// has), until LeaderMoveTimeout or ctx; it fails records only when that
	// is safe, i.e. they were not written. So producing them again here
	// (UNKNOWN_TOPIC_OR_PARTITION for a topic just created) writes them once.
	start := time.Now()
	for n := 1; ; n++ {
		res := cl.ProduceSync(ctx, krs...)
		err := res.FirstErr()
		if err == nil {
			var last int64 = -1
			for _, r := range res {
				last = max(last, r.Record.Offset)
			}
			return last, nil
		}
		if !retriable(err) && !errors.Is(err, kgo.ErrRecordTimeout) {
			return 0, fmt.Errorf("produce to %s: %w", k.Spec.Name, err)
		}
		if ctx.Err() != nil || !retryUntil(ctx, start, n) {
			return 0, k.noLeaderError("produce to", start, err)
		}
	}
}

// fetchWait is how long one Fetch waits for new records.
const fetchWait = 500 * time.Millisecond

// Fetch implements consoledb.Log. Only one goroutine may call it.
func (k *KafkaLog) Fetch(ctx context.Context, from int64) ([]consoledb.Record, error) {
	pcl, err := k.client()
	if err != nil {
		return nil, err
	}
	if err := k.ensureTopic(ctx, pcl); err != nil {
		return nil, err
	}
	k.mu.Lock()
	cl, next := k.consumer, k.next
	k.mu.Unlock()
	if cl == nil {
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(k.Brokers...),
			kgo.ClientID("sluice-console"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.Spec.Name: {0: kgo.NewOffset().At(from)}}),
			kgo.FetchMaxWait(fetchWait),
			kgo.FetchMaxPartitionBytes(MaxRecordBytes),
			kgo.MetadataMinAge(250 * time.Millisecond),
			kgo.MetadataMaxAge(5 * time.Second),
		}, append(retryOpts(), k.ClientOpts...)...)
		if cl, err = kgo.NewClient(opts...); err != nil {
			return nil, err
		}
		k.mu.Lock()
		if k.closed {
			k.mu.Unlock()
			cl.Close()
			return nil, errClosed
		}
		k.consumer, k.next, next = cl, from, from
		k.mu.Unlock()
	}
	if next != from {
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{k.Spec.Name: {0: {Epoch: -1, Offset: from}}})
		k.mu.Lock()
		k.next = from
		k.mu.Unlock()
	}
	pctx, cancel := context.WithTimeout(ctx, 2*fetchWait)
	defer cancel()
	fs := cl.PollFetches(pctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
			continue
		}
		return nil, fmt.Errorf("fetch %s: %w", k.Spec.Name, fe.Err)
	}
	var out []consoledb.Record
	fs.EachRecord(func(r *kgo.Record) {
		if r.Attrs.IsControl() || r.Offset < from {
			return
		}
		rec := consoledb.Record{Offset: r.Offset, Key: r.Key, Value: r.Value, Time: r.Timestamp}
		if len(r.Headers) > 0 {
			rec.Headers = make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				rec.Headers[h.Key] = string(h.Value)
			}
		}
		out = append(out, rec)
	})
	if len(out) > 0 {
		k.mu.Lock()
		k.next = out[len(out)-1].Offset + 1
		k.mu.Unlock()
	}
	return out, nil
}

// End implements consoledb.Log: the partition's high watermark, and the
// topic's id (read again every 30 seconds).
func (k *KafkaLog) End(ctx context.Context) (int64, string, error) {
	cl, err := k.client()
	if err != nil {
		return 0, "", err
	}
	if err := k.ensureTopic(ctx, cl); err != nil {
		return 0, "", err
	}
	adm := kadm.NewClient(cl)
	var o kadm.ListedOffset
	start := time.Now()
	for n := 1; ; n++ {
		offs, err := adm.ListEndOffsets(ctx, k.Spec.Name)
		if err != nil {
			if ctx.Err() == nil && retriable(err) && retryUntil(ctx, start, n) {
				continue
			}
			if retriable(err) {
				return 0, "", k.noLeaderError("end offset of", start, err)
			}
			return 0, "", fmt.Errorf("end offset of %s: %w", k.Spec.Name, err)
		}
		var ok bool
		if o, ok = offs.Lookup(k.Spec.Name, 0); !ok {
			return 0, "", fmt.Errorf("end offset of %s: no answer for partition 0", k.Spec.Name)
		}
		if o.Err == nil {
			break
		}
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			k.mu.Lock()
			k.created = false // deleted meanwhile: create it again
			k.mu.Unlock()
			return 0, "", fmt.Errorf("end offset of %s: %w", k.Spec.Name, o.Err)
		}
		if !retriable(o.Err) {
			return 0, "", fmt.Errorf("end offset of %s: %w", k.Spec.Name, o.Err)
		}
		if !retryUntil(ctx, start, n) {
			return 0, "", k.noLeaderError("end offset of", start, o.Err)
		}
	}
	k.mu.Lock()
	id, fresh := k.id, time.Since(k.idAt) < 30*time.Second
	k.mu.Unlock()
	if !fresh {
		if tds, err := adm.ListTopics(ctx, k.Spec.Name); err == nil {
			if td, ok := tds[k.Spec.Name]; ok && td.Err == nil && td.ID != (kadm.TopicID{}) {
				id = hex.EncodeToString(td.ID[:])
				k.mu.Lock()
				k.id, k.idAt = id, time.Now()
				k.mu.Unlock()
			}
		}
	}
	return o.Offset, id, nil
}

// Close closes the clients. Call it after the replica using the log
// stopped.
func (k *KafkaLog) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.producer != nil {
		k.producer.Close()
		k.producer = nil
	}
	if k.consumer != nil {
		k.consumer.Close()
		k.consumer = nil
	}
}

var _ consoledb.Log = (*KafkaLog)(nil)

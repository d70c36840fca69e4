package schemareg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topic is the registry's compacted topic, under Confluent's default name
// (its kafkastore.topic) so that a copied topic is found as it is.
const Topic = "_schemas"

// Log is where the registry keeps its records: the _schemas topic
// (KafkaLog), or memory in tests (MemLog).
type Log interface {
	// Append writes records in order and returns the offset of the last.
	Append(ctx context.Context, recs []Record) (int64, error)
	// Tail calls fn for every record from the start of the log, in order,
	// until ctx ends; it returns ctx's error then.
	Tail(ctx context.Context, fn func(offset int64, r Record)) error
	// Poke asks Tail to look for new records now (after another host wrote
	// some), where it would otherwise wait a moment.
	Poke()
}

// MemLog is a Log in memory, for tests and tools.
type MemLog struct {
	mu      sync.Mutex
	recs    []Record
	changed chan struct{}
}

// NewMemLog returns an empty MemLog.
func NewMemLog() *MemLog { return &MemLog{changed: make(chan struct{})} }

// Append implements Log.
func (m *MemLog) Append(_ context.Context, recs []Record) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, recs...)
	close(m.changed)
	m.changed = make(chan struct{})
	return int64(len(m.recs) - 1), nil
}

// Records returns a copy of the records written.
func (m *MemLog) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.recs...)
}

// Tail implements Log.
func (m *MemLog) Tail(ctx context.Context, fn func(int64, Record)) error {
	next := 0
	for {
		m.mu.Lock()
		recs, ch := m.recs[next:], m.changed
		m.mu.Unlock()
		for _, r := range recs {
			fn(int64(next), r)
			next++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Poke implements Log.
func (m *MemLog) Poke() {}

// KafkaLog keeps the records in the _schemas topic of a Kafka cluster (the
// local broker): one partition, compacted, replicated up to 3 times. The
// topic is created by the first write, so a broker whose registry is never
// written to has no _schemas topic.
type KafkaLog struct {
	Brokers    []string
	ClientOpts []kgo.Opt // TLS, SASL, ... for both clients
	// TopicExists, when set, says whether _schemas exists (the appliance
	// asks its broker's metadata image). Tail then opens no client until
	// it does, so a registry nobody has written to keeps no connection to
	// the cluster. Poke makes Tail look again at once.
	TopicExists func() bool

	pokeOnce sync.Once
	poke     chan struct{}

	mu       sync.Mutex
	producer *kgo.Client // Lock mu.
	created  bool        // Lock mu.
	consumer *kgo.Client // the tailing client, while Tail runs. Lock mu.
	closed   bool        // Lock mu.
}

func (k *KafkaLog) client() (*kgo.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errors.New("schema registry log closed")
	}
	if k.producer == nil {
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(k.Brokers...),
			kgo.DefaultProduceTopic(Topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0),
		}, k.ClientOpts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		k.producer = cl
	}
	return k.producer, nil
}

// ensureTopic creates _schemas (1 partition, cleanup.policy=compact,
// replication factor min(3, brokers)) unless it exists.
func (k *KafkaLog) ensureTopic(ctx context.Context, cl *kgo.Client) error {
	k.mu.Lock()
	done := k.created
	k.mu.Unlock()
	if done {
		return nil
	}
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, Topic)
	if err != nil {
		return fmt.Errorf("list %s: %w", Topic, err)
	}
	if td, ok := tds[Topic]; !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return fmt.Errorf("list brokers: %w", err)
		}
		rf := int16(min(3, len(brokers)))
		if rf < 1 {
			rf = 1
		}
		compact := "compact"
		resp, err := adm.CreateTopic(ctx, 1, rf, map[string]*string{"cleanup.policy": &compact}, Topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", Topic, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", Topic, resp.Err)
		}
	}
	k.mu.Lock()
	k.created = true
	k.mu.Unlock()
	k.Poke()
	return nil
}

// Append implements Log: a synchronous produce with acks=all.
func (k *KafkaLog) Append(ctx context.Context, recs []Record) (int64, error) {
	cl, err := k.client()
	if err != nil {
		return 0, err
	}
	if err := k.ensureTopic(ctx, cl); err != nil {
		return 0, err
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Topic: Topic, Partition: 0, Key: r.Key, Value: r.Value}
	}
	var last int64 = -1
	for {
		res := cl.ProduceSync(ctx, krs...)
		err := res.FirstErr()
		if err == nil {
			for _, r := range res {
				last = max(last, r.Record.Offset)
			}
			return last, nil
		}
		// The topic was just created: its partition may not be led yet.
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, kerr.NotLeaderForPartition) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Tail implements Log with a consumer reading the topic from its start
// (read_committed is not needed: the registry does not write in
// transactions).
func (k *KafkaLog) Tail(ctx context.Context, fn func(int64, Record)) error {
	if k.TopicExists != nil {
		for !k.TopicExists() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-k.pokeChan():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(k.Brokers...),
		kgo.ConsumeTopics(Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
	}, k.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		cl.Close()
		return errors.New("schema registry log closed")
	}
	k.consumer = cl
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.consumer = nil
		k.mu.Unlock()
		cl.Close()
	}()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				return
			}
			fn(r.Offset, Record{Key: r.Key, Value: r.Value})
		})
	}
}

// Poke implements Log: a metadata refresh, so that a topic created by
// another host is consumed without waiting for the next periodic refresh.
func (k *KafkaLog) Poke() {
	select {
	case k.pokeChan() <- struct{}{}:
	default:
	}
	k.mu.Lock()
	cl := k.consumer
	k.mu.Unlock()
	if cl != nil {
		cl.ForceMetadataRefresh()
	}
}

func (k *KafkaLog) pokeChan() chan struct{} {
	k.pokeOnce.Do(func() { k.poke = make(chan struct{}, 1) })
	return k.poke
}

// Close closes the producing client (Tail's ends with its context).
func (k *KafkaLog) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.producer != nil {
		k.producer.Close()
		k.producer = nil
	}
}

// Package kafkaview is the console's view of the cluster. It is a Kafka client
// (franz-go kgo and kadm) and nothing else: everything the console shows or
// changes goes over the Kafka protocol to whichever broker answers, so the
// console of any host sees the whole cluster, and tests run it against kfake.
//
// The console's handlers do not use this package's Client directly; each
// declares the narrow interface it consumes and Client satisfies them all.
// The types here (Snapshot, TopicDetail, Record, ...) are plain data that the
// templates render.
package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/decompress"
	"github.com/sluice-io/sluice/lag"
)

// Client talks to the cluster for the console. It is safe for concurrent use.
type Client struct {
	cl    *kgo.Client
	adm   *kadm.Client
	lag   *lag.Collector
	dec   kgo.Decompressor
	seeds []string
	log   *slog.Logger

	// bg tracks the metadata refreshes running detached from their callers;
	// Close waits for them.
	bg sync.WaitGroup

	// metaMu guards the cached metadata snapshot and the in-flight refresh.
	metaMu       sync.Mutex
	meta         *Snapshot
	metaInflight *metaCall

	// tails counts live tails so a burst of browsers cannot open unbounded
	// fetch loops against the cluster.
	tailMu   sync.Mutex
	tails    int
	maxTails int
}

// Options tune a Client. Zero values take the defaults.
type Options struct {
	// ClientID is the Kafka client id (default "sluice-console").
	ClientID string
	// RequestTimeout bounds one admin request (default 15s).
	RequestTimeout time.Duration
	// MaxTails bounds concurrent live tails (default 32).
	MaxTails int
	// Extra kgo options (TLS, SASL) appended last.
	Extra []kgo.Opt
}

// ErrTooManyTails is returned by Tail when MaxTails tails are running.
var ErrTooManyTails = errors.New("too many live tails are open; close one and retry")

// New returns a client for the cluster reachable at seeds. It does not
// connect until the first request, so a console can start before its broker.
func New(seeds []string, log *slog.Logger, o Options) (*Client, error) {
	if len(seeds) == 0 {
		return nil, errors.New("kafka: no bootstrap brokers")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.ClientID == "" {
		o.ClientID = "sluice-console"
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 15 * time.Second
	}
	if o.MaxTails <= 0 {
		o.MaxTails = 32
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(o.ClientID),
		kgo.RequestTimeoutOverhead(o.RequestTimeout),
		kgo.RecordPartitioner(choosablePartitioner{kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerLinger(0),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(time.Second),
		decompress.ClientOpt(),
	}
	opts = append(opts, o.Extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %w", err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(o.RequestTimeout / time.Millisecond))
	return &Client{
		cl:       cl,
		adm:      adm,
		lag:      lag.NewCollector(cl),
		dec:      decompress.Decompressor(), // a batch beyond decompress.MaxBytes is an error, not a page of RSS
		seeds:    append([]string(nil), seeds...),
		log:      log,
		maxTails: o.MaxTails,
	}, nil
}

// Close closes the connections and waits for background requests. Calls
// after Close fail.
func (c *Client) Close() {
	c.cl.Close()
	c.bg.Wait()
}

// Kgo is the underlying client, for page groups that need more than this
// package offers. Do not close it.
func (c *Client) Kgo() *kgo.Client { return c.cl }

// Admin is the kadm client over Kgo.
func (c *Client) Admin() *kadm.Client { return c.adm }

// Ping checks that a broker answers, with a metadata request without topics.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.adm.BrokerMetadata(ctx)
	return err
}

type partitionKey struct{}

// WithPartition returns a context that makes Produce write to partition p
// instead of letting the partitioner choose.
func withPartition(ctx context.Context, p int32) context.Context {
	return context.WithValue(ctx, partitionKey{}, p)
}

// choosablePartitioner lets a record name its partition through its context
// (the produce form's "partition" field) and otherwise defers to the default
// key-hash / sticky partitioner, so one client serves both.
type choosablePartitioner struct{ def kgo.Partitioner }

func (p choosablePartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return choosableTopicPartitioner{p.def.ForTopic(t)}
}

type choosableTopicPartitioner struct{ def kgo.TopicPartitioner }

func chosen(r *kgo.Record) (int32, bool) {
	if r.Context == nil {
		return 0, false
	}
	p, ok := r.Context.Value(partitionKey{}).(int32)
	return p, ok
}

func (p choosableTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	if _, ok := chosen(r); ok {
		return true
	}
	return p.def.RequiresConsistency(r)
}

func (p choosableTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if want, ok := chosen(r); ok && int(want) < n {
		return int(want)
	}
	return p.def.Partition(r, n)
}

func (p choosableTopicPartitioner) OnNewBatch() {
	if nb, ok := p.def.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

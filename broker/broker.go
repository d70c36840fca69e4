// Package broker holds partitions and their replicas and the semantics of
// Kafka's data path: produce (validation and offsets by storage, idempotence
// through storage's producer state, acks 0/1/all), fetch (reads as file
// regions, long-poll woken by appends), topic and partition lifecycle, topic
// configs, and producer id allocation. It knows partitions and replicas, not
// the wire format of requests: package protocol decodes requests and calls
// the methods here.
//
// The broker's view of the cluster comes from a cluster.Coordinator: a
// reconcile loop reads topics, assignments, partition states and configs on
// every change the coordinator reports, publishes them as an immutable Image
// (what Metadata answers from), and opens, leads, follows or deletes the
// local partitions accordingly.
//
// Lock order: Broker.refreshMu, then Broker.mu, then Partition.mu, then
// Partition.hwMu, then Partition.watchMu.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/storage"
)

// Config configures a Broker.
type Config struct {
	BrokerID    int32
	Rack        string
	Endpoints   []cluster.Endpoint // advertised listeners, registered with the coordinator
	Logs        *storage.Manager
	Coordinator cluster.Coordinator
	Logger      *slog.Logger

	NumPartitions            int32 // num.partitions
	DefaultReplicationFactor int16 // default.replication.factor
	AutoCreateTopics         bool  // auto.create.topics.enable
	DeleteTopicEnable        bool  // delete.topic.enable
	MaxRequestBytes          int32 // socket.request.max.bytes (a topic's max.message.bytes may not exceed it)

	// TopicDefaults are the broker-level values behind topic configs, keyed
	// by topic config name (retention.ms -> log.retention.ms's value, ...).
	// Missing entries fall back to Kafka's defaults.
	TopicDefaults map[string]TopicDefault
	// BrokerConfigs is what DescribeConfigs shows for this broker.
	BrokerConfigs []ConfigEntry

	// The consumer offsets topic, created on demand by EnsureOffsetsTopic.
	OffsetsTopicPartitions        int32 // offsets.topic.num.partitions
	OffsetsTopicReplicationFactor int16 // offsets.topic.replication.factor
	OffsetsTopicSegmentBytes      int64 // offsets.topic.segment.bytes

	// AdoptStrayLogs makes logs found on disk whose topic the coordinator
	// does not know into topics (single node: the data directory is the
	// truth). Without it such logs are left alone and reported.
	AdoptStrayLogs bool

	// ProducerIDBlockSize is how many producer ids are reserved from the
	// coordinator at a time (Kafka: 1000).
	ProducerIDBlockSize int64

	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// Image is an immutable snapshot of the cluster metadata as this broker
// last read it from the coordinator.
type Image struct {
	ClusterID  string
	Controller int32 // -1 when none
	Brokers    []cluster.Broker
	Topics     map[string]*TopicImage
	byID       map[cluster.TopicID]*TopicImage
}

// TopicImage is one topic in an Image.
type TopicImage struct {
	Name       string
	ID         cluster.TopicID
	Internal   bool // __consumer_offsets, __transaction_state
	Deleting   bool // marked for deletion
	Configs    map[string]string
	Partitions []PartitionImage
	Version    int32 // assignment version, for adding partitions
}

// PartitionImage is one partition in an Image.
type PartitionImage struct {
	Partition   int32
	Replicas    []int32
	Leader      int32 // -1 when none
	LeaderEpoch int32
	ISR         []int32
}

// Topic returns a topic by name.
func (im *Image) Topic(name string) (*TopicImage, bool) {
	t, ok := im.Topics[name]
	return t, ok
}

// TopicByID returns a topic by id.
func (im *Image) TopicByID(id cluster.TopicID) (*TopicImage, bool) {
	t, ok := im.byID[id]
	return t, ok
}

// TopicNames returns the topic names, sorted.
func (im *Image) TopicNames() []string { return slices.Sorted(maps.Keys(im.Topics)) }

// Broker returns a live broker by id.
func (im *Image) Broker(id int32) (cluster.Broker, bool) {
	for _, b := range im.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return cluster.Broker{}, false
}

// IsInternalTopic reports whether name is one of Kafka's internal topics.
func IsInternalTopic(name string) bool {
	return name == OffsetsTopic || name == "__transaction_state"
}

// OffsetsTopic is the consumer offsets topic.
const OffsetsTopic = "__consumer_offsets"

// PartitionChange tells a listener that this broker's role for a partition
// changed (OnPartitionChange).
type PartitionChange struct {
	Topic       string
	Partition   int32
	Leader      bool  // this broker now leads the partition
	LeaderEpoch int32 // the epoch it leads (or follows) at
	Deleted     bool  // the partition is gone from this broker
}

// Broker is one Kafka broker's partitions and data path.
type Broker struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	image     atomic.Pointer[Image]
	imageMu   sync.Mutex
	imageWake chan struct{} // closed and replaced on every new image

	refreshMu sync.Mutex // serialises refresh and listener registration

	mu         sync.RWMutex
	partitions map[storage.TopicPartition]*Partition
	listeners  map[int]func(PartitionChange)
	nextListen int

	pidMu    sync.Mutex
	pidBlock cluster.ProducerIDBlock
	pidNext  int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// New returns a broker; Start registers it and begins serving.
func New(cfg Config) (*Broker, error) {
	if cfg.Logs == nil || cfg.Coordinator == nil {
		return nil, errors.New("broker: Logs and Coordinator are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 1
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = 1
	}
	if cfg.OffsetsTopicPartitions <= 0 {
		cfg.OffsetsTopicPartitions = 50
	}
	if cfg.OffsetsTopicReplicationFactor <= 0 {
		cfg.OffsetsTopicReplicationFactor = 3
	}
	if cfg.OffsetsTopicSegmentBytes <= 0 {
		cfg.OffsetsTopicSegmentBytes = 100 << 20
	}
	if cfg.ProducerIDBlockSize <= 0 {
		cfg.ProducerIDBlockSize = 1000
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	b := &Broker{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "broker"),
		now:        now,
		imageWake:  make(chan struct{}),
		partitions: make(map[storage.TopicPartition]*Partition),
		listeners:  make(map[int]func(PartitionChange)),
		pidNext:    -1,
	}
	b.image.Store(&Image{Controller: -1, Topics: map[string]*TopicImage{}, byID: map[cluster.TopicID]*TopicImage{}})
	return b, nil
}

// ID is this broker's id.
func (b *Broker) ID() int32 { return b.cfg.BrokerID }

// Config returns the configuration the broker was built with.
func (b *Broker) Config() Config { return b.cfg }

// Image returns the current metadata snapshot. Do not modify it.
func (b *Broker) Image() *Image { return b.image.Load() }

// Start registers the broker with the coordinator, adopts or reports stray
// logs, loads the metadata once (so the partitions this broker leads are
// served when Start returns) and starts the reconcile loop.
func (b *Broker) Start(ctx context.Context) error {
	co := b.cfg.Coordinator
	if _, err := co.ClusterID(ctx); err != nil {
		return fmt.Errorf("broker: cluster id: %w", err)
	}
	err := co.RegisterBroker(ctx, cluster.Broker{
		ID: b.cfg.BrokerID, Rack: b.cfg.Rack, Endpoints: b.cfg.Endpoints, Timestamp: b.now().UnixMilli(),
	})
	if err != nil {
		return fmt.Errorf("broker: register: %w", err)
	}
	if err := b.handleStrayLogs(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	changes := co.Watch(runCtx)
	if err := b.refresh(ctx); err != nil {
		cancel()
		return fmt.Errorf("broker: load metadata: %w", err)
	}
	b.wg.Add(1)
	go b.run(runCtx, changes)
	return nil
}

// run re-reads the metadata on every change until ctx is done. A failed
// read is retried after a second.
func (b *Broker) run(ctx context.Context, changes <-chan cluster.Change) {
	defer b.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-retry:
		}
		retry = nil
		if err := b.refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			b.log.Warn("metadata refresh failed; retrying", "err", err)
			retry = time.After(time.Second)
		}
	}
}

// Close stops the reconcile loop and wakes every waiter. The logs belong to
// the storage manager, which the owner closes afterwards.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
	b.mu.RLock()
	for _, p := range b.partitions {
		p.notify()
	}
	b.mu.RUnlock()
	return nil
}

// handleStrayLogs deals with logs on disk whose topic the coordinator does
// not know: adopted as topics led by this broker when AdoptStrayLogs, else
// reported and left untouched.
func (b *Broker) handleStrayLogs(ctx context.Context) error {
	names, err := b.cfg.Coordinator.Topics(ctx)
	if err != nil {
		return fmt.Errorf("broker: list topics: %w", err)
	}
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	stray := map[string]int32{} // topic -> partition count
	for _, l := range b.cfg.Logs.Logs() {
		tp := l.TopicPartition()
		if known[tp.Topic] {
			continue
		}
		stray[tp.Topic] = max(stray[tp.Topic], tp.Partition+1)
	}
	for _, topic := range slices.Sorted(maps.Keys(stray)) {
		n := stray[topic]
		if !b.cfg.AdoptStrayLogs {
			b.log.Warn("logs on disk for a topic the coordinator does not know; leaving them untouched", "topic", topic, "partitions", n)
			continue
		}
		t := cluster.Topic{Name: topic, ID: cluster.NewUUID()}
		for range n {
			t.Replicas = append(t.Replicas, []int32{b.cfg.BrokerID})
		}
		if err := b.cfg.Coordinator.CreateTopic(ctx, t, nil); err != nil && !errors.Is(err, cluster.ErrTopicExists) {
			return fmt.Errorf("broker: adopt logs of topic %s: %w", topic, err)
		}
		b.log.Warn("adopted logs on disk as a topic: the metadata did not list it", "topic", topic, "partitions", n)
	}
	return nil
}

// Sync re-reads the metadata from the coordinator and applies it now,
// rather than on the next change notification.
func (b *Broker) Sync(ctx context.Context) error { return b.refresh(ctx) }

// refresh reads the whole metadata from the coordinator, publishes it and
// applies it to the local partitions.
func (b *Broker) refresh(ctx context.Context) error {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	img, err := b.readImage(ctx)
	if err != nil {
		return err
	}
	b.applyLocal(img)
	b.image.Store(img)
	b.imageMu.Lock()
	close(b.imageWake)
	b.imageWake = make(chan struct{})
	b.imageMu.Unlock()
	return nil
}

func (b *Broker) readImage(ctx context.Context) (*Image, error) {
	co := b.cfg.Coordinator
	img := &Image{Topics: map[string]*TopicImage{}, byID: map[cluster.TopicID]*TopicImage{}}
	var err error
	if img.ClusterID, err = co.ClusterID(ctx); err != nil {
		return nil, err
	}
	if img.Brokers, err = co.Brokers(ctx); err != nil {
		return nil, err
	}
	ctrl, err := co.Controller(ctx)
	if err != nil {
		return nil, err
	}
	img.Controller = ctrl.ID
	deleting, err := co.PendingDeletions(ctx)
	if err != nil {
		return nil, err
	}
	names, err := co.Topics(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		t, err := co.Topic(ctx, name)
		if errors.Is(err, cluster.ErrNoTopic) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cfgs, err := co.TopicConfig(ctx, name)
		if errors.Is(err, cluster.ErrNoTopic) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ti := &TopicImage{
			Name: name, ID: t.ID, Internal: IsInternalTopic(name), Deleting: slices.Contains(deleting, name),
			Configs: cfgs, Version: t.Version,
		}
		for p, replicas := range t.Replicas {
			pi := PartitionImage{Partition: int32(p), Replicas: replicas, Leader: -1, LeaderEpoch: -1}
			st, err := co.PartitionState(ctx, name, int32(p))
			switch {
			case errors.Is(err, cluster.ErrNoState):
			case err != nil:
				return nil, err
			default:
				pi.Leader, pi.LeaderEpoch, pi.ISR = st.Leader, st.LeaderEpoch, st.ISR
			}
			ti.Partitions = append(ti.Partitions, pi)
		}
		img.Topics[name] = ti
		img.byID[t.ID] = ti
	}
	return img, nil
}

// applyLocal opens, leads, follows and deletes local partitions to match
// img. Only refresh calls it (refreshMu held).
func (b *Broker) applyLocal(img *Image) {
	type want struct {
		topic *TopicImage
		part  PartitionImage
	}
	wanted := map[storage.TopicPartition]want{}
	for _, t := range img.Topics {
		if t.Deleting {
			continue
		}
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, b.cfg.BrokerID) && p.LeaderEpoch >= 0 {
				wanted[storage.TopicPartition{Topic: t.Name, Partition: p.Partition}] = want{t, p}
			}
		}
	}
	var events []PartitionChange

	// Remove partitions that are gone, reassigned away, or belong to an
	// older incarnation of a topic (same name, new id).
	b.mu.RLock()
	var drop []*Partition
	for tp, p := range b.partitions {
		w, ok := wanted[tp]
		if !ok || w.topic.ID != p.topicID {
			drop = append(drop, p)
		}
	}
	b.mu.RUnlock()
	for _, p := range drop {
		p.resign()
		b.mu.Lock()
		delete(b.partitions, p.tp)
		b.mu.Unlock()
		if err := b.cfg.Logs.DeleteLog(p.tp); err != nil {
			b.log.Error("delete log", "partition", p.tp.String(), "err", err)
		} else {
			b.log.Info("partition deleted", "partition", p.tp.String())
		}
		events = append(events, PartitionChange{Topic: p.tp.Topic, Partition: p.tp.Partition, Deleted: true})
	}

	for tp, w := range wanted {
		b.mu.RLock()
		p := b.partitions[tp]
		b.mu.RUnlock()
		settings, err := b.settings(w.topic.Configs)
		if err != nil {
			b.log.Error("bad topic config; using broker defaults", "topic", tp.Topic, "err", err)
			settings, _ = b.settings(nil)
		}
		if p == nil {
			l, err := b.cfg.Logs.GetOrCreateLog(tp, settings.log)
			if err != nil {
				b.log.Error("open log", "partition", tp.String(), "err", err)
				continue
			}
			p = newPartition(b, tp, w.topic.ID, l)
			b.mu.Lock()
			b.partitions[tp] = p
			b.mu.Unlock()
		}
		if ev, changed := p.apply(w.part, settings); changed {
			events = append(events, ev)
		}
	}

	if len(events) == 0 {
		return
	}
	b.mu.RLock()
	ls := slices.Collect(maps.Values(b.listeners))
	b.mu.RUnlock()
	for _, ev := range events {
		for _, fn := range ls {
			fn(ev)
		}
	}
}

// OnPartitionChange registers fn to learn when this broker starts or stops
// leading a partition, or drops one. fn is first called for every partition
// this broker leads now, then for each change, in order, from the reconcile
// goroutine: it must not block for long (hand work to your own goroutine)
// and must not call OnPartitionChange. The returned function unregisters.
func (b *Broker) OnPartitionChange(fn func(PartitionChange)) (cancel func()) {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	b.mu.Lock()
	id := b.nextListen
	b.nextListen++
	b.listeners[id] = fn
	current := slices.Collect(maps.Values(b.partitions))
	b.mu.Unlock()
	slices.SortFunc(current, func(x, y *Partition) int {
		if c := cmpString(x.tp.Topic, y.tp.Topic); c != 0 {
			return c
		}
		return int(x.tp.Partition - y.tp.Partition)
	})
	for _, p := range current {
		if leader, epoch := p.Leader(); leader {
			fn(PartitionChange{Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: true, LeaderEpoch: epoch})
		}
	}
	return func() {
		b.mu.Lock()
		delete(b.listeners, id)
		b.mu.Unlock()
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Partition returns the local partition, or UNKNOWN_TOPIC_OR_PARTITION.
// It does not check leadership; the methods that need it do.
func (b *Broker) Partition(topic string, partition int32) (*Partition, error) {
	b.mu.RLock()
	p := b.partitions[storage.TopicPartition{Topic: topic, Partition: partition}]
	b.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	img := b.Image()
	t, ok := img.Topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, errUnknownTopicOrPartition
	}
	// The topic exists but this broker holds no replica of the
	// partition: the client's metadata is stale.
	return nil, errNotLeader
}

// LeaderPartition returns the local partition if this broker leads it:
// UNKNOWN_TOPIC_OR_PARTITION when no such partition exists,
// NOT_LEADER_OR_FOLLOWER when another broker leads it.
func (b *Broker) LeaderPartition(topic string, partition int32) (*Partition, error) {
	p, err := b.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	if leader, _ := p.Leader(); !leader {
		return nil, errNotLeader
	}
	return p, nil
}

// Partitions returns every local partition.
func (b *Broker) Partitions() []*Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return slices.Collect(maps.Values(b.partitions))
}

// waitImageFor is waitImage bounded by wait; with wait <= 0 it does not
// wait at all (and reports success).
func (b *Broker) waitImageFor(ctx context.Context, wait time.Duration, cond func(*Image) bool) error {
	if wait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return b.waitImage(ctx, cond)
}

// waitImage blocks until cond holds for the current image or ctx is done.
func (b *Broker) waitImage(ctx context.Context, cond func(*Image) bool) error {
	for {
		b.imageMu.Lock()
		wake := b.imageWake
		b.imageMu.Unlock()
		if cond(b.Image()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

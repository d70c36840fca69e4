// Package broker holds partitions and their replicas and the semantics of
// Kafka's data path, topic and partition lifecycle, topic configs, producer
// id allocation and the follower side of replication. It knows partitions
// and replicas, not the wire format of requests: package protocol decodes
// requests and calls the methods here, and encodes what they return.
//
// # Produce and Fetch
//
// The data path is two operations, Produce (produce.go) and Fetch
// (fetch.go), each a whole request: Produce converts message sets, appends
// each partition's batches as leader (storage validates them and assigns
// offsets; idempotence through storage's producer state; the broker's own
// policy on each batch through storage.Admit) and, for acks=all, waits in
// the purgatory for the high watermark. Fetch reads file regions within the
// request's budget (KIP-74, fetch.max.bytes), answers a diverged follower
// with where its log diverged (KIP-595), records a follower's position, and
// long-polls on partition notifications for min_bytes. A produce goes
// protocol -> broker -> storage -> broker -> protocol.
//
// Their requests and results are plain structs (ProduceRequest,
// FetchRequest), not kmsg's types: the broker stays ignorant of request
// versions and encodings (protocol folds a version into plain fields, such
// as MessageSets or a -1 leader epoch), the operations are tested without
// the wire, and what comes next — transactions (read_committed and the last
// stable offset where FetchRequest.Isolation is taken, the transactional id
// beside the batches' admission) and authorisation (a refusal per partition
// before the append or the read) — lands on fields and steps here, not in
// the handlers. Client quotas are the exception: they measure a client
// (principal and client id) and mute its connection, both protocol's, so
// package protocol records and throttles around these calls (package
// quota). The partitions carry
// their outcome beside their input, so a request costs no allocation beyond
// its partition list, which the caller owns (on its stack for the common
// single-partition produce). A WaitHook lets the caller, protocol, let its
// connection read on while an operation parks, without broker importing
// protocol. Errors are classified once, in errors.go (ErrorCode).
//
// The broker's view of the cluster comes from a cluster.Coordinator: a
// reconcile loop reads topics, assignments, partition states and configs on
// every change the coordinator reports, publishes them as an immutable Image
// (what Metadata answers from), and opens, leads, follows or deletes the
// local partitions accordingly.
//
// Lock order: Broker.refreshMu, then Broker.publishMu, then Broker.mu, then Partition.mu, then
// Partition.hwMu, then Partition.watchMu.
package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/jonboulle/clockwork"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/loglevels"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/security"
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
	FetchMaxBytes            int32 // fetch.max.bytes: most record bytes in one Fetch answer (55 MiB)

	// TopicDefaults are the broker-level values behind topic configs, keyed
	// by topic config name (retention.ms -> log.retention.ms's value, ...).
	// Missing entries fall back to Kafka's defaults.
	TopicDefaults map[string]TopicDefault
	// BrokerConfigs is what DescribeConfigs shows for this broker.
	BrokerConfigs []ConfigEntry
	// Static is the broker's configuration as read at start; with it, and
	// a coordinator that keeps them, the broker takes dynamic broker
	// configs (dynamicconfigs.go). nil: static configs only.
	Static *config.Config
	// Loggers are the process's log levels, for BROKER_LOGGER configs
	// (loggers.go); nil: not settable at run time.
	Loggers *loglevels.Levels

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

	// Replication (several brokers). Zero values take Kafka's defaults.
	ReplicaLagTimeMax            time.Duration // replica.lag.time.max.ms, 30s: a follower this far behind leaves the ISR
	ReplicaFetchWaitMax          time.Duration // replica.fetch.wait.max.ms, 500ms
	ReplicaFetchMinBytes         int32         // replica.fetch.min.bytes, 1
	ReplicaFetchMaxBytes         int32         // replica.fetch.max.bytes, 1 MiB per partition
	ReplicaFetchResponseMaxBytes int32         // replica.fetch.response.max.bytes, 10 MiB
	ReplicaFetchBackoff          time.Duration // replica.fetch.backoff.ms, 1s
	NumReplicaFetchers           int           // num.replica.fetchers, 1: fetchers per leader broker
	// OnDynamic, when set, is called with the dynamic broker configs in
	// force each time they change (first with the image read at start),
	// for the parts of the process outside the broker that apply dynamic
	// keys (the listener's connection limits). It must not block.
	OnDynamic            func(config.Dynamic)
	ReplicaSocketTimeout time.Duration // replica.socket.timeout.ms, 30s
	// InterBrokerListener (inter.broker.listener.name) is the listener
	// followers fetch from; default: the first advertised listener.
	InterBrokerListener string
	// InterBrokerAuth is how this broker authenticates to the others on
	// that listener (TLS, SASL); nil: plaintext.
	InterBrokerAuth *InterBrokerAuth

	// Clock is the broker's time: follower fetch times, the ISR manager's
	// checks and retries (nil = the real clock; tests pass a
	// clockwork.FakeClock and advance it).
	Clock clockwork.Clock

	// Metrics is the registry the broker's traffic and state metrics go to
	// (metrics.go), labelled with BrokerID; nil is metrics.Default().
	Metrics *metrics.Registry

	// Authorizer decides what each principal may do (authorizer.class.name,
	// over the coordinator's ACLs); nil when none is configured: every
	// request is allowed, as in Kafka without an authorizer.
	Authorizer *security.Authorizer
}

// Image is an immutable snapshot of the cluster metadata as this broker
// last read it from the coordinator.
type Image struct {
	ClusterID  string
	Controller int32 // -1 when none
	Brokers    []cluster.Broker
	Topics     map[string]*TopicImage
	byID       map[cluster.TopicID]*TopicImage
	// Dynamic are the dynamic broker configs of this broker and of the
	// cluster default; topicDefaults the topic defaults they give (nil:
	// Config.TopicDefaults).
	Dynamic       config.Dynamic
	topicDefaults map[string]TopicDefault
	// throttled are the partitions whose replica on this broker the
	// topics' throttled-replica lists name (nil: none).
	throttled map[storage.TopicPartition]throttleSide
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
	// Adding and Removing are the replicas an ongoing reassignment adds and
	// removes (nil when none).
	Adding, Removing []int32
	// StateVersion is the store version of the partition state read.
	StateVersion int32
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

// IsInternalTopic reports whether name is one of Kafka's internal topics,
// or one of the console's (IsConsoleTopic).
func IsInternalTopic(name string) bool {
	return name == OffsetsTopic || name == TransactionStateTopic || IsConsoleTopic(name)
}

// ConsoleTopicPrefix starts the names of the console's internal topics:
// __sluice_console (its replicated state) and __sluice_console_lag (lag
// history). See DESIGN.md, "The console in a cluster".
const ConsoleTopicPrefix = "__sluice_console"

// IsConsoleTopic reports whether name is one of the console's internal
// topics. Only the console, from a broker's host, may produce to them
// (checkClientAppend, ProduceRequest.ConsoleWriter).
func IsConsoleTopic(name string) bool { return strings.HasPrefix(name, ConsoleTopicPrefix) }

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
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	clock clockwork.Clock

	image     atomic.Pointer[Image] // published: what Metadata answers from
	applied   atomic.Pointer[Image] // the last image applied to the local partitions
	applyWake chan struct{}         // a newer image was published (cap 1)
	imageMu   sync.Mutex
	imageWake chan struct{} // closed and replaced on every new image

	// deletesPending: the last applyLocal could not delete some logs;
	// applyLoop tries again.
	deletesPending atomic.Bool

	refreshMu   sync.Mutex      // serialises applying images and listener registration
	publishMu   sync.Mutex      // serialises reading and publishing images (a later read wins)
	lastDynamic *config.Dynamic // handed to Config.OnDynamic last (Lock publishMu)

	mu         sync.RWMutex
	partitions map[storage.TopicPartition]*Partition
	listeners  map[int]func(PartitionChange)
	txnL       txnListeners
	nextListen int

	pidMu    sync.Mutex
	pidBlock cluster.ProducerIDBlock
	pidNext  int64

	fetchers *replicaFetchers // follower side of replication
	isr      *isrManager      // leader side: ISR changes

	mx            *metrics.Broker             // this broker's metrics handle (metrics.go)
	purgatory     [numDelayedOps]atomic.Int64 // requests parked now, by kind
	removeCollect func()                      // unregisters the scrape-time callback

	// Replication throttles (replicationquota.go): the leader's and the
	// follower's quota; removeRepl unregisters the reassignment gauge.
	leaderQuota, followerQuota *replicationQuota
	removeRepl                 func()

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
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 55 << 20
	}
	if cfg.ProducerIDBlockSize <= 0 {
		cfg.ProducerIDBlockSize = 1000
	}
	if cfg.ReplicaLagTimeMax <= 0 {
		cfg.ReplicaLagTimeMax = 30 * time.Second
	}
	if cfg.ReplicaFetchWaitMax <= 0 {
		cfg.ReplicaFetchWaitMax = 500 * time.Millisecond
	}
	if cfg.ReplicaFetchMinBytes <= 0 {
		cfg.ReplicaFetchMinBytes = 1
	}
	if cfg.ReplicaFetchMaxBytes <= 0 {
		cfg.ReplicaFetchMaxBytes = 1 << 20
	}
	if cfg.ReplicaFetchResponseMaxBytes <= 0 {
		cfg.ReplicaFetchResponseMaxBytes = 10 << 20
	}
	if cfg.ReplicaFetchBackoff <= 0 {
		cfg.ReplicaFetchBackoff = time.Second
	}
	if cfg.NumReplicaFetchers <= 0 {
		cfg.NumReplicaFetchers = 1
	}
	if cfg.ReplicaSocketTimeout <= 0 {
		cfg.ReplicaSocketTimeout = 30 * time.Second
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	b := &Broker{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "broker"),
		now:        clock.Now,
		clock:      clock,
		imageWake:  make(chan struct{}),
		applyWake:  make(chan struct{}, 1),
		partitions: make(map[storage.TopicPartition]*Partition),
		listeners:  make(map[int]func(PartitionChange)),
		pidNext:    -1,
	}
	b.image.Store(&Image{Controller: -1, Topics: map[string]*TopicImage{}, byID: map[cluster.TopicID]*TopicImage{}})
	reg := cfg.Metrics
	if reg == nil {
		reg = metrics.Default()
	}
	b.cfg.Metrics = reg
	b.mx = reg.Broker(cfg.BrokerID)
	var rmx *metrics.Replication
	rmx, b.removeRepl = reg.Replication(cfg.BrokerID, b.reassignmentBytesRemaining)
	b.leaderQuota, b.followerQuota = newReplicationQuotas(rmx)
	b.fetchers = newReplicaFetchers(b)
	b.isr = newISRManager(b, cfg.ReplicaLagTimeMax)
	return b, nil
}

// ID is this broker's id.
func (b *Broker) ID() int32 { return b.cfg.BrokerID }

// FetchMaxBytes is fetch.max.bytes: the most record bytes one Fetch answer
// carries, whatever the request asks for (Kafka's min(max_bytes,
// fetch.max.bytes)).
func (b *Broker) FetchMaxBytes() int32 { return b.cfg.FetchMaxBytes }

// Config returns the configuration the broker was built with.
func (b *Broker) Config() Config { return b.cfg }

// Image returns the current metadata snapshot. Do not modify it.
func (b *Broker) Image() *Image { return b.image.Load() }

// Authorizer returns the broker's authorizer, nil when none is configured.
func (b *Broker) Authorizer() *security.Authorizer { return b.cfg.Authorizer }

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
	b.isr.start()
	changes := co.Watch(runCtx)
	if err := b.refresh(ctx); err != nil {
		cancel()
		b.fetchers.close()
		b.isr.stop()
		return fmt.Errorf("broker: load metadata: %w", err)
	}
	b.removeCollect = b.mx.OnCollect(b.collectMetrics)
	b.wg.Add(2)
	go b.run(runCtx, changes)
	go b.applyLoop(runCtx)
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
		if err := b.publish(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			b.log.Warn("metadata refresh failed; retrying", "err", err)
			retry = time.After(time.Second)
		}
	}
}

// applyLoop applies the latest published image to the local partitions
// whenever one is published: apart from run, so that Metadata stays
// current while thousands of local logs are being created.
func (b *Broker) applyLoop(ctx context.Context) {
	defer b.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.applyWake:
		case <-retry:
		}
		b.refreshMu.Lock()
		img := b.image.Load()
		if img != b.applied.Load() || b.deletesPending.Load() {
			b.applyLocal(img)
			b.applied.Store(img)
			b.wakeImageWaiters()
		}
		retry = nil
		if b.deletesPending.Load() {
			retry = time.After(deleteRetry)
		}
		b.refreshMu.Unlock()
	}
}

// deleteRetry is how soon a log deletion that failed is tried again when no
// new image comes first.
const deleteRetry = 5 * time.Second

// Close stops the reconcile loop and wakes every waiter. The logs belong to
// the storage manager, which the owner closes afterwards.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if b.cancel != nil {
		b.cancel()
	}
	if b.removeCollect != nil {
		b.removeCollect()
	}
	b.removeRepl()
	b.wg.Wait()
	b.StopReplication()
	b.mu.RLock()
	for _, p := range b.partitions {
		p.notify(WakeOnAny)
	}
	b.mu.RUnlock()
	return nil
}

// StopReplication stops fetching from leaders and writing ISR changes (a
// broker about to shut down, after its controlled shutdown moved leadership
// away). Close calls it too.
func (b *Broker) StopReplication() {
	b.fetchers.close()
	b.isr.stop()
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
	b.publishMu.Lock()
	img, err := b.readImage(ctx)
	if err != nil {
		b.publishMu.Unlock()
		return err
	}
	b.image.Store(img)
	b.applyThrottles(img)
	b.notifyDynamic(img)
	b.publishMu.Unlock()
	b.wakeImageWaiters()
	b.applyLocal(img)
	b.applied.Store(img)
	b.wakeImageWaiters()
	if b.deletesPending.Load() {
		b.wakeApply() // applyLoop tries again after deleteRetry
	}
	return nil
}

// publish reads the metadata and publishes it as the image Metadata
// answers from, then hands it to applyLoop. Publishing does not wait for
// the local partitions: Metadata names the cluster's current leaders even
// while this broker is still creating thousands of new local logs (a client
// sent here too early gets NOT_LEADER_OR_FOLLOWER and retries), as Kafka's
// metadata cache is updated apart from its replica manager.
func (b *Broker) publish(ctx context.Context) error {
	b.publishMu.Lock()
	img, err := b.readImage(ctx)
	if err != nil {
		b.publishMu.Unlock()
		return err
	}
	b.image.Store(img)
	b.applyThrottles(img)
	b.notifyDynamic(img)
	b.publishMu.Unlock()
	b.wakeImageWaiters()
	b.wakeApply()
	return nil
}

// wakeApply tells applyLoop to look at the published image.
func (b *Broker) wakeApply() {
	select {
	case b.applyWake <- struct{}{}:
	default:
	}
}

func (b *Broker) wakeImageWaiters() {
	b.imageMu.Lock()
	close(b.imageWake)
	b.imageWake = make(chan struct{})
	b.imageMu.Unlock()
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
			pi := PartitionImage{Partition: int32(p), Replicas: replicas, Leader: -1, LeaderEpoch: -1,
				Adding: t.Adding[int32(p)], Removing: t.Removing[int32(p)]}
			st, err := co.PartitionState(ctx, name, int32(p))
			switch {
			case errors.Is(err, cluster.ErrNoState):
			case err != nil:
				return nil, err
			default:
				pi.Leader, pi.LeaderEpoch, pi.ISR, pi.StateVersion = st.Leader, st.LeaderEpoch, st.ISR, st.Version
			}
			ti.Partitions = append(ti.Partitions, pi)
		}
		img.Topics[name] = ti
		img.byID[t.ID] = ti
	}
	if err := b.readDynamic(ctx, img, b.image.Load()); err != nil {
		return nil, err
	}
	img.throttled = throttledOf(img.Topics, b.cfg.BrokerID)
	return img, nil
}

// applyLocal opens, leads, follows and deletes local partitions to match
// img. refreshMu should be held (refresh, applyLoop).
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
	// A partition leaves the map only once its log's directory is renamed
	// away: one whose deletion failed stays, resigned (it serves nothing),
	// so that no new log is opened over its directory (a topic made again
	// under the name would find the old records); its deletion is tried
	// again on the next image or after deleteRetry.
	var dropped []*Partition
	pending := false
	for _, p := range drop {
		if !p.resign() {
			// Gone from this broker's service from now on, whether or
			// not its log is deleted at the first attempt.
			events = append(events, PartitionChange{Topic: p.tp.Topic, Partition: p.tp.Partition, Deleted: true})
		}
		if _, ok := b.cfg.Logs.Log(p.tp); ok {
			if err := b.cfg.Logs.DeleteLog(p.tp); err != nil {
				b.log.Error("delete log; trying again later", "partition", p.tp.String(), "err", err)
				pending = true
				continue
			}
			b.log.Info("partition deleted", "partition", p.tp.String())
		}
		b.mu.Lock()
		delete(b.partitions, p.tp)
		b.mu.Unlock()
		dropped = append(dropped, p)
	}
	b.deletesPending.Store(pending)
	b.forgetTopicMetrics(dropped)

	settingsByTopic := map[string]topicSettings{}
	settingsOf := func(tp storage.TopicPartition, t *TopicImage) topicSettings {
		settings, ok := settingsByTopic[tp.Topic]
		if !ok {
			var err error
			settings, err = b.settings(t.Configs)
			if err != nil {
				b.log.Error("bad topic config; using broker defaults", "topic", tp.Topic, "err", err)
				settings, _ = b.settings(nil)
			}
			settingsByTopic[tp.Topic] = settings
		}
		return settings
	}

	// apply brings the local partitions of tps in line with the image (in
	// parallel: a failover brings thousands at once), records the ones to
	// follow, and hands the fetchers the partitions followed so far.
	follow := map[storage.TopicPartition]followTarget{}
	var evMu sync.Mutex
	start := time.Now()
	applied := 0
	apply := func(tps []storage.TopicPartition) {
		type pending struct {
			p        *Partition
			part     PartitionImage
			settings topicSettings
		}
		var changes, leading []pending
		for _, tp := range tps {
			w := wanted[tp]
			b.mu.RLock()
			p := b.partitions[tp]
			b.mu.RUnlock()
			if p == nil {
				continue // its log could not be opened
			}
			settings := settingsOf(tp, w.topic)
			if !p.current(w.part, settings) {
				// Changed; unchanged ones (most, on most refreshes)
				// are left alone.
				if w.part.Leader == b.cfg.BrokerID {
					leading = append(leading, pending{p, w.part, settings})
				} else {
					changes = append(changes, pending{p, w.part, settings})
				}
			}
			if w.part.Leader >= 0 && w.part.Leader != b.cfg.BrokerID {
				follow[tp] = followTarget{p: p, leader: w.part.Leader, epoch: w.part.LeaderEpoch}
			}
		}
		do := func(changes []pending) {
			parallelDo(len(changes), applyWorkers, func(i int) {
				c := changes[i]
				if ev, changed := c.p.apply(c.part, c.settings); changed {
					evMu.Lock()
					events = append(events, ev)
					evMu.Unlock()
				}
			})
			applied += len(changes)
		}
		// Followers first, and the fetchers told at once: in a
		// failover the partitions this broker now follows have new
		// leaders that wait for its fetches to accept acks=all
		// produce, while its own new leaderships wait for the other
		// brokers' fetches, not for its followers.
		do(changes)
		b.fetchers.update(follow)
		do(leading)
	}

	var existing, fresh []storage.TopicPartition
	b.mu.RLock()
	for tp, w := range wanted {
		switch p := b.partitions[tp]; {
		case p == nil:
			fresh = append(fresh, tp)
		case p.topicID == w.topic.ID:
			existing = append(existing, tp)
		default:
			// An older incarnation of the topic whose log is not
			// deleted yet: the new one waits for it.
		}
	}
	b.mu.RUnlock()
	apply(existing)

	// New local replicas (a new topic, a broker joining, a reassignment):
	// their logs are created in chunks, each followed as soon as it
	// exists, so leaders do not see thousands of followers go silent while
	// the rest are created.
	const chunk = 256
	for len(fresh) > 0 {
		n := min(chunk, len(fresh))
		part := fresh[:n]
		fresh = fresh[n:]
		cfgs := make([]storage.LogConfig, len(part))
		for i, tp := range part {
			cfgs[i] = settingsOf(tp, wanted[tp].topic).log
		}
		// One call per chunk: the logs are opened in parallel and each
		// log dir fsynced once for the chunk.
		logs, errs := b.cfg.Logs.CreateLogs(part, cfgs)
		for i, err := range errs {
			if err != nil {
				b.log.Error("open log", "partition", part[i].String(), "err", err)
			}
		}
		b.mu.Lock()
		for i, tp := range part {
			if logs[i] != nil {
				b.partitions[tp] = newPartition(b, tp, wanted[tp].topic.ID, logs[i])
			}
		}
		b.mu.Unlock()
		apply(part)
	}
	if d := time.Since(start); d > time.Second {
		b.log.Info("applied metadata", "partitions_changed", applied, "took", d)
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

// applyWorkers bounds the partitions applyLocal changes at once. Becoming
// leader no longer waits for the disk (the new epoch reaches the log's
// leader-epoch checkpoint with its next flush, storage.Log.syncEpochs);
// what is left per partition is its locks, a config change and the
// waiters it wakes, which a failover does for hundreds at once.
const applyWorkers = 64

// parallelDo runs fn(0..n-1) on up to workers goroutines and waits.
func parallelDo(n, workers int, fn func(i int)) {
	var g errgroup.Group
	g.SetLimit(workers)
	for i := range n {
		g.Go(func() error { fn(i); return nil })
	}
	g.Wait()
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
		if c := cmp.Compare(x.tp.Topic, y.tp.Topic); c != 0 {
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

// waitImage blocks until cond holds for the image this broker has applied
// to its local partitions (so a topic waited for is served here) or ctx is
// done.
func (b *Broker) waitImage(ctx context.Context, cond func(*Image) bool) error {
	for {
		b.imageMu.Lock()
		wake := b.imageWake
		b.imageMu.Unlock()
		img := b.applied.Load()
		if img == nil {
			img = b.Image()
		}
		if cond(img) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

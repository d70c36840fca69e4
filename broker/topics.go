package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
)

// TopicSpec is a topic to create (CreateTopics, auto-creation).
type TopicSpec struct {
	Name              string
	Partitions        int32 // -1 = num.partitions
	ReplicationFactor int16 // -1 = default.replication.factor
	// Assignment gives each partition's replicas explicitly; Partitions and
	// ReplicationFactor must then be -1.
	Assignment [][]int32
	Configs    map[string]string
}

// ErrExcessiveBatch is what a request gets that would create or change
// more metadata records than cluster.MaxRecordsPerRequest: POLICY_VIOLATION
// with Kafka's own message.
var ErrExcessiveBatch = &Error{Code: kerr.PolicyViolation, Msg: "Unable to perform excessively large batch operation."}

// TopicRecords is how many metadata records creating a topic makes, as
// Kafka counts them: the topic, each partition and each config. partitions
// is the count asked for (-1: num.partitions), assignments the number of
// explicit replica lists (which decide the count when given). A request
// whose topics add up to more than cluster.MaxRecordsPerRequest gets
// ErrExcessiveBatch for every topic, as Kafka refuses the whole batch.
func (b *Broker) TopicRecords(partitions int32, assignments, configs int) int64 {
	n := int64(partitions)
	switch {
	case assignments > 0:
		n = int64(assignments)
	case partitions == -1:
		n = int64(b.cfg.NumPartitions)
	case partitions < 0:
		n = 0 // refused anyway (INVALID_PARTITIONS)
	}
	return 1 + n + int64(configs)
}

// CreatedTopic describes a topic CreateTopic made (or would make).
type CreatedTopic struct {
	ID                cluster.TopicID
	Partitions        int32
	ReplicationFactor int16
	Configs           []ConfigEntry
}

// liveBrokers returns the live brokers (at least this one, before the
// first refresh).
func (b *Broker) liveBrokers() []cluster.Broker {
	img := b.Image()
	if len(img.Brokers) == 0 {
		return []cluster.Broker{{ID: b.cfg.BrokerID, Rack: b.cfg.Rack}}
	}
	return img.Brokers
}

func (b *Broker) liveBrokerIDs() []int32 {
	img := b.Image()
	ids := make([]int32, 0, len(img.Brokers))
	for _, br := range img.Brokers {
		ids = append(ids, br.ID)
	}
	if len(ids) == 0 {
		ids = append(ids, b.cfg.BrokerID) // before the first refresh
	}
	return ids
}

// CreateTopic validates spec and creates the topic; with validateOnly it
// only validates. It then waits up to wait (0: not at all) for every
// partition to have a leader (REQUEST_TIMED_OUT when the wait ends first;
// the topic exists anyway, as in Kafka). ctx bounds the coordinator calls. Errors: INVALID_TOPIC_EXCEPTION,
// TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
// INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, INVALID_CONFIG,
// POLICY_VIOLATION (a config out of range, or more metadata records than
// cluster.MaxRecordsPerRequest, checked before anything is allocated).
func (b *Broker) CreateTopic(ctx context.Context, spec TopicSpec, validateOnly bool, wait time.Duration) (CreatedTopic, error) {
	t, created, err := b.prepareTopic(spec)
	if err != nil {
		return created, err
	}
	if validateOnly {
		return created, nil
	}
	cctx, cancel := storeWrite(ctx)
	err = b.cfg.Coordinator.CreateTopic(cctx, t, spec.Configs)
	cancel()
	if err != nil {
		if errors.Is(err, cluster.ErrTopicExists) {
			return created, errorf(kerr.TopicAlreadyExists, "Topic '%s' already exists.", spec.Name)
		}
		return created, storeErr(err)
	}
	b.log.Info("topic created", "topic", spec.Name, "partitions", created.Partitions, "replication_factor", created.ReplicationFactor, "configs", spec.Configs)
	if err := b.waitLeaders(ctx, wait, spec.Name, t.ID, int(created.Partitions)); err != nil {
		return created, err
	}
	return created, nil
}

func (b *Broker) prepareTopic(spec TopicSpec) (cluster.Topic, CreatedTopic, error) {
	var created CreatedTopic
	if err := cluster.ValidateTopicName(spec.Name); err != nil {
		return cluster.Topic{}, created, errorf(kerr.InvalidTopicException, "%v", err)
	}
	img := b.Image()
	if _, ok := img.Topics[spec.Name]; ok {
		return cluster.Topic{}, created, errorf(kerr.TopicAlreadyExists, "Topic '%s' already exists.", spec.Name)
	}
	if other := cluster.CollisionIn(spec.Name, maps.Keys(img.Topics)); other != "" {
		return cluster.Topic{}, created, errorf(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", spec.Name, other)
	}
	live := b.liveBrokerIDs()
	var assignment [][]int32
	if len(spec.Assignment) > 0 {
		if spec.Partitions != -1 || spec.ReplicationFactor != -1 {
			return cluster.Topic{}, created, errorf(kerr.InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
		}
		if b.TopicRecords(-1, len(spec.Assignment), len(spec.Configs)) > cluster.MaxRecordsPerRequest {
			return cluster.Topic{}, created, ErrExcessiveBatch
		}
		known := func(id int32) bool { return slices.Contains(live, id) }
		if err := cluster.ValidateAssignment(spec.Assignment, known); err != nil {
			return cluster.Topic{}, created, errorf(kerr.InvalidReplicaAssignment, "%v", err)
		}
		assignment = spec.Assignment
	} else {
		n, rf := spec.Partitions, spec.ReplicationFactor
		if n == -1 {
			n = b.cfg.NumPartitions
		}
		if rf == -1 {
			rf = b.cfg.DefaultReplicationFactor
		}
		if n <= 0 {
			return cluster.Topic{}, created, errorf(kerr.InvalidPartitions, "Number of partitions must be larger than 0.")
		}
		if rf <= 0 {
			return cluster.Topic{}, created, errorf(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0.")
		}
		if int(rf) > len(live) {
			return cluster.Topic{}, created, errorf(kerr.InvalidReplicationFactor, "Replication factor: %d larger than available brokers: %d.", rf, len(live))
		}
		if b.TopicRecords(n, 0, len(spec.Configs)) > cluster.MaxRecordsPerRequest {
			return cluster.Topic{}, created, ErrExcessiveBatch
		}
		var err error
		if assignment, err = cluster.Assign(b.liveBrokers(), int(n), int(rf), 0, nil); err != nil {
			return cluster.Topic{}, created, errorf(kerr.InvalidReplicationFactor, "%v", err)
		}
	}
	rf := len(assignment[0])
	if err := b.validateTopicConfigs(spec.Configs, rf); err != nil {
		return cluster.Topic{}, created, err
	}
	t := cluster.Topic{Name: spec.Name, ID: cluster.NewUUID(), Replicas: assignment}
	created = CreatedTopic{
		ID: t.ID, Partitions: int32(len(assignment)), ReplicationFactor: int16(rf),
		Configs: b.describeTopicConfigs(spec.Configs, false),
	}
	return t, created, nil
}

// waitLeaders waits up to wait until the image shows topic id with n
// partitions, each with a leader.
func (b *Broker) waitLeaders(ctx context.Context, wait time.Duration, name string, id cluster.TopicID, n int) error {
	err := b.waitImageFor(ctx, wait, func(img *Image) bool {
		t, ok := img.Topics[name]
		if !ok || t.ID != id || len(t.Partitions) < n {
			return false
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return errorf(kerr.RequestTimedOut, "topic %s was created but its partitions have no leader yet", name)
	}
	return nil
}

// AutoCreates reports whether a Metadata request that names the unknown
// topic name and allows auto-creation creates it: any topic when
// auto.create.topics.enable is on, and __consumer_offsets whatever that key
// says, as Kafka's ZooKeeper-mode brokers do (KafkaApis.createInternalTopic):
// tools that read the offsets topic (Burrow, monitoring agents) then start
// on a cluster where no group has existed yet.
func (b *Broker) AutoCreates(name string) bool {
	return name == OffsetsTopic || b.cfg.AutoCreateTopics
}

// AutoCreateRecords is how many metadata records auto-creating name makes
// (TopicRecords): __consumer_offsets has its own partition count and three
// configs.
func (b *Broker) AutoCreateRecords(name string) int64 {
	if name == OffsetsTopic {
		return b.TopicRecords(b.cfg.OffsetsTopicPartitions, 0, 3)
	}
	return b.TopicRecords(-1, 0, 0)
}

// AutoCreateTopic creates an unknown topic asked for by Metadata when
// AutoCreates allows it (UNKNOWN_TOPIC_OR_PARTITION otherwise;
// INVALID_TOPIC_EXCEPTION for a bad name). __consumer_offsets is created
// with its own settings (offsets.topic.*). It waits for leaders until ctx is
// done and returns nil if the topic exists afterwards, even without leaders
// yet (Metadata then shows LEADER_NOT_AVAILABLE, as Kafka does).
func (b *Broker) AutoCreateTopic(ctx context.Context, name string) error {
	if !b.AutoCreates(name) {
		return errUnknownTopicOrPartition
	}
	if name == OffsetsTopic {
		return b.existsAfter(name, b.EnsureOffsetsTopic(ctx))
	}
	if err := cluster.ValidateTopicName(name); err != nil {
		return errorf(kerr.InvalidTopicException, "%v", err)
	}
	_, err := b.CreateTopic(ctx, TopicSpec{Name: name, Partitions: -1, ReplicationFactor: -1}, false, untilDeadline(ctx))
	return b.existsAfter(name, err)
}

// existsAfter turns the outcome of a create into nil when the topic exists
// (someone else created it, or it was created but leaders are still pending).
func (b *Broker) existsAfter(name string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := b.Image().Topics[name]; ok {
		return nil
	}
	if errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(err, kerr.RequestTimedOut) {
		return nil
	}
	return err
}

// EnsureOffsetsTopic creates __consumer_offsets if it does not exist:
// offsets.topic.num.partitions partitions, offsets.topic.replication.factor
// capped at the number of live brokers (so a single node works out of the
// box), cleanup.policy=compact, segment.bytes=offsets.topic.segment.bytes.
// It waits for the partitions' leaders until ctx is done.
func (b *Broker) EnsureOffsetsTopic(ctx context.Context) error {
	rf := min(int(b.cfg.OffsetsTopicReplicationFactor), len(b.liveBrokerIDs()))
	return b.ensureInternalTopic(ctx, TopicSpec{
		Name: OffsetsTopic, Partitions: b.cfg.OffsetsTopicPartitions, ReplicationFactor: int16(rf),
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"segment.bytes":    strconv.FormatInt(b.cfg.OffsetsTopicSegmentBytes, 10),
			"compression.type": "producer",
		},
	})
}

// DeleteTopic marks a topic for deletion and waits up to wait (0: not at
// all) for it to be gone (REQUEST_TIMED_OUT otherwise; the deletion still
// happens).
// Errors: UNKNOWN_TOPIC_OR_PARTITION, TOPIC_DELETION_DISABLED,
// INVALID_TOPIC_EXCEPTION for internal topics.
func (b *Broker) DeleteTopic(ctx context.Context, name string, wait time.Duration) error {
	if !b.DeleteTopicEnabled() {
		return errorf(kerr.TopicDeletionDisabled, "delete.topic.enable is false")
	}
	t, ok := b.Image().Topics[name]
	if !ok {
		return errUnknownTopicOrPartition
	}
	if t.Internal {
		return errorf(kerr.InvalidTopicException, "Topic %s is an internal topic and cannot be deleted", name)
	}
	cctx, cancel := storeWrite(ctx)
	err := b.cfg.Coordinator.MarkTopicForDeletion(cctx, name)
	cancel()
	if err != nil {
		if errors.Is(err, cluster.ErrNoTopic) {
			return errUnknownTopicOrPartition
		}
		return storeErr(err)
	}
	b.log.Info("topic marked for deletion", "topic", name)
	err = b.waitImageFor(ctx, wait, func(img *Image) bool {
		cur, ok := img.Topics[name]
		return !ok || cur.ID != t.ID
	})
	if err != nil {
		return errorf(kerr.RequestTimedOut, "topic %s is marked for deletion but not gone yet", name)
	}
	return nil
}

// DeleteTopicEnabled is delete.topic.enable: whether DeleteTopic may
// delete at all.
func (b *Broker) DeleteTopicEnabled() bool { return b.cfg.DeleteTopicEnable }

// DeleteTopicByID is DeleteTopic for a topic named by id.
func (b *Broker) DeleteTopicByID(ctx context.Context, id cluster.TopicID, wait time.Duration) (string, error) {
	t, ok := b.Image().TopicByID(id)
	if !ok {
		return "", errorf(kerr.UnknownTopicID, "no topic with id %s", id)
	}
	return t.Name, b.DeleteTopic(ctx, t.Name, wait)
}

// Internal topics (__consumer_offsets) are written by the broker alone: a
// client's Produce and DeleteRecords on one get INVALID_TOPIC_EXCEPTION, as
// Kafka refuses them even without ACLs (ReplicaManager: "Cannot append to
// internal topic", "Cannot delete records of internal topic"), and so do
// DeleteTopics (DeleteTopic). A forged record would otherwise be loaded as
// someone else's committed offset, and deleted records could leave a
// group's partition without its state. CreatePartitions gets
// INVALID_PARTITIONS: the partition count decides where every group lives
// (Kafka's topic tool refuses it with the same words).

// checkClientAppend returns the error a client's Produce to topic gets when
// topic is internal, else nil. The group coordinator appends to
// __consumer_offsets through Partition.AppendRecords, not through this.
// The console's topics (IsConsoleTopic) are written by the console with an
// ordinary Produce from a broker's host: consoleWriter says whether the
// request comes from one (ProduceRequest.ConsoleWriter).
func checkClientAppend(topic string, consoleWriter bool) error {
	if consoleWriter && IsConsoleTopic(topic) {
		return nil
	}
	if IsInternalTopic(topic) {
		return errorf(kerr.InvalidTopicException, "Cannot append to internal topic %s", topic)
	}
	return nil
}

// CreatePartitions grows a topic to count partitions, placing the new ones
// by assignment when given (one replica list per new partition) or by the
// controller's assignment; with validateOnly it only validates. It waits up
// to wait for the new partitions' leaders. Errors:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
// INVALID_REPLICATION_FACTOR, POLICY_VIOLATION (more new partitions than
// cluster.MaxRecordsPerRequest).
func (b *Broker) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool, wait time.Duration) error {
	for attempt := 0; ; attempt++ {
		t, ok := b.Image().Topics[name]
		if !ok || t.Deleting {
			return errUnknownTopicOrPartition
		}
		if t.Internal {
			return errorf(kerr.InvalidPartitions, "The number of partitions for the internal topic %s cannot be changed.", name)
		}
		cur := int32(len(t.Partitions))
		if count < cur {
			return errorf(kerr.InvalidPartitions, "Topic currently has %d partitions, which is higher than the requested %d.", cur, count)
		}
		if count == cur {
			return errorf(kerr.InvalidPartitions, "Topic already has %d partitions.", cur)
		}
		rf := len(t.Partitions[0].Replicas)
		add := int(count - cur)
		if add > cluster.MaxRecordsPerRequest {
			return ErrExcessiveBatch
		}
		live := b.liveBrokerIDs()
		if assignment != nil {
			if len(assignment) != add {
				return errorf(kerr.InvalidReplicaAssignment, "Increasing the number of partitions by %d but %d assignments provided.", add, len(assignment))
			}
			if err := cluster.ValidateAssignment(assignment, func(id int32) bool { return slices.Contains(live, id) }); err != nil {
				return errorf(kerr.InvalidReplicaAssignment, "%v", err)
			}
			if len(assignment[0]) != rf {
				return errorf(kerr.InvalidReplicaAssignment, "Inconsistent replication factor between partitions, partition 0 has %d while the new partitions have %d.", rf, len(assignment[0]))
			}
		} else {
			var err error
			assignment, err = cluster.Assign(b.liveBrokers(), add, rf, int(cur), nil)
			if err != nil {
				return errorf(kerr.InvalidReplicationFactor, "%v", err)
			}
		}
		for _, p := range t.Partitions {
			if len(p.Adding) > 0 || len(p.Removing) > 0 {
				return errorf(kerr.ReassignmentInProgress, "A partition reassignment is in progress for topic '%s'.", name)
			}
		}
		if validateOnly {
			return nil
		}
		nt := cluster.Topic{Name: name, ID: t.ID, Version: t.Version}
		for _, p := range t.Partitions {
			nt.Replicas = append(nt.Replicas, slices.Clone(p.Replicas))
		}
		nt.Replicas = append(nt.Replicas, assignment...)
		cctx, cancel := storeWrite(ctx)
		_, err := b.cfg.Coordinator.SetTopicAssignment(cctx, nt)
		cancel()
		if errors.Is(err, cluster.ErrBadVersion) && attempt < 3 {
			// Someone else changed the topic; re-read and retry.
			if err := b.refresh(ctx); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, cluster.ErrNoTopic) {
			return errUnknownTopicOrPartition
		}
		if err != nil {
			return storeErr(err)
		}
		b.log.Info("partitions added", "topic", name, "from", cur, "to", count)
		return b.waitLeaders(ctx, wait, name, t.ID, int(count))
	}
}

// String renders a topic spec for logs.
func (s TopicSpec) String() string {
	return fmt.Sprintf("%s(partitions=%d rf=%d)", s.Name, s.Partitions, s.ReplicationFactor)
}

// storeErr is what a client gets when the coordinator failed: with the
// metadata store out of reach (no ZooKeeper session), NOT_CONTROLLER — the
// broker cannot change metadata now; Kafka clients look the controller up
// again and retry — rather than UNKNOWN_SERVER_ERROR, which ends their
// request. Other errors pass through (ErrorCode maps them).
func storeErr(err error) error {
	if errors.Is(err, cluster.ErrUnavailable) {
		return errorf(kerr.NotController, "this broker cannot reach the cluster metadata store (ZooKeeper) right now: %v", err)
	}
	return err
}

// storeWrite bounds a metadata write a request makes (a topic created,
// deleted or given partitions) by ctx and storeWriteBound, not by the
// request's timeout_ms: Kafka writes the znodes first and applies timeout_ms
// only to the wait for the change to take effect, so that a topic answered
// with REQUEST_TIMED_OUT exists. (A short timeout_ms — 1 ms, or what a
// request of many topics had left for its last ones — used to cancel the
// write of a topic that was then answered REQUEST_TIMED_OUT, as if created.)
// The coordinator fails sooner when its store is away (a ZooKeeper
// session's timeout).
func storeWrite(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, storeWriteBound)
}

const storeWriteBound = 30 * time.Second

// untilDeadline is how long ctx has left (30 s when it has no deadline).
func untilDeadline(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 30 * time.Second
}

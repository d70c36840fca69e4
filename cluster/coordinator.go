// Package cluster holds what the broker needs from a metadata store — the
// Coordinator interface — together with the controller logic that works on
// top of any Coordinator (replica assignment, leader election, topic
// deletion) and the standalone Coordinator that keeps a single node's
// metadata in a file in its data directory.
//
// The interface is shaped after Kafka's ZooKeeper layout so that a ZooKeeper
// implementation (package zkcoord) maps each method onto the znodes Kafka
// uses:
//
//	ClusterID                     /cluster/id
//	RegisterBroker, Brokers       /brokers/ids/<id> (ephemeral)
//	NextBrokerID                  /brokers/seqid
//	Campaign, Controller          /controller (ephemeral), /controller_epoch
//	CreateTopic, Topic, Topics,
//	SetTopicAssignment            /brokers/topics/<t> (assignment, topic_id; version for CAS)
//	PartitionState, CreatePartitionState,
//	SetPartitionState             /brokers/topics/<t>/partitions/<p>/state (CAS on version)
//	TopicConfig, SetTopicConfig,
//	ReadTopicConfig,
//	SetTopicConfigIf              /config/topics/<t> (version for CAS)
//	MarkTopicForDeletion,
//	PendingDeletions, DeleteTopic /admin/delete_topics/<t>
//	AllocateProducerIDs           /latest_producer_id_block (CAS loop)
//	Credentials                   /config/users/<name> (SCRAM), /config/changes
//	ACLs, UpdateACLs, WatchACLs   /kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name>,
//	                              /kafka-acl-changes, /kafka-acl-extended-changes (acls.go)
//	Watch                         ZooKeeper watches on the nodes above
//
// Optional interfaces: StateBatcher (many partition states per ZooKeeper
// transaction) and LegacyReassigner (/admin/reassign_partitions). A
// coordinator that can fence refuses partition-state writes made under
// WithControllerEpoch once that controller epoch is over.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Errors every Coordinator returns (wrapped or not) so that callers can test
// them with errors.Is regardless of the implementation.
var (
	ErrTopicExists   = errors.New("cluster: topic already exists")
	ErrNoTopic       = errors.New("cluster: topic does not exist")
	ErrNoState       = errors.New("cluster: partition state does not exist")
	ErrStateExists   = errors.New("cluster: partition state already exists")
	ErrBadVersion    = errors.New("cluster: version mismatch (compare-and-set lost)")
	ErrBrokerExists  = errors.New("cluster: broker id already registered")
	ErrClosed        = errors.New("cluster: coordinator closed")
	ErrNotController = errors.New("cluster: this broker is not the controller")
	// ErrUnavailable marks errors caused by the store being out of reach
	// (zkcoord: no ZooKeeper session, or the connection lost mid-request).
	// It is transient: a write may or may not have happened, so re-read
	// before retrying. Brokers answer clients NOT_CONTROLLER for it, which
	// Kafka clients retry after looking the controller up again.
	ErrUnavailable = errors.New("cluster: metadata store unavailable")
)

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Listener         string // listener name, e.g. "PLAINTEXT"
	SecurityProtocol string // "PLAINTEXT"
	Host             string
	Port             int32
}

func (e Endpoint) String() string { return fmt.Sprintf("%s://%s:%d", e.Listener, e.Host, e.Port) }

// Broker is a live broker's registration (/brokers/ids/<id>).
type Broker struct {
	ID        int32
	Rack      string // "" when broker.rack is unset
	Endpoints []Endpoint
	Timestamp int64 // registration time, Unix ms
}

// Endpoint returns the broker's endpoint for listener, falling back to its
// first endpoint when listener is "" or unknown.
func (b Broker) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	if listener == "" && len(b.Endpoints) > 0 {
		return b.Endpoints[0], true
	}
	return Endpoint{}, false
}

// TopicID is a topic's 16-byte UUID (KIP-516).
type TopicID [16]byte

// Topic is a topic's identity and replica assignment (/brokers/topics/<t>).
type Topic struct {
	Name string
	ID   TopicID
	// Replicas holds, for each partition (index = partition id), the broker
	// ids of its replicas in preference order; the first is the preferred
	// leader. During a reassignment it is the union of the target and the
	// original replicas (KIP-455).
	Replicas [][]int32
	// Adding and Removing are, for partitions being reassigned, the
	// replicas being added and removed (the znode's adding_replicas and
	// removing_replicas). The target replica set is Replicas minus
	// Removing. Both are nil or empty when nothing is being reassigned.
	Adding, Removing map[int32][]int32
	// Version is the store's version of this record, for compare-and-set in
	// SetTopicAssignment. Ignored by CreateTopic.
	Version int32
}

// Clone returns a deep copy.
func (t Topic) Clone() Topic {
	c := t
	c.Replicas = make([][]int32, len(t.Replicas))
	for i, r := range t.Replicas {
		c.Replicas[i] = slices.Clone(r)
	}
	c.Adding = cloneReplicaMap(t.Adding)
	c.Removing = cloneReplicaMap(t.Removing)
	return c
}

func cloneReplicaMap(m map[int32][]int32) map[int32][]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[int32][]int32, len(m))
	for p, r := range m {
		out[p] = slices.Clone(r)
	}
	return out
}

// Reassigning reports whether partition p is being reassigned.
func (t Topic) Reassigning(p int32) bool { return len(t.Adding[p]) > 0 || len(t.Removing[p]) > 0 }

// Target returns the replicas partition p ends up with: its replicas minus
// those being removed.
func (t Topic) Target(p int32) []int32 {
	if int(p) >= len(t.Replicas) {
		return nil
	}
	rm := t.Removing[p]
	out := make([]int32, 0, len(t.Replicas[p]))
	for _, r := range t.Replicas[p] {
		if !slices.Contains(rm, r) {
			out = append(out, r)
		}
	}
	return out
}

// Original returns the replicas partition p had before its reassignment
// began: its replicas minus those being added.
func (t Topic) Original(p int32) []int32 {
	if int(p) >= len(t.Replicas) {
		return nil
	}
	add := t.Adding[p]
	out := make([]int32, 0, len(t.Replicas[p]))
	for _, r := range t.Replicas[p] {
		if !slices.Contains(add, r) {
			out = append(out, r)
		}
	}
	return out
}

// PartitionState is a partition's leadership
// (/brokers/topics/<t>/partitions/<p>/state).
type PartitionState struct {
	Leader          int32 // -1 when the partition has no leader (offline)
	LeaderEpoch     int32
	ISR             []int32
	ControllerEpoch int32 // epoch of the controller that last wrote the leader
	// Version is the store's version of this record; SetPartitionState
	// succeeds only when it matches the stored one.
	Version int32
}

// Clone returns a deep copy.
func (s PartitionState) Clone() PartitionState {
	c := s
	c.ISR = slices.Clone(s.ISR)
	return c
}

// ControllerInfo says which broker is the controller and since which epoch.
type ControllerInfo struct {
	ID    int32 // -1 when there is no controller
	Epoch int32
}

// ProducerIDBlock is a range of producer ids [Start, End] handed to one
// broker; InitProducerId allocates from it.
type ProducerIDBlock struct {
	Start, End int64
}

// Change is a set of kinds of metadata that changed, delivered by Watch.
type Change uint32

const (
	ChangeBrokers    Change = 1 << iota // a broker registered or went away
	ChangeTopics                        // a topic was created or deleted, or its assignment changed
	ChangePartitions                    // a partition state (leader, epoch, ISR) changed
	ChangeConfigs                       // a topic config changed
	ChangeController                    // the controller changed
	ChangeDeletions                     // a topic was marked for deletion
	ChangeAll        = ChangeBrokers | ChangeTopics | ChangePartitions | ChangeConfigs | ChangeController | ChangeDeletions | ChangeBrokerConfigs
)

// ChangeBrokerConfigs: a dynamic broker config changed (BrokerConfigStore).
const ChangeBrokerConfigs Change = ChangeDeletions << 1

// DefaultBrokerEntity names the cluster-wide default of the dynamic broker
// configs, as Kafka's /config/brokers/<default>.
const DefaultBrokerEntity = "<default>"

// BrokerConfigStore is implemented by coordinators that keep Kafka's
// dynamic broker configs: the overrides of one broker (entity: its id) and
// the cluster-wide default (DefaultBrokerEntity), /config/brokers/<entity>
// in ZooKeeper. A change is delivered by Watch as ChangeBrokerConfigs on
// every broker.
type BrokerConfigStore interface {
	// BrokerConfig returns the entity's dynamic configs (empty, not nil,
	// when none are set).
	BrokerConfig(ctx context.Context, entity string) (map[string]string, error)
	// SetBrokerConfig replaces the entity's dynamic configs.
	SetBrokerConfig(ctx context.Context, entity string, configs map[string]string) error
}

// Coordinator is the one seam between the broker and its metadata store.
// Implementations are safe for concurrent use. Every method that can block on
// the store takes a context.
type Coordinator interface {
	// ClusterID returns the cluster id, creating it (a random 22-character
	// base64 UUID) the first time any broker asks.
	ClusterID(ctx context.Context) (string, error)

	// RegisterBroker announces b as live for as long as the coordinator
	// session lasts (an ephemeral node). ErrBrokerExists if another live
	// broker holds the id.
	RegisterBroker(ctx context.Context, b Broker) error
	// Brokers returns the live brokers sorted by id.
	Brokers(ctx context.Context) ([]Broker, error)
	// NextBrokerID generates a broker id for broker.id=-1: Kafka's
	// /brokers/seqid sequence plus reserved.broker.max.id (1000), so the
	// first generated id is 1001. The caller keeps it (meta.properties).
	NextBrokerID(ctx context.Context) (int32, error)

	// Campaign tries to make brokerID the controller. When there is no
	// controller it takes the role and increments the controller epoch; it
	// returns the controller after the attempt (which may be another broker).
	Campaign(ctx context.Context, brokerID int32) (ControllerInfo, error)
	// Controller returns the current controller (ID -1 when there is none).
	Controller(ctx context.Context) (ControllerInfo, error)

	// CreateTopic stores a new topic with its assignment and its config
	// overrides (only keys that differ from the defaults). ErrTopicExists if
	// a topic of that name exists, including one pending deletion.
	CreateTopic(ctx context.Context, t Topic, configs map[string]string) error
	// Topics returns every topic name, sorted, including topics marked for
	// deletion.
	Topics(ctx context.Context) ([]string, error)
	// Topic returns one topic (ErrNoTopic if it does not exist).
	Topic(ctx context.Context, name string) (Topic, error)
	// SetTopicAssignment replaces a topic's assignment (adding partitions)
	// when t.Version matches the stored version (else ErrBadVersion) and
	// returns the new version.
	SetTopicAssignment(ctx context.Context, t Topic) (int32, error)

	// MarkTopicForDeletion records a request to delete the topic; the
	// controller completes it with DeleteTopic. ErrNoTopic if absent.
	MarkTopicForDeletion(ctx context.Context, name string) error
	// PendingDeletions returns the topics marked for deletion, sorted.
	PendingDeletions(ctx context.Context) ([]string, error)
	// DeleteTopic removes a topic, its partition states, its config and its
	// deletion mark.
	DeleteTopic(ctx context.Context, name string) error

	// PartitionState returns a partition's state (ErrNoState if none yet).
	PartitionState(ctx context.Context, topic string, partition int32) (PartitionState, error)
	// CreatePartitionState stores the first state of a partition
	// (ErrStateExists if present) and returns its version.
	CreatePartitionState(ctx context.Context, topic string, partition int32, s PartitionState) (int32, error)
	// SetPartitionState replaces a partition's state when s.Version matches
	// the stored version (else ErrBadVersion) and returns the new version.
	SetPartitionState(ctx context.Context, topic string, partition int32, s PartitionState) (int32, error)

	// TopicConfig returns a topic's config overrides (empty, not nil, when
	// there are none; ErrNoTopic if the topic does not exist).
	TopicConfig(ctx context.Context, topic string) (map[string]string, error)
	// SetTopicConfig replaces a topic's config overrides.
	SetTopicConfig(ctx context.Context, topic string, configs map[string]string) error
	// ReadTopicConfig reads a topic's config overrides from the store
	// itself, not from a cache kept by watches (zkcoord: a sync, then
	// /config/topics/<t>), so it sees every change acknowledged before it
	// was called, through whichever broker: what DescribeConfigs answers,
	// and the base of a read-modify-write. version is opaque: pass it to
	// SetTopicConfigIf. ErrNoTopic if the topic does not exist;
	// ErrUnavailable, without waiting, while the store is out of reach.
	ReadTopicConfig(ctx context.Context, topic string) (configs map[string]string, version int32, err error)
	// SetTopicConfigIf is SetTopicConfig when the overrides are still at
	// version (as ReadTopicConfig returned it), else ErrBadVersion: an
	// IncrementalAlterConfigs built on them then reads them again rather
	// than undoing a change made meanwhile through another broker.
	SetTopicConfigIf(ctx context.Context, topic string, configs map[string]string, version int32) error

	// AllocateProducerIDs reserves the next block of size producer ids for
	// brokerID. Blocks never overlap, across restarts and brokers.
	AllocateProducerIDs(ctx context.Context, brokerID int32, size int64) (ProducerIDBlock, error)

	// ACLStore keeps the ACLs (acls.go): /kafka-acl, /kafka-acl-extended.
	ACLStore

	// Watch returns a channel that delivers the kinds of change made since
	// the previous receive, coalesced, until ctx is done (then it is closed).
	// It is level-triggered: on a receive, re-read what you care about. A
	// change made before Watch returns may or may not be delivered, so read
	// the state after calling Watch.
	Watch(ctx context.Context) <-chan Change

	// Close ends the session (live registration and controllership go away)
	// and releases resources.
	Close() error

	// SCRAM credentials: /config/users/<name> (credentials.go).
	Credentials
}

// StateWrite is one partition state write of WriteStates.
type StateWrite struct {
	Topic     string
	Partition int32
	// State is what to write. For an update, State.Version is the version
	// it replaces (compare-and-set); for a create it is ignored.
	State  PartitionState
	Create bool
}

// StateBatcher is implemented by coordinators that write many partition
// states in few round trips (zkcoord: a few ZooKeeper transactions for
// thousands of states). Each write has the meaning of CreatePartitionState
// or SetPartitionState; the result holds each write's new version or error.
type StateBatcher interface {
	WritePartitionStates(ctx context.Context, writes []StateWrite) ([]int32, []error)
}

// WriteStates writes the states with co's StateBatcher when it has one, one
// at a time otherwise.
func WriteStates(ctx context.Context, co Coordinator, writes []StateWrite) ([]int32, []error) {
	if len(writes) == 0 {
		return nil, nil
	}
	if b, ok := co.(StateBatcher); ok {
		return b.WritePartitionStates(ctx, writes)
	}
	versions := make([]int32, len(writes))
	errs := make([]error, len(writes))
	for i, w := range writes {
		if w.Create {
			versions[i], errs[i] = co.CreatePartitionState(ctx, w.Topic, w.Partition, w.State)
		} else {
			versions[i], errs[i] = co.SetPartitionState(ctx, w.Topic, w.Partition, w.State)
		}
	}
	return versions, errs
}

type controllerEpochKey struct{}

// WithControllerEpoch marks the partition state writes made with ctx as the
// controller's at epoch. A coordinator that can fence (zkcoord) refuses them
// with ErrNotController unless its session holds that controller epoch and
// the epoch has not moved on in the store, so a controller that lost its
// role without noticing cannot overwrite its successor's decisions.
func WithControllerEpoch(ctx context.Context, epoch int32) context.Context {
	return context.WithValue(ctx, controllerEpochKey{}, epoch)
}

// ControllerEpochFrom returns the epoch WithControllerEpoch put in ctx.
func ControllerEpochFrom(ctx context.Context) (int32, bool) {
	e, ok := ctx.Value(controllerEpochKey{}).(int32)
	return e, ok
}

// Reassignment is one partition's target replica list, as requested through
// /admin/reassign_partitions (kafka-reassign-partitions.sh --zookeeper).
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// LegacyReassigner is implemented by coordinators that hold reassignment
// requests outside the topics (zkcoord: the /admin/reassign_partitions
// znode). The controller moves them into the topics' Adding and Removing
// and then clears them.
type LegacyReassigner interface {
	Reassignments(ctx context.Context) ([]Reassignment, error)
	SetReassignments(ctx context.Context, rs []Reassignment) error
}

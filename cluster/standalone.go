package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// StandaloneFile is the name of the standalone coordinator's metadata file.
const StandaloneFile = "sluice-metadata.json"

// standaloneFormat is the version written into the file; a file of another
// version is refused rather than misread.
const standaloneFormat = 1

// Standalone is the Coordinator of a single node: the metadata Kafka keeps in
// ZooKeeper, kept in one JSON file in the data directory and rewritten
// atomically (temporary file, fsync, rename, fsync of the directory) on every
// change. Live brokers and the controller are session state, as ephemeral
// znodes are: they are not persisted and vanish on Close.
type Standalone struct {
	path string

	mu         sync.Mutex
	closed     bool
	state      standaloneState
	brokers    map[int32]Broker
	controller int32 // -1 none
	watchers   map[*watcher]struct{}
	done       chan struct{} // closed by Close; ends the Watch goroutines
	wg         sync.WaitGroup

	// configVersions are the topics' config versions (ReadTopicConfig,
	// SetTopicConfigIf), in memory: every change of a topic's configs
	// (and its creation and deletion) takes the next configSeq.
	configVersions map[string]int32
	configSeq      int32
}

// standaloneState is what the file holds.
type standaloneState struct {
	Format          int                               `json:"format"`
	ClusterID       string                            `json:"cluster_id,omitempty"`
	ControllerEpoch int32                             `json:"controller_epoch"`
	BrokerSeq       int32                             `json:"broker_seqid,omitempty"`
	Topics          map[string]*storedTopic           `json:"topics"`
	Deletions       []string                          `json:"delete_topics,omitempty"`
	ProducerIDBlock *ProducerIDBlock                  `json:"latest_producer_id_block,omitempty"`
	ACLs            map[string]json.RawMessage        `json:"acls,omitempty"` // ACL node path -> Kafka's node (standalone_acls.go)
	Configs         map[string]map[string]string      `json:"topic_configs,omitempty"`
	Users           map[string]map[string]string      `json:"user_configs,omitempty"`     // user -> SCRAM mechanism -> credential text (standalone_credentials.go)
	States          map[string]map[string]storedState `json:"partition_states,omitempty"` // topic -> partition -> state
	BrokerConfigs   map[string]map[string]string      `json:"broker_configs,omitempty"`   // entity (id or <default>) -> dynamic configs
	ClientConfigs   map[string]map[string]string      `json:"client_configs,omitempty"`   // quota entity path (clients/<c>, users/<u>/clients/<c>) -> quotas (standalone_quotas.go)
}

type storedTopic struct {
	ID       string             `json:"topic_id"`
	Replicas [][]int32          `json:"partitions"`
	Adding   map[string][]int32 `json:"adding_replicas,omitempty"`
	Removing map[string][]int32 `json:"removing_replicas,omitempty"`
	Version  int32              `json:"version"`
}

func toStoredMap(m map[int32][]int32) map[string][]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string][]int32, len(m))
	for p, r := range m {
		if len(r) > 0 {
			out[strconv.Itoa(int(p))] = slices.Clone(r)
		}
	}
	return out
}

func fromStoredMap(m map[string][]int32) map[int32][]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[int32][]int32, len(m))
	for k, r := range m {
		if p, err := strconv.ParseInt(k, 10, 32); err == nil {
			out[int32(p)] = slices.Clone(r)
		}
	}
	return out
}

type storedState struct {
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ControllerEpoch int32   `json:"controller_epoch"`
	Version         int32   `json:"version"`
}

type watcher struct {
	ch chan Change
}

// OpenStandalone loads (or creates) the metadata file in dir.
func OpenStandalone(dir string) (*Standalone, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("standalone coordinator: %w", err)
	}
	s := &Standalone{
		path:       filepath.Join(dir, StandaloneFile),
		brokers:    make(map[int32]Broker),
		controller: -1,
		watchers:   make(map[*watcher]struct{}),
		done:       make(chan struct{}),
	}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.state = standaloneState{Format: standaloneFormat}
	case err != nil:
		return nil, fmt.Errorf("standalone coordinator: %w", err)
	default:
		if err := json.Unmarshal(b, &s.state); err != nil {
			return nil, fmt.Errorf("standalone coordinator: %s is corrupt: %w", s.path, err)
		}
		if s.state.Format != standaloneFormat {
			return nil, fmt.Errorf("standalone coordinator: %s has format %d, this version reads %d", s.path, s.state.Format, standaloneFormat)
		}
	}
	if s.state.Topics == nil {
		s.state.Topics = make(map[string]*storedTopic)
	}
	if s.state.Configs == nil {
		s.state.Configs = make(map[string]map[string]string)
	}
	if s.state.States == nil {
		s.state.States = make(map[string]map[string]storedState)
	}
	return s, nil
}

// Path is the metadata file's path.
func (s *Standalone) Path() string { return s.path }

// persist writes the state atomically. Lock should be held.
func (s *Standalone) persist() error {
	b, err := json.MarshalIndent(&s.state, "", "  ")
	if err != nil {
		return fmt.Errorf("standalone coordinator: encode: %w", err)
	}
	return WriteFileAtomic(s.path, b)
}

// WriteFileAtomic replaces path with data: it writes a temporary file in the
// same directory, fsyncs it, renames it over path and fsyncs the directory, so
// a crash leaves either the old or the new content, never a torn file.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync dir: %w", path, err)
	}
	return nil
}

// mutate runs fn under the lock, persists when fn succeeded and notifies the
// watchers of change. A failed persist rolls the in-memory state back, so
// memory never runs ahead of the file.
func (s *Standalone) mutate(change Change, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	backup, err := cloneState(&s.state)
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	if err := s.persist(); err != nil {
		s.state = *backup
		return err
	}
	s.notify(change)
	return nil
}

func cloneState(st *standaloneState) (*standaloneState, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("standalone coordinator: %w", err)
	}
	var c standaloneState
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("standalone coordinator: %w", err)
	}
	if c.Topics == nil {
		c.Topics = make(map[string]*storedTopic)
	}
	if c.Configs == nil {
		c.Configs = make(map[string]map[string]string)
	}
	if c.States == nil {
		c.States = make(map[string]map[string]storedState)
	}
	return &c, nil
}

// notify delivers change to every watcher, merging it with an undelivered
// one. Lock should be held.
func (s *Standalone) notify(change Change) {
	for w := range s.watchers {
		c := change
		for {
			select {
			case w.ch <- c:
			default:
				select {
				case old := <-w.ch:
					c |= old
				default:
				}
				continue
			}
			break
		}
	}
}

func (s *Standalone) check() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

// ClusterID implements Coordinator.
func (s *Standalone) ClusterID(ctx context.Context) (string, error) {
	s.mu.Lock()
	id, closed := s.state.ClusterID, s.closed
	s.mu.Unlock()
	if closed {
		return "", ErrClosed
	}
	if id != "" {
		return id, nil
	}
	err := s.mutate(0, func() error {
		if s.state.ClusterID == "" {
			u := NewUUID()
			s.state.ClusterID = base64.RawURLEncoding.EncodeToString(u[:])
		}
		id = s.state.ClusterID
		return nil
	})
	return id, err
}

// RegisterBroker implements Coordinator.
func (s *Standalone) RegisterBroker(ctx context.Context, b Broker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	if _, ok := s.brokers[b.ID]; ok {
		return fmt.Errorf("%w: %d", ErrBrokerExists, b.ID)
	}
	if b.Timestamp == 0 {
		b.Timestamp = time.Now().UnixMilli()
	}
	b.Endpoints = slices.Clone(b.Endpoints)
	s.brokers[b.ID] = b
	s.notify(ChangeBrokers)
	return nil
}

// Brokers implements Coordinator.
func (s *Standalone) Brokers(ctx context.Context) ([]Broker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]Broker, 0, len(s.brokers))
	for _, b := range s.brokers {
		b.Endpoints = slices.Clone(b.Endpoints)
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Broker) int { return int(a.ID - b.ID) })
	return out, nil
}

// ReservedBrokerMaxID is Kafka's reserved.broker.max.id: generated broker
// ids start above it.
const ReservedBrokerMaxID = 1000

// NextBrokerID implements Coordinator.
func (s *Standalone) NextBrokerID(ctx context.Context) (int32, error) {
	var id int32
	err := s.mutate(0, func() error {
		s.state.BrokerSeq++
		id = ReservedBrokerMaxID + s.state.BrokerSeq
		return nil
	})
	return id, err
}

// Campaign implements Coordinator.
func (s *Standalone) Campaign(ctx context.Context, brokerID int32) (ControllerInfo, error) {
	var info ControllerInfo
	err := s.mutate(ChangeController, func() error {
		if s.controller >= 0 {
			return errNoChange
		}
		if _, ok := s.brokers[brokerID]; !ok {
			return fmt.Errorf("cluster: broker %d is not registered", brokerID)
		}
		s.state.ControllerEpoch++
		s.controller = brokerID
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return info, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return ControllerInfo{ID: s.controller, Epoch: s.state.ControllerEpoch}, nil
}

// errNoChange aborts a mutation that has nothing to do.
var errNoChange = errors.New("no change")

// Controller implements Coordinator.
func (s *Standalone) Controller(ctx context.Context) (ControllerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return ControllerInfo{}, err
	}
	return ControllerInfo{ID: s.controller, Epoch: s.state.ControllerEpoch}, nil
}

// CreateTopic implements Coordinator.
func (s *Standalone) CreateTopic(ctx context.Context, t Topic, configs map[string]string) error {
	return s.mutate(ChangeTopics|ChangeConfigs, func() error {
		if _, ok := s.state.Topics[t.Name]; ok {
			return fmt.Errorf("%w: %s", ErrTopicExists, t.Name)
		}
		st := &storedTopic{ID: t.ID.String(), Version: 0, Adding: toStoredMap(t.Adding), Removing: toStoredMap(t.Removing)}
		for _, r := range t.Replicas {
			st.Replicas = append(st.Replicas, slices.Clone(r))
		}
		s.state.Topics[t.Name] = st
		if len(configs) > 0 {
			s.state.Configs[t.Name] = maps.Clone(configs)
		}
		s.bumpConfigVersion(t.Name)
		return nil
	})
}

// Topics implements Coordinator.
func (s *Standalone) Topics(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(s.state.Topics)), nil
}

// Topic implements Coordinator.
func (s *Standalone) Topic(ctx context.Context, name string) (Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return Topic{}, err
	}
	st, ok := s.state.Topics[name]
	if !ok {
		return Topic{}, fmt.Errorf("%w: %s", ErrNoTopic, name)
	}
	id, err := ParseUUID(st.ID)
	if err != nil {
		return Topic{}, fmt.Errorf("standalone coordinator: topic %s: %w", name, err)
	}
	t := Topic{Name: name, ID: id, Version: st.Version, Adding: fromStoredMap(st.Adding), Removing: fromStoredMap(st.Removing)}
	for _, r := range st.Replicas {
		t.Replicas = append(t.Replicas, slices.Clone(r))
	}
	return t, nil
}

// SetTopicAssignment implements Coordinator.
func (s *Standalone) SetTopicAssignment(ctx context.Context, t Topic) (int32, error) {
	var v int32
	err := s.mutate(ChangeTopics, func() error {
		st, ok := s.state.Topics[t.Name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoTopic, t.Name)
		}
		if st.Version != t.Version {
			return fmt.Errorf("%w: topic %s at version %d, not %d", ErrBadVersion, t.Name, st.Version, t.Version)
		}
		st.Replicas = st.Replicas[:0]
		for _, r := range t.Replicas {
			st.Replicas = append(st.Replicas, slices.Clone(r))
		}
		st.Adding, st.Removing = toStoredMap(t.Adding), toStoredMap(t.Removing)
		st.Version++
		v = st.Version
		return nil
	})
	return v, err
}

// MarkTopicForDeletion implements Coordinator.
func (s *Standalone) MarkTopicForDeletion(ctx context.Context, name string) error {
	return s.mutate(ChangeDeletions, func() error {
		if _, ok := s.state.Topics[name]; !ok {
			return fmt.Errorf("%w: %s", ErrNoTopic, name)
		}
		if !slices.Contains(s.state.Deletions, name) {
			s.state.Deletions = append(s.state.Deletions, name)
			slices.Sort(s.state.Deletions)
		}
		return nil
	})
}

// PendingDeletions implements Coordinator.
func (s *Standalone) PendingDeletions(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	return slices.Clone(s.state.Deletions), nil
}

// DeleteTopic implements Coordinator.
func (s *Standalone) DeleteTopic(ctx context.Context, name string) error {
	return s.mutate(ChangeTopics|ChangeDeletions|ChangePartitions|ChangeConfigs, func() error {
		if _, ok := s.state.Topics[name]; !ok {
			return fmt.Errorf("%w: %s", ErrNoTopic, name)
		}
		delete(s.state.Topics, name)
		delete(s.state.States, name)
		delete(s.state.Configs, name)
		s.bumpConfigVersion(name)
		s.state.Deletions = slices.DeleteFunc(s.state.Deletions, func(n string) bool { return n == name })
		return nil
	})
}

// PartitionState implements Coordinator.
func (s *Standalone) PartitionState(ctx context.Context, topic string, partition int32) (PartitionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return PartitionState{}, err
	}
	st, ok := s.state.States[topic][strconv.Itoa(int(partition))]
	if !ok {
		return PartitionState{}, fmt.Errorf("%w: %s-%d", ErrNoState, topic, partition)
	}
	return PartitionState{
		Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, ISR: slices.Clone(st.ISR),
		ControllerEpoch: st.ControllerEpoch, Version: st.Version,
	}, nil
}

// CreatePartitionState implements Coordinator.
func (s *Standalone) CreatePartitionState(ctx context.Context, topic string, partition int32, ps PartitionState) (int32, error) {
	err := s.mutate(ChangePartitions, func() error {
		if _, ok := s.state.Topics[topic]; !ok {
			return fmt.Errorf("%w: %s", ErrNoTopic, topic)
		}
		m := s.state.States[topic]
		if m == nil {
			m = make(map[string]storedState)
			s.state.States[topic] = m
		}
		key := strconv.Itoa(int(partition))
		if _, ok := m[key]; ok {
			return fmt.Errorf("%w: %s-%d", ErrStateExists, topic, partition)
		}
		m[key] = storedState{Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, ISR: slices.Clone(ps.ISR), ControllerEpoch: ps.ControllerEpoch}
		return nil
	})
	return 0, err
}

// SetPartitionState implements Coordinator.
func (s *Standalone) SetPartitionState(ctx context.Context, topic string, partition int32, ps PartitionState) (int32, error) {
	var v int32
	err := s.mutate(ChangePartitions, func() error {
		key := strconv.Itoa(int(partition))
		st, ok := s.state.States[topic][key]
		if !ok {
			return fmt.Errorf("%w: %s-%d", ErrNoState, topic, partition)
		}
		if st.Version != ps.Version {
			return fmt.Errorf("%w: %s-%d state at version %d, not %d", ErrBadVersion, topic, partition, st.Version, ps.Version)
		}
		v = st.Version + 1
		s.state.States[topic][key] = storedState{Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, ISR: slices.Clone(ps.ISR), ControllerEpoch: ps.ControllerEpoch, Version: v}
		return nil
	})
	return v, err
}

// TopicConfig implements Coordinator.
func (s *Standalone) TopicConfig(ctx context.Context, topic string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	if _, ok := s.state.Topics[topic]; !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTopic, topic)
	}
	c := maps.Clone(s.state.Configs[topic])
	if c == nil {
		c = map[string]string{}
	}
	return c, nil
}

// SetTopicConfig implements Coordinator.
func (s *Standalone) SetTopicConfig(ctx context.Context, topic string, configs map[string]string) error {
	return s.setTopicConfig(topic, configs, nil)
}

// ReadTopicConfig implements Coordinator: the file's state is
// authoritative (one process holds it).
func (s *Standalone) ReadTopicConfig(ctx context.Context, topic string) (map[string]string, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	if _, ok := s.state.Topics[topic]; !ok {
		return nil, 0, fmt.Errorf("%w: %s", ErrNoTopic, topic)
	}
	c := maps.Clone(s.state.Configs[topic])
	if c == nil {
		c = map[string]string{}
	}
	return c, s.configVersions[topic], nil
}

// SetTopicConfigIf implements Coordinator.
func (s *Standalone) SetTopicConfigIf(ctx context.Context, topic string, configs map[string]string, version int32) error {
	return s.setTopicConfig(topic, configs, &version)
}

func (s *Standalone) setTopicConfig(topic string, configs map[string]string, version *int32) error {
	return s.mutate(ChangeConfigs, func() error {
		if _, ok := s.state.Topics[topic]; !ok {
			return fmt.Errorf("%w: %s", ErrNoTopic, topic)
		}
		if version != nil && *version != s.configVersions[topic] {
			return fmt.Errorf("%w: configs of %s at version %d, not %d", ErrBadVersion, topic, s.configVersions[topic], *version)
		}
		if len(configs) == 0 {
			delete(s.state.Configs, topic)
		} else {
			s.state.Configs[topic] = maps.Clone(configs)
		}
		s.bumpConfigVersion(topic)
		return nil
	})
}

// bumpConfigVersion gives topic's configs a new version. Lock s.mu.
func (s *Standalone) bumpConfigVersion(topic string) {
	if s.configVersions == nil {
		s.configVersions = map[string]int32{}
	}
	s.configSeq++
	s.configVersions[topic] = s.configSeq
}

// BrokerConfig implements BrokerConfigStore.
func (s *Standalone) BrokerConfig(ctx context.Context, entity string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	c := maps.Clone(s.state.BrokerConfigs[entity])
	if c == nil {
		c = map[string]string{}
	}
	return c, nil
}

// SetBrokerConfig implements BrokerConfigStore.
func (s *Standalone) SetBrokerConfig(ctx context.Context, entity string, configs map[string]string) error {
	return s.mutate(ChangeBrokerConfigs, func() error {
		if len(configs) == 0 {
			delete(s.state.BrokerConfigs, entity)
			return nil
		}
		if s.state.BrokerConfigs == nil {
			s.state.BrokerConfigs = map[string]map[string]string{}
		}
		s.state.BrokerConfigs[entity] = maps.Clone(configs)
		return nil
	})
}

// AllocateProducerIDs implements Coordinator.
func (s *Standalone) AllocateProducerIDs(ctx context.Context, brokerID int32, size int64) (ProducerIDBlock, error) {
	if size <= 0 {
		return ProducerIDBlock{}, fmt.Errorf("cluster: producer id block size %d", size)
	}
	var blk ProducerIDBlock
	err := s.mutate(0, func() error {
		start := int64(0)
		if s.state.ProducerIDBlock != nil {
			start = s.state.ProducerIDBlock.End + 1
		}
		blk = ProducerIDBlock{Start: start, End: start + size - 1}
		s.state.ProducerIDBlock = &blk
		return nil
	})
	return blk, err
}

// Watch implements Coordinator.
func (s *Standalone) Watch(ctx context.Context) <-chan Change {
	w := &watcher{ch: make(chan Change, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(w.ch)
		return w.ch
	}
	s.watchers[w] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		s.mu.Lock()
		if _, ok := s.watchers[w]; ok {
			delete(s.watchers, w)
			close(w.ch)
		}
		s.mu.Unlock()
	}()
	return w.ch
}

// Close implements Coordinator: live registrations and controllership end,
// Watch channels are closed, and Close waits for the goroutines it started.
func (s *Standalone) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.brokers = map[int32]Broker{}
	s.controller = -1
	for w := range s.watchers {
		delete(s.watchers, w)
		close(w.ch)
	}
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() TopicID {
	var u TopicID
	if _, err := rand.Read(u[:]); err != nil {
		panic("cluster: crypto/rand: " + err.Error())
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// String renders the id as Kafka does: 22 characters of URL-safe base64.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseUUID parses an id rendered by TopicID.String.
func ParseUUID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("bad uuid %q", s)
	}
	copy(id[:], b)
	return id, nil
}

package zkcoord

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/cluster"
)

// Kafka's znode layout (kafka.zk.ZkData), relative to the chroot.
const (
	clusterIDPath       = "/cluster/id"
	brokerIDsPath       = "/brokers/ids"
	brokerSeqIDPath     = "/brokers/seqid"
	topicsPath          = "/brokers/topics"
	controllerPath      = "/controller"
	controllerEpochPath = "/controller_epoch"
	configTopicsPath    = "/config/topics"
	configChangesPath   = "/config/changes"
	deleteTopicsPath    = "/admin/delete_topics"
	reassignPath        = "/admin/reassign_partitions"
	producerIDBlockPath = "/latest_producer_id_block"
	isrChangePath       = "/isr_change_notification"

	// stateChangesPath is Sluice's own: every partition state write adds,
	// in the same transaction, a sequential child naming the partitions
	// and their new state, so that brokers learn of leadership changes
	// from one watch instead of one watch per partition (see doc.go).
	stateChangesPath = "/state_change_notification"

	configChangePrefix = "config_change_"
	stateChangePrefix  = "state_change_"
)

// topLevelPaths are created (empty, persistent) when missing, as Kafka's
// KafkaZkClient.createTopLevelPaths does.
var topLevelPaths = []string{
	"/admin", deleteTopicsPath,
	"/brokers", brokerIDsPath, topicsPath,
	"/config", configChangesPath, configTopicsPath, "/config/clients", "/config/users", "/config/brokers",
	isrChangePath, stateChangesPath, "/cluster",
}

func brokerPath(id int32) string { return brokerIDsPath + "/" + strconv.Itoa(int(id)) }
func topicPath(t string) string  { return topicsPath + "/" + t }
func partitionsPath(t string) string {
	return topicsPath + "/" + t + "/partitions"
}
func partitionPath(t string, p int32) string {
	return partitionsPath(t) + "/" + strconv.Itoa(int(p))
}
func statePath(t string, p int32) string { return partitionPath(t, p) + "/state" }
func topicConfigPath(t string) string    { return configTopicsPath + "/" + t }
func deleteTopicPath(t string) string    { return deleteTopicsPath + "/" + t }

// ---- /cluster/id: {"version":"1","id":"<22 chars>"} ----

type clusterIDZNode struct {
	Version string `json:"version"`
	ID      string `json:"id"`
}

func encodeClusterID(id string) []byte {
	b, _ := json.Marshal(clusterIDZNode{Version: "1", ID: id})
	return b
}

func decodeClusterID(b []byte) (string, error) {
	var z clusterIDZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return "", fmt.Errorf("%s: %w", clusterIDPath, err)
	}
	if z.ID == "" {
		return "", fmt.Errorf("%s: no id", clusterIDPath)
	}
	return z.ID, nil
}

// ---- /brokers/ids/<id>: JSON version 5 ----

type brokerZNode struct {
	Features          map[string]featureRange `json:"features"`
	ListenerProtocols map[string]string       `json:"listener_security_protocol_map"`
	Endpoints         []string                `json:"endpoints"`
	JMXPort           int                     `json:"jmx_port"`
	Port              int32                   `json:"port"`
	Host              *string                 `json:"host"`
	Version           int                     `json:"version"`
	Timestamp         string                  `json:"timestamp"`
	Rack              *string                 `json:"rack,omitempty"`
}

type featureRange struct {
	MinVersion int16 `json:"min_version"`
	MaxVersion int16 `json:"max_version"`
}

// encodeBroker writes BrokerIdZNode version 5 as Kafka 2.7+ does: host and
// port are those of the first PLAINTEXT endpoint (null and -1 without one),
// endpoints are "LISTENER://host:port", the listener map names each
// listener's security protocol, and rack appears only when set.
func encodeBroker(b cluster.Broker) []byte {
	z := brokerZNode{
		Features:          map[string]featureRange{},
		ListenerProtocols: map[string]string{},
		Endpoints:         []string{},
		JMXPort:           -1,
		Port:              -1,
		Version:           5,
		Timestamp:         strconv.FormatInt(b.Timestamp, 10),
	}
	for _, e := range b.Endpoints {
		proto := e.SecurityProtocol
		if proto == "" {
			proto = "PLAINTEXT"
		}
		z.ListenerProtocols[e.Listener] = proto
		z.Endpoints = append(z.Endpoints, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		if proto == "PLAINTEXT" && z.Host == nil {
			h := e.Host
			z.Host, z.Port = &h, e.Port
		}
	}
	if b.Rack != "" {
		r := b.Rack
		z.Rack = &r
	}
	out, _ := json.Marshal(z)
	return out
}

// decodeBroker reads BrokerIdZNode versions 1 to 5 (versions before 4 have
// no listener map: the listener name is the security protocol).
func decodeBroker(id int32, b []byte) (cluster.Broker, error) {
	var z brokerZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return cluster.Broker{}, fmt.Errorf("broker %d registration: %w", id, err)
	}
	out := cluster.Broker{ID: id}
	if z.Rack != nil {
		out.Rack = *z.Rack
	}
	if z.Timestamp != "" {
		ts, err := strconv.ParseInt(z.Timestamp, 10, 64)
		if err != nil {
			return cluster.Broker{}, fmt.Errorf("broker %d registration: timestamp %q: %w", id, z.Timestamp, err)
		}
		out.Timestamp = ts
	}
	for _, s := range z.Endpoints {
		name, hostport, ok := strings.Cut(s, "://")
		if !ok {
			return cluster.Broker{}, fmt.Errorf("broker %d registration: endpoint %q is not LISTENER://host:port", id, s)
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return cluster.Broker{}, fmt.Errorf("broker %d registration: endpoint %q: %w", id, s, err)
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			return cluster.Broker{}, fmt.Errorf("broker %d registration: endpoint %q: %w", id, s, err)
		}
		proto := z.ListenerProtocols[name]
		if proto == "" {
			proto = name
		}
		out.Endpoints = append(out.Endpoints, cluster.Endpoint{Listener: name, SecurityProtocol: proto, Host: host, Port: int32(p)})
	}
	if len(out.Endpoints) == 0 && z.Host != nil && z.Port > 0 {
		// Version 1: only host and port.
		out.Endpoints = []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: *z.Host, Port: z.Port}}
	}
	return out, nil
}

// ---- /controller: {"version":2,"brokerid":1,"timestamp":"...","kraftControllerEpoch":-1} ----

type controllerZNode struct {
	Version              int    `json:"version"`
	BrokerID             int32  `json:"brokerid"`
	Timestamp            string `json:"timestamp"`
	KraftControllerEpoch int32  `json:"kraftControllerEpoch"`
}

func encodeController(id int32, ts int64) []byte {
	b, _ := json.Marshal(controllerZNode{Version: 2, BrokerID: id, Timestamp: strconv.FormatInt(ts, 10), KraftControllerEpoch: -1})
	return b
}

func decodeController(b []byte) (int32, error) {
	// Kafka before 0.9 wrote a bare integer.
	if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32); err == nil {
		return int32(n), nil
	}
	var z controllerZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return -1, fmt.Errorf("%s: %w", controllerPath, err)
	}
	return z.BrokerID, nil
}

// /controller_epoch: a bare integer.
func decodeEpoch(b []byte) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", controllerEpochPath, b, err)
	}
	return int32(n), nil
}

// ---- /brokers/topics/<t>: version 3 ----

type topicZNode struct {
	Version          int                `json:"version"`
	Partitions       map[string][]int32 `json:"partitions"`
	AddingReplicas   map[string][]int32 `json:"adding_replicas"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas"`
	TopicID          string             `json:"topic_id,omitempty"`
}

func encodeTopic(t cluster.Topic) []byte {
	z := topicZNode{
		Version:          3,
		Partitions:       make(map[string][]int32, len(t.Replicas)),
		AddingReplicas:   map[string][]int32{},
		RemovingReplicas: map[string][]int32{},
		TopicID:          t.ID.String(),
	}
	for p, r := range t.Replicas {
		z.Partitions[strconv.Itoa(p)] = nonNil(r)
	}
	for p, r := range t.Adding {
		z.AddingReplicas[strconv.Itoa(int(p))] = nonNil(r)
	}
	for p, r := range t.Removing {
		z.RemovingReplicas[strconv.Itoa(int(p))] = nonNil(r)
	}
	b, _ := json.Marshal(z)
	return b
}

func nonNil(r []int32) []int32 {
	if r == nil {
		return []int32{}
	}
	return r
}

// decodeTopic reads versions 1 to 3. A topic written without a topic id
// (Kafka before 2.8) gets the zero id.
func decodeTopic(name string, b []byte) (cluster.Topic, error) {
	var z topicZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return cluster.Topic{}, fmt.Errorf("topic %s: %w", name, err)
	}
	t := cluster.Topic{Name: name}
	if z.TopicID != "" {
		id, err := cluster.ParseUUID(z.TopicID)
		if err != nil {
			return cluster.Topic{}, fmt.Errorf("topic %s: topic_id: %w", name, err)
		}
		t.ID = id
	}
	parts, err := partitionMap(name, z.Partitions)
	if err != nil {
		return cluster.Topic{}, err
	}
	// Partitions are numbered 0..n-1; a gap would be a corrupt znode.
	t.Replicas = make([][]int32, len(parts))
	for p, r := range parts {
		if p < 0 || int(p) >= len(parts) {
			return cluster.Topic{}, fmt.Errorf("topic %s: partitions are not numbered 0..%d", name, len(parts)-1)
		}
		t.Replicas[p] = r
	}
	if t.Adding, err = partitionMap(name, z.AddingReplicas); err != nil {
		return cluster.Topic{}, err
	}
	if t.Removing, err = partitionMap(name, z.RemovingReplicas); err != nil {
		return cluster.Topic{}, err
	}
	if len(t.Adding) == 0 {
		t.Adding = nil
	}
	if len(t.Removing) == 0 {
		t.Removing = nil
	}
	return t, nil
}

func partitionMap(topic string, m map[string][]int32) (map[int32][]int32, error) {
	out := make(map[int32][]int32, len(m))
	for k, v := range m {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("topic %s: partition key %q: %w", topic, k, err)
		}
		out[int32(p)] = v
	}
	return out, nil
}

// ---- /brokers/topics/<t>/partitions/<p>/state ----

type stateZNode struct {
	ControllerEpoch     int32   `json:"controller_epoch"`
	Leader              int32   `json:"leader"`
	Version             int     `json:"version"`
	LeaderEpoch         int32   `json:"leader_epoch"`
	ISR                 []int32 `json:"isr"`
	LeaderRecoveryState *int8   `json:"leader_recovery_state,omitempty"`
}

func encodeState(s cluster.PartitionState) []byte {
	b, _ := json.Marshal(toStateZNode(s))
	return b
}

func toStateZNode(s cluster.PartitionState) stateZNode {
	return stateZNode{ControllerEpoch: s.ControllerEpoch, Leader: s.Leader, Version: 1, LeaderEpoch: s.LeaderEpoch, ISR: nonNil(s.ISR)}
}

func (z stateZNode) state(version int32) cluster.PartitionState {
	return cluster.PartitionState{Leader: z.Leader, LeaderEpoch: z.LeaderEpoch, ISR: slices.Clone(z.ISR), ControllerEpoch: z.ControllerEpoch, Version: version}
}

func decodeState(b []byte, version int32) (cluster.PartitionState, error) {
	var z stateZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return cluster.PartitionState{}, fmt.Errorf("partition state: %w", err)
	}
	return z.state(version), nil
}

// ---- /config/topics/<t>: {"version":1,"config":{...}} ----

type configZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

func encodeConfig(c map[string]string) []byte {
	if c == nil {
		c = map[string]string{}
	}
	b, _ := json.Marshal(configZNode{Version: 1, Config: c})
	return b
}

func decodeConfig(b []byte) (map[string]string, error) {
	var z configZNode
	if len(b) == 0 {
		return map[string]string{}, nil
	}
	if err := json.Unmarshal(b, &z); err != nil {
		return nil, fmt.Errorf("topic config: %w", err)
	}
	if z.Config == nil {
		z.Config = map[string]string{}
	}
	return z.Config, nil
}

// ---- /config/changes/config_change_<seq>: {"version":2,"entity_path":"topics/<t>"} ----

type configChangeZNode struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

func encodeConfigChange(topic string) []byte { return encodeEntityChange("topics/" + topic) }

// encodeEntityChange announces a change of the entity at path under
// /config: "topics/<t>", "brokers/<id>", "brokers/<default>".
func encodeEntityChange(entityPath string) []byte {
	b, _ := json.Marshal(configChangeZNode{Version: 2, EntityPath: entityPath})
	return b
}

// ---- /latest_producer_id_block ----

type producerIDBlockZNode struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

func encodeProducerIDBlock(broker int32, b cluster.ProducerIDBlock) []byte {
	out, _ := json.Marshal(producerIDBlockZNode{Version: 1, Broker: broker,
		BlockStart: strconv.FormatInt(b.Start, 10), BlockEnd: strconv.FormatInt(b.End, 10)})
	return out
}

func decodeProducerIDBlock(b []byte) (cluster.ProducerIDBlock, error) {
	var z producerIDBlockZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return cluster.ProducerIDBlock{}, fmt.Errorf("%s: %w", producerIDBlockPath, err)
	}
	start, err1 := strconv.ParseInt(z.BlockStart, 10, 64)
	end, err2 := strconv.ParseInt(z.BlockEnd, 10, 64)
	if err1 != nil || err2 != nil || end < start {
		return cluster.ProducerIDBlock{}, fmt.Errorf("%s: bad block %q..%q", producerIDBlockPath, z.BlockStart, z.BlockEnd)
	}
	return cluster.ProducerIDBlock{Start: start, End: end}, nil
}

// ---- /admin/reassign_partitions ----

type reassignZNode struct {
	Version    int                `json:"version"`
	Partitions []reassignPartJSON `json:"partitions"`
}

type reassignPartJSON struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

func encodeReassignments(rs []cluster.Reassignment) []byte {
	z := reassignZNode{Version: 1, Partitions: []reassignPartJSON{}}
	for _, r := range rs {
		z.Partitions = append(z.Partitions, reassignPartJSON{Topic: r.Topic, Partition: r.Partition, Replicas: nonNil(r.Replicas)})
	}
	b, _ := json.Marshal(z)
	return b
}

func decodeReassignments(b []byte) ([]cluster.Reassignment, error) {
	var z reassignZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return nil, fmt.Errorf("%s: %w", reassignPath, err)
	}
	out := make([]cluster.Reassignment, 0, len(z.Partitions))
	for _, p := range z.Partitions {
		out = append(out, cluster.Reassignment{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// ---- /state_change_notification/state_change_<seq> (Sluice) ----
//
//	{"version":1,
//	 "topics":["t"],                       // assignments (/brokers/topics/<t>) rewritten
//	 "partitions":[{"topic":"t","topic_id":"...","partition":0,
//	                "zk_version":4,"state":{...the state znode's JSON...}}]}
//
// The entry carries the new state and its znode version, so a broker applies
// it without reading the state znode.

type stateChangeZNode struct {
	Version    int                `json:"version"`
	Topics     []string           `json:"topics,omitempty"`
	Partitions []stateChangeEntry `json:"partitions,omitempty"`
}

type stateChangeEntry struct {
	Topic     string     `json:"topic"`
	TopicID   string     `json:"topic_id"`
	Partition int32      `json:"partition"`
	ZkVersion int32      `json:"zk_version"`
	State     stateZNode `json:"state"`
}

func encodeStateChange(z stateChangeZNode) []byte {
	z.Version = 1
	b, _ := json.Marshal(z)
	return b
}

func decodeStateChange(b []byte) (stateChangeZNode, error) {
	var z stateChangeZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return z, fmt.Errorf("state change notification: %w", err)
	}
	return z, nil
}

// sequenceOf returns the sequence number of a sequential child name
// ("state_change_0000000042" -> 42).
func sequenceOf(name, prefix string) (int64, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

package appliance

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/storage"
	"github.com/sluice-io/sluice/web"
)

// Listener is one entry of listeners or advertised.listeners:
// NAME://host:port. The security protocol is PLAINTEXT (the only one served).
type Listener struct {
	Name string // "PLAINTEXT"
	Host string // "" = every interface (listeners) / the host name (advertised)
	Port int
}

func (l Listener) String() string {
	return l.Name + "://" + net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

// Addr is host:port for net.Listen.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// Config is the appliance's configuration: Kafka's broker keys with Kafka's
// names and defaults, plus the console's keys. Build one with Load (file and
// overrides) or DefaultConfig, then EnsureDefaults and Validate.
type Config struct {
	// Broker identity and network.
	BrokerID              int32      // broker.id; -1 = generated (Kafka: 1001 and up) and kept in meta.properties
	BrokerRack            string     // broker.rack
	Listeners             []Listener // listeners
	AdvertisedListeners   []Listener // advertised.listeners; empty = listeners
	SocketRequestMaxBytes int32      // socket.request.max.bytes
	FetchMaxBytes         int32      // fetch.max.bytes

	// Connection limits (protocol.Config).
	ConnectionsMaxIdleMs         int64          // connections.max.idle.ms; -1 = never
	SocketRequestReadTimeoutMs   int64          // socket.request.read.timeout.ms; -1 = never
	MaxConnections               int32          // max.connections
	MaxConnectionsPerIP          int32          // max.connections.per.ip
	MaxConnectionsPerIPOverrides map[string]int // max.connections.per.ip.overrides: host or IP -> limit
	QueuedMaxRequestBytes        int64          // queued.max.request.bytes; -1 = unbounded

	// Logs.
	LogDirs                      []string      // log.dirs (log.dir when unset)
	NumPartitions                int32         // num.partitions
	DefaultReplicationFactor     int16         // default.replication.factor
	MinInsyncReplicas            int32         // min.insync.replicas
	AutoCreateTopics             bool          // auto.create.topics.enable
	DeleteTopicEnable            bool          // delete.topic.enable
	LogRetentionMs               int64         // log.retention.ms > .minutes > .hours; -1 = forever
	LogRetentionBytes            int64         // log.retention.bytes
	LogSegmentBytes              int64         // log.segment.bytes
	LogRollMs                    int64         // log.roll.ms > log.roll.hours
	LogCleanupPolicy             string        // log.cleanup.policy
	LogFlushIntervalMessages     int64         // log.flush.interval.messages
	LogFlushIntervalMs           int64         // log.flush.interval.ms; math.MaxInt64 when unset
	LogRetentionCheckInterval    time.Duration // log.retention.check.interval.ms
	LogCleanerEnable             bool          // log.cleaner.enable
	LogCleanerDeleteRetentionMs  int64         // log.cleaner.delete.retention.ms
	LogCleanerMinCleanableRatio  float64       // log.cleaner.min.cleanable.ratio
	LogCleanerMinCompactionLagMs int64         // log.cleaner.min.compaction.lag.ms
	LogIndexIntervalBytes        int32         // log.index.interval.bytes
	LogIndexSizeMaxBytes         int32         // log.index.size.max.bytes
	LogMessageTimestampType      string        // log.message.timestamp.type
	CompressionType              string        // compression.type
	MessageMaxBytes              int32         // message.max.bytes
	MessageDecompressedMaxBytes  int64         // message.decompressed.max.bytes

	// Consumer groups (used by the group coordinator).
	OffsetsTopicNumPartitions     int32         // offsets.topic.num.partitions
	OffsetsTopicReplicationFactor int16         // offsets.topic.replication.factor
	OffsetsTopicSegmentBytes      int64         // offsets.topic.segment.bytes
	OffsetsRetentionMinutes       int32         // offsets.retention.minutes
	GroupInitialRebalanceDelayMs  int32         // group.initial.rebalance.delay.ms
	GroupMinSessionTimeoutMs      int32         // group.min.session.timeout.ms
	GroupMaxSessionTimeoutMs      int32         // group.max.session.timeout.ms
	GroupMaxSize                  int32         // group.max.size
	OffsetsRetentionCheckInterval time.Duration // offsets.retention.check.interval.ms
	OffsetsCommitTimeout          time.Duration // offsets.commit.timeout.ms
	OffsetMetadataMaxBytes        int32         // offset.metadata.max.bytes
	OffsetsLoadBufferSize         int32         // offsets.load.buffer.size

	// Cluster mode (ZooKeeper); empty zookeeper.connect = single node.
	ZookeeperConnect             string // zookeeper.connect
	ZookeeperSessionTimeoutMs    int32  // zookeeper.session.timeout.ms
	ZookeeperConnectionTimeoutMs int32  // zookeeper.connection.timeout.ms; unset = the session timeout
	ReplicaLagTimeMaxMs          int64  // replica.lag.time.max.ms
	UncleanLeaderElectionEnable  bool   // unclean.leader.election.enable
	AutoLeaderRebalanceEnable    bool   // auto.leader.rebalance.enable

	// Replication and controller (cluster mode).
	ReplicaFetchWaitMaxMs              int32  // replica.fetch.wait.max.ms
	ReplicaFetchMinBytes               int32  // replica.fetch.min.bytes
	ReplicaFetchMaxBytes               int32  // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes       int32  // replica.fetch.response.max.bytes
	ReplicaFetchBackoffMs              int32  // replica.fetch.backoff.ms
	ReplicaSocketTimeoutMs             int32  // replica.socket.timeout.ms
	InterBrokerListenerName            string // inter.broker.listener.name; "" = the first listener
	ControlledShutdownEnable           bool   // controlled.shutdown.enable
	ControlledShutdownMaxRetries       int32  // controlled.shutdown.max.retries
	ControlledShutdownRetryBackoffMs   int64  // controlled.shutdown.retry.backoff.ms
	LeaderImbalanceCheckIntervalSecs   int64  // leader.imbalance.check.interval.seconds
	LeaderImbalancePerBrokerPercentage int32  // leader.imbalance.per.broker.percentage

	// Console and metrics.
	ConsoleListen  string // console.listen; "" disables the console
	ConsoleDataDir string // console.data.dir
	ConsoleTLSCert string // console.tls.cert
	ConsoleTLSKey  string // console.tls.key
	ConsoleBaseURL string // console.base.url
	MetricsListen  string // metrics.listen; "" = served by the console listener
	MetricsPath    string // metrics.path

	// Console hardening: who is the client, what the audit log keeps, where
	// notifications may go.
	ConsoleTrustedProxies     []string // console.trusted.proxies
	ConsoleAuditRetentionDays int32    // console.audit.retention.days
	ConsoleAuditMaxRows       int32    // console.audit.max.rows
	ConsoleAuditAccessEnable  bool     // console.audit.access.enable
	AlertingAllowedTargets    []string // alerting.allowed.targets
	AlertingProxy             string   // alerting.proxy
	// Schema registry (schemareg): Confluent's REST API on its own listener.
	SchemaRegistryListen        string // schema.registry.listen; "" disables the registry
	SchemaRegistryAdvertisedURL string // schema.registry.advertised.url; "" = made from the listener
	SchemaRegistryTLSCert       string // schema.registry.tls.cert
	SchemaRegistryTLSKey        string // schema.registry.tls.key
	SchemaRegistryAuth          string // schema.registry.auth: none or basic

	// Background work of the console (lag sampling, alert evaluation).
	ConsoleLagSampleInterval   time.Duration // console.lag.sample.interval.ms
	AlertingEvaluationInterval time.Duration // alerting.evaluation.interval.ms

	// The console's replicated state (__sluice_console, __sluice_console_lag).
	ConsoleTopicReplicationFactor int16         // console.topic.replication.factor
	ConsoleLagHistoryRetention    time.Duration // console.lag.history.retention.ms

	// Given holds every key set explicitly (file or --override) with its
	// value as written, for DescribeConfigs' STATIC_BROKER_CONFIG source.
	Given map[string]string
}

// keyDef describes one configuration key.
type keyDef struct {
	name string
	def  string // Kafka's default as text; "" = unset
	doc  string
	set  func(c *Config, v string) error
}

// keys is every key Sluice accepts, in documentation order. Each setter
// parses the text and stores it; range checks are in Validate.
var keys = []keyDef{
	{"broker.id", "-1", "this broker's id; -1 generates one (1001 upwards, as Kafka) and keeps it in meta.properties", func(c *Config, v string) error { return parseInt32(v, &c.BrokerID) }},
	{"broker.rack", "", "rack of this broker, shown in metadata", func(c *Config, v string) error { c.BrokerRack = v; return nil }},
	{"listeners", "PLAINTEXT://:9092", "comma-separated NAME://host:port to listen on; empty host = all interfaces", func(c *Config, v string) (err error) {
		c.Listeners, err = parseListeners(v)
		return err
	}},
	{"advertised.listeners", "", "NAME://host:port clients are told to connect to; empty = listeners, with the host name for an empty host", func(c *Config, v string) (err error) {
		c.AdvertisedListeners, err = parseListeners(v)
		return err
	}},
	{"socket.request.max.bytes", "104857600", "largest request frame accepted; a larger one closes the connection", func(c *Config, v string) error { return parseInt32(v, &c.SocketRequestMaxBytes) }},
	{"fetch.max.bytes", "57671680", "most record bytes one Fetch answer carries (a request asking for more gets this much; the first batch goes out whatever its size); at least 1024", func(c *Config, v string) error { return parseInt32(v, &c.FetchMaxBytes) }},
	{"connections.max.idle.ms", strconv.FormatInt(protocol.DefaultConnectionsMaxIdle.Milliseconds(), 10), "a client connection that read and wrote nothing for this long is closed; -1 never closes one", func(c *Config, v string) error { return parseInt64(v, &c.ConnectionsMaxIdleMs) }},
	{"socket.request.read.timeout.ms", strconv.FormatInt(protocol.DefaultRequestReadTimeout.Milliseconds(), 10), "a request frame must arrive whole within this long of its first byte, else the connection is closed (slow or stalled senders; no Kafka equivalent); -1 waits forever", func(c *Config, v string) error { return parseInt64(v, &c.SocketRequestReadTimeoutMs) }},
	{"max.connections", strconv.Itoa(protocol.DefaultMaxConnections), "client connections open at once over all listeners; one more is closed at accept (Kafka: unbounded; an idle connection holds ~40 KiB)", func(c *Config, v string) error { return parseInt32(v, &c.MaxConnections) }},
	{"max.connections.per.ip", strconv.Itoa(protocol.DefaultMaxConnectionsPerIP), "client connections open at once from one address; one more is closed at accept; 0 admits only the addresses in max.connections.per.ip.overrides", func(c *Config, v string) error { return parseInt32(v, &c.MaxConnectionsPerIP) }},
	{"max.connections.per.ip.overrides", "", "comma-separated host:limit or ip:limit exceptions to max.connections.per.ip, e.g. 10.0.0.5:2000,ingest.example.com:500 (host names are resolved at start-up)", func(c *Config, v string) (err error) {
		c.MaxConnectionsPerIPOverrides, err = parseConnectionOverrides(v)
		return err
	}},
	{"queued.max.request.bytes", strconv.Itoa(protocol.DefaultQueuedMaxRequestBytes), "request bytes read and not yet handled, over all connections, before reading waits; -1 (or 0) = unbounded, Kafka's default; else at least socket.request.max.bytes", func(c *Config, v string) error { return parseInt64(v, &c.QueuedMaxRequestBytes) }},
	{"log.dirs", "./data/kafka", "comma-separated directories holding the partition logs", func(c *Config, v string) error { c.LogDirs = splitList(v); return nil }},
	{"log.dir", "", "single log directory, used when log.dirs is not set", func(c *Config, v string) error {
		if _, ok := c.Given["log.dirs"]; !ok {
			c.LogDirs = splitList(v)
		}
		return nil
	}},
	{"num.partitions", "1", "partitions of an auto-created topic or a CreateTopics without a count", func(c *Config, v string) error { return parseInt32(v, &c.NumPartitions) }},
	{"default.replication.factor", "1", "replication factor of auto-created topics and of CreateTopics without one", func(c *Config, v string) error { return parseInt16(v, &c.DefaultReplicationFactor) }},
	{"min.insync.replicas", "1", "acks=all produce fails with NOT_ENOUGH_REPLICAS when the ISR is smaller (topic config min.insync.replicas)", func(c *Config, v string) error { return parseInt32(v, &c.MinInsyncReplicas) }},
	{"auto.create.topics.enable", "true", "create a topic when Metadata asks for an unknown one (__consumer_offsets is created whatever this says, as Kafka does)", func(c *Config, v string) error { return parseBool(v, &c.AutoCreateTopics) }},
	{"delete.topic.enable", "true", "allow DeleteTopics", func(c *Config, v string) error { return parseBool(v, &c.DeleteTopicEnable) }},
	{"log.retention.hours", "168", "retention time in hours (retention.ms), overridden by log.retention.minutes and log.retention.ms", nil},
	{"log.retention.minutes", "", "retention time in minutes, overridden by log.retention.ms", nil},
	{"log.retention.ms", "", "retention time in ms; -1 keeps forever", nil},
	{"log.retention.bytes", "-1", "size limit per partition before old segments are deleted (retention.bytes); -1 = none", func(c *Config, v string) error { return parseInt64(v, &c.LogRetentionBytes) }},
	{"log.segment.bytes", "1073741824", "segment size before a roll (segment.bytes)", func(c *Config, v string) error { return parseInt64(v, &c.LogSegmentBytes) }},
	{"log.roll.hours", "168", "segment age before a roll (segment.ms), overridden by log.roll.ms", nil},
	{"log.roll.ms", "", "segment age in ms before a roll", nil},
	{"log.cleanup.policy", "delete", "delete, compact or compact,delete (cleanup.policy)", func(c *Config, v string) error { c.LogCleanupPolicy = strings.ReplaceAll(v, " ", ""); return nil }},
	{"log.flush.interval.messages", strconv.FormatInt(math.MaxInt64, 10), "fsync after this many messages (flush.messages)", func(c *Config, v string) error { return parseInt64(v, &c.LogFlushIntervalMessages) }},
	{"log.flush.interval.ms", "", "fsync when data is this old (flush.ms); unset = never by time", func(c *Config, v string) error { return parseInt64(v, &c.LogFlushIntervalMs) }},
	{"log.retention.check.interval.ms", "300000", "how often retention is enforced", func(c *Config, v string) error { return parseDurationMs(v, &c.LogRetentionCheckInterval) }},
	{"log.cleaner.enable", "true", "run the log cleaner for compacted topics", func(c *Config, v string) error { return parseBool(v, &c.LogCleanerEnable) }},
	{"log.cleaner.delete.retention.ms", "86400000", "how long tombstones are kept in compacted topics (delete.retention.ms)", func(c *Config, v string) error { return parseInt64(v, &c.LogCleanerDeleteRetentionMs) }},
	{"log.cleaner.min.cleanable.ratio", "0.5", "dirty ratio that triggers compaction (min.cleanable.dirty.ratio)", func(c *Config, v string) error { return parseFloat(v, &c.LogCleanerMinCleanableRatio) }},
	{"log.cleaner.min.compaction.lag.ms", "0", "minimum age of a record before it can be compacted (min.compaction.lag.ms)", func(c *Config, v string) error { return parseInt64(v, &c.LogCleanerMinCompactionLagMs) }},
	{"log.index.interval.bytes", "4096", "bytes between offset index entries (index.interval.bytes)", func(c *Config, v string) error { return parseInt32(v, &c.LogIndexIntervalBytes) }},
	{"log.index.size.max.bytes", "10485760", "preallocated index size (segment.index.bytes)", func(c *Config, v string) error { return parseInt32(v, &c.LogIndexSizeMaxBytes) }},
	{"log.message.timestamp.type", "CreateTime", "CreateTime or LogAppendTime (message.timestamp.type)", func(c *Config, v string) error { c.LogMessageTimestampType = v; return nil }},
	{"compression.type", "producer", "producer, uncompressed, gzip, snappy, lz4 or zstd (compression.type)", func(c *Config, v string) error { c.CompressionType = strings.ToLower(v); return nil }},
	{"message.max.bytes", "1048588", "largest record batch accepted (max.message.bytes)", func(c *Config, v string) error { return parseInt32(v, &c.MessageMaxBytes) }},
	{"message.decompressed.max.bytes", strconv.Itoa(storage.DefaultMaxDecompressedBatchBytes), "largest size a compressed record batch may expand to; every compressed batch is decompressed and its records checked on append, and a larger one is refused with INVALID_RECORD (no Kafka equivalent); at most 268435456", func(c *Config, v string) error { return parseInt64(v, &c.MessageDecompressedMaxBytes) }},
	{"offsets.topic.num.partitions", "50", "partitions of __consumer_offsets", func(c *Config, v string) error { return parseInt32(v, &c.OffsetsTopicNumPartitions) }},
	{"offsets.topic.replication.factor", "3", "replication factor of __consumer_offsets (capped at the number of live brokers when it is created)", func(c *Config, v string) error { return parseInt16(v, &c.OffsetsTopicReplicationFactor) }},
	{"offsets.topic.segment.bytes", "104857600", "segment size of __consumer_offsets", func(c *Config, v string) error { return parseInt64(v, &c.OffsetsTopicSegmentBytes) }},
	{"offsets.retention.minutes", "10080", "how long committed offsets of an empty group are kept", func(c *Config, v string) error { return parseInt32(v, &c.OffsetsRetentionMinutes) }},
	{"group.initial.rebalance.delay.ms", "3000", "delay of a new group's first rebalance", func(c *Config, v string) error { return parseInt32(v, &c.GroupInitialRebalanceDelayMs) }},
	{"group.min.session.timeout.ms", "6000", "smallest session timeout a group member may ask for", func(c *Config, v string) error { return parseInt32(v, &c.GroupMinSessionTimeoutMs) }},
	{"group.max.session.timeout.ms", "1800000", "largest session timeout a group member may ask for", func(c *Config, v string) error { return parseInt32(v, &c.GroupMaxSessionTimeoutMs) }},
	{"group.max.size", "2147483647", "most members a consumer group may have; a member joining a full group gets GROUP_MAX_SIZE_REACHED", func(c *Config, v string) error { return parseInt32(v, &c.GroupMaxSize) }},
	{"offsets.retention.check.interval.ms", "600000", "how often expired committed offsets are removed", func(c *Config, v string) error { return parseDurationMs(v, &c.OffsetsRetentionCheckInterval) }},
	{"offsets.commit.timeout.ms", "5000", "how long an offset commit waits for its write to __consumer_offsets to be acknowledged by every ISR replica", func(c *Config, v string) error { return parseDurationMs(v, &c.OffsetsCommitTimeout) }},
	{"offset.metadata.max.bytes", "4096", "largest metadata string an offset commit may carry (else OFFSET_METADATA_TOO_LARGE)", func(c *Config, v string) error { return parseInt32(v, &c.OffsetMetadataMaxBytes) }},
	{"offsets.load.buffer.size", "5242880", "bytes read at a time when loading __consumer_offsets after becoming a group coordinator", func(c *Config, v string) error { return parseInt32(v, &c.OffsetsLoadBufferSize) }},
	{"zookeeper.connect", "", "host:port[,host:port...][/chroot] of ZooKeeper; empty = single node, metadata kept in the data directory", func(c *Config, v string) error { c.ZookeeperConnect = v; return nil }},
	{"zookeeper.session.timeout.ms", "18000", "ZooKeeper session timeout", func(c *Config, v string) error { return parseInt32(v, &c.ZookeeperSessionTimeoutMs) }},
	{"zookeeper.connection.timeout.ms", "", "time to wait for a ZooKeeper connection; unset = the session timeout", func(c *Config, v string) error { return parseInt32(v, &c.ZookeeperConnectionTimeoutMs) }},
	{"replica.lag.time.max.ms", "30000", "a follower this far behind leaves the ISR", func(c *Config, v string) error { return parseInt64(v, &c.ReplicaLagTimeMaxMs) }},
	{"unclean.leader.election.enable", "false", "let a replica outside the ISR become leader when no ISR member is alive", func(c *Config, v string) error { return parseBool(v, &c.UncleanLeaderElectionEnable) }},
	{"auto.leader.rebalance.enable", "true", "move leadership back to preferred replicas", func(c *Config, v string) error { return parseBool(v, &c.AutoLeaderRebalanceEnable) }},
	{"leader.imbalance.check.interval.seconds", "300", "how often the controller checks leader balance (auto.leader.rebalance.enable)", func(c *Config, v string) error { return parseInt64(v, &c.LeaderImbalanceCheckIntervalSecs) }},
	{"leader.imbalance.per.broker.percentage", "10", "share of a broker's preferred partitions led elsewhere that triggers a rebalance", func(c *Config, v string) error { return parseInt32(v, &c.LeaderImbalancePerBrokerPercentage) }},
	{"replica.fetch.wait.max.ms", "500", "how long a follower's fetch waits at the leader for new records", func(c *Config, v string) error { return parseInt32(v, &c.ReplicaFetchWaitMaxMs) }},
	{"replica.fetch.min.bytes", "1", "bytes a follower's fetch waits for at the leader", func(c *Config, v string) error { return parseInt32(v, &c.ReplicaFetchMinBytes) }},
	{"replica.fetch.max.bytes", "1048576", "bytes a follower fetches per partition per request (at least one batch)", func(c *Config, v string) error { return parseInt32(v, &c.ReplicaFetchMaxBytes) }},
	{"replica.fetch.response.max.bytes", "10485760", "bytes a follower fetches per request", func(c *Config, v string) error { return parseInt32(v, &c.ReplicaFetchResponseMaxBytes) }},
	{"replica.fetch.backoff.ms", "1000", "pause of a follower after a failed fetch", func(c *Config, v string) error { return parseInt32(v, &c.ReplicaFetchBackoffMs) }},
	{"replica.socket.timeout.ms", "30000", "network timeout of broker-to-broker requests", func(c *Config, v string) error { return parseInt32(v, &c.ReplicaSocketTimeoutMs) }},
	{"inter.broker.listener.name", "", "listener followers fetch from and brokers talk to each other on; empty = the first listener", func(c *Config, v string) error { c.InterBrokerListenerName = v; return nil }},
	{"controlled.shutdown.enable", "true", "on shutdown, ask the controller to move leadership away first", func(c *Config, v string) error { return parseBool(v, &c.ControlledShutdownEnable) }},
	{"controlled.shutdown.max.retries", "3", "attempts at a controlled shutdown before stopping anyway", func(c *Config, v string) error { return parseInt32(v, &c.ControlledShutdownMaxRetries) }},
	{"controlled.shutdown.retry.backoff.ms", "5000", "pause between controlled shutdown attempts", func(c *Config, v string) error { return parseInt64(v, &c.ControlledShutdownRetryBackoffMs) }},
	{"console.listen", ":8080", "address of the web console; empty disables it", func(c *Config, v string) error { c.ConsoleListen = v; return nil }},
	{"console.data.dir", "./data/console", "directory of the console's SQLite database; outside every log dir", func(c *Config, v string) error { c.ConsoleDataDir = v; return nil }},
	{"console.tls.cert", "", "PEM certificate for HTTPS on the console (with console.tls.key)", func(c *Config, v string) error { c.ConsoleTLSCert = v; return nil }},
	{"console.tls.key", "", "PEM private key for HTTPS on the console (with console.tls.cert)", func(c *Config, v string) error { c.ConsoleTLSKey = v; return nil }},
	{"console.base.url", "", "external URL of the console, used in links sent by alerts", func(c *Config, v string) error { c.ConsoleBaseURL = v; return nil }},
	{"console.trusted.proxies", "", "comma-separated addresses or CIDR prefixes of reverse proxies in front of the console; X-Forwarded-For is honoured only from them (client address in the audit log and the sign-in backoff)", func(c *Config, v string) error { c.ConsoleTrustedProxies = splitList(v); return nil }},
	{"console.audit.retention.days", "365", "days the console keeps audit log entries", func(c *Config, v string) error { return parseInt32(v, &c.ConsoleAuditRetentionDays) }},
	{"console.audit.max.rows", "1000000", "most audit log entries the console keeps; the oldest go first", func(c *Config, v string) error { return parseInt32(v, &c.ConsoleAuditMaxRows) }},
	{"console.audit.access.enable", "true", "record reads of records (browse, search, export, live tail) as access entries in the audit log", func(c *Config, v string) error { return parseBool(v, &c.ConsoleAuditAccessEnable) }},
	{"alerting.allowed.targets", "", "comma-separated CIDR prefixes, addresses or host:port pairs that notifications may reach although they are loopback, link-local or private (public addresses need no entry)", func(c *Config, v string) error { c.AlertingAllowedTargets = splitList(v); return nil }},
	{"alerting.proxy", "", "HTTP proxy (http://host:port) every notification goes through; empty = direct (the environment's HTTPS_PROXY is not used)", func(c *Config, v string) error { c.AlertingProxy = v; return nil }},
	{"metrics.listen", "", "address of the Prometheus endpoint; empty = served by the console listener", func(c *Config, v string) error { c.MetricsListen = v; return nil }},
	{"metrics.path", "/metrics", "path of the Prometheus endpoint", func(c *Config, v string) error { c.MetricsPath = v; return nil }},
	{"console.lag.sample.interval.ms", "30000", "how often the console samples every group's lag (history charts, exported lag metrics)", func(c *Config, v string) error { return parseDurationMs(v, &c.ConsoleLagSampleInterval) }},
	{"console.topic.replication.factor", "3", "replication factor of the console's topics __sluice_console and __sluice_console_lag (capped at the live brokers when they are created; min.insync.replicas 2 from 3)", func(c *Config, v string) error { return parseInt16(v, &c.ConsoleTopicReplicationFactor) }},
	{"console.lag.history.retention.ms", "604800000", "how long the lag history topic __sluice_console_lag keeps samples, and every console its lag history", func(c *Config, v string) error { return parseDurationMs(v, &c.ConsoleLagHistoryRetention) }},
	{"schema.registry.listen", ":8081", "address of the Confluent-compatible schema registry (topic _schemas); empty disables it. Left at its default, a port already in use only logs a warning", func(c *Config, v string) error { c.SchemaRegistryListen = v; return nil }},
	{"schema.registry.advertised.url", "", "URL other hosts forward registry writes to when this host leads; empty = http(s)://<listener host or advertised host>:<port>", func(c *Config, v string) error { c.SchemaRegistryAdvertisedURL = v; return nil }},
	{"schema.registry.tls.cert", "", "PEM certificate for HTTPS on the schema registry (with schema.registry.tls.key)", func(c *Config, v string) error { c.SchemaRegistryTLSCert = v; return nil }},
	{"schema.registry.tls.key", "", "PEM private key for HTTPS on the schema registry (with schema.registry.tls.cert)", func(c *Config, v string) error { c.SchemaRegistryTLSKey = v; return nil }},
	{"schema.registry.auth", "none", "none, or basic: HTTP basic auth against the console's users (viewer reads; operator and admin also write)", func(c *Config, v string) error {
		c.SchemaRegistryAuth = strings.ToLower(strings.TrimSpace(v))
		return nil
	}},
	{"alerting.evaluation.interval.ms", "30000", "how often the console doing the background work evaluates the alert rules", func(c *Config, v string) error { return parseDurationMs(v, &c.AlertingEvaluationInterval) }},
}

// Key is a configuration key with its default and a one-line description,
// for documentation and `sluice serve --help`.
type Key struct{ Name, Default, Doc string }

// Keys returns every accepted key in documentation order.
func Keys() []Key {
	out := make([]Key, len(keys))
	for i, k := range keys {
		out[i] = Key{k.name, k.def, k.doc}
	}
	return out
}

func lookupKey(name string) (*keyDef, bool) {
	for i := range keys {
		if keys[i].name == name {
			return &keys[i], true
		}
	}
	return nil, false
}

// DefaultConfig returns the configuration with every key at its default.
func DefaultConfig() *Config {
	c := &Config{Given: map[string]string{}}
	if err := c.apply(); err != nil {
		panic("appliance: bad built-in default: " + err.Error())
	}
	return c
}

// Load reads the properties file at path (none when path is "") and then the
// overrides ("key=value", applied in order, later ones win), and returns the
// validated configuration. An unknown key or a bad value is an error naming
// the key.
func Load(path string, overrides []string) (*Config, error) {
	given := map[string]string{}
	var order []string
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		props, err := parseProperties(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		for _, p := range props {
			if _, ok := lookupKey(p.key); !ok {
				return nil, fmt.Errorf("config %s line %d: unknown key %q", path, p.line, p.key)
			}
			if _, seen := given[p.key]; !seen {
				order = append(order, p.key)
			}
			given[p.key] = p.value
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config: --override %q: want key=value", o)
		}
		if _, ok := lookupKey(k); !ok {
			return nil, fmt.Errorf("config: --override: unknown key %q", k)
		}
		if _, seen := given[k]; !seen {
			order = append(order, k)
		}
		given[k] = strings.TrimSpace(v)
	}
	return FromMap(given)
}

// FromMap builds a validated configuration from explicitly given keys.
func FromMap(given map[string]string) (*Config, error) {
	c := &Config{Given: map[string]string{}}
	for k, v := range given {
		if _, ok := lookupKey(k); !ok {
			return nil, fmt.Errorf("config: unknown key %q", k)
		}
		c.Given[k] = v
	}
	if err := c.apply(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// apply sets every field from its default and then from Given.
func (c *Config) apply() error {
	for _, k := range keys {
		if k.set == nil {
			continue
		}
		v, given := c.Given[k.name]
		if !given {
			v = k.def
			if v == "" {
				continue
			}
		}
		if v == "" && !given {
			continue
		}
		if err := k.set(c, v); err != nil {
			return fmt.Errorf("config: %s=%q: %w", k.name, v, err)
		}
	}
	// Keys with precedence chains (Kafka: ms over minutes over hours).
	var err error
	if c.LogRetentionMs, err = c.chain("log.retention.ms", "log.retention.minutes", "log.retention.hours"); err != nil {
		return err
	}
	if c.LogRollMs, err = c.chain("log.roll.ms", "", "log.roll.hours"); err != nil {
		return err
	}
	if _, ok := c.Given["log.flush.interval.ms"]; !ok {
		c.LogFlushIntervalMs = math.MaxInt64
	}
	if c.ZookeeperConnectionTimeoutMs == 0 {
		c.ZookeeperConnectionTimeoutMs = c.ZookeeperSessionTimeoutMs
	}
	return nil
}

// chain resolves a value given in ms, minutes or hours; the finest given key
// wins; -1 in any of them means unlimited.
func (c *Config) chain(msKey, minKey, hourKey string) (int64, error) {
	pick := func(key string, unit int64) (int64, bool, error) {
		if key == "" {
			return 0, false, nil
		}
		v, ok := c.Given[key]
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("config: %s=%q: not an integer", key, v)
		}
		if n < 0 {
			return -1, true, nil
		}
		if n > math.MaxInt64/unit {
			return 0, true, fmt.Errorf("config: %s=%q: too large", key, v)
		}
		return n * unit, true, nil
	}
	for _, k := range []struct {
		key  string
		unit int64
	}{{msKey, 1}, {minKey, 60_000}, {hourKey, 3_600_000}} {
		if v, ok, err := pick(k.key, k.unit); err != nil || ok {
			return v, err
		}
	}
	def, _ := lookupKey(hourKey)
	n, _ := strconv.ParseInt(def.def, 10, 64)
	return n * 3_600_000, nil
}

// EnsureDefaults fills every field still at its zero value with its default.
// Load, FromMap and DefaultConfig already apply every default; EnsureDefaults
// is for a Config built in code. It cannot tell a deliberate zero from an
// unset field, so it leaves BrokerID (0 is a valid id) and the booleans
// alone: start from DefaultConfig() to get those defaults.
func (c *Config) EnsureDefaults() {
	if c.Given == nil {
		c.Given = map[string]string{}
	}
	d := &Config{Given: map[string]string{}}
	if err := d.apply(); err != nil {
		panic("appliance: bad built-in default: " + err.Error())
	}
	if c.Listeners == nil {
		c.Listeners = d.Listeners
	}
	if c.SocketRequestMaxBytes == 0 {
		c.SocketRequestMaxBytes = d.SocketRequestMaxBytes
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = d.FetchMaxBytes
	}
	if c.ConnectionsMaxIdleMs == 0 {
		c.ConnectionsMaxIdleMs = d.ConnectionsMaxIdleMs
	}
	if c.SocketRequestReadTimeoutMs == 0 {
		c.SocketRequestReadTimeoutMs = d.SocketRequestReadTimeoutMs
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = d.MaxConnections
	}
	if c.MaxConnectionsPerIP == 0 && len(c.MaxConnectionsPerIPOverrides) == 0 {
		c.MaxConnectionsPerIP = d.MaxConnectionsPerIP
	}
	if c.QueuedMaxRequestBytes == 0 {
		c.QueuedMaxRequestBytes = d.QueuedMaxRequestBytes
	}
	if c.MessageDecompressedMaxBytes == 0 {
		c.MessageDecompressedMaxBytes = d.MessageDecompressedMaxBytes
	}
	if len(c.LogDirs) == 0 {
		c.LogDirs = d.LogDirs
	}
	if c.NumPartitions == 0 {
		c.NumPartitions = d.NumPartitions
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = d.DefaultReplicationFactor
	}
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = d.MinInsyncReplicas
	}
	if c.LogRetentionMs == 0 {
		c.LogRetentionMs = d.LogRetentionMs
	}
	if c.LogRetentionBytes == 0 {
		c.LogRetentionBytes = d.LogRetentionBytes
	}
	if c.LogSegmentBytes == 0 {
		c.LogSegmentBytes = d.LogSegmentBytes
	}
	if c.LogRollMs == 0 {
		c.LogRollMs = d.LogRollMs
	}
	if c.LogCleanupPolicy == "" {
		c.LogCleanupPolicy = d.LogCleanupPolicy
	}
	if c.LogFlushIntervalMessages == 0 {
		c.LogFlushIntervalMessages = d.LogFlushIntervalMessages
	}
	if c.LogFlushIntervalMs == 0 {
		c.LogFlushIntervalMs = d.LogFlushIntervalMs
	}
	if c.LogRetentionCheckInterval == 0 {
		c.LogRetentionCheckInterval = d.LogRetentionCheckInterval
	}
	if c.LogCleanerDeleteRetentionMs == 0 {
		c.LogCleanerDeleteRetentionMs = d.LogCleanerDeleteRetentionMs
	}
	if c.LogCleanerMinCleanableRatio == 0 {
		c.LogCleanerMinCleanableRatio = d.LogCleanerMinCleanableRatio
	}
	if c.LogIndexIntervalBytes == 0 {
		c.LogIndexIntervalBytes = d.LogIndexIntervalBytes
	}
	if c.LogIndexSizeMaxBytes == 0 {
		c.LogIndexSizeMaxBytes = d.LogIndexSizeMaxBytes
	}
	if c.LogMessageTimestampType == "" {
		c.LogMessageTimestampType = d.LogMessageTimestampType
	}
	if c.CompressionType == "" {
		c.CompressionType = d.CompressionType
	}
	if c.MessageMaxBytes == 0 {
		c.MessageMaxBytes = d.MessageMaxBytes
	}
	if c.OffsetsTopicNumPartitions == 0 {
		c.OffsetsTopicNumPartitions = d.OffsetsTopicNumPartitions
	}
	if c.OffsetsTopicReplicationFactor == 0 {
		c.OffsetsTopicReplicationFactor = d.OffsetsTopicReplicationFactor
	}
	if c.OffsetsTopicSegmentBytes == 0 {
		c.OffsetsTopicSegmentBytes = d.OffsetsTopicSegmentBytes
	}
	if c.OffsetsRetentionMinutes == 0 {
		c.OffsetsRetentionMinutes = d.OffsetsRetentionMinutes
	}
	if c.GroupInitialRebalanceDelayMs == 0 {
		if _, ok := c.Given["group.initial.rebalance.delay.ms"]; !ok {
			c.GroupInitialRebalanceDelayMs = d.GroupInitialRebalanceDelayMs
		}
	}
	if c.GroupMinSessionTimeoutMs == 0 {
		c.GroupMinSessionTimeoutMs = d.GroupMinSessionTimeoutMs
	}
	if c.GroupMaxSessionTimeoutMs == 0 {
		c.GroupMaxSessionTimeoutMs = d.GroupMaxSessionTimeoutMs
	}
	if c.GroupMaxSize == 0 {
		c.GroupMaxSize = d.GroupMaxSize
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = d.OffsetsRetentionCheckInterval
	}
	if c.OffsetsCommitTimeout == 0 {
		c.OffsetsCommitTimeout = d.OffsetsCommitTimeout
	}
	if c.OffsetMetadataMaxBytes == 0 {
		if _, ok := c.Given["offset.metadata.max.bytes"]; !ok {
			c.OffsetMetadataMaxBytes = d.OffsetMetadataMaxBytes
		}
	}
	if c.OffsetsLoadBufferSize == 0 {
		c.OffsetsLoadBufferSize = d.OffsetsLoadBufferSize
	}
	if c.ZookeeperSessionTimeoutMs == 0 {
		c.ZookeeperSessionTimeoutMs = d.ZookeeperSessionTimeoutMs
	}
	if c.ZookeeperConnectionTimeoutMs == 0 {
		c.ZookeeperConnectionTimeoutMs = c.ZookeeperSessionTimeoutMs
	}
	if c.ReplicaFetchWaitMaxMs == 0 {
		c.ReplicaFetchWaitMaxMs = d.ReplicaFetchWaitMaxMs
	}
	if c.ReplicaFetchMinBytes == 0 {
		c.ReplicaFetchMinBytes = d.ReplicaFetchMinBytes
	}
	if c.ReplicaFetchMaxBytes == 0 {
		c.ReplicaFetchMaxBytes = d.ReplicaFetchMaxBytes
	}
	if c.ReplicaFetchResponseMaxBytes == 0 {
		c.ReplicaFetchResponseMaxBytes = d.ReplicaFetchResponseMaxBytes
	}
	if c.ReplicaFetchBackoffMs == 0 {
		c.ReplicaFetchBackoffMs = d.ReplicaFetchBackoffMs
	}
	if c.ReplicaSocketTimeoutMs == 0 {
		c.ReplicaSocketTimeoutMs = d.ReplicaSocketTimeoutMs
	}
	if c.LeaderImbalanceCheckIntervalSecs == 0 {
		c.LeaderImbalanceCheckIntervalSecs = d.LeaderImbalanceCheckIntervalSecs
	}
	if c.LeaderImbalancePerBrokerPercentage == 0 {
		c.LeaderImbalancePerBrokerPercentage = d.LeaderImbalancePerBrokerPercentage
	}
	if c.ControlledShutdownMaxRetries == 0 {
		if _, ok := c.Given["controlled.shutdown.max.retries"]; !ok {
			c.ControlledShutdownMaxRetries = d.ControlledShutdownMaxRetries
		}
	}
	if c.ControlledShutdownRetryBackoffMs == 0 {
		if _, ok := c.Given["controlled.shutdown.retry.backoff.ms"]; !ok {
			c.ControlledShutdownRetryBackoffMs = d.ControlledShutdownRetryBackoffMs
		}
	}
	if _, ok := c.Given["controlled.shutdown.enable"]; !ok && !c.ControlledShutdownEnable {
		c.ControlledShutdownEnable = d.ControlledShutdownEnable
	}
	if c.ReplicaLagTimeMaxMs == 0 {
		c.ReplicaLagTimeMaxMs = d.ReplicaLagTimeMaxMs
	}
	if c.ConsoleDataDir == "" {
		c.ConsoleDataDir = d.ConsoleDataDir
	}
	if c.MetricsPath == "" {
		c.MetricsPath = d.MetricsPath
	}
	if c.ConsoleLagSampleInterval == 0 {
		c.ConsoleLagSampleInterval = d.ConsoleLagSampleInterval
	}
	if c.AlertingEvaluationInterval == 0 {
		c.AlertingEvaluationInterval = d.AlertingEvaluationInterval
	}
	if c.ConsoleTopicReplicationFactor == 0 {
		c.ConsoleTopicReplicationFactor = d.ConsoleTopicReplicationFactor
	}
	if c.ConsoleLagHistoryRetention == 0 {
		c.ConsoleLagHistoryRetention = d.ConsoleLagHistoryRetention
	}
	if c.ConsoleAuditRetentionDays == 0 {
		c.ConsoleAuditRetentionDays = d.ConsoleAuditRetentionDays
	}
	if c.ConsoleAuditMaxRows == 0 {
		c.ConsoleAuditMaxRows = d.ConsoleAuditMaxRows
	}
	if _, ok := c.Given["console.audit.access.enable"]; !ok && !c.ConsoleAuditAccessEnable {
		c.ConsoleAuditAccessEnable = d.ConsoleAuditAccessEnable
	}
}

// Validate checks ranges and combinations; the error names the key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.BrokerID < -1 {
		bad("broker.id", "%d: must be -1 (generate) or a non-negative id", c.BrokerID)
	}
	if len(c.Listeners) == 0 {
		bad("listeners", "at least one listener is needed")
	}
	names := map[string]bool{}
	for _, l := range c.Listeners {
		if names[l.Name] {
			bad("listeners", "listener name %s is used twice", l.Name)
		}
		names[l.Name] = true
	}
	for _, l := range c.AdvertisedListeners {
		if !names[l.Name] {
			bad("advertised.listeners", "%s names no listener in listeners", l)
		}
		if ip := net.ParseIP(l.Host); ip != nil && ip.IsUnspecified() {
			bad("advertised.listeners", "%s: cannot advertise an unspecified address", l)
		}
		if l.Port == 0 {
			bad("advertised.listeners", "%s: port 0 cannot be advertised", l)
		}
	}
	if c.FetchMaxBytes < 1024 {
		bad("fetch.max.bytes", "%d: must be at least 1024", c.FetchMaxBytes)
	}
	if c.SocketRequestMaxBytes < 1 {
		bad("socket.request.max.bytes", "%d: must be at least 1", c.SocketRequestMaxBytes)
	}
	if c.ConnectionsMaxIdleMs < 1 && c.ConnectionsMaxIdleMs != -1 {
		bad("connections.max.idle.ms", "%d: must be -1 (never) or at least 1", c.ConnectionsMaxIdleMs)
	}
	if c.SocketRequestReadTimeoutMs < 1 && c.SocketRequestReadTimeoutMs != -1 {
		bad("socket.request.read.timeout.ms", "%d: must be -1 (never) or at least 1", c.SocketRequestReadTimeoutMs)
	}
	if c.MaxConnections < 1 {
		bad("max.connections", "%d: must be at least 1", c.MaxConnections)
	}
	if c.MaxConnectionsPerIP < 0 {
		bad("max.connections.per.ip", "%d: must not be negative", c.MaxConnectionsPerIP)
	}
	if c.MaxConnectionsPerIP == 0 && len(c.MaxConnectionsPerIPOverrides) == 0 {
		bad("max.connections.per.ip", "can be set to zero only if max.connections.per.ip.overrides is set")
	}
	if c.QueuedMaxRequestBytes > 0 && c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		bad("queued.max.request.bytes", "%d: must be -1 (unbounded) or at least socket.request.max.bytes (%d)", c.QueuedMaxRequestBytes, c.SocketRequestMaxBytes)
	}
	if len(c.LogDirs) == 0 {
		bad("log.dirs", "at least one directory is needed")
	}
	if c.NumPartitions < 1 || c.NumPartitions >= cluster.MaxRecordsPerRequest {
		bad("num.partitions", "%d: must be at least 1 and below %d (a topic and its partitions are created in one request of at most %d metadata records, as in Kafka)", c.NumPartitions, cluster.MaxRecordsPerRequest, cluster.MaxRecordsPerRequest)
	}
	if c.DefaultReplicationFactor < 1 {
		bad("default.replication.factor", "%d: must be at least 1", c.DefaultReplicationFactor)
	}
	if c.MinInsyncReplicas < 1 {
		bad("min.insync.replicas", "%d: must be at least 1", c.MinInsyncReplicas)
	}
	if c.LogRetentionMs < -1 {
		bad("log.retention.ms", "%d: must be -1 or more", c.LogRetentionMs)
	}
	if c.LogRetentionBytes < -1 {
		bad("log.retention.bytes", "%d: must be -1 or more", c.LogRetentionBytes)
	}
	if c.LogSegmentBytes < 14 || c.LogSegmentBytes > math.MaxInt32 {
		bad("log.segment.bytes", "%d: must be between 14 and %d", c.LogSegmentBytes, math.MaxInt32)
	}
	if c.LogRollMs < 1 {
		bad("log.roll.ms", "%d: must be at least 1", c.LogRollMs)
	}
	if err := ValidateCleanupPolicy(c.LogCleanupPolicy); err != nil {
		bad("log.cleanup.policy", "%v", err)
	}
	if c.LogFlushIntervalMessages < 1 {
		bad("log.flush.interval.messages", "%d: must be at least 1", c.LogFlushIntervalMessages)
	}
	if c.LogFlushIntervalMs < 0 {
		bad("log.flush.interval.ms", "%d: must not be negative", c.LogFlushIntervalMs)
	}
	if c.LogRetentionCheckInterval < time.Millisecond {
		bad("log.retention.check.interval.ms", "%v: must be at least 1", c.LogRetentionCheckInterval)
	}
	if c.LogCleanerDeleteRetentionMs < 0 {
		bad("log.cleaner.delete.retention.ms", "%d: must not be negative", c.LogCleanerDeleteRetentionMs)
	}
	if c.LogCleanerMinCleanableRatio < 0 || c.LogCleanerMinCleanableRatio > 1 {
		bad("log.cleaner.min.cleanable.ratio", "%v: must be between 0 and 1", c.LogCleanerMinCleanableRatio)
	}
	if c.LogCleanerMinCompactionLagMs < 0 {
		bad("log.cleaner.min.compaction.lag.ms", "%d: must not be negative", c.LogCleanerMinCompactionLagMs)
	}
	if c.LogIndexIntervalBytes < 0 {
		bad("log.index.interval.bytes", "%d: must not be negative", c.LogIndexIntervalBytes)
	}
	if c.LogIndexSizeMaxBytes < 4 {
		bad("log.index.size.max.bytes", "%d: must be at least 4", c.LogIndexSizeMaxBytes)
	}
	if c.LogMessageTimestampType != "CreateTime" && c.LogMessageTimestampType != "LogAppendTime" {
		bad("log.message.timestamp.type", "%q: must be CreateTime or LogAppendTime", c.LogMessageTimestampType)
	}
	if !slices.Contains([]string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}, c.CompressionType) {
		bad("compression.type", "%q: must be one of producer, uncompressed, gzip, snappy, lz4, zstd", c.CompressionType)
	}
	if c.MessageMaxBytes < 0 {
		bad("message.max.bytes", "%d: must not be negative", c.MessageMaxBytes)
	}
	if c.OffsetsTopicNumPartitions < 1 || c.OffsetsTopicNumPartitions > cluster.MaxRecordsPerRequest-4 {
		bad("offsets.topic.num.partitions", "%d: must be at least 1 and at most %d (the topic, its partitions and its 3 configs are created in one request of at most %d metadata records, as in Kafka)", c.OffsetsTopicNumPartitions, cluster.MaxRecordsPerRequest-4, cluster.MaxRecordsPerRequest)
	}
	if c.MessageDecompressedMaxBytes < 1 || c.MessageDecompressedMaxBytes > storage.MaxDecompressedBatchBytesLimit {
		bad("message.decompressed.max.bytes", "%d: must be between 1 and %d", c.MessageDecompressedMaxBytes, storage.MaxDecompressedBatchBytesLimit)
	}
	if c.OffsetsTopicReplicationFactor < 1 {
		bad("offsets.topic.replication.factor", "%d: must be at least 1", c.OffsetsTopicReplicationFactor)
	}
	if c.OffsetsTopicSegmentBytes < 1 {
		bad("offsets.topic.segment.bytes", "%d: must be at least 1", c.OffsetsTopicSegmentBytes)
	}
	if c.OffsetsRetentionMinutes < 1 {
		bad("offsets.retention.minutes", "%d: must be at least 1", c.OffsetsRetentionMinutes)
	}
	if c.GroupInitialRebalanceDelayMs < 0 {
		bad("group.initial.rebalance.delay.ms", "%d: must not be negative", c.GroupInitialRebalanceDelayMs)
	}
	if c.GroupMinSessionTimeoutMs < 0 {
		bad("group.min.session.timeout.ms", "%d: must not be negative", c.GroupMinSessionTimeoutMs)
	}
	if c.GroupMaxSessionTimeoutMs < c.GroupMinSessionTimeoutMs {
		bad("group.max.session.timeout.ms", "%d: must not be below group.min.session.timeout.ms (%d)", c.GroupMaxSessionTimeoutMs, c.GroupMinSessionTimeoutMs)
	}
	if c.GroupMaxSize < 1 {
		bad("group.max.size", "%d: must be at least 1", c.GroupMaxSize)
	}
	if c.OffsetsRetentionCheckInterval < time.Millisecond {
		bad("offsets.retention.check.interval.ms", "%d: must be at least 1", c.OffsetsRetentionCheckInterval.Milliseconds())
	}
	if c.OffsetsCommitTimeout < time.Millisecond {
		bad("offsets.commit.timeout.ms", "%d: must be at least 1", c.OffsetsCommitTimeout.Milliseconds())
	}
	if c.OffsetMetadataMaxBytes < 0 {
		bad("offset.metadata.max.bytes", "%d: must not be negative", c.OffsetMetadataMaxBytes)
	}
	if c.OffsetsLoadBufferSize < 1 {
		bad("offsets.load.buffer.size", "%d: must be at least 1", c.OffsetsLoadBufferSize)
	}
	if c.ZookeeperSessionTimeoutMs < 1 {
		bad("zookeeper.session.timeout.ms", "%d: must be at least 1", c.ZookeeperSessionTimeoutMs)
	}
	if c.ZookeeperConnectionTimeoutMs < 1 {
		bad("zookeeper.connection.timeout.ms", "%d: must be at least 1", c.ZookeeperConnectionTimeoutMs)
	}
	if c.ZookeeperConnect != "" {
		hosts, _, _ := strings.Cut(c.ZookeeperConnect, "/")
		for _, h := range strings.Split(hosts, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(h)); err != nil {
				bad("zookeeper.connect", "%q: want host:port[,host:port...][/chroot]", c.ZookeeperConnect)
				break
			}
		}
	}
	if c.ReplicaLagTimeMaxMs < 1 {
		bad("replica.lag.time.max.ms", "%d: must be at least 1", c.ReplicaLagTimeMaxMs)
	}
	for _, k := range []struct {
		name string
		v    int64
	}{
		{"replica.fetch.wait.max.ms", int64(c.ReplicaFetchWaitMaxMs)},
		{"replica.fetch.min.bytes", int64(c.ReplicaFetchMinBytes)},
		{"replica.fetch.max.bytes", int64(c.ReplicaFetchMaxBytes)},
		{"replica.fetch.response.max.bytes", int64(c.ReplicaFetchResponseMaxBytes)},
		{"replica.fetch.backoff.ms", int64(c.ReplicaFetchBackoffMs)},
		{"replica.socket.timeout.ms", int64(c.ReplicaSocketTimeoutMs)},
		{"leader.imbalance.check.interval.seconds", c.LeaderImbalanceCheckIntervalSecs},
		{"leader.imbalance.per.broker.percentage", int64(c.LeaderImbalancePerBrokerPercentage)},
	} {
		if k.v < 1 {
			bad(k.name, "%d: must be at least 1", k.v)
		}
	}
	if c.ReplicaFetchWaitMaxMs >= c.ReplicaSocketTimeoutMs {
		bad("replica.fetch.wait.max.ms", "%d: must be below replica.socket.timeout.ms (%d)", c.ReplicaFetchWaitMaxMs, c.ReplicaSocketTimeoutMs)
	}
	if c.ControlledShutdownMaxRetries < 0 {
		bad("controlled.shutdown.max.retries", "%d: must not be negative", c.ControlledShutdownMaxRetries)
	}
	if c.ControlledShutdownRetryBackoffMs < 0 {
		bad("controlled.shutdown.retry.backoff.ms", "%d: must not be negative", c.ControlledShutdownRetryBackoffMs)
	}
	if c.InterBrokerListenerName != "" && !names[c.InterBrokerListenerName] {
		bad("inter.broker.listener.name", "%q names no listener in listeners", c.InterBrokerListenerName)
	}
	if c.ConsoleListen != "" {
		if _, _, err := net.SplitHostPort(c.ConsoleListen); err != nil {
			bad("console.listen", "%q: want host:port or :port", c.ConsoleListen)
		}
	}
	if (c.ConsoleTLSCert == "") != (c.ConsoleTLSKey == "") {
		bad("console.tls.cert", "console.tls.cert and console.tls.key must be set together")
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			bad("metrics.listen", "%q: want host:port or :port", c.MetricsListen)
		}
	}
	if !strings.HasPrefix(c.MetricsPath, "/") {
		bad("metrics.path", "%q: must start with /", c.MetricsPath)
	}
	if c.SchemaRegistryListen != "" {
		if _, _, err := net.SplitHostPort(c.SchemaRegistryListen); err != nil {
			bad("schema.registry.listen", "%q: want host:port or :port", c.SchemaRegistryListen)
		}
	}
	if (c.SchemaRegistryTLSCert == "") != (c.SchemaRegistryTLSKey == "") {
		bad("schema.registry.tls.cert", "schema.registry.tls.cert and schema.registry.tls.key must be set together")
	}
	if c.SchemaRegistryAuth != "" && c.SchemaRegistryAuth != "none" && c.SchemaRegistryAuth != "basic" {
		bad("schema.registry.auth", "%q: want none or basic", c.SchemaRegistryAuth)
	}
	if c.ConsoleLagSampleInterval < time.Second {
		bad("console.lag.sample.interval.ms", "%d: must be at least 1000", c.ConsoleLagSampleInterval.Milliseconds())
	}
	if c.AlertingEvaluationInterval < 100*time.Millisecond {
		bad("alerting.evaluation.interval.ms", "%d: must be at least 100", c.AlertingEvaluationInterval.Milliseconds())
	}
	if c.ConsoleTopicReplicationFactor < 1 {
		bad("console.topic.replication.factor", "%d: must be at least 1", c.ConsoleTopicReplicationFactor)
	}
	if c.ConsoleLagHistoryRetention < time.Minute {
		bad("console.lag.history.retention.ms", "%d: must be at least 60000", c.ConsoleLagHistoryRetention.Milliseconds())
	}
	if err := web.ValidateTrustedProxies(c.ConsoleTrustedProxies); err != nil {
		bad("console.trusted.proxies", "%v", err)
	}
	if c.ConsoleAuditRetentionDays < 1 {
		bad("console.audit.retention.days", "%d: must be at least 1", c.ConsoleAuditRetentionDays)
	}
	if c.ConsoleAuditMaxRows < 1000 {
		bad("console.audit.max.rows", "%d: must be at least 1000", c.ConsoleAuditMaxRows)
	}
	if _, err := alerting.ParseTargets(c.AlertingAllowedTargets); err != nil {
		bad("alerting.allowed.targets", "%v", errors.Unwrap(err)) // the error names the key already
	}
	if _, err := alerting.ParseProxy(c.AlertingProxy); err != nil {
		bad("alerting.proxy", "%v", errors.Unwrap(err))
	}
	errs = append(errs, c.checkDirs()...) // dirs.go
	return errors.Join(errs...)
}

// ValidateCleanupPolicy accepts delete, compact, or both comma-separated.
func ValidateCleanupPolicy(v string) error {
	parts := splitList(v)
	if len(parts) == 0 {
		return fmt.Errorf("%q: must be delete, compact or compact,delete", v)
	}
	for _, p := range parts {
		if p != "delete" && p != "compact" {
			return fmt.Errorf("%q: must be delete, compact or compact,delete", v)
		}
	}
	return nil
}

// AdvertisedEndpoints returns what clients are told: advertised.listeners,
// or listeners when unset, with an empty or unspecified host replaced by the
// machine's host name (Kafka's behaviour) and port 0 replaced by the port
// actually bound (bound maps listener name to it).
func (c *Config) AdvertisedEndpoints(bound map[string]int) []Listener {
	src := c.AdvertisedListeners
	if len(src) == 0 {
		src = c.Listeners
	}
	out := make([]Listener, 0, len(src))
	for _, l := range src {
		if ip := net.ParseIP(l.Host); l.Host == "" || ip != nil && ip.IsUnspecified() {
			l.Host = advertisedHost()
		}
		if l.Port == 0 {
			l.Port = bound[l.Name]
		}
		out = append(out, l)
	}
	return out
}

// advertisedHost is the host name, when it resolves; else 127.0.0.1.
func advertisedHost() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "127.0.0.1"
	}
	if _, err := net.LookupHost(h); err != nil {
		return "127.0.0.1"
	}
	return h
}

func parseListeners(v string) ([]Listener, error) {
	var out []Listener
	for _, item := range splitList(v) {
		name, hostport, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME://host:port", item)
		}
		name = strings.ToUpper(name)
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port", item)
		}
		if name != "PLAINTEXT" {
			return nil, fmt.Errorf("%q: only PLAINTEXT listeners are supported", item)
		}
		out = append(out, Listener{Name: name, Host: host, Port: p})
	}
	return out, nil
}

// parseConnectionOverrides reads max.connections.per.ip.overrides:
// host:limit or ip:limit, comma-separated (the limit after the last colon,
// so IPv6 addresses may be written bare or in brackets).
func parseConnectionOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range splitList(v) {
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want host:limit", item)
		}
		host := strings.Trim(strings.TrimSpace(item[:i]), "[]")
		n, err := strconv.Atoi(strings.TrimSpace(item[i+1:]))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the limit must be a non-negative integer", item)
		}
		if host == "" {
			return nil, fmt.Errorf("%q: want host:limit", item)
		}
		out[host] = n
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseInt32(v string, dst *int32) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return errors.New("not a 32-bit integer")
	}
	*dst = int32(n)
	return nil
}

func parseInt16(v string, dst *int16) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 16)
	if err != nil {
		return errors.New("not a 16-bit integer")
	}
	*dst = int16(n)
	return nil
}

func parseInt64(v string, dst *int64) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	*dst = n
	return nil
}

func parseFloat(v string, dst *float64) error {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return errors.New("not a number")
	}
	*dst = n
	return nil
}

func parseBool(v string, dst *bool) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errors.New("must be true or false")
	}
	return nil
}

func parseDurationMs(v string, dst *time.Duration) error {
	var n int64
	if err := parseInt64(v, &n); err != nil {
		return err
	}
	*dst = time.Duration(n) * time.Millisecond
	return nil
}

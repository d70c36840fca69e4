package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// The sections of the reference, in its order.
var (
	groupBroker = &Group{Title: "Broker",
		Intro: "Identity and listeners of this broker."}
	groupRequests = &Group{Title: "Requests and connections",
		Intro: "Limits on what clients may send and hold open: each protects the broker from a client that sends too much, too many or too slowly."}
	groupLogs = &Group{Title: "Topics and logs",
		Intro: "Defaults of new topics, the broker-level defaults of the topic configs (a config set on a topic wins over its broker key; see [Topic configs](#topic-configs)), and the log's background work."}
	groupGroups = &Group{Title: "Consumer groups",
		Intro: "The group coordinator and `__consumer_offsets`, where groups keep their assignments and committed offsets."}
	groupTransactions = &Group{Title: "Transactions",
		Intro: "The transaction coordinator and `__transaction_state`, where transactional producers (exactly-once) keep their transactions; and how long the log remembers a producer."}
	groupCluster = &Group{Title: "Cluster mode: ZooKeeper and replication",
		Intro: "The keys of a broker that is one of a cluster (`zookeeper.connect` set); a single node uses none of the others."}
	groupSecurity = &Group{Title: "Security: listeners, TLS and SASL",
		Intro: "How clients and brokers connect and authenticate: each listener's security protocol, its TLS keys and its SASL mechanisms. A key marked per listener may also be set for one listener only as `listener.name.<listener>.<key>` (the listener's name in lower case), which wins over the bare key on that listener. Users are SCRAM credentials kept in the cluster's store (`sluice users`). See docs/security.md."}
	groupAuthorization = &Group{Title: "Authorization (ACLs)",
		Intro: "Kafka's ACLs, kept in ZooKeeper's /kafka-acl nodes (or the single node's metadata file) and managed with `sluice acls`, kafka-acls.sh or any admin client; see [ACLs](acls.md)."}
	groupConsole = &Group{Title: "Web console",
		Intro: "The console runs in the broker's process. In a cluster, the background work (lag sampling, alert evaluation, comparisons) is done by one console at a time, the leader."}
	groupAlerting = &Group{Title: "Alerting",
		Intro: "Alert rules and their notifications (PagerDuty, webhooks), evaluated by the console that leads."}
	groupMetrics = &Group{Title: "Metrics",
		Intro: "The Prometheus endpoint (the text format, or OpenMetrics when the scraper asks for it)."}
	groupSchemaRegistry = &Group{Title: "Schema registry",
		Intro: "A Confluent-compatible schema registry served on its own listener, its schemas kept in the compacted topic `_schemas`."}
)

// keys is every broker key Sluice accepts, grouped, in the reference's
// order. Each binds its name to its Config field; a key read only as the
// synonym of another (log.retention.hours) has no field and a scale.
//
// A new key: add a field to Config and an entry here, in its group, with
// its default as text, its doc (a sentence), its rule and, when Kafka can
// change it at run time, its Mode; `make docs` then regenerates
// docs/configuration.md and packaging/server.properties. A broker key that
// gives a topic config's default takes its type, rules and default from
// topicKeys (topic.go) and is cluster-wide, as in Kafka.
var keys = []Key{
	// Broker.
	{Name: "broker.id", Default: "-1", Group: groupBroker,
		Doc:  "This broker's id; -1 generates one (1001 upwards, as Kafka does) and keeps it in meta.properties in the log directory. Every broker of a cluster needs its own id.",
		rule: neverOrAtLeast(0, "generate"), field: func(c *Config) any { return &c.BrokerID }},
	{Name: "broker.rack", Group: groupBroker,
		Doc:   "Rack of this broker, shown in metadata. When every broker has one, new topics place each partition's replicas on different racks (Kafka's rack-aware assignment).",
		field: func(c *Config) any { return &c.BrokerRack }},
	{Name: "listeners", Type: String, Default: "PLAINTEXT://:9092", Mode: PerBroker, Group: groupBroker,
		Doc:   "Comma-separated NAME://host:port to listen on for Kafka clients; an empty host means every interface. A name is a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or a name mapped to one by listener.security.protocol.map; see [Security](#security-listeners-tls-and-sasl).",
		field: func(c *Config) any { return &c.Listeners }},
	{Name: "advertised.listeners", Type: String, Mode: PerBroker, Group: groupBroker,
		Doc:   "NAME://host:port that clients are told to connect to; empty = listeners, with this machine's host name for an empty host. Set it when clients reach this host under another name or address.",
		field: func(c *Config) any { return &c.AdvertisedListeners }},

	// Requests and connections.
	{Name: "socket.request.max.bytes", Default: "104857600", Group: groupRequests,
		Doc:  "Largest request frame accepted; a larger one closes the connection.",
		rule: atLeast(1), field: func(c *Config) any { return &c.SocketRequestMaxBytes }},
	{Name: "fetch.max.bytes", Default: "57671680", Group: groupRequests,
		Doc:  "Most record bytes one Fetch answer carries: a request asking for more gets this much, and the first batch goes out whatever its size.",
		rule: atLeast(1024), field: func(c *Config) any { return &c.FetchMaxBytes }},
	{Name: "connections.max.idle.ms", Default: "600000", Group: groupRequests,
		Doc:  "A client connection that read and wrote nothing for this long is closed.",
		rule: neverOrAtLeast(1, "never"), field: func(c *Config) any { return &c.ConnectionsMaxIdleMs }},
	{Name: "socket.request.read.timeout.ms", Default: "30000", Group: groupRequests,
		Doc:  "A request frame must arrive whole within this long of its first byte, else the connection is closed (slow or stalled senders; no Kafka equivalent).",
		rule: neverOrAtLeast(1, "wait forever"), field: func(c *Config) any { return &c.SocketRequestReadTimeoutMs }},
	{Name: "max.connections", Default: "4096", Mode: ClusterWide, Group: groupRequests, Dynamic: true,
		Doc:  "Client connections open at once over all listeners; one more is closed at accept (Kafka: unbounded; an idle connection holds about 40 KiB). Dynamic: a new value applies to the connections accepted from then on; those open stay.",
		rule: atLeast(1), field: func(c *Config) any { return &c.MaxConnections }},
	{Name: "max.connections.per.ip", Default: "2147483647", Mode: ClusterWide, Group: groupRequests, Dynamic: true,
		Doc:  "Client connections open at once from one address; one more is closed at accept. 0 admits only the addresses in max.connections.per.ip.overrides. Dynamic, as max.connections.",
		rule: atLeast(0), field: func(c *Config) any { return &c.MaxConnectionsPerIP }},
	{Name: "max.connections.per.ip.overrides", Type: String, Mode: ClusterWide, Group: groupRequests,
		Doc:   "Comma-separated host:limit or ip:limit exceptions to max.connections.per.ip, e.g. 10.0.0.5:2000,ingest.example.com:500 (host names are resolved at start-up).",
		field: func(c *Config) any { return &c.MaxConnectionsPerIPOverrides }},
	{Name: "controller.quota.window.num", Default: "11", Group: groupRequests,
		Doc:  "Samples of a client's controller_mutation_rate quota: its token bucket holds controller.quota.window.num times controller.quota.window.size.seconds worth of the quota, the partitions it may create or delete in one burst.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ControllerQuotaWindowNum }},
	{Name: "controller.quota.window.size.seconds", Default: "1", Group: groupRequests,
		Doc:  "Length of one sample of controller.quota.window.num.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ControllerQuotaWindowSeconds }},
	{Name: "quota.window.num", Default: "11", Group: groupRequests,
		Doc:  "Samples a client's rate is measured over for its client quotas (producer_byte_rate, consumer_byte_rate, request_percentage; set with sluice quotas or kafka-configs.sh --entity-type users/clients).",
		rule: atLeast(1), field: func(c *Config) any { return &c.QuotaWindowNum }},
	{Name: "quota.window.size.seconds", Default: "1", Group: groupRequests,
		Doc:  "Length of one sample of quota.window.num: a client's rate is measured over the last quota.window.num of them.",
		rule: atLeast(1), field: func(c *Config) any { return &c.QuotaWindowSizeSeconds }},
	{Name: "queued.max.request.bytes", Default: "268435456", Group: groupRequests,
		Doc:   "Request bytes read and not yet handled, over all connections, before reading waits (Kafka's default: unbounded).",
		rule:  Rule{Doc: "-1 or 0 (unbounded), or at least socket.request.max.bytes"}, // checked in Validate
		field: func(c *Config) any { return &c.QueuedMaxRequestBytes }},

	// Topics and logs.
	{Name: "log.dirs", Type: String, Default: "./data/kafka", Synonyms: []string{"log.dir"}, Group: groupLogs,
		Doc:  "Comma-separated directories holding the partition logs. No log dir may hold another, nor console.data.dir.",
		rule: nonEmptyList("directory"), field: func(c *Config) any { return &c.LogDirs }},
	{Name: "log.dir", Type: String, Group: groupLogs,
		Doc: "A single log directory."},
	{Name: "num.partitions", Default: "1", Group: groupLogs,
		Doc:  "Partitions of an auto-created topic, or of a CreateTopics without a count. A topic and its partitions are created in one request of at most 10000 metadata records, as in Kafka.",
		rule: between(1, maxRecordsPerRequest-1), field: func(c *Config) any { return &c.NumPartitions }},
	{Name: "default.replication.factor", Type: Int, Default: "1", Group: groupLogs,
		Doc:  "Replication factor of auto-created topics and of CreateTopics without one.",
		rule: atLeast(1), field: func(c *Config) any { return &c.DefaultReplicationFactor }},
	{Name: "min.insync.replicas", Default: "1", Group: groupLogs,
		Doc:   "acks=all produce fails with NOT_ENOUGH_REPLICAS when the ISR is smaller.",
		field: func(c *Config) any { return &c.MinInsyncReplicas }},
	{Name: "auto.create.topics.enable", Default: "true", Group: groupLogs,
		Doc:   "Create a topic when a client's Metadata request asks for an unknown one (__consumer_offsets is created whatever this says, as Kafka does).",
		field: func(c *Config) any { return &c.AutoCreateTopics }},
	{Name: "delete.topic.enable", Default: "true", Group: groupLogs,
		Doc:   "Allow DeleteTopics.",
		field: func(c *Config) any { return &c.DeleteTopicEnable }},
	{Name: "log.retention.hours", Type: Int, Default: "168", scale: 3_600_000, Group: groupLogs,
		Doc: "Retention time in hours."},
	{Name: "log.retention.minutes", Type: Int, scale: 60_000, Group: groupLogs,
		Doc: "Retention time in minutes."},
	{Name: "log.retention.ms", Synonyms: []string{"log.retention.minutes", "log.retention.hours"}, Group: groupLogs,
		Doc:   "Retention time in milliseconds; -1 keeps forever.",
		field: func(c *Config) any { return &c.LogRetentionMs }},
	{Name: "log.retention.bytes", Default: "-1", Group: groupLogs,
		Doc:   "Size limit per partition before old segments are deleted; -1 = none.",
		field: func(c *Config) any { return &c.LogRetentionBytes }},
	{Name: "log.segment.bytes", Default: "1073741824", Group: groupLogs,
		Doc:   "Segment size before a roll.",
		field: func(c *Config) any { return &c.LogSegmentBytes }},
	{Name: "log.roll.hours", Type: Int, Default: "168", scale: 3_600_000, Group: groupLogs,
		Doc: "Segment age in hours before a roll."},
	{Name: "log.roll.ms", Synonyms: []string{"log.roll.hours"}, Group: groupLogs,
		Doc:   "Segment age in milliseconds before a roll.",
		field: func(c *Config) any { return &c.LogRollMs }},
	{Name: "log.cleanup.policy", Default: "delete", Group: groupLogs,
		Doc:   "Cleanup policy of the topics that set none: delete, compact or compact,delete.",
		field: func(c *Config) any { return &c.LogCleanupPolicy }},
	{Name: "log.flush.interval.messages", Default: "9223372036854775807", Group: groupLogs,
		Doc:   "fsync after this many messages.",
		field: func(c *Config) any { return &c.LogFlushIntervalMessages }},
	{Name: "log.flush.interval.ms", unset: "9223372036854775807", Group: groupLogs,
		Doc:   "fsync when unflushed data is this old, in milliseconds; unset = never by time.",
		field: func(c *Config) any { return &c.LogFlushIntervalMs }},
	{Name: "num.recovery.threads.per.data.dir", Default: "8", Mode: ClusterWide, Group: groupLogs,
		Doc:  "Logs of one log directory loaded (and, after a crash, recovered) at once when the broker starts, and flushed at once when it stops; the directories work side by side. Kafka's default is 1, one log at a time per directory; Sluice's is 8 because loading and flushing are mostly waiting for the disk, so more run at once than there are cores (BENCHMARKS.md, issue 21: the clean stop of 1,000 logs took 6-7 s with 8 against 14-19 s with 1). Kafka's sample server.properties sets 1. Read at start.",
		rule: atLeast(1), field: func(c *Config) any { return &c.NumRecoveryThreadsPerDataDir }},
	{Name: "log.retention.check.interval.ms", Type: Long, Default: "300000", Group: groupLogs,
		Doc:  "How often retention is enforced, in milliseconds.",
		rule: atLeast(1), field: func(c *Config) any { return &c.LogRetentionCheckInterval }},
	{Name: "log.cleaner.enable", Default: "true", Group: groupLogs,
		Doc:   "Run the log cleaner for compacted topics.",
		field: func(c *Config) any { return &c.LogCleanerEnable }},
	{Name: "log.cleaner.delete.retention.ms", Default: "86400000", Group: groupLogs,
		Doc:   "How long tombstones are kept in compacted topics.",
		field: func(c *Config) any { return &c.LogCleanerDeleteRetentionMs }},
	{Name: "log.cleaner.min.cleanable.ratio", Default: "0.5", Group: groupLogs,
		Doc:   "Dirty ratio that triggers compaction.",
		field: func(c *Config) any { return &c.LogCleanerMinCleanableRatio }},
	{Name: "log.cleaner.min.compaction.lag.ms", Default: "0", Group: groupLogs,
		Doc:   "Minimum age of a record before it can be compacted.",
		field: func(c *Config) any { return &c.LogCleanerMinCompactionLagMs }},
	{Name: "log.index.interval.bytes", Default: "4096", Group: groupLogs,
		Doc:   "Bytes between offset index entries.",
		field: func(c *Config) any { return &c.LogIndexIntervalBytes }},
	{Name: "log.index.size.max.bytes", Default: "10485760", Group: groupLogs,
		Doc:   "Preallocated index size.",
		field: func(c *Config) any { return &c.LogIndexSizeMaxBytes }},
	{Name: "log.message.timestamp.type", Default: "CreateTime", Group: groupLogs,
		Doc:   "Timestamp type of the topics that set none: CreateTime or LogAppendTime.",
		field: func(c *Config) any { return &c.LogMessageTimestampType }},
	{Name: "compression.type", Default: "producer", Group: groupLogs,
		Doc:   "Final compression of the topics that set none: producer keeps the producer's codec; uncompressed, gzip, snappy, lz4 and zstd recompress.",
		field: func(c *Config) any { return &c.CompressionType }},
	{Name: "message.max.bytes", Default: "1048588", Group: groupLogs,
		Doc:   "Largest record batch accepted.",
		field: func(c *Config) any { return &c.MessageMaxBytes }},
	{Name: "message.decompressed.max.bytes", Default: "67108864", Group: groupLogs,
		Doc:  "Largest size a compressed record batch may expand to: every compressed batch is decompressed and its records checked on append, and a larger one is refused with INVALID_RECORD (no Kafka equivalent).",
		rule: between(1, maxDecompressedBatchBytes), field: func(c *Config) any { return &c.MessageDecompressedMaxBytes }},

	// Consumer groups.
	{Name: "offsets.topic.num.partitions", Default: "50", Group: groupGroups,
		Doc:  "Partitions of __consumer_offsets. They decide where each group lives: do not change it once groups exist. The topic, its partitions and its 3 configs are created in one request of at most 10000 metadata records, as in Kafka.",
		rule: between(1, maxRecordsPerRequest-4), field: func(c *Config) any { return &c.OffsetsTopicNumPartitions }},
	{Name: "offsets.topic.replication.factor", Default: "3", Group: groupGroups,
		Doc:  "Replication factor of __consumer_offsets, capped at the number of live brokers when it is created.",
		rule: atLeast(1), field: func(c *Config) any { return &c.OffsetsTopicReplicationFactor }},
	{Name: "offsets.topic.segment.bytes", Type: Int, Default: "104857600", Group: groupGroups,
		Doc:  "Segment size of __consumer_offsets (a compacted topic).",
		rule: atLeast(14), field: func(c *Config) any { return &c.OffsetsTopicSegmentBytes }},
	{Name: "offsets.retention.minutes", Default: "10080", Group: groupGroups,
		Doc:  "How long the committed offsets of an empty group are kept, in minutes.",
		rule: atLeast(1), field: func(c *Config) any { return &c.OffsetsRetentionMinutes }},
	{Name: "group.initial.rebalance.delay.ms", Default: "3000", Group: groupGroups,
		Doc:  "How long a new group's first rebalance waits for more members to join.",
		rule: atLeast(0), field: func(c *Config) any { return &c.GroupInitialRebalanceDelayMs }},
	{Name: "group.min.session.timeout.ms", Default: "6000", Group: groupGroups,
		Doc:  "Smallest session timeout a group member may ask for.",
		rule: atLeast(0), field: func(c *Config) any { return &c.GroupMinSessionTimeoutMs }},
	{Name: "group.max.session.timeout.ms", Default: "1800000", Group: groupGroups,
		Doc:   "Largest session timeout a group member may ask for.",
		rule:  Rule{Doc: "at least group.min.session.timeout.ms"}, // CheckSessionTimeouts
		field: func(c *Config) any { return &c.GroupMaxSessionTimeoutMs }},
	{Name: "group.max.size", Default: "2147483647", Group: groupGroups,
		Doc:  "Most members a consumer group may have; a member joining a full group gets GROUP_MAX_SIZE_REACHED. The default is unlimited.",
		rule: atLeast(1), field: func(c *Config) any { return &c.GroupMaxSize }},
	{Name: "offsets.retention.check.interval.ms", Type: Long, Default: "600000", Group: groupGroups,
		Doc:  "How often expired committed offsets are removed.",
		rule: atLeast(1), field: func(c *Config) any { return &c.OffsetsRetentionCheckInterval }},
	{Name: "offsets.commit.timeout.ms", Type: Int, Default: "5000", Group: groupGroups,
		Doc:  "How long an offset commit waits for its write to __consumer_offsets to be acknowledged by every ISR replica.",
		rule: atLeast(1), field: func(c *Config) any { return &c.OffsetsCommitTimeout }},
	{Name: "offset.metadata.max.bytes", Default: "4096", Group: groupGroups,
		Doc:  "Largest metadata string an offset commit may carry (else OFFSET_METADATA_TOO_LARGE).",
		rule: atLeast(0), field: func(c *Config) any { return &c.OffsetMetadataMaxBytes }},
	{Name: "offsets.load.buffer.size", Default: "5242880", Group: groupGroups,
		Doc:  "Bytes read at a time when loading __consumer_offsets after becoming a group coordinator.",
		rule: atLeast(1), field: func(c *Config) any { return &c.OffsetsLoadBufferSize }},

	// Transactions.
	{Name: "transaction.state.log.num.partitions", Default: "50", Group: groupTransactions,
		Doc:  "Partitions of __transaction_state. They decide which broker coordinates each transactional id: do not change it once transactions exist.",
		rule: between(1, maxRecordsPerRequest-4), field: func(c *Config) any { return &c.TransactionStateLogNumPartitions }},
	{Name: "transaction.state.log.replication.factor", Type: Short, Default: "3", Group: groupTransactions,
		Doc:  "Replication factor of __transaction_state, capped at the number of live brokers when it is created.",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionStateLogReplicationFactor }},
	{Name: "transaction.state.log.min.isr", Default: "2", Group: groupTransactions,
		Doc:  "min.insync.replicas of __transaction_state, capped at its replication factor when it is created (so a single node works).",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionStateLogMinISR }},
	{Name: "transaction.state.log.segment.bytes", Type: Int, Default: "104857600", Group: groupTransactions,
		Doc:  "Segment size of __transaction_state (a compacted topic).",
		rule: atLeast(14), field: func(c *Config) any { return &c.TransactionStateLogSegmentBytes }},
	{Name: "transaction.state.log.load.buffer.size", Default: "5242880", Group: groupTransactions,
		Doc:  "Bytes read at a time when loading __transaction_state after becoming a transaction coordinator.",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionStateLogLoadBufferSize }},
	{Name: "transaction.max.timeout.ms", Type: Int, Default: "900000", Group: groupTransactions,
		Doc:  "Largest transaction.timeout.ms a producer may ask for; a larger one gets INVALID_TRANSACTION_TIMEOUT.",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionMaxTimeout }},
	{Name: "transactional.id.expiration.ms", Type: Int, Default: "604800000", Group: groupTransactions,
		Doc:  "A transactional id with no transaction and no request for this long is forgotten (its producer id is not fenced any more).",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionalIDExpiration }},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: Int, Default: "10000", Group: groupTransactions,
		Doc:  "How often the coordinator aborts transactions open longer than their transaction.timeout.ms.",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionAbortTimedOutInterval }},
	{Name: "transaction.remove.expired.transaction.cleanup.interval.ms", Type: Int, Default: "3600000", Group: groupTransactions,
		Doc:  "How often the coordinator forgets transactional ids idle for transactional.id.expiration.ms.",
		rule: atLeast(1), field: func(c *Config) any { return &c.TransactionRemoveExpiredInterval }},
	{Name: "producer.id.expiration.ms", Type: Int, Default: "86400000", Group: groupTransactions,
		Doc:  "A partition forgets an idempotent producer that wrote nothing for this long (one with an open transaction is kept).",
		rule: atLeast(1), field: func(c *Config) any { return &c.ProducerIDExpiration }},

	// Cluster mode.
	{Name: "zookeeper.connect", Group: groupCluster,
		Doc:  "host:port[,host:port...][/chroot] of ZooKeeper; empty = a single node, whose metadata is kept in the data directory. Point every broker of a cluster at the same ensemble (each with its own broker.id), e.g. zk1:2181,zk2:2181,zk3:2181/sluice.",
		rule: zookeeperConnectRule, field: func(c *Config) any { return &c.ZookeeperConnect }},
	{Name: "zookeeper.session.timeout.ms", Default: "18000", Group: groupCluster,
		Doc:  "A broker that stops answering ZooKeeper for this long (kill -9, a network partition, a long pause) loses its registration, and its partitions fail over.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ZookeeperSessionTimeoutMs }},
	{Name: "zookeeper.connection.timeout.ms", fallback: "zookeeper.session.timeout.ms", Group: groupCluster,
		Doc:  "How long start-up waits for a ZooKeeper connection.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ZookeeperConnectionTimeoutMs }},
	// ZooKeeper security (zookeeper.set.acl, TLS to the ensemble).
	{Name: "zookeeper.set.acl", Default: "false", Group: groupCluster,
		Doc:   "Create znodes that only this cluster's brokers may change (ZooKeeper's CREATOR_ALL for the client's identity, read for everyone but under /config/users, /config/brokers and /delegation_token/tokens), and secure the existing ones at start. Needs a client identity: a TLS client certificate (zookeeper.ssl.client.enable, zookeeper.ssl.keystore.location), the same on every broker.",
		field: func(c *Config) any { return &c.ZookeeperSetACL }},
	{Name: "zookeeper.ssl.client.enable", Default: "false", Group: groupCluster,
		Doc:   "Connect to ZooKeeper over TLS (its secureClientPort).",
		field: func(c *Config) any { return &c.ZookeeperSSLClientEnable }},
	{Name: "zookeeper.ssl.keystore.location", Group: groupCluster,
		Doc:   "PEM file with the private key (unencrypted) and certificate chain the broker presents to ZooKeeper; its certificate is the broker's identity for zookeeper.set.acl.",
		field: func(c *Config) any { return &c.ZookeeperSSLKeystoreLocation }},
	{Name: "zookeeper.ssl.keystore.type", Group: groupCluster,
		Doc:   "PEM (the only type read); empty = PEM.",
		field: func(c *Config) any { return &c.ZookeeperSSLKeystoreType }},
	{Name: "zookeeper.ssl.truststore.location", Group: groupCluster,
		Doc:   "PEM file of the CA certificates ZooKeeper's certificate must chain to; empty = the system's.",
		field: func(c *Config) any { return &c.ZookeeperSSLTruststoreLocation }},
	{Name: "zookeeper.ssl.truststore.type", Group: groupCluster,
		Doc:   "PEM (the only type read); empty = PEM.",
		field: func(c *Config) any { return &c.ZookeeperSSLTruststoreType }},
	{Name: "zookeeper.ssl.protocol", Default: "TLSv1.2", Group: groupCluster,
		Doc:   "The TLS version when zookeeper.ssl.enabled.protocols is empty: TLSv1.2 or TLSv1.3.",
		field: func(c *Config) any { return &c.ZookeeperSSLProtocol }},
	{Name: "zookeeper.ssl.enabled.protocols", Group: groupCluster,
		Doc:   "Comma-separated TLS versions allowed (TLSv1.2, TLSv1.3); empty = zookeeper.ssl.protocol.",
		field: func(c *Config) any { return &c.ZookeeperSSLEnabledProtocols }},
	{Name: "zookeeper.ssl.cipher.suites", Group: groupCluster,
		Doc:   "Comma-separated IANA names of the TLS 1.2 cipher suites allowed; empty = Go's secure defaults (TLS 1.3 suites are not configurable).",
		field: func(c *Config) any { return &c.ZookeeperSSLCipherSuites }},
	{Name: "zookeeper.ssl.endpoint.identification.algorithm", Default: "HTTPS", Group: groupCluster,
		Doc:   "HTTPS checks that ZooKeeper's certificate names the host connected to; empty checks only the chain.",
		field: func(c *Config) any { return &c.ZookeeperSSLEndpointIdentificationAlgorithm }},
	{Name: "replica.lag.time.max.ms", Default: "30000", Group: groupCluster,
		Doc:  "A follower that has not caught up with the leader for this long leaves the ISR.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ReplicaLagTimeMaxMs }},
	{Name: "unclean.leader.election.enable", Default: "false", Group: groupCluster,
		Doc:   "Let a replica outside the ISR become leader when no ISR member is alive (may lose acknowledged records).",
		field: func(c *Config) any { return &c.UncleanLeaderElectionEnable }},
	{Name: "auto.leader.rebalance.enable", Default: "true", Group: groupCluster,
		Doc:   "Move leadership back to the preferred replicas.",
		field: func(c *Config) any { return &c.AutoLeaderRebalanceEnable }},
	{Name: "leader.imbalance.check.interval.seconds", Default: "300", Group: groupCluster,
		Doc:  "How often the controller checks leader balance (with auto.leader.rebalance.enable).",
		rule: atLeast(1), field: func(c *Config) any { return &c.LeaderImbalanceCheckIntervalSecs }},
	{Name: "leader.imbalance.per.broker.percentage", Default: "10", Group: groupCluster,
		Doc:  "A broker whose share of preferred partitions led elsewhere exceeds this percentage gets them back.",
		rule: atLeast(1), field: func(c *Config) any { return &c.LeaderImbalancePerBrokerPercentage }},
	{Name: "replica.fetch.wait.max.ms", Default: "500", Group: groupCluster,
		Doc:  "How long a follower's fetch waits at the leader for new records.",
		rule: withDoc(atLeast(1), "at least 1, below replica.socket.timeout.ms"), field: func(c *Config) any { return &c.ReplicaFetchWaitMaxMs }},
	{Name: "replica.fetch.min.bytes", Default: "1", Group: groupCluster,
		Doc:  "Bytes a follower's fetch waits for at the leader.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ReplicaFetchMinBytes }},
	{Name: "replica.fetch.max.bytes", Default: "1048576", Group: groupCluster,
		Doc:  "Bytes a follower fetches per partition per request (at least one batch).",
		rule: atLeast(1), field: func(c *Config) any { return &c.ReplicaFetchMaxBytes }},
	{Name: "replica.fetch.response.max.bytes", Default: "10485760", Group: groupCluster,
		Doc:  "Bytes a follower fetches per request.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ReplicaFetchResponseMaxBytes }},
	{Name: "replica.fetch.backoff.ms", Default: "1000", Group: groupCluster,
		Doc:  "Pause of a follower after a failed fetch.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ReplicaFetchBackoffMs }},
	{Name: "num.replica.fetchers", Default: "1", Group: groupCluster, Mode: ClusterWide, Dynamic: true,
		Doc:  "Fetchers (connections and goroutines) a follower runs per leader broker; each partition stays on one. More spread the replication of many partitions over cores. Dynamic: a new value moves the partitions whose fetcher changes, without a restart.",
		rule: atLeast(1), field: func(c *Config) any { return &c.NumReplicaFetchers }},
	{Name: "leader.replication.throttled.rate", Default: "9223372036854775807", Group: groupCluster, Mode: PerBroker, Dynamic: true,
		Doc:  "Bytes per second this broker serves, as a leader, to the followers of the replicas named in the topic config leader.replication.throttled.replicas (the moves of a reassignment, a drain or an add with --throttle). Followers in the ISR are not held back. Usually set as a dynamic broker config, and removed once the move completed.",
		rule: atLeast(1), field: func(c *Config) any { return &c.LeaderReplicationThrottledRate }},
	{Name: "follower.replication.throttled.rate", Default: "9223372036854775807", Group: groupCluster, Mode: PerBroker, Dynamic: true,
		Doc:  "Bytes per second this broker fetches, as a follower, for the replicas named in the topic config follower.replication.throttled.replicas, until they catch up. Usually set as a dynamic broker config, and removed once the move completed.",
		rule: atLeast(1), field: func(c *Config) any { return &c.FollowerReplicationThrottledRate }},
	{Name: "replica.socket.timeout.ms", Default: "30000", Group: groupCluster,
		Doc:  "Network timeout of broker-to-broker requests.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ReplicaSocketTimeoutMs }},
	{Name: "inter.broker.listener.name", Group: groupCluster,
		Doc:   "Listener followers fetch from and brokers talk to each other on; empty = the first listener.",
		rule:  Rule{Doc: "a name in listeners"}, // checked in Validate
		field: func(c *Config) any { return &c.InterBrokerListenerName }},
	{Name: "controlled.shutdown.enable", Default: "true", Group: groupCluster,
		Doc:   "On shutdown (SIGTERM), ask the controller to move leadership away first.",
		field: func(c *Config) any { return &c.ControlledShutdownEnable }},
	{Name: "controlled.shutdown.max.retries", Default: "3", Group: groupCluster,
		Doc:  "Attempts at a controlled shutdown before stopping anyway.",
		rule: atLeast(0), field: func(c *Config) any { return &c.ControlledShutdownMaxRetries }},
	{Name: "controlled.shutdown.retry.backoff.ms", Default: "5000", Group: groupCluster,
		Doc:  "Pause between controlled shutdown attempts.",
		rule: atLeast(0), field: func(c *Config) any { return &c.ControlledShutdownRetryBackoffMs }},

	// Security: listeners, TLS and SASL (authentication).
	{Name: "listener.security.protocol.map", Default: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", Group: groupSecurity,
		Doc:   "Comma-separated NAME:PROTOCOL pairs giving each listener name its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), e.g. INTERNAL:SASL_SSL,EXTERNAL:SSL.",
		field: func(c *Config) any { return &c.ListenerSecurityProtocolMap }},
	{Name: "security.inter.broker.protocol", Group: groupSecurity,
		Doc:  "Security protocol brokers talk to each other with (replica fetchers, controlled shutdown): the listener of that name. Set this or inter.broker.listener.name, not both; neither = the first listener.",
		norm: upperTrimmed, rule: protocolRule, field: func(c *Config) any { return &c.SecurityInterBrokerProtocol }},
	{Name: "sasl.enabled.mechanisms", Default: "SCRAM-SHA-256,SCRAM-SHA-512", Group: groupSecurity, perListener: true,
		Doc:  "SASL mechanisms SASL_PLAINTEXT and SASL_SSL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served). PLAIN checks the password against the user's SCRAM credential; send it only over TLS. Per listener.",
		rule: mechanismsRule, field: func(c *Config) any { return &c.SaslEnabledMechanisms }},
	{Name: "sasl.mechanism.inter.broker.protocol", Default: "SCRAM-SHA-512", Group: groupSecurity,
		Doc:  "SASL mechanism brokers authenticate to each other with when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL; it must be enabled on that listener.",
		norm: upperTrimmed, rule: mechanismRule, field: func(c *Config) any { return &c.SaslMechanismInterBrokerProtocol }},
	{Name: "sasl.jaas.config", Type: Password, Group: groupSecurity, perMechanism: true,
		Doc:   "The broker's own SASL credentials for the inter-broker listener, as Kafka writes them: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"...\"; (PlainLoginModule for PLAIN). Usually set as listener.name.<listener>.<mechanism>.sasl.jaas.config. The password may be ${env:NAME}, ${file:/path/file.properties:key} or ${directory:/dir:file} instead of its text. The user needs a SCRAM credential like any other.",
		field: func(c *Config) any { return &c.SaslJaasConfig }},
	{Name: "connections.max.reauth.ms", Default: "0", Group: groupSecurity, perListener: true, perMechanism: true,
		Doc:  "Lifetime of a SASL session (KIP-368): a client must re-authenticate before it ends, or the connection is closed at its next request; 0 = sessions do not expire.",
		rule: atLeast(0), field: func(c *Config) any { return &c.ConnectionsMaxReauthMs }},
	{Name: "sasl.server.max.receive.size", Default: "524288", Group: groupSecurity, perListener: true,
		Doc:  "Largest frame a connection may send before it has authenticated; a larger one closes it.",
		rule: atLeast(1), field: func(c *Config) any { return &c.SaslServerMaxReceiveSize }},
	{Name: "connection.failed.authentication.delay.ms", Default: "100", Group: groupSecurity,
		Doc:  "Failed authentications are answered (and the connection closed) after this delay, doubled with each further failure from the same address up to 5 s, and an address's attempts are spaced by the same delay, so that guessing passwords is slow; 0 = no delay.",
		rule: atLeast(0), field: func(c *Config) any { return &c.ConnectionFailedAuthenticationDelayMs }},
	{Name: "ssl.keystore.type", Default: "PEM", Group: groupSecurity, perListener: true,
		Doc:  "Format of the key store: PEM (JKS and PKCS12 stores are refused; Kafka's default is JKS).",
		norm: upperTrimmed, rule: pemRule, field: func(c *Config) any { return &c.SSLKeystoreType }},
	{Name: "ssl.keystore.location", Group: groupSecurity, perListener: true,
		Doc:   "PEM file holding the listener's private key (unencrypted, PKCS#8, PKCS#1 or SEC 1) and its certificate chain. A renewed file is picked up by the next TLS handshake, without a restart.",
		field: func(c *Config) any { return &c.SSLKeystoreLocation }},
	{Name: "ssl.keystore.key", Type: Password, Group: groupSecurity, perListener: true,
		Doc:   "The private key as inline PEM, instead of ssl.keystore.location (with ssl.keystore.certificate.chain).",
		field: func(c *Config) any { return &c.SSLKeystoreKey }},
	{Name: "ssl.keystore.certificate.chain", Group: groupSecurity, perListener: true,
		Doc:   "The certificate chain as inline PEM, with ssl.keystore.key.",
		field: func(c *Config) any { return &c.SSLKeystoreCertificateChain }},
	{Name: "ssl.key.password", Type: Password, Group: groupSecurity, perListener: true,
		Doc:   "Password of an encrypted private key. Encrypted keys are not supported: decrypt the key and protect the file with its permissions.",
		field: func(c *Config) any { return &c.SSLKeyPassword }},
	{Name: "ssl.truststore.type", Default: "PEM", Group: groupSecurity, perListener: true,
		Doc:  "Format of the trust store: PEM.",
		norm: upperTrimmed, rule: pemRule, field: func(c *Config) any { return &c.SSLTruststoreType }},
	{Name: "ssl.truststore.location", Group: groupSecurity, perListener: true,
		Doc:   "PEM file of the CA certificates client certificates are checked against (ssl.client.auth), and that the broker's own inter-broker client trusts.",
		field: func(c *Config) any { return &c.SSLTruststoreLocation }},
	{Name: "ssl.truststore.certificates", Group: groupSecurity, perListener: true,
		Doc:   "The CA certificates as inline PEM, instead of ssl.truststore.location.",
		field: func(c *Config) any { return &c.SSLTruststoreCertificates }},
	{Name: "ssl.client.auth", Default: "none", Group: groupSecurity, perListener: true,
		Doc:  "Client certificates on SSL and SASL_SSL listeners: none, requested (checked when sent) or required. On an SSL listener a client certificate's subject is the principal (see ssl.principal.mapping.rules); without one it is User:ANONYMOUS.",
		norm: lowerTrimmed, rule: clientAuthRule, field: func(c *Config) any { return &c.SSLClientAuth }},
	{Name: "ssl.enabled.protocols", Default: "TLSv1.2,TLSv1.3", Group: groupSecurity, perListener: true,
		Doc:  "TLS versions accepted.",
		rule: protocolsRule, field: func(c *Config) any { return &c.SSLEnabledProtocols }},
	{Name: "ssl.cipher.suites", Group: groupSecurity, perListener: true,
		Doc:   "IANA names of the TLS 1.2 cipher suites offered; empty = Go's secure defaults. TLS 1.3's suites are always on (Go does not make them configurable).",
		field: func(c *Config) any { return &c.SSLCipherSuites }},
	{Name: "ssl.principal.mapping.rules", Default: "DEFAULT", Group: groupSecurity, perListener: true,
		Doc:   "How a client certificate's subject becomes a user name: comma-separated RULE:<regex>/<replacement>/[L|U] rules, the first whose regex matches the whole DN winning, and DEFAULT (the DN as it is, e.g. User:CN=alice,OU=Eng,O=Acme). No match refuses the connection.",
		field: func(c *Config) any { return &c.SSLPrincipalMappingRules }},
	{Name: "ssl.endpoint.identification.algorithm", Default: "https", Group: groupSecurity,
		Doc:  "How the broker's own inter-broker client checks another broker's certificate: https (it must name the host dialed) or empty (any certificate a trusted CA signed).",
		norm: lowerTrimmed, rule: endpointRule, field: func(c *Config) any { return &c.SSLEndpointIdentificationAlgorithm }},
	{Name: "listener.name.<listener>.<key>", Type: String, Group: groupSecurity, prefix: true,
		Doc: "A per-listener value of a key marked per listener, for the listener of that name (lower case), e.g. listener.name.external.ssl.client.auth=required; connections.max.reauth.ms and sasl.jaas.config may also be set per SASL mechanism: listener.name.internal.scram-sha-512.sasl.jaas.config."},
	// Authorization.
	{Name: "authorizer.class.name", Group: groupAuthorization,
		Doc:   "The authorizer: empty = none (every request is allowed, and the ACL APIs answer SECURITY_DISABLED); kafka.security.authorizer.AclAuthorizer (or its old name kafka.security.auth.SimpleAclAuthorizer) = Kafka's ACLs, checked on every request.",
		rule:  Rule{Doc: "empty or kafka.security.authorizer.AclAuthorizer"}, // checked at start (security.AuthorizerEnabled)
		field: func(c *Config) any { return &c.AuthorizerClassName }},
	{Name: "super.users", Group: groupAuthorization,
		Doc:   "Principals that may do everything whatever the ACLs say, separated by semicolons: User:admin;User:CN=broker1,O=example. The brokers' own principal belongs here (or holds ClusterAction on the cluster).",
		rule:  Rule{Doc: "Type:name;Type:name..."}, // checked at start (security.ParseSuperUsers)
		field: func(c *Config) any { return &c.SuperUsers }},
	{Name: "allow.everyone.if.no.acl.found", Default: "false", Group: groupAuthorization,
		Doc:   "A resource that no ACL names is open to everyone; false (Kafka's default) closes it to all but super.users.",
		field: func(c *Config) any { return &c.AllowEveryoneIfNoACLFound }},

	// Web console.
	{Name: "console.listen", Default: ":8080", Group: groupConsole,
		Doc:  "Address of the web console; empty disables it, and with it the alert evaluation, the lag export and the comparisons.",
		rule: listenRule, field: func(c *Config) any { return &c.ConsoleListen }},
	{Name: "console.data.dir", Default: "./data/console", Group: groupConsole,
		Doc:   "Directory of the console's SQLite database console.db (users, sessions, audit log, settings, alert rules, comparisons, lag history) and of alerting.key; outside every log dir, or the broker refuses to start.",
		field: func(c *Config) any { return &c.ConsoleDataDir }},
	{Name: "console.tls.cert", Group: groupConsole,
		Doc:   "PEM certificate for HTTPS on the console (with console.tls.key); notification links become https://. The file must be readable by the user Sluice runs as.",
		rule:  Rule{Doc: "set with console.tls.key"}, // checked in Validate
		field: func(c *Config) any { return &c.ConsoleTLSCert }},
	{Name: "console.tls.key", Group: groupConsole,
		Doc:   "PEM private key for HTTPS on the console (with console.tls.cert).",
		rule:  Rule{Doc: "set with console.tls.cert"}, // checked in Validate
		field: func(c *Config) any { return &c.ConsoleTLSKey }},
	{Name: "console.base.url", Group: groupConsole,
		Doc:   "External URL of the console, used in the setup link and in the links notifications carry; empty = http(s)://<host name>:<console port>. Behind a reverse proxy, set it to https://… so that cookies are marked Secure.",
		field: func(c *Config) any { return &c.ConsoleBaseURL }},
	{Name: "console.trusted.proxies", Group: groupConsole,
		Doc:   "Comma-separated addresses or CIDR prefixes of reverse proxies in front of the console. X-Forwarded-For is believed only from them (the client address in the audit log and in the sign-in backoff); without them every user behind a proxy shares its address.",
		field: func(c *Config) any { return &c.ConsoleTrustedProxies }},
	{Name: "console.audit.retention.days", Default: "365", Group: groupConsole,
		Doc:  "Days the audit log keeps an entry (pruned hourly).",
		rule: atLeast(1), field: func(c *Config) any { return &c.ConsoleAuditRetentionDays }},
	{Name: "console.audit.max.rows", Default: "1000000", Group: groupConsole,
		Doc:  "Most entries the audit log keeps; the oldest are pruned first.",
		rule: atLeast(1000), field: func(c *Config) any { return &c.ConsoleAuditMaxRows }},
	{Name: "console.audit.access.enable", Default: "true", Group: groupConsole,
		Doc:   "Record reads of records (browse, search, export, live tail) as access. entries in the audit log.",
		field: func(c *Config) any { return &c.ConsoleAuditAccessEnable }},
	{Name: "console.kafka.<property>", Type: String, Group: groupConsole, prefix: true, field: func(c *Config) any { return &c.ConsoleKafka },
		Doc: "Kafka client settings of the console's own clients (pages, lag sampler, comparisons, alert sources, the schema registry), with Kafka's client property names: console.kafka.security.protocol, console.kafka.sasl.mechanism, console.kafka.sasl.username, console.kafka.sasl.password (or console.kafka.sasl.jaas.config), console.kafka.ssl.truststore.location, console.kafka.ssl.keystore.location, console.kafka.ssl.endpoint.identification.algorithm. A password may be ${env:NAME}, ${file:/path/file.properties:key} or ${directory:/dir:file}. The console then connects to a listener of that security protocol."},
	{Name: "console.lag.sample.interval.ms", Type: Long, Default: "30000", Group: groupConsole,
		Doc:  "How often the leading console samples every group's lag (history charts, the exported sluice_consumergroup_lag_* metrics).",
		rule: atLeast(1000), field: func(c *Config) any { return &c.ConsoleLagSampleInterval }},
	{Name: "console.topic.replication.factor", Default: "3", Group: groupConsole,
		Doc:  "Replication factor of the console's topics __sluice_console (the shared console state) and __sluice_console_lag (lag history), capped at the number of live brokers when they are created; min.insync.replicas is 2 where the factor is 3 or more.",
		rule: atLeast(1), field: func(c *Config) any { return &c.ConsoleTopicReplicationFactor }},
	{Name: "console.lag.history.retention.ms", Type: Long, Default: "604800000", Group: groupConsole,
		Doc:  "How long the lag history topic __sluice_console_lag keeps samples, and every console its lag history.",
		rule: atLeast(60000), field: func(c *Config) any { return &c.ConsoleLagHistoryRetention }},

	// Alerting.
	{Name: "alerting.evaluation.interval.ms", Type: Long, Default: "30000", Group: groupAlerting,
		Doc:  "How often the leading console evaluates the alert rules.",
		rule: atLeast(100), field: func(c *Config) any { return &c.AlertingEvaluationInterval }},
	{Name: "alerting.allowed.targets", Group: groupAlerting,
		Doc:   "Comma-separated CIDR prefixes, addresses or host:port pairs that notifications may reach although they are loopback, link-local or private, e.g. an Alertmanager on this host: 127.0.0.1:9093. Public addresses need no entry.",
		field: func(c *Config) any { return &c.AlertingAllowedTargets }},
	{Name: "alerting.proxy", Group: groupAlerting,
		Doc:   "HTTP proxy (http://host:port) every notification goes through, the target checked first; empty = direct (the environment's HTTPS_PROXY is not used).",
		field: func(c *Config) any { return &c.AlertingProxy }},

	// Metrics.
	{Name: "metrics.listen", Group: groupMetrics,
		Doc:  "Address of a Prometheus endpoint of its own, e.g. :9308; empty = served on the console listener at metrics.path, without signing in. With console.listen empty and this set, only the metrics endpoint runs.",
		rule: listenRule, field: func(c *Config) any { return &c.MetricsListen }},
	{Name: "metrics.path", Default: "/metrics", Group: groupMetrics,
		Doc:  "Path of the Prometheus endpoint.",
		rule: pathRule, field: func(c *Config) any { return &c.MetricsPath }},

	// Schema registry.
	{Name: "schema.registry.listen", Default: ":8081", Group: groupSchemaRegistry,
		Doc:  "Address of the schema registry (serializers' schema.registry.url points here); empty disables it. Left at its default, a port already in use only logs a warning.",
		rule: listenRule, field: func(c *Config) any { return &c.SchemaRegistryListen }},
	{Name: "schema.registry.advertised.url", Group: groupSchemaRegistry,
		Doc:   "URL the other hosts of a cluster forward registry writes to while this host leads the registry; empty = http(s)://<listener host or advertised host>:<port>.",
		field: func(c *Config) any { return &c.SchemaRegistryAdvertisedURL }},
	{Name: "schema.registry.tls.cert", Group: groupSchemaRegistry,
		Doc:   "PEM certificate for HTTPS on the schema registry (with schema.registry.tls.key).",
		rule:  Rule{Doc: "set with schema.registry.tls.key"}, // checked in Validate
		field: func(c *Config) any { return &c.SchemaRegistryTLSCert }},
	{Name: "schema.registry.tls.key", Group: groupSchemaRegistry,
		Doc:   "PEM private key for HTTPS on the schema registry (with schema.registry.tls.cert).",
		rule:  Rule{Doc: "set with schema.registry.tls.cert"}, // checked in Validate
		field: func(c *Config) any { return &c.SchemaRegistryTLSKey }},
	{Name: "schema.registry.auth", Default: "none", Group: groupSchemaRegistry,
		Doc:  "none, or basic: HTTP basic auth against the console's users (viewer reads; operator and admin also register, delete and change configs).",
		norm: lowerTrimmed, rule: Rule{Doc: "none or basic", check: func(v any) error {
			if s := v.(string); s != "" && s != "none" && s != "basic" {
				return errors.New("want none or basic")
			}
			return nil
		}},
		field: func(c *Config) any { return &c.SchemaRegistryAuth }},
}

// Limits the rules share with other packages (tests tie them together):
// cluster.MaxRecordsPerRequest, Kafka's cap on the metadata records of one
// request, and record.MaxDecompressedBatchBytesLimit.
const (
	maxRecordsPerRequest      = 10000
	maxDecompressedBatchBytes = 256 << 20
)

var listenRule = Rule{Doc: "host:port, :port, or empty", check: func(v any) error {
	if s := v.(string); s != "" {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return errors.New("want host:port or :port")
		}
	}
	return nil
}}

var pathRule = Rule{Doc: "starts with /", check: func(v any) error {
	if !strings.HasPrefix(v.(string), "/") {
		return errors.New("must start with /")
	}
	return nil
}}

var zookeeperConnectRule = Rule{Doc: "host:port[,host:port...][/chroot], or empty", check: func(v any) error {
	s := v.(string)
	if s == "" {
		return nil
	}
	hosts, _, _ := strings.Cut(s, "/")
	for _, h := range strings.Split(hosts, ",") {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(h)); err != nil {
			return errors.New("want host:port[,host:port...][/chroot]")
		}
	}
	return nil
}}

func withDoc(r Rule, doc string) Rule { r.Doc = doc; return r }

// Keys returns every broker key in the reference's order.
func Keys() []Key { return append([]Key(nil), keys...) }

// Lookup returns the broker key name. A per-listener override
// (listener.name.<listener>.<key>) returns the key it overrides; a
// console.kafka.<property> key the entry documenting that prefix.
func Lookup(name string) (*Key, bool) {
	if k, ok := keyIndex[name]; ok {
		return k, true
	}
	return lookupPrefixed(name)
}

var keyIndex, topicIndex map[string]*Key

// init indexes the tables, derives what one key says of another (a
// synonym's primary, a topic config's broker key and default) and checks
// that each fact is stated once.
func init() {
	keyIndex = make(map[string]*Key, len(keys))
	for i := range keys {
		k := &keys[i]
		if keyIndex[k.Name] != nil {
			panic("config: key defined twice: " + k.Name)
		}
		keyIndex[k.Name] = k
		if k.Type == 0 && k.field != nil {
			k.Type = typeOf(k.field(&Config{}))
		}
	}
	for i := range keys {
		k := &keys[i]
		for _, s := range k.Synonyms {
			sk := keyIndex[s]
			if sk == nil || sk.field != nil || sk.synonymOf != "" {
				panic(fmt.Sprintf("config: %s: synonym %s must be a key of its own without a field", k.Name, s))
			}
			sk.synonymOf = k.Name
		}
		if k.fallback != "" {
			// Parse and EnsureDefaults read the fallback's field: it must come first.
			if fk := keyIndex[k.fallback]; fk == nil || fk.field == nil || !slices.ContainsFunc(keys[:i], func(e Key) bool { return e.Name == fk.Name }) {
				panic("config: " + k.Name + ": bad fallback " + k.fallback)
			}
		}
	}
	topicIndex = make(map[string]*Key, len(topicKeys))
	for i := range topicKeys {
		t := &topicKeys[i]
		if i > 0 && topicKeys[i-1].Name >= t.Name {
			panic("config: topicKeys must be sorted by name: " + t.Name)
		}
		topicIndex[t.Name] = t
		if t.Type == 0 {
			t.Type = typeOf(t.tfield(&Topic{}))
		}
		b := keyIndex[t.BrokerKey]
		if b == nil || b.field == nil || b.Topic != "" {
			panic("config: topic config " + t.Name + ": bad broker key " + t.BrokerKey)
		}
		if b.norm != nil || b.syntax.Doc != "" || b.rule.Doc != "" || b.Mode != ReadOnly {
			panic("config: " + b.Name + " gives the default of " + t.Name + " and takes its rules from it: declare them there")
		}
		b.Topic, b.Type, b.Mode, b.Dynamic = t.Name, t.Type, ClusterWide, true
		b.norm, b.syntax, b.rule = t.norm, t.syntax, t.rule
	}
	initKafka()
	d := Default()
	for i := range topicKeys {
		t := &topicKeys[i]
		b := keyIndex[t.BrokerKey]
		t.Default = format(b.field(d))
		if err := t.Set(&defaultTopic, t.Default); err != nil {
			panic("config: default of " + t.Name + ": " + err.Error())
		}
	}
}

// Package config is the one home of Sluice's configuration keys: the broker
// keys of server.properties (Kafka's names, types and defaults, plus the
// console's, the metrics' and the schema registry's keys) and the topic
// configs, each defined once in a table with its type, default, Kafka's
// update mode, documentation, validation and synonyms.
//
// Everything else is derived from the tables: Config (the typed broker
// configuration, read once at start: the hot paths read struct fields, never
// strings), the topic configuration (Topic, Log) and the broker-level
// defaults behind it, the group coordinator's and the log's defaults, the
// DescribeConfigs entries, docs/configuration.md (`sluice config docs`) and
// the sample server.properties (`sluice config properties`). Topic-name
// rules and cleanup.policy parsing live here too.
//
// config imports nothing of the project; broker, storage, group and
// appliance import it.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Listener is one entry of listeners or advertised.listeners:
// NAME://host:port. Its security protocol is the name's in
// listener.security.protocol.map (Config.ListenerProtocol).
type Listener struct {
	Name string // "PLAINTEXT", "SASL_SSL", "INTERNAL", ...
	Host string // "" = every interface (listeners) / the host name (advertised)
	Port int
}

func (l Listener) String() string {
	return l.Name + "://" + net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

// Addr is host:port for net.Listen.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// Config is the configuration of a Sluice process: one typed field per
// broker key of the table (keys.go), named after it. Build one with Load,
// Parse or Default; a Config built in code gets the defaults of its unset
// fields from EnsureDefaults.
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
	QuotaWindowNum               int32          // quota.window.num
	QuotaWindowSizeSeconds       int32          // quota.window.size.seconds
	ControllerQuotaWindowNum     int32          // controller.quota.window.num
	ControllerQuotaWindowSeconds int32          // controller.quota.window.size.seconds

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
	NumRecoveryThreadsPerDataDir int32         // num.recovery.threads.per.data.dir
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

	// Consumer groups (the group coordinator: group.NewConfig).
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

	// Transactions (the transaction coordinator: txn.NewConfig).
	TransactionStateLogNumPartitions     int32         // transaction.state.log.num.partitions
	TransactionStateLogReplicationFactor int16         // transaction.state.log.replication.factor
	TransactionStateLogMinISR            int32         // transaction.state.log.min.isr
	TransactionStateLogSegmentBytes      int64         // transaction.state.log.segment.bytes
	TransactionStateLogLoadBufferSize    int32         // transaction.state.log.load.buffer.size
	TransactionMaxTimeout                time.Duration // transaction.max.timeout.ms
	TransactionalIDExpiration            time.Duration // transactional.id.expiration.ms
	TransactionAbortTimedOutInterval     time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TransactionRemoveExpiredInterval     time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms
	ProducerIDExpiration                 time.Duration // producer.id.expiration.ms

	// Cluster mode (ZooKeeper); empty zookeeper.connect = single node.
	ZookeeperConnect             string // zookeeper.connect
	ZookeeperSessionTimeoutMs    int32  // zookeeper.session.timeout.ms
	ZookeeperConnectionTimeoutMs int32  // zookeeper.connection.timeout.ms; unset = the session timeout
	ReplicaLagTimeMaxMs          int64  // replica.lag.time.max.ms
	UncleanLeaderElectionEnable  bool   // unclean.leader.election.enable
	AutoLeaderRebalanceEnable    bool   // auto.leader.rebalance.enable

	// ZooKeeper security: zookeeper.set.acl and zookeeper.ssl.*.
	ZookeeperSetACL                             bool
	ZookeeperSSLClientEnable                    bool
	ZookeeperSSLKeystoreLocation                string
	ZookeeperSSLKeystoreType                    string
	ZookeeperSSLTruststoreLocation              string
	ZookeeperSSLTruststoreType                  string
	ZookeeperSSLProtocol                        string
	ZookeeperSSLEnabledProtocols                []string
	ZookeeperSSLCipherSuites                    []string
	ZookeeperSSLEndpointIdentificationAlgorithm string

	// Replication and controller (cluster mode).
	ReplicaFetchWaitMaxMs              int32  // replica.fetch.wait.max.ms
	ReplicaFetchMinBytes               int32  // replica.fetch.min.bytes
	ReplicaFetchMaxBytes               int32  // replica.fetch.max.bytes
	ReplicaFetchResponseMaxBytes       int32  // replica.fetch.response.max.bytes
	ReplicaFetchBackoffMs              int32  // replica.fetch.backoff.ms
	NumReplicaFetchers                 int32  // num.replica.fetchers
	LeaderReplicationThrottledRate     int64  // leader.replication.throttled.rate (bytes/s)
	FollowerReplicationThrottledRate   int64  // follower.replication.throttled.rate (bytes/s)
	ReplicaSocketTimeoutMs             int32  // replica.socket.timeout.ms
	InterBrokerListenerName            string // inter.broker.listener.name; "" = the first listener
	ControlledShutdownEnable           bool   // controlled.shutdown.enable
	ControlledShutdownMaxRetries       int32  // controlled.shutdown.max.retries
	ControlledShutdownRetryBackoffMs   int64  // controlled.shutdown.retry.backoff.ms
	LeaderImbalanceCheckIntervalSecs   int64  // leader.imbalance.check.interval.seconds
	LeaderImbalancePerBrokerPercentage int32  // leader.imbalance.per.broker.percentage

	// Authorization.
	AuthorizerClassName       string // authorizer.class.name; "" = no authorizer
	SuperUsers                string // super.users
	AllowEveryoneIfNoACLFound bool   // allow.everyone.if.no.acl.found

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
	// Security: listeners' protocols, TLS and SASL (security.go). The ssl.*,
	// sasl.enabled.mechanisms, sasl.server.max.receive.size and
	// connections.max.reauth.ms fields are the bare keys; ForListener
	// applies a listener's overrides.
	ListenerSecurityProtocolMap           map[string]string // listener.security.protocol.map: name -> protocol
	SecurityInterBrokerProtocol           string            // security.inter.broker.protocol
	SaslEnabledMechanisms                 []string          // sasl.enabled.mechanisms
	SaslMechanismInterBrokerProtocol      string            // sasl.mechanism.inter.broker.protocol
	SaslJaasConfig                        string            // sasl.jaas.config: the broker's own credentials
	ConnectionsMaxReauthMs                int64             // connections.max.reauth.ms; 0 = sessions do not expire
	SaslServerMaxReceiveSize              int32             // sasl.server.max.receive.size
	ConnectionFailedAuthenticationDelayMs int32             // connection.failed.authentication.delay.ms
	SSLKeystoreType                       string            // ssl.keystore.type
	SSLKeystoreLocation                   string            // ssl.keystore.location
	SSLKeystoreKey                        string            // ssl.keystore.key
	SSLKeystoreCertificateChain           string            // ssl.keystore.certificate.chain
	SSLKeyPassword                        string            // ssl.key.password
	SSLTruststoreType                     string            // ssl.truststore.type
	SSLTruststoreLocation                 string            // ssl.truststore.location
	SSLTruststoreCertificates             string            // ssl.truststore.certificates
	SSLClientAuth                         string            // ssl.client.auth
	SSLEnabledProtocols                   []string          // ssl.enabled.protocols
	SSLCipherSuites                       []string          // ssl.cipher.suites
	SSLPrincipalMappingRules              string            // ssl.principal.mapping.rules
	SSLEndpointIdentificationAlgorithm    string            // ssl.endpoint.identification.algorithm
	// ConsoleKafka holds the console.kafka.<property> keys: the client
	// settings of the console's own clients, by Kafka client property name.
	ConsoleKafka map[string]string

	// Given holds every key set explicitly (file or --override) with its
	// value as written, for DescribeConfigs' STATIC_BROKER_CONFIG source.
	Given map[string]string
	// Ignored holds the keys given that are Apache Kafka's but mean nothing
	// to Sluice (num.network.threads), with their values: accepted, named
	// in one warning at start (Warnings).
	Ignored map[string]string
}

// Default returns the configuration with every key at its default.
func Default() *Config {
	c, err := Parse(nil)
	if err != nil {
		panic("config: bad built-in default: " + err.Error())
	}
	return c
}

// Load reads the properties file at path (none when path is "") and then
// the overrides ("key=value", applied in order, later ones win), and returns
// the validated configuration. An unknown key or a bad value is an error
// naming the key.
func Load(path string, overrides []string) (*Config, error) {
	given, err := ReadGiven(path, overrides)
	if err != nil {
		return nil, err
	}
	c, err := Parse(given)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadGiven reads the keys set by the properties file at path (none when
// path is "") and by the overrides ("key=value", later ones win). An
// key that neither Sluice nor Kafka has is an error naming it (and its
// line in the file) and the closest known key.
func ReadGiven(path string, overrides []string) (map[string]string, error) {
	given := map[string]string{}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		props, err := ReadProperties(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		for _, p := range props {
			if !known(p.Key) {
				return nil, fmt.Errorf("config %s line %d: %w", path, p.Line, unknownKeyError(p.Key))
			}
			given[p.Key] = p.Value
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config: --override %q: want key=value", o)
		}
		if !known(k) {
			return nil, fmt.Errorf("config: --override: %w", unknownKeyError(k))
		}
		given[k] = strings.TrimSpace(v)
	}
	return given, nil
}

// Parse builds the configuration from the keys given explicitly (the
// others take their defaults), without the range checks of Validate. A
// key of Kafka's that Sluice does not use goes to Ignored. A key unknown to
// both, or a value that does not parse, is an error naming the key.
func Parse(given map[string]string) (*Config, error) {
	c := &Config{Given: map[string]string{}}
	for k, v := range given {
		if _, ok := Lookup(k); ok {
			c.Given[k] = v
			continue
		}
		if _, ok := KafkaBrokerKey(k); !ok {
			return nil, fmt.Errorf("config: %w", unknownKeyError(k))
		}
		if c.Ignored == nil {
			c.Ignored = map[string]string{}
		}
		c.Ignored[k] = v
	}
	for i := range keys {
		k := &keys[i]
		if k.field == nil {
			continue // a synonym: set through the key it stands in for
		}
		name, v, ok, err := c.resolve(k)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := k.set(c, v); err != nil {
			return nil, fmt.Errorf("config: %s=%q: %w", name, v, err)
		}
	}
	c.ConsoleKafka = consoleKafka(c.Given)
	return c, nil
}

// resolve finds the text of a broker key: the key itself or its first
// synonym given (scaled to the key's unit), else its default, else its
// first synonym's default, else the value of its fallback key or its unset
// value. name is the key the text comes from; ok is false when there is
// none (the field stays zero).
func (c *Config) resolve(k *Key) (name, v string, ok bool, err error) {
	if v, ok := c.Given[k.Name]; ok {
		return k.Name, v, true, nil
	}
	for _, s := range k.Synonyms {
		if v, ok := c.Given[s]; ok {
			v, err := scaled(s, v)
			return s, v, true, err
		}
	}
	if k.Default != "" {
		return k.Name, k.Default, true, nil
	}
	for _, s := range k.Synonyms {
		if sk, _ := Lookup(s); sk.Default != "" {
			v, err := scaled(s, sk.Default)
			return s, v, true, err
		}
	}
	if k.fallback != "" {
		fk, _ := Lookup(k.fallback)
		return k.fallback, format(fk.field(c)), true, nil
	}
	if k.unset != "" {
		return k.Name, k.unset, true, nil
	}
	return k.Name, "", false, nil
}

// scaled converts the text of the synonym s to the unit of the key it
// stands in for (log.retention.hours to milliseconds); a negative value
// means unlimited and becomes -1.
func scaled(s, v string) (string, error) {
	sk, _ := Lookup(s)
	if sk.scale == 0 {
		return v, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return "", fmt.Errorf("config: %s=%q: not an integer", s, v)
	}
	if n < 0 {
		return "-1", nil
	}
	if n > (1<<63-1)/sk.scale {
		return "", fmt.Errorf("config: %s=%q: too large", s, v)
	}
	return strconv.FormatInt(n*sk.scale, 10), nil
}

// EnsureDefaults gives every field still at its zero value, whose key (or
// synonym) is not in Given, its default: it is for a Config built in code.
// A deliberate zero or false must be recorded in Given (or start from
// Default and change fields).
func (c *Config) EnsureDefaults() {
	if c.Given == nil {
		c.Given = map[string]string{}
	}
	for i := range keys {
		k := &keys[i]
		if k.field == nil || !isZero(k.field(c)) || c.givenAny(k) {
			continue
		}
		_, v, ok, err := c.resolve(k) // the default, or the fallback key's value
		if !ok || err != nil {
			continue
		}
		if err := k.set(c, v); err != nil {
			panic("config: bad built-in default of " + k.Name + ": " + err.Error())
		}
	}
}

func (c *Config) givenAny(k *Key) bool {
	if _, ok := c.Given[k.Name]; ok {
		return true
	}
	for _, s := range k.Synonyms {
		if _, ok := c.Given[s]; ok {
			return true
		}
	}
	return false
}

// Validate checks every key's range and the keys that depend on each
// other; the error names the key (each problem, joined).
func (c *Config) Validate() error {
	var errs []error
	for i := range keys {
		if k := &keys[i]; k.field != nil {
			if err := k.check(k.field(c)); err != nil {
				errs = append(errs, fmt.Errorf("config: %w", err))
			}
		}
	}
	bad := func(key string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
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
	if c.MaxConnectionsPerIP == 0 && len(c.MaxConnectionsPerIPOverrides) == 0 {
		bad("max.connections.per.ip", "can be set to zero only if max.connections.per.ip.overrides is set")
	}
	if c.QueuedMaxRequestBytes > 0 && c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		bad("queued.max.request.bytes", "%d: must be -1 (unbounded) or at least socket.request.max.bytes (%d)", c.QueuedMaxRequestBytes, c.SocketRequestMaxBytes)
	}
	if err := CheckSessionTimeouts(int64(c.GroupMinSessionTimeoutMs), int64(c.GroupMaxSessionTimeoutMs)); err != nil {
		errs = append(errs, err)
	}
	if c.ReplicaFetchWaitMaxMs >= c.ReplicaSocketTimeoutMs {
		bad("replica.fetch.wait.max.ms", "%d: must be below replica.socket.timeout.ms (%d)", c.ReplicaFetchWaitMaxMs, c.ReplicaSocketTimeoutMs)
	}
	if c.InterBrokerListenerName != "" && !names[c.InterBrokerListenerName] {
		bad("inter.broker.listener.name", "%q names no listener in listeners", c.InterBrokerListenerName)
	}
	errs = append(errs, c.validateSecurity()...)
	if (c.ConsoleTLSCert == "") != (c.ConsoleTLSKey == "") {
		bad("console.tls.cert", "console.tls.cert and console.tls.key must be set together")
	}
	if (c.SchemaRegistryTLSCert == "") != (c.SchemaRegistryTLSKey == "") {
		bad("schema.registry.tls.cert", "schema.registry.tls.cert and schema.registry.tls.key must be set together")
	}
	return errors.Join(errs...)
}

// CheckSessionTimeouts is the rule between group.min.session.timeout.ms and
// group.max.session.timeout.ms (milliseconds).
func CheckSessionTimeouts(minMs, maxMs int64) error {
	if maxMs < minMs {
		return fmt.Errorf("config: group.max.session.timeout.ms: %d: must not be below group.min.session.timeout.ms (%d)", maxMs, minMs)
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

// Warnings lists what in the configuration is accepted but probably not
// meant, for the log at start: Kafka's keys that Sluice ignores (one
// warning naming them all) and values that hold a trailing comment.
func (c *Config) Warnings() []string {
	var out []string
	if w := ignoredWarning(c.Ignored); w != "" {
		out = append(out, w)
	}
	for i := range keys {
		k := &keys[i]
		v, ok := c.Given[k.Name]
		if ok && trailingComment(v) {
			out = append(out, fmt.Sprintf("config: %s=%q contains \" #\": a properties file has no trailing comments, so the text after it is part of the value; put comments on lines of their own", k.Name, v))
		}
	}
	return out
}

// SplitList splits a comma-separated list, trimming each item and dropping
// empty ones (Kafka's LIST type).
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseListeners(v string) ([]Listener, error) {
	var out []Listener
	for _, item := range SplitList(v) {
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
		if !listenerNameRE.MatchString(name) {
			return nil, fmt.Errorf("%q: a listener name is letters, digits and _", item)
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
	for _, item := range SplitList(v) {
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

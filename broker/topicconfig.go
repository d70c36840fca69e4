package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/storage"
)

// ConfigSource is where a config value comes from; the values are Kafka's
// (DescribeConfigs config_source).
type ConfigSource int8

const (
	SourceUnknown      ConfigSource = 0
	SourceDynamicTopic ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG: set on the topic
	SourceStaticBroker ConfigSource = 4 // STATIC_BROKER_CONFIG: set in the broker's config file or an override
	SourceDefault      ConfigSource = 5 // DEFAULT_CONFIG: Kafka's default
)

// ConfigType is a config's type; the values are Kafka's (config_type, v3+).
type ConfigType = config.Type

const (
	TypeBoolean = config.Boolean
	TypeString  = config.String
	TypeInt     = config.Int
	TypeShort   = config.Short
	TypeLong    = config.Long
	TypeDouble  = config.Double
	TypeList    = config.List
)

// ConfigSynonym is one source a config's value could come from, in
// precedence order (DescribeConfigs include_synonyms).
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry is one config as DescribeConfigs shows it.
type ConfigEntry struct {
	Name      string
	Value     *string // nil for a sensitive or unset value
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Type      ConfigType
	Doc       string
	Synonyms  []ConfigSynonym
}

// TopicDefault is the broker-level value behind a topic config: the value of
// its broker key (log.retention.ms for retention.ms, ...) and whether that
// key was set explicitly (config.Config.TopicDefaults).
type TopicDefault = config.TopicDefault

// topicSettings is a topic's effective configuration, as its partitions use
// it.
type topicSettings struct {
	log           storage.LogConfig
	minISR        int32
	uncleanLeader bool
}

// lookupTopicConfig returns the topic config name: one Sluice honours, or
// one of Kafka's it accepts without acting on it.
func lookupTopicConfig(name string) (*config.Key, bool) {
	if c, ok := config.LookupTopic(name); ok {
		return c, true
	}
	return config.LookupAcceptedTopic(name)
}

// describedTopicKeys is every topic config DescribeConfigs lists, sorted by
// name: those Sluice honours and those it accepts.
var describedTopicKeys = func() []config.Key {
	out := append(config.TopicKeys(), config.AcceptedTopicKeys()...)
	slices.SortFunc(out, func(a, b config.Key) int { return strings.Compare(a.Name, b.Name) })
	return out
}()

// defaultValue is the broker-level value of c: the broker's setting when
// known, else Kafka's default.
func (b *Broker) defaultValue(c *config.Key) (string, ConfigSource) {
	return defaultValue(b.topicDefaults(), c)
}

func defaultValue(defaults map[string]TopicDefault, c *config.Key) (string, ConfigSource) {
	if d, ok := defaults[c.Name]; ok {
		if d.Static && d.Level == config.LevelDefault {
			d.Level = config.LevelStatic // made in code, without a level
		}
		return d.Value, sourceOf(d.Level)
	}
	return c.Default, SourceDefault
}

// settings computes a topic's effective configuration from the broker-level
// values and the topic's overrides. The overrides must have passed
// validateTopicConfigs.
func (b *Broker) settings(overrides map[string]string) (topicSettings, error) {
	return settings(b.topicDefaults(), overrides)
}

func settings(defaults map[string]TopicDefault, overrides map[string]string) (topicSettings, error) {
	t := config.DefaultTopic()
	for _, c := range config.TopicKeys() {
		v, ok := overrides[c.Name]
		if !ok {
			v, _ = defaultValue(defaults, &c)
		}
		if err := c.Set(&t, v); err != nil {
			return topicSettings{}, errorf(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", v, c.Name, err)
		}
	}
	return topicSettings{log: storage.LogConfig{Log: t.Log}, minISR: t.MinInsyncReplicas, uncleanLeader: t.UncleanLeaderElectionEnable}, nil
}

// TopicLogConfig is the storage configuration of a topic with the given
// overrides on top of the broker-level defaults (falling back to the
// defaults alone where an override is bad). The appliance uses it for logs
// found on disk at start, before the broker exists.
func TopicLogConfig(defaults map[string]TopicDefault, overrides map[string]string) storage.LogConfig {
	s, err := settings(defaults, overrides)
	if err != nil {
		s, _ = settings(defaults, nil)
	}
	return s.log
}

// validateTopicConfigs checks config overrides for a topic whose replication
// factor is rf (0 = unknown): an unknown name or a value that does not parse
// is INVALID_CONFIG, as in Kafka; a value that parses but is out of range or
// contradicts the broker (max.message.bytes above socket.request.max.bytes,
// min.insync.replicas above the replication factor) is POLICY_VIOLATION.
func (b *Broker) validateTopicConfigs(overrides map[string]string, rf int) error {
	for name, v := range overrides {
		if c, ok := config.LookupAcceptedTopic(name); ok {
			// Kafka's, without effect here: its type and range still count.
			if _, err := c.ParseValue(v); err != nil {
				return errorf(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", v, name, err)
			}
			if err := c.CheckValue(v); err != nil {
				return errorf(kerr.PolicyViolation, "%s: %s: %v", name, v, err)
			}
			continue
		}
		c, ok := config.LookupTopic(name)
		if !ok {
			return errorf(kerr.InvalidConfig, "Unknown topic config name: %s", name)
		}
		t := config.DefaultTopic()
		if err := c.Set(&t, v); err != nil {
			return errorf(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", v, name, err)
		}
	}
	s, err := b.settings(overrides)
	if err != nil {
		return err
	}
	t := config.Topic{Log: s.log.Log, MinInsyncReplicas: s.minISR, UncleanLeaderElectionEnable: s.uncleanLeader}
	if err := t.Validate(); err != nil {
		return errorf(kerr.PolicyViolation, "%v", err)
	}
	// The cross-checks apply to values set on the topic: the broker's own
	// defaults are the operator's business.
	if _, ok := overrides["min.insync.replicas"]; ok && rf > 0 && int(s.minISR) > rf {
		return errorf(kerr.PolicyViolation, "min.insync.replicas %d is larger than the replication factor %d: acks=all produce could never succeed", s.minISR, rf)
	}
	if _, ok := overrides["max.message.bytes"]; ok && b.cfg.MaxRequestBytes > 0 && s.log.MaxMessageBytes > b.cfg.MaxRequestBytes {
		return errorf(kerr.PolicyViolation, "max.message.bytes %d is larger than socket.request.max.bytes %d: such batches could never arrive", s.log.MaxMessageBytes, b.cfg.MaxRequestBytes)
	}
	return nil
}

// describeTopicConfigs lists every topic config of a topic with the given
// overrides, with its value and source, and the synonyms when asked.
func (b *Broker) describeTopicConfigs(overrides map[string]string, synonyms bool) []ConfigEntry {
	keys := describedTopicKeys
	out := make([]ConfigEntry, 0, len(keys))
	for i := range keys {
		c := &keys[i]
		def, defSource := b.defaultValue(c)
		e := ConfigEntry{Name: c.Name, Type: c.Type, Doc: c.Doc}
		if v, ok := overrides[c.Name]; ok {
			e.Value, e.Source = &v, SourceDynamicTopic
		} else {
			v := def
			e.Value, e.Source = &v, defSource
		}
		if synonyms {
			if v, ok := overrides[c.Name]; ok {
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: c.Name, Value: v, Source: SourceDynamicTopic})
			}
			if defSource != SourceDefault {
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: b.topicDefaults()[c.Name].BrokerKey, Value: def, Source: defSource})
			}
			if c.BrokerKey != "" {
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: c.BrokerKey, Value: c.Default, Source: SourceDefault})
			}
		}
		out = append(out, e)
	}
	return out
}

package config

import (
	"errors"
	"fmt"
)

// Dynamic broker configs (Kafka's KIP-226): a broker key Sluice applies
// while it runs (Key.Dynamic) can be set for one broker or as the cluster
// default with AlterConfigs/IncrementalAlterConfigs on a BROKER resource,
// kept by the coordinator (/config/brokers/<id>, /config/brokers/<default>).
// The value in force is, in Kafka's order: the broker's own dynamic
// config, the cluster default, the config file (or an override), the
// built-in default.
//
// The dynamic keys are the broker keys that give a topic config its
// default (log.retention.ms, log.segment.bytes, message.max.bytes,
// unclean.leader.election.enable, ...): every partition takes the new
// value at once, unless its topic sets its own.

// Dynamic holds the dynamic broker configs in force on one broker.
type Dynamic struct {
	Broker  map[string]string // /config/brokers/<this broker's id>
	Default map[string]string // /config/brokers/<default>
}

// Value is the value of broker key name set dynamically: the broker's own,
// else the cluster default's, each only when valid by CheckDynamic; ok is
// false when neither sets it (the static value holds).
func (d Dynamic) Value(name string) (string, bool) {
	for _, m := range []map[string]string{d.Broker, d.Default} {
		if v, ok := m[name]; ok && CheckDynamic(name, v) == nil {
			return v, true
		}
	}
	return "", false
}

// Level is where the value of a broker key comes from, highest first.
type Level int8

const (
	LevelDefault        Level = iota // the built-in default
	LevelStatic                      // the config file or an override
	LevelDynamicDefault              // the cluster-wide dynamic default
	LevelDynamicBroker               // this broker's dynamic config
)

// Errors of CheckDynamic.
var (
	// ErrNotDynamic: the key exists but is read at start only.
	ErrNotDynamic = errors.New("not dynamic")
	// ErrUnknownDynamic: neither Sluice nor Kafka has the key.
	ErrUnknownDynamic = errors.New("unknown broker config")
)

// CheckDynamic checks a dynamic broker config before it is stored: the key
// must be one Sluice applies at run time (else ErrNotDynamic or
// ErrUnknownDynamic, wrapped in a message an operator can act on) and the
// value must parse and be in range (the key's rules).
func CheckDynamic(name, value string) error {
	k, ok := Lookup(name)
	if !ok {
		if _, kafka := KafkaBrokerKey(name); kafka {
			return fmt.Errorf("%w: %s is a Kafka config that has no meaning for Sluice", ErrNotDynamic, name)
		}
		if s := Suggest(name); s != "" {
			return fmt.Errorf("%w: %s (did you mean %s?)", ErrUnknownDynamic, name, s)
		}
		return fmt.Errorf("%w: %s", ErrUnknownDynamic, name)
	}
	if !k.Dynamic {
		why := "Sluice reads it at start"
		if k.synonymOf != "" {
			why = "set " + k.synonymOf + " instead, which Sluice applies at run time"
		}
		return fmt.Errorf("%w: %s cannot be changed while the broker runs (%s); set it in server.properties and restart the broker", ErrNotDynamic, name, why)
	}
	if err := k.CheckValue(value); err != nil {
		return fmt.Errorf("%s=%q: %w", name, value, err)
	}
	return nil
}

// DynamicKeys returns the names of the broker keys Sluice applies at run
// time, in the table's order.
func DynamicKeys() []string {
	var out []string
	for i := range keys {
		if keys[i].Dynamic {
			out = append(out, keys[i].Name)
		}
	}
	return out
}

// TopicDefaultsWith is TopicDefaults with the dynamic broker configs dyn on
// top: a broker key set dynamically (valid by CheckDynamic; others are
// skipped) gives its topic config's default, with its level.
func (c *Config) TopicDefaultsWith(dyn Dynamic) map[string]TopicDefault {
	out := c.TopicDefaults()
	for i := range topicKeys {
		t := &topicKeys[i]
		for _, l := range []struct {
			m     map[string]string
			level Level
		}{{dyn.Broker, LevelDynamicBroker}, {dyn.Default, LevelDynamicDefault}} {
			v, ok := l.m[t.BrokerKey]
			if !ok || CheckDynamic(t.BrokerKey, v) != nil {
				continue
			}
			k, _ := Lookup(t.BrokerKey)
			if k.norm != nil {
				v = k.norm(v)
			}
			out[t.Name] = TopicDefault{BrokerKey: t.BrokerKey, Value: v, Level: l.level}
			break
		}
	}
	return out
}

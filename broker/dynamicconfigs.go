package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/config"
)

// Dynamic broker configs (config/dynamic.go): the broker keys Sluice
// applies at run time, set per broker or as the cluster default through
// AlterConfigs and IncrementalAlterConfigs on BROKER resources and kept by
// the coordinator (cluster.BrokerConfigStore). Every broker reads its own
// and the default entity with each metadata image; a change re-applies
// the topic defaults to the local partitions (applyLocal), so it takes
// effect without a restart and survives one.

// Kafka's config sources of dynamic broker configs (config_source).
const (
	SourceDynamicBroker        ConfigSource = 2 // DYNAMIC_BROKER_CONFIG: set on this broker
	SourceDynamicDefaultBroker ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: the cluster-wide default
)

// brokerConfigStore is the coordinator's store of dynamic broker configs,
// when it has one and the broker knows its static configuration.
func (b *Broker) brokerConfigStore() (cluster.BrokerConfigStore, bool) {
	if b.cfg.Static == nil {
		return nil, false
	}
	s, ok := b.cfg.Coordinator.(cluster.BrokerConfigStore)
	return s, ok
}

// readDynamic reads this broker's and the default dynamic configs into
// img, computing the topic defaults they give (reused from prev when the
// configs did not change).
func (b *Broker) readDynamic(ctx context.Context, img, prev *Image) error {
	s, ok := b.brokerConfigStore()
	if !ok {
		return nil
	}
	var err error
	if img.Dynamic.Broker, err = s.BrokerConfig(ctx, strconv.Itoa(int(b.cfg.BrokerID))); err != nil {
		return err
	}
	if img.Dynamic.Default, err = s.BrokerConfig(ctx, cluster.DefaultBrokerEntity); err != nil {
		return err
	}
	if prev != nil && prev.topicDefaults != nil && maps.Equal(prev.Dynamic.Broker, img.Dynamic.Broker) && maps.Equal(prev.Dynamic.Default, img.Dynamic.Default) {
		img.topicDefaults = prev.topicDefaults
		return nil
	}
	if len(img.Dynamic.Broker) == 0 && len(img.Dynamic.Default) == 0 && prev == nil {
		return nil // the static defaults
	}
	img.topicDefaults = b.cfg.Static.TopicDefaultsWith(img.Dynamic)
	for _, m := range []map[string]string{img.Dynamic.Broker, img.Dynamic.Default} {
		for k, v := range m {
			if err := config.CheckDynamic(k, v); err != nil {
				b.log.Warn("dynamic broker config ignored", "key", k, "value", v, "err", err)
			}
		}
	}
	b.log.Info("dynamic broker configs in force", "broker", img.Dynamic.Broker, "default", img.Dynamic.Default)
	return nil
}

// topicDefaults are the broker-level values behind the topic configs now:
// the static ones with the dynamic broker configs of the latest image.
func (b *Broker) topicDefaults() map[string]TopicDefault {
	if img := b.Image(); img != nil && img.topicDefaults != nil {
		return img.topicDefaults
	}
	return b.cfg.TopicDefaults
}

// dynamicValue is the value of broker key name set dynamically in img
// (config.Dynamic.Value); ok is false when img is nil or does not set it.
func dynamicValue(img *Image, name string) (string, bool) {
	if img == nil {
		return "", false
	}
	return img.Dynamic.Value(name)
}

// dynamicInt is dynamicValue of an integer key.
func dynamicInt(img *Image, name string) (int64, bool) {
	v, ok := dynamicValue(img, name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// numReplicaFetchers is num.replica.fetchers in force: the dynamic value
// of the latest image, else the static one.
func (b *Broker) numReplicaFetchers() int {
	if n, ok := dynamicInt(b.Image(), "num.replica.fetchers"); ok && n >= 1 {
		return int(n)
	}
	return b.cfg.NumReplicaFetchers
}

// notifyDynamic hands the dynamic configs of a newly published img to
// Config.OnDynamic when they differ from the ones handed last (publishMu
// held, so calls are in image order).
func (b *Broker) notifyDynamic(img *Image) {
	if b.cfg.OnDynamic == nil {
		return
	}
	if last := b.lastDynamic; last != nil && maps.Equal(last.Broker, img.Dynamic.Broker) && maps.Equal(last.Default, img.Dynamic.Default) {
		return
	}
	d := img.Dynamic
	b.lastDynamic = &d
	b.cfg.OnDynamic(d)
}

// sourceOf is the ConfigSource of a broker-level value.
func sourceOf(l config.Level) ConfigSource {
	switch l {
	case config.LevelDynamicBroker:
		return SourceDynamicBroker
	case config.LevelDynamicDefault:
		return SourceDynamicDefaultBroker
	case config.LevelStatic:
		return SourceStaticBroker
	}
	return SourceDefault
}

// DescribeBrokerConfigsOf lists the configs of a BROKER resource (only
// names, when non-empty): entity "" is the cluster default, which shows
// the dynamic defaults set (DYNAMIC_DEFAULT_BROKER_CONFIG) as Kafka does;
// otherwise this broker's every key with the value in force and its source
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and, when asked, its synonyms in
// that order. Dynamic keys are not read-only.
func (b *Broker) DescribeBrokerConfigsOf(entity string, names []string, synonyms bool) []ConfigEntry {
	var dyn config.Dynamic
	if img := b.Image(); img != nil {
		dyn = img.Dynamic
	}
	if entity == "" {
		var out []ConfigEntry
		for _, name := range slices.Sorted(maps.Keys(dyn.Default)) {
			v := dyn.Default[name]
			e := ConfigEntry{Name: name, Value: &v, Source: SourceDynamicDefaultBroker, Type: config.String}
			if k, ok := config.Lookup(name); ok {
				e.Type, e.Doc, e.ReadOnly = k.Type, k.Documentation(), !k.Dynamic
			}
			if synonyms {
				e.Synonyms = []ConfigSynonym{{Name: name, Value: v, Source: SourceDynamicDefaultBroker}}
			}
			out = append(out, e)
		}
		return filterEntries(out, names)
	}
	out := slices.Clone(b.cfg.BrokerConfigs)
	for i := range out {
		e := &out[i]
		k, ok := config.Lookup(e.Name)
		if ok && k.Dynamic {
			e.ReadOnly = false
			var pre []ConfigSynonym
			if v, ok := dyn.Broker[e.Name]; ok && config.CheckDynamic(e.Name, v) == nil {
				pre = append(pre, ConfigSynonym{Name: e.Name, Value: v, Source: SourceDynamicBroker})
			}
			if v, ok := dyn.Default[e.Name]; ok && config.CheckDynamic(e.Name, v) == nil {
				pre = append(pre, ConfigSynonym{Name: e.Name, Value: v, Source: SourceDynamicDefaultBroker})
			}
			if len(pre) > 0 {
				v := pre[0].Value
				e.Value, e.Source = &v, pre[0].Source
				e.Synonyms = append(pre, e.Synonyms...)
			}
		}
		if !synonyms {
			e.Synonyms = nil
		}
	}
	return filterEntries(out, names)
}

// brokerEntity checks the name of a BROKER resource to alter: "" is the
// cluster default, else it must be this broker's id (Kafka sends a
// broker's own configs to that broker).
func (b *Broker) brokerEntity(name string) (string, error) {
	if name == "" {
		return cluster.DefaultBrokerEntity, nil
	}
	if name != strconv.Itoa(int(b.cfg.BrokerID)) {
		return "", errorf(kerr.InvalidRequest, "alter the configs of broker %s on that broker", name)
	}
	return name, nil
}

// AlterBrokerConfigs replaces all of a BROKER resource's dynamic configs
// with set (AlterConfigs semantics).
func (b *Broker) AlterBrokerConfigs(ctx context.Context, resource string, set map[string]string, validateOnly bool) error {
	return b.alterBrokerConfigs(ctx, resource, func(map[string]string) (map[string]string, error) {
		return maps.Clone(set), nil
	}, validateOnly)
}

// IncrementalAlterBrokerConfigs applies ops to a BROKER resource's dynamic
// configs: SET, DELETE (back to the next source), APPEND and SUBTRACT for
// list keys.
func (b *Broker) IncrementalAlterBrokerConfigs(ctx context.Context, resource string, ops []ConfigOp, validateOnly bool) error {
	return b.alterBrokerConfigs(ctx, resource, func(cur map[string]string) (map[string]string, error) {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]string{}
		}
		seen := map[string]bool{}
		for _, op := range ops {
			if seen[op.Name] {
				return nil, errorf(kerr.InvalidRequest, "Error due to duplicate config keys: %s", op.Name)
			}
			seen[op.Name] = true
			switch op.Op {
			case 0:
				next[op.Name] = op.Value
			case 1:
				delete(next, op.Name)
			case 2, 3:
				k, ok := config.Lookup(op.Name)
				if !ok || k.Type != config.List {
					return nil, errorf(kerr.InvalidConfig, "Config value append/subtract is not allowed for config %s: it is not a list", op.Name)
				}
				curVal, ok := next[op.Name]
				if !ok {
					curVal = b.brokerValue(op.Name)
				}
				items := splitItems(curVal)
				for _, v := range splitItems(op.Value) {
					if op.Op == 2 && !slices.Contains(items, v) {
						items = append(items, v)
					}
					if op.Op == 3 {
						items = slices.DeleteFunc(items, func(s string) bool { return s == v })
					}
				}
				next[op.Name] = strings.Join(items, ",")
			default:
				return nil, errorf(kerr.InvalidRequest, "unknown config operation %d", op.Op)
			}
		}
		return next, nil
	}, validateOnly)
}

// brokerValue is the value in force of a broker key on this broker.
func (b *Broker) brokerValue(name string) string {
	for _, e := range b.DescribeBrokerConfigsOf(strconv.Itoa(int(b.cfg.BrokerID)), []string{name}, false) {
		if e.Value != nil {
			return *e.Value
		}
	}
	return ""
}

func (b *Broker) alterBrokerConfigs(ctx context.Context, resource string, change func(map[string]string) (map[string]string, error), validateOnly bool) error {
	s, ok := b.brokerConfigStore()
	if !ok {
		return errorf(kerr.InvalidRequest, "this broker keeps no dynamic configs: edit the config file and restart")
	}
	entity, err := b.brokerEntity(resource)
	if err != nil {
		return err
	}
	cur, err := s.BrokerConfig(ctx, entity)
	if err != nil {
		return err
	}
	next, err := change(cur)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(next)) {
		if v, ok := cur[name]; ok && v == next[name] {
			continue // kept as it was: a value stored before stays storable
		}
		if err := config.CheckDynamic(name, next[name]); err != nil {
			switch {
			case errors.Is(err, config.ErrNotDynamic):
				return errorf(kerr.InvalidRequest, "Cannot update these configs dynamically: %v", err)
			case errors.Is(err, config.ErrUnknownDynamic):
				return errorf(kerr.InvalidConfig, "%v", err)
			}
			return errorf(kerr.InvalidConfig, "Invalid value for dynamic broker config: %v", err)
		}
	}
	if validateOnly {
		return nil
	}
	if err := s.SetBrokerConfig(ctx, entity, next); err != nil {
		return err
	}
	b.log.Info("dynamic broker configs changed", "entity", entity, "configs", next)
	// Apply before answering, so that a describe or a produce right after
	// sees the change on this broker.
	own := entity != cluster.DefaultBrokerEntity
	_ = b.waitImage(ctx, func(img *Image) bool {
		if own {
			return maps.Equal(img.Dynamic.Broker, next)
		}
		return maps.Equal(img.Dynamic.Default, next)
	})
	return nil
}

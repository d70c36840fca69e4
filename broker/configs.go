package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
)

// DescribeTopicConfigs lists a topic's configs (only names, when names is
// non-empty) with value and source, and their synonyms when asked. The
// overrides are read from the metadata store (TopicConfigs), so a change
// acknowledged through any broker shows at once.
func (b *Broker) DescribeTopicConfigs(ctx context.Context, topic string, names []string, synonyms bool) ([]ConfigEntry, error) {
	overrides, err := b.TopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	return filterEntries(b.describeTopicConfigs(overrides, synonyms), names), nil
}

// TopicConfigs returns a topic's config overrides as the metadata store
// has them now, as Kafka in ZooKeeper mode reads /config/topics/<t> for
// DescribeConfigs: the image (what produce, fetch and the logs use) learns
// of a change made through another broker only when its notification
// arrives. While the store is out of reach it answers from the image.
func (b *Broker) TopicConfigs(ctx context.Context, topic string) (map[string]string, error) {
	cfgs, _, err := b.cfg.Coordinator.ReadTopicConfig(ctx, topic)
	switch {
	case err == nil:
		return cfgs, nil
	case errors.Is(err, cluster.ErrNoTopic):
		return nil, errUnknownTopicOrPartition
	case errors.Is(err, cluster.ErrUnavailable):
		if t, ok := b.Image().Topics[topic]; ok {
			return maps.Clone(t.Configs), nil
		}
		return nil, errUnknownTopicOrPartition
	}
	return nil, err
}

// DescribeBrokerConfigs lists this broker's configs (only names, when
// non-empty). id must be this broker's id (or "" for the default entity).
func (b *Broker) DescribeBrokerConfigs(names []string, synonyms bool) []ConfigEntry {
	return b.DescribeBrokerConfigsOf(strconv.Itoa(int(b.cfg.BrokerID)), names, synonyms)
}

func filterEntries(all []ConfigEntry, names []string) []ConfigEntry {
	if len(names) == 0 {
		return all
	}
	out := make([]ConfigEntry, 0, min(len(names), len(all)))
	for _, e := range all {
		if slices.Contains(names, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// AlterTopicConfigs replaces all of a topic's config overrides with set
// (AlterConfigs semantics: keys not in set return to their defaults).
func (b *Broker) AlterTopicConfigs(ctx context.Context, topic string, set map[string]string, validateOnly bool) error {
	return b.alterTopicConfigs(ctx, topic, func(map[string]string) (map[string]string, error) {
		return maps.Clone(set), nil
	}, validateOnly)
}

// ConfigOp is one IncrementalAlterConfigs operation (Kafka's op codes).
type ConfigOp struct {
	Name  string
	Op    int8 // 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
	Value string
}

// IncrementalAlterTopicConfigs applies ops to a topic's overrides: SET
// overrides a value, DELETE returns it to the default, APPEND and SUBTRACT
// add to or remove from a list config (cleanup.policy).
func (b *Broker) IncrementalAlterTopicConfigs(ctx context.Context, topic string, ops []ConfigOp, validateOnly bool) error {
	return b.alterTopicConfigs(ctx, topic, func(cur map[string]string) (map[string]string, error) {
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
			c, ok := lookupTopicConfig(op.Name)
			if !ok {
				return nil, errorf(kerr.InvalidConfig, "Unknown topic config name: %s", op.Name)
			}
			switch op.Op {
			case 0:
				next[op.Name] = op.Value
			case 1:
				delete(next, op.Name)
			case 2, 3:
				if c.Type != TypeList {
					return nil, errorf(kerr.InvalidConfig, "Config value append/subtract is not allowed for config %s: it is not a list", op.Name)
				}
				curVal, ok := next[op.Name]
				if !ok {
					curVal, _ = b.defaultValue(c)
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

func splitItems(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// configApplyWait bounds how long an alter waits for this broker to
// apply the configs it wrote.
const configApplyWait = 10 * time.Second

// maxConfigCASAttempts bounds how often an alter re-reads a topic's
// configs that changed between its read and its write.
const maxConfigCASAttempts = 10

// alterTopicConfigs is a read-modify-write on the metadata store: change
// is applied to the overrides as stored now (not as this broker's image
// has them, which may not have seen a change made through another broker
// yet), and written only if they did not change meanwhile; else it reads
// them again and reapplies change.
func (b *Broker) alterTopicConfigs(ctx context.Context, topic string, change func(map[string]string) (map[string]string, error), validateOnly bool) error {
	t, ok := b.Image().Topics[topic]
	if !ok || t.Deleting {
		return errUnknownTopicOrPartition
	}
	rf := 0
	if len(t.Partitions) > 0 {
		rf = len(t.Partitions[0].Replicas)
	}
	var next map[string]string
	for attempt := 1; ; attempt++ {
		cur, version, err := b.cfg.Coordinator.ReadTopicConfig(ctx, topic)
		if errors.Is(err, cluster.ErrNoTopic) {
			return errUnknownTopicOrPartition
		}
		if err != nil {
			return storeErr(err)
		}
		if next, err = change(cur); err != nil {
			return err
		}
		if err := b.validateTopicConfigs(next, rf); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		err = b.cfg.Coordinator.SetTopicConfigIf(ctx, topic, next, version)
		if errors.Is(err, cluster.ErrBadVersion) && attempt < maxConfigCASAttempts {
			continue // changed through another broker since the read
		}
		if errors.Is(err, cluster.ErrNoTopic) {
			return errUnknownTopicOrPartition
		}
		if err != nil {
			return storeErr(err)
		}
		break
	}
	b.log.Info("topic configs changed", "topic", topic, "configs", next)
	// Apply before answering, so that a produce right after through this
	// broker sees the change: until the image holds it, or what the
	// coordinator's copy holds now (a change made meanwhile replaced it).
	_ = b.waitImageFor(ctx, configApplyWait, func(img *Image) bool {
		cur, ok := img.Topics[topic]
		if !ok || maps.Equal(cur.Configs, next) {
			return true
		}
		now, err := b.cfg.Coordinator.TopicConfig(ctx, topic)
		return err != nil || maps.Equal(cur.Configs, now)
	})
	return nil
}

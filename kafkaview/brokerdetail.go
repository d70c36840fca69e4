package kafkaview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoBroker: the metadata lists no broker with that id.
var ErrNoBroker = errors.New("no such broker")

// BrokerDetail is everything the broker page shows.
type BrokerDetail struct {
	Info BrokerInfo
	// Configs are the broker's configs (DescribeConfigs on its BROKER
	// resource), sorted by name, with where each value comes from.
	Configs    []BrokerConfig
	ConfigsErr string
	// ClusterDefaults are the cluster-wide dynamic broker configs set
	// (DescribeConfigs on the BROKER resource with the empty name).
	ClusterDefaults    map[string]string
	ClusterDefaultsErr string
	// LogDirs are its log directories; Replicas the partition replicas it
	// holds (Led: it leads them), sorted by topic and partition.
	LogDirs     []LogDir
	LogDirsErr  string
	Led, Follow []BrokerReplica
}

// BrokerConfig is one broker config.
type BrokerConfig struct {
	Name      string
	Value     string
	Null      bool   // no value (unset, or sensitive)
	Sensitive bool   // a password: never shown
	Source    string // broker (dynamic), cluster default, broker config file, default
	Kafka     kmsg.ConfigSource
	Set       bool // set somewhere (not Kafka's default)
	// Synonyms are the values of every level that sets it, highest first
	// (Kafka's synonyms: this broker's dynamic config, the cluster default,
	// the config file, the default).
	Synonyms []BrokerConfigSynonym
}

// BrokerConfigSynonym is the value of a broker config at one level.
type BrokerConfigSynonym struct {
	Name   string
	Value  string
	Null   bool
	Source string // as BrokerConfig.Source
	Kafka  kmsg.ConfigSource
}

// Below is the value the config takes when the levels in drop no longer
// set it: the first synonym of another level, or ok=false when none is
// described.
func (c BrokerConfig) Below(drop ...kmsg.ConfigSource) (BrokerConfigSynonym, bool) {
	for _, s := range c.Synonyms {
		if !slices.Contains(drop, s.Kafka) {
			return s, true
		}
	}
	return BrokerConfigSynonym{}, false
}

// BrokerReplica is a partition replica a broker holds.
type BrokerReplica struct {
	Topic     string
	Partition int32
	Leader    int32
	Replicas  []int32
	InSync    bool  // this broker's replica is in the ISR
	Size      int64 // bytes on this broker; -1 when not reported
	// OffsetLag is DescribeLogDirs' offset lag of the replica: on a Sluice
	// follower its replica fetcher's lag (the leader's high watermark at
	// the last fetch minus its log end), on a leader the records not yet
	// replicated to the ISR; -1 when not reported.
	OffsetLag int64
}

type replicaKey struct {
	topic     string
	partition int32
}

// BrokerDetail describes broker id of snap: its configs, log dirs and the
// partitions it leads and follows. ErrNoBroker when snap has no such broker.
func (c *Client) BrokerDetail(ctx context.Context, snap *Snapshot, id int32) (*BrokerDetail, error) {
	b, ok := snap.Broker(id)
	if !ok {
		return nil, ErrNoBroker
	}
	d := &BrokerDetail{Info: BrokerInfo{Broker: b, Up: true, Controller: id == snap.Controller, TotalBytes: -1, FreeBytes: -1}}
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, id)
	if err == nil && len(rcs) == 1 && rcs[0].Err != nil {
		err = rcs[0].Err
		if rcs[0].ErrMessage != "" {
			err = errors.New(err.Error() + ": " + rcs[0].ErrMessage)
		}
	}
	if err != nil {
		d.ConfigsErr = err.Error()
	} else {
		for _, rc := range rcs {
			for _, cfg := range rc.Configs {
				e := BrokerConfig{Name: cfg.Key, Sensitive: cfg.Sensitive, Null: cfg.Value == nil, Source: sourceName(cfg.Source), Kafka: cfg.Source,
					Set: cfg.Source != kmsg.ConfigSourceDefaultConfig}
				if cfg.Value != nil {
					e.Value = *cfg.Value
				}
				for _, syn := range cfg.Synonyms {
					s := BrokerConfigSynonym{Name: syn.Key, Null: syn.Value == nil, Source: sourceName(syn.Source), Kafka: syn.Source}
					if syn.Value != nil {
						s.Value = *syn.Value
					}
					e.Synonyms = append(e.Synonyms, s)
				}
				d.Configs = append(d.Configs, e)
			}
		}
		slices.SortFunc(d.Configs, func(x, y BrokerConfig) int { return strings.Compare(x.Name, y.Name) })
	}
	d.ClusterDefaults, err = c.ClusterDefaultConfigs(ctx)
	if err != nil {
		d.ClusterDefaultsErr = err.Error()
	}
	sizes := map[replicaKey]kadm.DescribedLogDirPartition{}
	dirs, err := c.adm.DescribeBrokerLogDirs(ctx, id, nil)
	if err != nil {
		d.LogDirsErr = err.Error()
	}
	var total, free int64
	seenVolumes := false
	for _, ld := range dirs.Sorted() {
		l := LogDir{Dir: ld.Dir, Bytes: ld.Size(), TotalBytes: ld.TotalBytes, FreeBytes: ld.UsableBytes}
		if ld.Err != nil {
			l.Err = ld.Err.Error()
		}
		d.Info.LogBytes += l.Bytes
		if ld.TotalBytes > 0 {
			seenVolumes = true
			total, free = max(total, ld.TotalBytes), max(free, ld.UsableBytes)
		}
		d.LogDirs = append(d.LogDirs, l)
		ld.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			sizes[replicaKey{p.Topic, p.Partition}] = p
		})
	}
	if seenVolumes {
		d.Info.TotalBytes, d.Info.FreeBytes = total, free
	}
	d.Info.LogDirs = d.LogDirs
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			if !slices.Contains(p.Replicas, id) {
				continue
			}
			r := BrokerReplica{Topic: t.Name, Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas,
				InSync: slices.Contains(p.ISR, id), Size: -1, OffsetLag: -1}
			if s, ok := sizes[replicaKey{t.Name, p.Partition}]; ok {
				r.Size, r.OffsetLag = s.Size, s.OffsetLag
			}
			if p.Leader == id {
				d.Led = append(d.Led, r)
			} else {
				d.Follow = append(d.Follow, r)
			}
		}
	}
	byName := func(x, y BrokerReplica) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	}
	slices.SortFunc(d.Led, byName)
	slices.SortFunc(d.Follow, byName)
	return d, nil
}

// ClusterDefaultConfigs are the cluster-wide dynamic broker configs set
// (Kafka's <default> entity), by name.
func (c *Client) ClusterDefaultConfigs(ctx context.Context) (map[string]string, error) {
	rcs, err := c.adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, &KafkaError{Op: "describe the cluster's default broker configs", Err: rc.Err, Message: rc.ErrMessage}
		}
		for _, cfg := range rc.Configs {
			if cfg.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig && cfg.Value != nil {
				out[cfg.Key] = *cfg.Value
			}
		}
	}
	return out, nil
}

// DynamicOverrides are the dynamic configs set on broker (its own
// overrides), or, for broker < 0, the cluster-wide defaults, by name.
func (c *Client) DynamicOverrides(ctx context.Context, broker int32) (map[string]string, error) {
	if broker < 0 {
		return c.ClusterDefaultConfigs(ctx)
	}
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, &KafkaError{Op: "describe the configs of broker " + strconv.Itoa(int(broker)), Err: rc.Err, Message: rc.ErrMessage}
		}
		for _, cfg := range rc.Configs {
			for _, syn := range cfg.Synonyms {
				if syn.Source == kmsg.ConfigSourceDynamicBrokerConfig && syn.Value != nil {
					out[cfg.Key] = *syn.Value
				}
			}
			if cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig && cfg.Value != nil {
				out[cfg.Key] = *cfg.Value
			}
		}
	}
	return out, nil
}

// AlterBrokerConfigs applies changes to the dynamic configs of broker, or
// of the cluster default when broker < 0, with IncrementalAlterConfigs on
// the BROKER resource (its id, or the empty name): a change sets a value,
// a Reset deletes the override (the config falls back to the level
// below). validateOnly asks the broker to check without storing.
func (c *Client) AlterBrokerConfigs(ctx context.Context, broker int32, changes []ConfigChange, validateOnly bool) error {
	if len(changes) == 0 {
		return nil
	}
	alters := make([]kadm.AlterConfig, 0, len(changes))
	for _, ch := range changes {
		if ch.Reset {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: ch.Name})
			continue
		}
		v := ch.Value
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: ch.Name, Value: &v})
	}
	var ids []int32
	what := "the cluster's default broker configs"
	if broker >= 0 {
		ids = []int32{broker}
		what = "the configs of broker " + strconv.Itoa(int(broker))
	}
	alter := c.adm.AlterBrokerConfigs
	if validateOnly {
		alter = c.adm.ValidateAlterBrokerConfigs
	}
	resps, err := alter(ctx, alters, ids...)
	if err != nil {
		return fmt.Errorf("alter %s: %w", what, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return &KafkaError{Op: "alter " + what, Err: r.Err, Message: r.ErrMessage}
		}
	}
	return nil
}

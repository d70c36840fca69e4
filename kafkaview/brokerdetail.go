package kafkaview

import (
	"cmp"
	"context"
	"errors"
	"slices"
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
	Set       bool   // set somewhere (not Kafka's default)
}

// BrokerReplica is a partition replica a broker holds.
type BrokerReplica struct {
	Topic     string
	Partition int32
	Leader    int32
	Replicas  []int32
	InSync    bool  // this broker's replica is in the ISR
	Size      int64 // bytes on this broker; -1 when not reported
	OffsetLag int64 // Kafka's offset lag of the replica (high watermark minus its log end); -1 when not reported
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
				e := BrokerConfig{Name: cfg.Key, Sensitive: cfg.Sensitive, Null: cfg.Value == nil, Source: sourceName(cfg.Source),
					Set: cfg.Source != kmsg.ConfigSourceDefaultConfig}
				if cfg.Value != nil {
					e.Value = *cfg.Value
				}
				d.Configs = append(d.Configs, e)
			}
		}
		slices.SortFunc(d.Configs, func(x, y BrokerConfig) int { return strings.Compare(x.Name, y.Name) })
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

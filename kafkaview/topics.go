package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/config"
)

// TopicStats are the figures of a topic that need more than metadata.
type TopicStats struct {
	Messages int64 // sum over partitions of end - start offset
	Size     int64 // bytes of one replica of every partition (-1 when unknown)
	Err      string
}

// Stats lists start and end offsets and log sizes for the named topics. It
// costs two ListOffsets and one DescribeLogDirs round, so callers ask for a
// page of topics, not all of them.
func (c *Client) Stats(ctx context.Context, topics []string) (map[string]TopicStats, error) {
	out := make(map[string]TopicStats, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	starts, err := c.adm.ListStartOffsets(ctx, topics...)
	if err != nil && len(starts) == 0 {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, topics...)
	if err != nil && len(ends) == 0 {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	parts := make(map[string][]int32, len(ends))
	ends.Each(func(o kadm.ListedOffset) { parts[o.Topic] = append(parts[o.Topic], o.Partition) })
	sizes := c.sizes(ctx, parts)
	for _, t := range topics {
		st := TopicStats{Size: -1}
		for p, e := range ends[t] {
			if e.Err != nil {
				st.Err = e.Err.Error()
				continue
			}
			s, ok := starts[t][p]
			if !ok || s.Err != nil {
				continue
			}
			if e.Offset > s.Offset {
				st.Messages += e.Offset - s.Offset
			}
		}
		if ps, ok := sizes[t]; ok {
			st.Size = 0
			for _, sz := range ps {
				st.Size += sz
			}
		}
		out[t] = st
	}
	return out, nil
}

// sizes returns per topic and partition the size of its largest replica,
// from DescribeLogDirs on every broker, for the given partitions of each
// topic. Missing entries mean unknown.
func (c *Client) sizes(ctx context.Context, parts map[string][]int32) map[string]map[int32]int64 {
	out := make(map[string]map[int32]int64)
	if len(parts) == 0 {
		return out
	}
	set := make(kadm.TopicsSet)
	for t, ps := range parts {
		set.Add(t, ps...)
	}
	all, err := c.adm.DescribeAllLogDirs(ctx, set)
	if err != nil && len(all) == 0 {
		c.log.Debug("describe log dirs", "err", err)
		return out
	}
	all.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			return
		}
		for t, ps := range d.Topics {
			for p, dp := range ps {
				m := out[t]
				if m == nil {
					m = make(map[int32]int64)
					out[t] = m
				}
				m[p] = max(m[p], dp.Size)
			}
		}
	})
	return out
}

// PartitionDetail is a partition with its offsets and size.
type PartitionDetail struct {
	PartitionMeta
	Start int64 // log start offset (-1 when unknown)
	End   int64 // high watermark (-1 when unknown)
	// Stable is the last stable offset (-1 when unknown): where a
	// read_committed consumer stops, before the oldest open transaction.
	Stable int64
	Size   int64 // bytes of the largest replica (-1 when unknown)
}

// Unstable is how many records lie between the last stable offset and the
// high watermark, held back from read_committed consumers by open
// transactions (0 when unknown).
func (p PartitionDetail) Unstable() int64 {
	if p.Stable < 0 || p.End < p.Stable {
		return 0
	}
	return p.End - p.Stable
}

// Messages is End - Start, or 0 when unknown.
func (p PartitionDetail) Messages() int64 {
	if p.Start < 0 || p.End < p.Start {
		return 0
	}
	return p.End - p.Start
}

// ConfigEntry is one topic config with its effective value and default.
type ConfigEntry struct {
	Name      string
	Value     string
	Null      bool   // the value is null (unset and no default)
	Default   string // the value the topic gets without an override
	IsDefault bool   // no topic-level override
	Source    string // where the value comes from: topic, broker, default
	Sensitive bool
	ReadOnly  bool
	Doc       string
}

// TopicDetail is everything the topic page shows.
type TopicDetail struct {
	Meta       TopicMeta
	Partitions []PartitionDetail
	Configs    []ConfigEntry // sorted by name
	Messages   int64
	Size       int64 // -1 when unknown
	ConfigErr  string
	OffsetsErr string
}

// Topic describes one topic: metadata, offsets, sizes and configs.
func (c *Client) Topic(ctx context.Context, name string) (*TopicDetail, error) {
	tm, err := c.TopicMetadata(ctx, name)
	if err != nil {
		return nil, err
	}
	d := &TopicDetail{Meta: tm, Size: -1}
	starts, serr := c.adm.ListStartOffsets(ctx, name)
	ends, eerr := c.adm.ListEndOffsets(ctx, name)
	if err := errors.Join(serr, eerr); err != nil {
		d.OffsetsErr = err.Error()
	}
	ps := make([]int32, len(tm.Partitions))
	for i, p := range tm.Partitions {
		ps[i] = p.Partition
	}
	sizes := c.sizes(ctx, map[string][]int32{name: ps})[name]
	stable, lerr := c.LastStableOffsets(ctx, name)
	if lerr != nil {
		d.OffsetsErr = strings.TrimPrefix(d.OffsetsErr+"; "+lerr.Error(), "; ")
	}
	for _, p := range tm.Partitions {
		pd := PartitionDetail{PartitionMeta: p, Start: -1, End: -1, Stable: -1, Size: -1}
		if o, ok := stable[p.Partition]; ok {
			pd.Stable = o
		}
		if o, ok := starts.Lookup(name, p.Partition); ok && o.Err == nil {
			pd.Start = o.Offset
		}
		if o, ok := ends.Lookup(name, p.Partition); ok && o.Err == nil {
			pd.End = o.Offset
		}
		if sz, ok := sizes[p.Partition]; ok {
			pd.Size = sz
			if d.Size < 0 {
				d.Size = 0
			}
			d.Size += sz
		}
		d.Messages += pd.Messages()
		d.Partitions = append(d.Partitions, pd)
	}
	cfgs, err := c.TopicConfigs(ctx, name)
	if err != nil {
		d.ConfigErr = err.Error()
	}
	d.Configs = cfgs
	return d, nil
}

// TopicConfigs describes a topic's configs with their defaults and docs.
func (c *Client) TopicConfigs(ctx context.Context, name string) ([]ConfigEntry, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = name
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	req.IncludeDocumentation = true
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("describe configs of %s: %w", name, err)
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("describe configs of %s: %d resources in the answer", name, len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		if r.ErrorMessage != nil {
			return nil, fmt.Errorf("describe configs of %s: %w: %s", name, err, *r.ErrorMessage)
		}
		return nil, fmt.Errorf("describe configs of %s: %w", name, err)
	}
	out := make([]ConfigEntry, 0, len(r.Configs))
	for _, rc := range r.Configs {
		e := ConfigEntry{
			Name:      rc.Name,
			Sensitive: rc.IsSensitive,
			ReadOnly:  rc.ReadOnly,
			Source:    sourceName(rc.Source),
		}
		if rc.Value != nil {
			e.Value = *rc.Value
		} else {
			e.Null = true
		}
		if rc.Documentation != nil {
			e.Doc = *rc.Documentation
		}
		e.IsDefault = rc.Source != kmsg.ConfigSourceDynamicTopicConfig
		if e.IsDefault {
			e.Default = e.Value
		} else {
			for _, syn := range rc.ConfigSynonyms {
				if syn.Source == kmsg.ConfigSourceDynamicTopicConfig {
					continue
				}
				if syn.Value != nil {
					e.Default = *syn.Value
				}
				break
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func sourceName(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "broker (dynamic)"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "cluster default"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker config file"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return strings.ToLower(s.String())
}

// ValidateTopicName applies Kafka's rules (config.ValidateTopicName), in
// words for the create form.
func ValidateTopicName(name string) error {
	var e *config.TopicNameError
	if !errors.As(config.ValidateTopicName(name), &e) {
		return nil
	}
	switch e.Problem {
	case config.TopicNameEmpty:
		return errors.New("enter a topic name")
	case config.TopicNameTooLong:
		return fmt.Errorf("a topic name is at most %d characters (this one has %d)", config.MaxTopicNameLength, len(name))
	case config.TopicNameDots:
		return errors.New(`a topic cannot be named "." or ".."`)
	}
	return fmt.Errorf("%q is not allowed in a topic name: use letters, digits, '.', '_' and '-'", e.Char)
}

// NewTopic is what the create form asks for.
type NewTopic struct {
	Name        string
	Partitions  int32 // -1 for the broker default
	Replication int16 // -1 for the broker default
	Configs     map[string]string
}

// KafkaError is an error answer from the cluster, with Kafka's message.
type KafkaError struct {
	Op      string
	Err     error // a *kerr.Error
	Message string
}

func (e *KafkaError) Error() string {
	if e.Message != "" && !strings.Contains(e.Err.Error(), e.Message) {
		return fmt.Sprintf("%s: %v: %s", e.Op, e.Err, e.Message)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

func (e *KafkaError) Unwrap() error { return e.Err }

// CreateTopic creates a topic. validateOnly asks the broker to check without
// creating.
func (c *Client) CreateTopic(ctx context.Context, t NewTopic, validateOnly bool) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = validateOnly
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = t.Name
	rt.NumPartitions = t.Partitions
	rt.ReplicationFactor = t.Replication
	keys := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name = k
		rc.Value = kmsg.StringPtr(t.Configs[k])
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	defer c.Invalidate()
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			ke := &KafkaError{Op: "create topic " + t.Name, Err: err}
			if r.ErrorMessage != nil {
				ke.Message = *r.ErrorMessage
			}
			return ke
		}
	}
	return nil
}

// DeleteTopic deletes a topic.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	defer c.Invalidate()
	resp, err := c.adm.DeleteTopic(ctx, name)
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	if resp.Err != nil {
		return &KafkaError{Op: "delete topic " + name, Err: resp.Err, Message: resp.ErrMessage}
	}
	return nil
}

// SetPartitionCount grows a topic to total partitions.
func (c *Client) SetPartitionCount(ctx context.Context, name string, total int) error {
	defer c.Invalidate()
	resps, err := c.adm.UpdatePartitions(ctx, total, name)
	if err != nil {
		return fmt.Errorf("add partitions to %s: %w", name, err)
	}
	r, err := resps.On(name, nil)
	if err != nil {
		return fmt.Errorf("add partitions to %s: %w", name, err)
	}
	if r.Err != nil {
		return &KafkaError{Op: "add partitions to " + name, Err: r.Err, Message: r.ErrMessage}
	}
	return nil
}

// ValidatePartitionCount asks the controller whether name may grow to
// total partitions (CreatePartitions with validate_only): nothing changes.
func (c *Client) ValidatePartitionCount(ctx context.Context, name string, total int) error {
	resps, err := c.adm.ValidateUpdatePartitions(ctx, total, name)
	if err != nil {
		return fmt.Errorf("add partitions to %s: %w", name, err)
	}
	r, err := resps.On(name, nil)
	if err != nil {
		return fmt.Errorf("add partitions to %s: %w", name, err)
	}
	if r.Err != nil {
		return &KafkaError{Op: "add partitions to " + name, Err: r.Err, Message: r.ErrMessage}
	}
	return nil
}

// ConfigChange is one change to a topic config: set to Value, or Reset to
// the default.
type ConfigChange struct {
	Name  string
	Value string
	Reset bool
}

// AlterTopicConfigs applies changes with IncrementalAlterConfigs.
func (c *Client) AlterTopicConfigs(ctx context.Context, name string, changes []ConfigChange) error {
	return c.alterTopicConfigs(ctx, name, changes, false)
}

// ValidateTopicConfigs asks the broker whether it would take changes
// (IncrementalAlterConfigs with validate_only): nothing changes.
func (c *Client) ValidateTopicConfigs(ctx context.Context, name string, changes []ConfigChange) error {
	return c.alterTopicConfigs(ctx, name, changes, true)
}

func (c *Client) alterTopicConfigs(ctx context.Context, name string, changes []ConfigChange, validateOnly bool) error {
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
	alter := c.adm.AlterTopicConfigs
	if validateOnly {
		alter = c.adm.ValidateAlterTopicConfigs
	}
	resps, err := alter(ctx, alters, name)
	if err != nil {
		return fmt.Errorf("alter configs of %s: %w", name, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return &KafkaError{Op: "alter configs of " + name, Err: r.Err, Message: r.ErrMessage}
		}
	}
	return nil
}

// ParseConfigLines reads "key=value" lines (blank lines and # comments
// skipped) into a map, reporting the first malformed line.
func ParseConfigLines(s string) (map[string]string, error) {
	out := make(map[string]string)
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d: want key=value, got %q", i+1, line)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: %s is given twice", i+1, k)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// FormatOffset renders an offset, "-" when unknown.
func FormatOffset(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

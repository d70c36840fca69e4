package kafkaview

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Snapshot is the cluster's metadata at one moment: brokers, controller and
// every topic with its partitions. Topics are sorted by name.
type Snapshot struct {
	At         time.Time
	ClusterID  string
	Controller int32 // -1 when there is none
	Brokers    []Broker
	Topics     []TopicMeta

	byName map[string]int
}

// Broker is one broker in the metadata.
type Broker struct {
	ID       int32
	Host     string
	Port     int32
	Rack     string
	Leaders  int // partitions this broker leads
	Replicas int // partition replicas this broker holds
}

// Addr is host:port.
func (b Broker) Addr() string { return fmt.Sprintf("%s:%d", b.Host, b.Port) }

// TopicMeta is a topic as the metadata describes it.
type TopicMeta struct {
	Name            string
	ID              [16]byte
	Internal        bool
	Partitions      []PartitionMeta // sorted by partition
	Replication     int             // replicas of partition 0 (the usual replication factor)
	UnderReplicated int             // partitions whose ISR is smaller than their replica set
	Offline         int             // partitions without a leader
	Err             string          // topic load error, if any
}

// PartitionMeta is one partition in the metadata.
type PartitionMeta struct {
	Partition   int32
	Leader      int32 // -1 when offline
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
	Err         string
}

// UnderReplicated reports whether some replica is out of the ISR.
func (p PartitionMeta) UnderReplicated() bool { return len(p.ISR) < len(p.Replicas) }

// Topic returns the named topic.
func (s *Snapshot) Topic(name string) (TopicMeta, bool) {
	i, ok := s.byName[name]
	if !ok {
		return TopicMeta{}, false
	}
	return s.Topics[i], true
}

// PartitionCount is the number of partitions over all topics.
func (s *Snapshot) PartitionCount() (partitions, under, offline int) {
	for i := range s.Topics {
		partitions += len(s.Topics[i].Partitions)
		under += s.Topics[i].UnderReplicated
		offline += s.Topics[i].Offline
	}
	return
}

// Broker returns the broker with id.
func (s *Snapshot) Broker(id int32) (Broker, bool) {
	for _, b := range s.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
}

type metaCall struct {
	done chan struct{}
	snap *Snapshot
	err  error
}

// Metadata returns a snapshot no older than maxAge, requesting a new one when
// the cached one is older. Concurrent callers share one request.
func (c *Client) Metadata(ctx context.Context, maxAge time.Duration) (*Snapshot, error) {
	c.metaMu.Lock()
	if c.meta != nil && time.Since(c.meta.At) <= maxAge {
		s := c.meta
		c.metaMu.Unlock()
		return s, nil
	}
	call := c.metaInflight
	if call == nil {
		call = &metaCall{done: make(chan struct{})}
		c.metaInflight = call
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			// The request runs detached from the first caller's context so a
			// caller that gives up does not fail the others; it is bounded by
			// its own timeout.
			rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			snap, err := c.fetchMetadata(rctx)
			c.metaMu.Lock()
			if err == nil {
				c.meta = snap
			}
			c.metaInflight = nil
			c.metaMu.Unlock()
			call.snap, call.err = snap, err
			close(call.done)
		}()
	}
	c.metaMu.Unlock()
	select {
	case <-call.done:
		return call.snap, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Invalidate drops the cached snapshot, after a change to topics.
func (c *Client) Invalidate() {
	c.metaMu.Lock()
	c.meta = nil
	c.metaMu.Unlock()
}

func (c *Client) fetchMetadata(ctx context.Context) (*Snapshot, error) {
	req := kmsg.NewPtrMetadataRequest() // nil Topics: all topics
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return snapshotFrom(resp), nil
}

func snapshotFrom(resp *kmsg.MetadataResponse) *Snapshot {
	s := &Snapshot{At: time.Now(), Controller: resp.ControllerID}
	if resp.ClusterID != nil {
		s.ClusterID = *resp.ClusterID
	}
	brokerIdx := make(map[int32]int, len(resp.Brokers))
	for _, b := range resp.Brokers {
		br := Broker{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		s.Brokers = append(s.Brokers, br)
	}
	sort.Slice(s.Brokers, func(i, j int) bool { return s.Brokers[i].ID < s.Brokers[j].ID })
	for i, b := range s.Brokers {
		brokerIdx[b.ID] = i
	}
	s.Topics = make([]TopicMeta, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		tm := TopicMeta{Name: *t.Topic, ID: t.TopicID, Internal: t.IsInternal}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			tm.Err = err.Error()
		}
		tm.Partitions = make([]PartitionMeta, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			pm := PartitionMeta{
				Partition:   p.Partition,
				Leader:      p.Leader,
				LeaderEpoch: p.LeaderEpoch,
				Replicas:    p.Replicas,
				ISR:         p.ISR,
				Offline:     p.OfflineReplicas,
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && err != kerr.ReplicaNotAvailable {
				pm.Err = err.Error()
			}
			if pm.Leader < 0 {
				tm.Offline++
			} else if i, ok := brokerIdx[pm.Leader]; ok {
				s.Brokers[i].Leaders++
			}
			for _, r := range pm.Replicas {
				if i, ok := brokerIdx[r]; ok {
					s.Brokers[i].Replicas++
				}
			}
			if pm.UnderReplicated() {
				tm.UnderReplicated++
			}
			tm.Partitions = append(tm.Partitions, pm)
		}
		sort.Slice(tm.Partitions, func(i, j int) bool { return tm.Partitions[i].Partition < tm.Partitions[j].Partition })
		if len(tm.Partitions) > 0 {
			tm.Replication = len(tm.Partitions[0].Replicas)
		}
		s.Topics = append(s.Topics, tm)
	}
	sort.Slice(s.Topics, func(i, j int) bool { return s.Topics[i].Name < s.Topics[j].Name })
	s.byName = make(map[string]int, len(s.Topics))
	for i, t := range s.Topics {
		s.byName[t.Name] = i
	}
	return s
}

// TopicMetadata asks for one topic's metadata now, bypassing the cache.
func (c *Client) TopicMetadata(ctx context.Context, topic string) (TopicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return TopicMeta{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	s := snapshotFrom(resp)
	tm, ok := s.Topic(topic)
	if !ok {
		return TopicMeta{}, fmt.Errorf("topic %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if tm.Err != "" {
		for _, t := range resp.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return TopicMeta{}, fmt.Errorf("topic %s: %w", topic, err)
			}
		}
	}
	return tm, nil
}

// BrokerInfo is what the brokers page shows of one broker beyond metadata.
type BrokerInfo struct {
	Broker
	Up         bool
	Controller bool
	LogDirs    []LogDir
	LogBytes   int64 // sum of partition sizes in all log dirs
	TotalBytes int64 // disk size of the log dirs' volumes, -1 when not reported
	FreeBytes  int64 // free disk, -1 when not reported
	Version    string
	Err        string
}

// LogDir is one log directory of a broker.
type LogDir struct {
	Dir        string
	Bytes      int64
	TotalBytes int64
	FreeBytes  int64
	Err        string
}

// BrokerInfos describes every broker in snap: log dir usage (DescribeLogDirs)
// and the Kafka version its API ranges match (ApiVersions).
func (c *Client) BrokerInfos(ctx context.Context, snap *Snapshot) ([]BrokerInfo, error) {
	out := make([]BrokerInfo, len(snap.Brokers))
	idx := make(map[int32]int, len(snap.Brokers))
	for i, b := range snap.Brokers {
		out[i] = BrokerInfo{Broker: b, Up: true, Controller: b.ID == snap.Controller, TotalBytes: -1, FreeBytes: -1}
		idx[b.ID] = i
	}
	dirs, err := c.adm.DescribeAllLogDirs(ctx, nil)
	if err != nil && len(dirs) == 0 {
		for i := range out {
			out[i].Err = "log dirs: " + err.Error()
		}
	}
	for id, ds := range dirs {
		i, ok := idx[id]
		if !ok {
			continue
		}
		bi := &out[i]
		var total, free int64 = 0, 0
		seenVolumes := false
		for _, d := range ds.Sorted() {
			ld := LogDir{Dir: d.Dir, Bytes: d.Size(), TotalBytes: d.TotalBytes, FreeBytes: d.UsableBytes}
			if d.Err != nil {
				ld.Err = d.Err.Error()
			}
			bi.LogBytes += ld.Bytes
			if d.TotalBytes > 0 {
				// Several dirs can share a volume; report the largest volume
				// seen rather than double counting.
				seenVolumes = true
				total = max(total, d.TotalBytes)
				free = max(free, d.UsableBytes)
			}
			bi.LogDirs = append(bi.LogDirs, ld)
		}
		if seenVolumes {
			bi.TotalBytes, bi.FreeBytes = total, free
		}
	}
	vers, err := c.adm.ApiVersions(ctx)
	if err == nil {
		for _, v := range vers.Sorted() {
			i, ok := idx[v.NodeID]
			if !ok {
				continue
			}
			if v.Err != nil {
				out[i].Err = strings.TrimPrefix(out[i].Err+"; api versions: "+v.Err.Error(), "; ")
				continue
			}
			out[i].Version = versionGuess(v)
		}
	}
	return out, nil
}

// versionGuess describes what a broker speaks: Kafka's version when its API
// ranges match one release exactly, and always the number of API keys and
// the newest Produce and Fetch versions (what clients care about).
func versionGuess(v kadm.BrokerApiVersions) string {
	var b strings.Builder
	if g := v.VersionGuess(); strings.HasPrefix(g, "v") && !strings.ContainsAny(g, " ") {
		b.WriteString("Kafka " + g + " API · ")
	}
	keys := 0
	v.EachKeySorted(func(int16, int16, int16) { keys++ })
	fmt.Fprintf(&b, "%d APIs", keys)
	if _, max, ok := v.KeyVersions(0); ok {
		fmt.Fprintf(&b, " · Produce ≤v%d", max)
	}
	if _, max, ok := v.KeyVersions(1); ok {
		fmt.Fprintf(&b, " · Fetch ≤v%d", max)
	}
	return b.String()
}

// Totals sums the end offsets of every partition and the log sizes of every
// broker: two figures whose growth between samples gives the cluster's
// messages-in and bytes-in rates. bytes is -1 when log dirs are not reported.
func (c *Client) Totals(ctx context.Context) (endOffsets, bytes int64, err error) {
	ends, err := c.adm.ListEndOffsets(ctx)
	if err != nil && len(ends) == 0 {
		return 0, -1, fmt.Errorf("list end offsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			endOffsets += o.Offset
		}
	})
	bytes = -1
	dirs, err := c.adm.DescribeAllLogDirs(ctx, nil)
	if err == nil || len(dirs) > 0 {
		// One replica per partition (the largest), as Kafka's BytesIn
		// counts what producers send, not what replication copies.
		type tp struct {
			t string
			p int32
		}
		largest := make(map[tp]int64)
		dirs.Each(func(d kadm.DescribedLogDir) {
			for t, ps := range d.Topics {
				for p, dp := range ps {
					k := tp{t, p}
					largest[k] = max(largest[k], dp.Size)
				}
			}
		})
		bytes = 0
		for _, sz := range largest {
			bytes += sz
		}
	}
	return endOffsets, bytes, nil
}

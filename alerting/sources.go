package alerting

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/sys/unix"
)

// The inputs of the evaluator. Each is a small interface so the appliance can
// wire whatever knows the answer (package lag, the cluster coordinator, the
// broker's log dirs, package migration); the Kadm* and LocalDisk sources
// below work against any Kafka cluster and host.

const (
	sourceLag           = "lag"
	sourceHealth        = "health"
	sourceDisk          = "disk"
	sourceComparisons   = "comparisons"
	sourceBrokerMetrics = "broker_metrics"
)

// LagSource reports every consumer group's lag.
type LagSource interface {
	Lag(ctx context.Context) ([]GroupLag, error)
}

// GroupLag is one group's lag (package lag's Group, reduced to what rules
// use).
type GroupLag struct {
	Group      string
	State      string // Empty, Stable, PreparingRebalance, ...
	Members    int
	Partitions []PartitionLag
	// Err is a per-group failure: rules leave the group's alerts as they are.
	Err error
}

// PartitionLag is a group's position on one partition.
type PartitionLag struct {
	Topic     string
	Partition int32
	Committed int64 // -1: no commit
	LogEnd    int64 // high watermark
	Lag       int64
	LagTime   time.Duration
	// CommitTime is when the committed offset was committed, when the source
	// knows it (zero otherwise; see windows.observe).
	CommitTime time.Time
	// Err says this partition's lag could not be read this round (its
	// offsets could not be listed): a lag rule does not take it for "no
	// lag", so an alert is not resolved by a failed read.
	Err error
}

// LagFunc adapts a function to LagSource.
type LagFunc func(ctx context.Context) ([]GroupLag, error)

// Lag calls f.
func (f LagFunc) Lag(ctx context.Context) ([]GroupLag, error) { return f(ctx) }

// HealthSource reports brokers and partition health.
type HealthSource interface {
	Health(ctx context.Context) (Health, error)
}

// Health is the cluster's state at one moment.
type Health struct {
	Brokers []BrokerHealth
	Topics  []TopicHealth
}

// BrokerHealth is one registered broker.
type BrokerHealth struct {
	ID   int32
	Addr string
	Up   bool
}

// TopicHealth is one topic's partitions.
type TopicHealth struct {
	Topic           string
	Partitions      int
	UnderReplicated []int32 // partitions whose ISR is smaller than their replicas
	Offline         []int32 // partitions without a live leader
	// MessagesIn only grows as records are produced (the sum of the
	// partitions' high watermarks will do); the evaluator derives the produce
	// rate from its change between rounds.
	MessagesIn int64
}

// HealthFunc adapts a function to HealthSource.
type HealthFunc func(ctx context.Context) (Health, error)

// Health calls f.
func (f HealthFunc) Health(ctx context.Context) (Health, error) { return f(ctx) }

// DiskSource reports log directories' free space.
type DiskSource interface {
	LogDirs(ctx context.Context) ([]LogDir, error)
}

// LogDir is one broker log directory.
type LogDir struct {
	Broker     int32
	Path       string
	FreeBytes  uint64
	TotalBytes uint64
}

// DiskFunc adapts a function to DiskSource.
type DiskFunc func(ctx context.Context) ([]LogDir, error)

// LogDirs calls f.
func (f DiskFunc) LogDirs(ctx context.Context) ([]LogDir, error) { return f(ctx) }

// ComparisonSource reports the latest result of each migration comparison.
type ComparisonSource interface {
	Comparisons(ctx context.Context) ([]Comparison, error)
}

// Comparison is the latest result of one comparison (ORDER vs ORDERNEW).
type Comparison struct {
	ID              int64
	Name            string
	SourceTopic     string
	TargetTopic     string
	Compared        int64 // records compared
	Mismatched      int64 // same key, different value
	MissingInTarget int64 // in the source topic only
	MissingInSource int64 // in the target topic only
	Running         bool
	FinishedAt      time.Time
}

// ComparisonFunc adapts a function to ComparisonSource.
type ComparisonFunc func(ctx context.Context) ([]Comparison, error)

// Comparisons calls f.
func (f ComparisonFunc) Comparisons(ctx context.Context) ([]Comparison, error) { return f(ctx) }

// KadmLag is a LagSource over the Kafka protocol (kadm's Lag: describe
// groups, fetch their commits, list start and end offsets). It has no time
// lag and no commit timestamps; package lag's collector, adapted with
// LagFunc, adds the time lag.
func KadmLag(adm *kadm.Client) LagSource {
	return LagFunc(func(ctx context.Context) ([]GroupLag, error) {
		lags, err := adm.Lag(ctx)
		if err != nil {
			return nil, fmt.Errorf("kadm lag: %w", err)
		}
		out := make([]GroupLag, 0, len(lags))
		for _, l := range lags {
			g := GroupLag{Group: l.Group, State: l.State, Members: len(l.Members), Err: l.Error()}
			for _, ml := range l.Lag.Sorted() {
				if ml.Err != nil {
					g.Partitions = append(g.Partitions, PartitionLag{Topic: ml.Topic, Partition: ml.Partition, Committed: -1, LogEnd: -1, Err: ml.Err})
					continue
				}
				g.Partitions = append(g.Partitions, PartitionLag{
					Topic:     ml.Topic,
					Partition: ml.Partition,
					Committed: ml.Commit.At,
					LogEnd:    ml.End.Offset,
					Lag:       max(ml.Lag, 0),
				})
			}
			out = append(out, g)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
		return out, nil
	})
}

// KadmHealth is a HealthSource over the Kafka protocol: metadata gives the
// live brokers, each partition's leader, replicas and ISR, and the end
// offsets give MessagesIn. A broker that was seen once and is missing from
// the metadata now is reported down (metadata lists live brokers only);
// brokers named in known are expected from the start.
func KadmHealth(adm *kadm.Client, known ...int32) HealthSource {
	var mu sync.Mutex
	seen := map[int32]string{}
	for _, id := range known {
		seen[id] = ""
	}
	return HealthFunc(func(ctx context.Context) (Health, error) {
		md, err := adm.Metadata(ctx)
		if err != nil {
			return Health{}, fmt.Errorf("kadm metadata: %w", err)
		}
		ends, err := adm.ListEndOffsets(ctx)
		if err != nil {
			return Health{}, fmt.Errorf("kadm list end offsets: %w", err)
		}
		var h Health
		live := map[int32]bool{}
		mu.Lock()
		for _, b := range md.Brokers {
			live[b.NodeID] = true
			seen[b.NodeID] = b.Host + ":" + strconv.Itoa(int(b.Port))
		}
		for id, addr := range seen {
			h.Brokers = append(h.Brokers, BrokerHealth{ID: id, Addr: addr, Up: live[id]})
		}
		mu.Unlock()
		sort.Slice(h.Brokers, func(i, j int) bool { return h.Brokers[i].ID < h.Brokers[j].ID })
		for _, td := range md.Topics.Sorted() {
			if td.Err != nil {
				continue
			}
			th := TopicHealth{Topic: td.Topic, Partitions: len(td.Partitions)}
			for _, pd := range td.Partitions.Sorted() {
				if pd.Leader < 0 || !live[pd.Leader] {
					th.Offline = append(th.Offline, pd.Partition)
				}
				if len(pd.ISR) < len(pd.Replicas) {
					th.UnderReplicated = append(th.UnderReplicated, pd.Partition)
				}
				if o, ok := ends.Lookup(td.Topic, pd.Partition); ok && o.Err == nil {
					th.MessagesIn += o.Offset
				}
			}
			h.Topics = append(h.Topics, th)
		}
		return h, nil
	})
}

// LocalDisk is a DiskSource for the log directories of the broker on this
// host (statfs(2)): free means available to an unprivileged writer.
func LocalDisk(broker int32, dirs ...string) DiskSource {
	return DiskFunc(func(ctx context.Context) ([]LogDir, error) {
		out := make([]LogDir, 0, len(dirs))
		for _, d := range dirs {
			var st unix.Statfs_t
			if err := unix.Statfs(d, &st); err != nil {
				return nil, fmt.Errorf("statfs %s: %w", d, err)
			}
			bs := uint64(st.Bsize)
			out = append(out, LogDir{Broker: broker, Path: d, FreeBytes: st.Bavail * bs, TotalBytes: st.Blocks * bs})
		}
		return out, nil
	})
}

package broker

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// LogDir is one log directory as DescribeLogDirs shows it.
type LogDir struct {
	Path        string
	Err         error // set when the directory cannot be read
	TotalBytes  int64 // -1 when unknown
	UsableBytes int64 // -1 when unknown
	Partitions  []LogDirPartition
}

// LogDirPartition is one partition's replica in a log directory.
type LogDirPartition struct {
	Topic     string
	Partition int32
	Size      int64
	OffsetLag int64 // Partition.offsetLag
}

// LogDirs describes the broker's log directories and the partitions in each.
func (b *Broker) LogDirs(dirs []string) []LogDir {
	out := make([]LogDir, 0, len(dirs))
	index := map[string]int{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			abs = d
		}
		ld := LogDir{Path: abs, TotalBytes: -1, UsableBytes: -1}
		var st syscall.Statfs_t
		if err := syscall.Statfs(abs, &st); err != nil {
			ld.Err = err
		} else {
			ld.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			ld.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		}
		index[abs] = len(out)
		out = append(out, ld)
	}
	for _, p := range b.Partitions() {
		dir := filepath.Dir(p.log.Dir())
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		i, ok := index[dir]
		if !ok {
			for path, j := range index {
				if strings.HasPrefix(p.log.Dir(), path+string(filepath.Separator)) {
					i, ok = j, true
				}
			}
		}
		if !ok {
			continue
		}
		out[i].Partitions = append(out[i].Partitions, LogDirPartition{
			Topic: p.tp.Topic, Partition: p.tp.Partition, Size: p.log.Size(),
			OffsetLag: p.offsetLag(),
		})
	}
	for i := range out {
		slices.SortFunc(out[i].Partitions, func(x, y LogDirPartition) int {
			if c := strings.Compare(x.Topic, y.Topic); c != 0 {
				return c
			}
			return int(x.Partition - y.Partition)
		})
	}
	return out
}

// offsetLag is the replica's offset lag as DescribeLogDirs reports it: on
// a follower, the replica fetcher's lag (Kafka's FetcherLagMetrics
// ConsumerLag: the leader's high watermark as the last fetch answered
// minus this log's end); on a leader, or a follower that has not fetched
// yet, its records not yet replicated to the ISR (log end minus high
// watermark).
func (p *Partition) offsetLag() int64 {
	end := p.log.LogEndOffset()
	if leader, _ := p.Leader(); !leader {
		if hw := p.leaderHW.Load(); hw >= 0 {
			return max(0, hw-end)
		}
	}
	return max(0, end-p.log.HighWatermark())
}

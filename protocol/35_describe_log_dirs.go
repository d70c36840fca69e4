package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

// DescribeLogDirs: v0-4
//
// Behaviour:
//   - Lists this broker's log directories (log.dirs) with the size of each
//     partition replica in them and its offset lag (log end minus high
//     watermark; 0 on a single node). A null topic list means every
//     partition; otherwise only the named ones. The console shows log dir
//     sizes through this API.
//   - A directory that cannot be read answers KAFKA_STORAGE_ERROR.
//
// Version notes:
//   - v1: ThrottleMillis semantics. v2: flexible. v3: top-level ErrorCode.
//   - v4: TotalBytes and UsableBytes of the directory's file system.

func init() { register(35, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.allowedCluster(r, security.OpDescribe) {
		// Kafka: Describe on the cluster, else no directories (and, v3+,
		// CLUSTER_AUTHORIZATION_FAILED).
		if req.Version >= 3 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	want := func(topic string, p int32) bool { return true }
	if req.Topics != nil {
		set := map[string]map[int32]bool{}
		for _, t := range req.Topics {
			m := set[t.Topic]
			if m == nil {
				m = map[int32]bool{}
				set[t.Topic] = m
			}
			for _, p := range t.Partitions {
				m[p] = true
			}
		}
		want = func(topic string, p int32) bool { return set[topic][p] }
	}
	for _, d := range s.cfg.Broker.LogDirs(s.cfg.LogDirs) {
		sd := kmsg.NewDescribeLogDirsResponseDir()
		sd.Dir = d.Path
		sd.TotalBytes, sd.UsableBytes = d.TotalBytes, d.UsableBytes
		if d.Err != nil {
			sd.ErrorCode = kerr.KafkaStorageError.Code
		}
		var cur *kmsg.DescribeLogDirsResponseDirTopic
		for _, p := range d.Partitions {
			if !want(p.Topic, p.Partition) {
				continue
			}
			if cur == nil || cur.Topic != p.Topic {
				sd.Topics = append(sd.Topics, kmsg.NewDescribeLogDirsResponseDirTopic())
				cur = &sd.Topics[len(sd.Topics)-1]
				cur.Topic = p.Topic
			}
			sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			sp.Partition, sp.Size, sp.OffsetLag = p.Partition, p.Size, p.OffsetLag
			cur.Partitions = append(cur.Partitions, sp)
		}
		resp.Dirs = append(resp.Dirs, sd)
	}
	return resp, nil
}

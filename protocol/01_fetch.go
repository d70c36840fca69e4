package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/quota"
	"github.com/sluice-io/sluice/security"
)

// Fetch: v4-12
//
// Behaviour (broker.Fetch's, but for sessions and the follower check: this
// handler decodes, checks, calls it and encodes):
//   - Record bytes are never copied into the response: each partition's
//     batches are a file region of a segment, written to the socket with
//     sendfile between the framing bytes (fetchenc.go).
//   - max_bytes is a soft limit and partition_max_bytes a per-partition one:
//     the first batch of the first partition with data is returned even
//     when larger (KIP-74); later partitions only get what fits. max_bytes
//     is lowered to fetch.max.bytes (55 MiB), and min_bytes to max_bytes,
//     as Kafka does.
//   - Consumers read up to the high watermark; a follower (replica_id >= 0)
//     reads up to the log end and its fetch offset is recorded. Only a
//     registered broker, from an address it registered, may fetch as a
//     follower (authorizeClusterAction); anyone else gets
//     TOPIC_AUTHORIZATION_FAILED on every partition, as Kafka answers a
//     follower fetch without ClusterAction.
//   - When fewer than min_bytes are available and there is no error, the
//     request parks (without holding up the connection's later requests)
//     until an append to one of its partitions brings enough, max_wait_ms
//     passes, or the server shuts down; a wait-free notification per
//     partition wakes it, never a sleep loop.
//   - A consumer needs Read on each topic (else TOPIC_AUTHORIZATION_FAILED
//     on its partitions, the others are fetched); with an authorizer, a
//     follower needs ClusterAction on the cluster instead of the address
//     check. The first incremental fetch of a session after the ACLs
//     changed checks every partition of the session, idle ones included.
//   - Quotas: a consumer's record bytes count against its
//     consumer_byte_rate; over it, throttle_time_ms says for how long the
//     connection is muted (quotas.go). max_bytes is lowered to what the
//     quota allows over quota.window.num-1 windows, as Kafka does.
//   - Fetch sessions (KIP-227, v7+): a full fetch with epoch 0 opens one,
//     later ones send only changes and get only partitions with news
//     (fetch_sessions.go).
//   - Partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
//     (v12: with the current leader), OFFSET_OUT_OF_RANGE,
//     FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v9+ current leader epoch).
//
// Version notes:
//   - v4: isolation level, last stable offset, aborted transactions (none:
//     no transactions; read_committed sees the high watermark).
//   - v5: log start offset. v7: sessions (see above). v9: current leader
//     epoch fencing. v11: rack id (ignored), preferred read replica -1.
//   - v12: flexible; last fetched epoch: a log that diverged from it answers
//     with DivergingEpoch (KIP-595) and no records.

func init() { registerStream(1, 4, 12, handleFetch) }

var errFollowerNotAuthorized = &broker.Error{Code: kerr.TopicAuthorizationFailed}

func handleFetch(ctx context.Context, s *Server, r *Request) (streamResponse, error) {
	req := r.Msg.(*kmsg.FetchRequest)
	resp := &fetchResponse{version: req.Version}
	if req.ReplicaID >= 0 {
		if err := s.checkClusterAction(ctx, r, req.ReplicaID); err != nil {
			// As Kafka answers a follower without ClusterAction (and
			// without a session).
			fillFetchPartitions(req, resp)
			for i := range resp.req.Partitions {
				resp.req.Partitions[i].Fail(errFollowerNotAuthorized)
			}
			return resp, nil
		}
	}
	sf, code := s.fetchSessions.begin(req)
	if code != 0 {
		resp.errorCode = code
		return resp, nil
	}
	if a := s.cfg.Broker.Authorizer(); a != nil && req.ReplicaID < 0 {
		sf.checkACLs(a.Generation())
	}
	if sf.incremental {
		sf.fillIncremental(req, resp)
	} else {
		fillFetchPartitions(req, resp)
		if sf.s != nil {
			sf.fillFull(req, resp)
		}
	}
	if req.ReplicaID < 0 {
		refuseUnreadable(s, r, resp.req.Partitions)
		if more := resp.req.More; more != nil && s.cfg.Broker.Authorizer() != nil {
			// Partitions that join a parked fetch are checked too.
			resp.req.More = func(fr *broker.FetchRequest) {
				n := len(fr.Partitions)
				more(fr)
				refuseUnreadable(s, r, fr.Partitions[n:])
			}
		}
	}
	resp.abortedEmpty = req.IsolationLevel == 1
	resp.req.ReplicaID = req.ReplicaID
	resp.req.MaxWait = time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	resp.req.MinBytes, resp.req.MaxBytes = req.MinBytes, req.MaxBytes
	if q := s.cfg.Quotas; q != nil && req.ReplicaID < 0 && q.Enabled(quota.Fetch) {
		// As Kafka bounds a consumer's fetch: no more than its quota
		// allows over the measured window.
		if v, ok := q.MaxValueInWindow(quota.Fetch, r.Principal.Name, r.ClientID); ok && v < float64(resp.req.MaxBytes) {
			resp.req.MaxBytes = int32(max(v, 1))
		}
	}
	resp.req.Isolation = broker.IsolationLevel(req.IsolationLevel)
	s.cfg.Broker.Fetch(ctx, &resp.req, r)
	if q := s.cfg.Quotas; q != nil && req.ReplicaID < 0 && q.Enabled(quota.Fetch) {
		var n int64
		for i := range resp.req.Partitions {
			n += resp.req.Partitions[i].Records.Len()
		}
		s.recordBandwidth(r, quota.Fetch, n)
	}
	sf.finish(resp)
	return resp, nil
}

// refuseUnreadable marks the partitions of topics the consumer may not
// read (Read on the topic) refused: nothing is read for them and they
// answer TOPIC_AUTHORIZATION_FAILED. The check runs once per run of a
// topic's partitions (a session's partitions are grouped by topic).
func refuseUnreadable(s *Server, r *Request, parts []broker.FetchPartition) {
	if s.cfg.Broker.Authorizer() == nil {
		return
	}
	last, readable := "", true
	for i := range parts {
		fp := &parts[i]
		if i == 0 || fp.Topic != last {
			last, readable = fp.Topic, s.allowedTopic(r, security.OpRead, fp.Topic)
		}
		if !readable {
			fp.Refused = errTopicAuthorization
		}
	}
}

// fillFetchPartitions fills resp with the partitions of a full request.
func fillFetchPartitions(req *kmsg.FetchRequest, resp *fetchResponse) {
	partitions := 0
	for _, rt := range req.Topics {
		partitions += len(rt.Partitions)
	}
	resp.reserve(len(req.Topics), partitions)
	for _, rt := range req.Topics {
		resp.topics = append(resp.topics, fetchTopic{name: rt.Topic, partitions: len(rt.Partitions)})
		for _, rp := range rt.Partitions {
			fp := broker.FetchPartition{
				Topic: rt.Topic, Partition: rp.Partition,
				FetchOffset: rp.FetchOffset, PartitionMaxBytes: rp.PartitionMaxBytes,
				CurrentLeaderEpoch: -1, LastFetchedEpoch: -1,
			}
			if req.Version >= 9 {
				fp.CurrentLeaderEpoch = rp.CurrentLeaderEpoch
			}
			if req.Version >= 12 {
				fp.LastFetchedEpoch = rp.LastFetchedEpoch
			}
			resp.req.Partitions = append(resp.req.Partitions, fp)
		}
	}
}

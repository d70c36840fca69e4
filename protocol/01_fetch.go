package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/storage"
)

// Fetch: v4-12
//
// Behaviour:
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
//   - Fetch sessions (KIP-227) are answered as a broker without them: the
//     response's session id is always 0, so clients send full requests; a
//     request naming a session id gets FETCH_SESSION_ID_NOT_FOUND.
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

func handleFetch(ctx context.Context, s *Server, r *Request) (streamResponse, error) {
	req := r.Msg.(*kmsg.FetchRequest)
	resp := &fetchResponse{version: req.Version}
	if req.Version >= 7 {
		switch {
		case req.SessionID != 0:
			resp.errorCode = kerr.FetchSessionIDNotFound.Code
			return resp, nil
		case req.SessionEpoch > 0:
			resp.errorCode = kerr.InvalidFetchSessionEpoch.Code
			return resp, nil
		}
	}
	if req.ReplicaID >= 0 {
		if err := s.authorizeClusterAction(ctx, r, req.ReplicaID); err != nil {
			// As Kafka answers a follower without ClusterAction.
			for _, rt := range req.Topics {
				ft := fetchTopic{name: rt.Topic, partitions: make([]fetchPartition, 0, len(rt.Partitions))}
				for _, rp := range rt.Partitions {
					fp := newFetchPartition(rp.Partition)
					fp.errorCode = kerr.TopicAuthorizationFailed.Code
					ft.partitions = append(ft.partitions, fp)
				}
				resp.topics = append(resp.topics, ft)
			}
			return resp, nil
		}
	}
	b := s.cfg.Broker
	// max_bytes is bounded by fetch.max.bytes, and min_bytes by that, as
	// Kafka bounds them.
	maxBytes := min(req.MaxBytes, b.FetchMaxBytes())
	minBytes := min(req.MinBytes, maxBytes)
	f := fetcher{b: b, req: req, maxBytes: maxBytes}
	// Whatever the response holds when the handler returns is what is
	// sent: count it then, not at each read of a parked fetch.
	defer resp.countSent(req.ReplicaID)
	// Answer now when min_bytes is there (min_bytes 0 or less: always), on
	// any partition error, or when the client will not wait.
	enough := func() bool { return minBytes <= 0 || resp.bytes() >= int64(minBytes) || f.hadError || f.full }
	if err := f.read(resp); err != nil || req.MaxWaitMillis <= 0 || enough() {
		return resp, err
	}

	// Not enough yet: park until an append, the deadline or shutdown.
	r.Detach()
	b.EnterPurgatory(broker.DelayedFetch)
	defer b.LeavePurgatory(broker.DelayedFetch)
	w := broker.NewWaiter()
	for _, p := range f.parts {
		p.Watch(w)
	}
	defer func() {
		for _, p := range f.parts {
			p.Unwatch(w)
		}
	}()
	timer := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer timer.Stop()
	for {
		// Re-read once after registering: an append between the first
		// read and Watch would otherwise be missed.
		resp.release()
		resp.topics = resp.topics[:0]
		if err := f.read(resp); err != nil {
			return resp, err
		}
		if enough() {
			return resp, nil
		}
		select {
		case <-w.C():
		case <-timer.C:
			return resp, nil
		case <-ctx.Done():
			return resp, nil
		}
	}
}

// fetcher reads every requested partition into a response.
type fetcher struct {
	b        *broker.Broker
	req      *kmsg.FetchRequest
	maxBytes int32               // max_bytes bounded by fetch.max.bytes
	parts    []*broker.Partition // the partitions read, to watch while parked
	hadError bool
	full     bool // max_bytes cut a read short: answer now
}

func (f *fetcher) read(resp *fetchResponse) error {
	req := f.req
	remaining := max(int64(f.maxBytes), 0)
	minOne := true
	collectParts := f.parts == nil
	img := f.b.Image()
	f.hadError, f.full = false, false
	for _, rt := range req.Topics {
		ft := fetchTopic{name: rt.Topic, partitions: make([]fetchPartition, 0, len(rt.Partitions))}
		for _, rp := range rt.Partitions {
			fp := newFetchPartition(rp.Partition)
			fp.abortedEmpty = req.IsolationLevel == 1
			p, err := f.b.Partition(rt.Topic, rp.Partition)
			if err == nil {
				if collectParts {
					f.parts = append(f.parts, p)
				}
				err = f.readPartition(p, rp, &fp, &remaining, &minOne)
			}
			if err != nil {
				f.hadError = true
				fp.errorCode, _ = broker.ErrorCode(err)
				if req.Version >= 12 && errors.Is(err, kerr.NotLeaderForPartition) {
					if t, ok := img.Topics[rt.Topic]; ok && int(rp.Partition) < len(t.Partitions) {
						pi := t.Partitions[rp.Partition]
						fp.currentLeaderID, fp.currentLeaderEpoch = pi.Leader, pi.LeaderEpoch
					}
				}
			}
			ft.partitions = append(ft.partitions, fp)
		}
		resp.topics = append(resp.topics, ft)
	}
	return nil
}

func (f *fetcher) readPartition(p *broker.Partition, rp kmsg.FetchRequestTopicPartition, fp *fetchPartition, remaining *int64, minOne *bool) error {
	req := f.req
	if req.Version >= 12 && rp.LastFetchedEpoch >= 0 {
		if err := p.CheckLeader(rp.CurrentLeaderEpoch); err != nil {
			return err
		}
		epoch, end, err := p.EndOffsetForEpoch(rp.LastFetchedEpoch, -1)
		if err != nil {
			return err
		}
		if epoch >= 0 && (epoch < rp.LastFetchedEpoch || end < rp.FetchOffset) {
			fp.divergingEpoch, fp.divergingEndOffset = epoch, end
			fp.highWatermark, fp.lastStableOffset, fp.logStartOffset = p.HighWatermark(), p.HighWatermark(), p.LogStartOffset()
			return nil
		}
	}
	limit := min(int64(rp.PartitionMaxBytes), *remaining)
	opts := broker.ReadOptions{
		Offset: rp.FetchOffset, MaxBytes: int32(max(limit, 0)), MinOneBatch: *minOne,
		ReplicaID: req.ReplicaID, CurrentLeaderEpoch: rp.CurrentLeaderEpoch, ReadCommitted: req.IsolationLevel == 1,
	}
	if req.Version < 9 {
		opts.CurrentLeaderEpoch = -1
	}
	if opts.ReplicaID < -1 {
		opts.ReplicaID = -1 // -2 and below are debug/consumer ids
	}
	var info storage.ReadInfo
	var err error
	if limit <= 0 && !*minOne {
		// Nothing left in the budget: report offsets, no records.
		err = p.CheckLeader(opts.CurrentLeaderEpoch)
	} else {
		info, err = p.Read(opts)
	}
	if err != nil {
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			fp.highWatermark, fp.lastStableOffset, fp.logStartOffset = p.HighWatermark(), p.HighWatermark(), p.LogStartOffset()
		}
		return err
	}
	// The response's budget, not the partition's, stopped this read while
	// more was there: the response is as full as it may be, which is
	// enough whatever min_bytes (at most max_bytes) says, as Kafka counts
	// the bytes available rather than those that fit.
	readable := p.HighWatermark()
	if req.ReplicaID >= 0 {
		readable = p.LogEndOffset()
	}
	budgetBound := *remaining < int64(rp.PartitionMaxBytes)
	if info.Region.Len > 0 {
		fp.read, fp.part = info, p
		*minOne = false
		*remaining -= info.Region.Len
		fp.highWatermark, fp.logStartOffset = info.HighWatermark, info.LogStartOffset
		if budgetBound && info.NextOffset < readable {
			f.full = true
		}
	} else {
		info.Release()
		fp.highWatermark, fp.logStartOffset = p.HighWatermark(), p.LogStartOffset()
		if budgetBound && rp.FetchOffset < readable {
			f.full = true
		}
	}
	fp.lastStableOffset = fp.highWatermark
	return nil
}
